//! The one place that maps errors to HTTP: status, the OpenAI error shape
//! `{"error": {"message", "type", "param", "code"}}` plus `reason`, `retry_after_s` and
//! `per_source_reasons` for an unavailable scope, `strategy`, `raw_text`, `repair_error`,
//! `validation_errors` and `reasks` for a structured answer the ladder gave up on (422), the
//! `Retry-After` header of an unavailable scope (429 when it gave up because of rate limiting,
//! else 503), and `x-should-retry: false` on the errors the gateway already retried or waited
//! on, so a client SDK does not multiply the upstream attempts.

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::{GatewayError, UnavailableReason};

/// The header the OpenAI SDKs read to decide whether to retry a failed request on their own
/// (`false` stops their retries; without it they retry 408, 409, 429 and 5xx).
pub const SHOULD_RETRY: HeaderName = HeaderName::from_static("x-should-retry");

/// How one error goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WireError<'a> {
    pub status: StatusCode,
    /// The OpenAI `type`.
    pub ty: &'static str,
    /// The field or header at fault.
    pub param: Option<&'a str>,
    /// The machine-readable why (for an unavailable scope: its reason).
    pub code: Option<&'a str>,
    /// `Some(false)`: the gateway already retried or waited on this failure; a client retry
    /// would only repeat that work. `None`: no advice (the client's own policy applies).
    pub should_retry: Option<bool>,
}

impl WireError<'_> {
    fn new(status: StatusCode, ty: &'static str) -> Self {
        WireError {
            status,
            ty,
            param: None,
            code: None,
            should_retry: None,
        }
    }

    fn retried(mut self) -> Self {
        self.should_retry = Some(false);
        self
    }
}

/// The wire form of an unavailable scope, by reason.
fn unavailable(reason: UnavailableReason) -> WireError<'static> {
    let (status, ty) = if reason.is_rate_limit() {
        (StatusCode::TOO_MANY_REQUESTS, "rate_limit_exceeded")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "scope_unavailable")
    };
    let w = WireError {
        code: Some(reason.as_str()),
        ..WireError::new(status, ty)
    };
    match reason {
        // The gateway already spent attempts, back-offs or waits on these.
        UnavailableReason::RetryExhausted
        | UnavailableReason::Stalled
        | UnavailableReason::RateLimited
        | UnavailableReason::CircuitOpen
        | UnavailableReason::NoSources => w.retried(),
        // Refused before any upstream work (quota fail-fast) or the state store was
        // unreachable: a later retry, after `Retry-After`, is what the answer asks for.
        UnavailableReason::QuotaExhausted | UnavailableReason::GovernanceBackendDown => w,
    }
}

/// Status, `type`, `param`, `code` and retry advice of an error: one exhaustive match.
pub(crate) fn wire(e: &GatewayError) -> WireError<'_> {
    match e {
        GatewayError::InvalidRequest { param, .. } => WireError {
            param: param.as_deref(),
            ..WireError::new(StatusCode::BAD_REQUEST, "invalid_request_error")
        },
        GatewayError::ModelNotFound { .. } => WireError {
            param: Some("model"),
            code: Some("model_not_found"),
            ..WireError::new(StatusCode::NOT_FOUND, "model_not_found")
        },
        GatewayError::UpstreamRejected { code, .. } => WireError {
            code: code.as_deref(),
            ..WireError::new(StatusCode::BAD_REQUEST, "upstream_rejected")
        },
        GatewayError::ResultInvalid { .. } => {
            WireError::new(StatusCode::UNPROCESSABLE_ENTITY, "result_invalid")
        }
        GatewayError::PluginFault { .. } => {
            WireError::new(StatusCode::BAD_GATEWAY, "plugin_fault").retried()
        }
        GatewayError::ScopeUnavailable { reason, .. } => unavailable(*reason),
        GatewayError::DeadlineExceeded { .. } => {
            WireError::new(StatusCode::GATEWAY_TIMEOUT, "deadline_exceeded").retried()
        }
        GatewayError::StreamInterrupted { .. } => {
            WireError::new(StatusCode::BAD_GATEWAY, "stream_interrupted")
        }
        GatewayError::ModelNotAllowed { .. } => WireError {
            param: Some("model"),
            code: Some("model_not_allowed"),
            ..WireError::new(StatusCode::FORBIDDEN, "permission_error")
        },
        GatewayError::KeyRateLimited { .. } => WireError {
            code: Some("key_rate_limited"),
            ..WireError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_exceeded")
        },
        // Retrying before the period resets cannot succeed: the SDKs' own quick retries
        // would only repeat the refusal.
        GatewayError::BudgetExceeded { .. } => WireError {
            code: Some("budget_exceeded"),
            ..WireError::new(StatusCode::TOO_MANY_REQUESTS, "budget_exceeded")
        }
        .retried(),
        GatewayError::Internal(_) => {
            WireError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error")
        }
    }
}

/// The status and JSON body of an error (also the body of a stream's in-band error event).
pub fn error_body(e: &GatewayError) -> (StatusCode, Value) {
    let w = wire(e);
    let mut err = json!({
        "message": e.to_string(),
        "type": w.ty,
        "param": w.param,
        "code": w.code,
    });
    if let GatewayError::ScopeUnavailable {
        reason,
        per_source_reasons,
        ..
    } = e
    {
        err["reason"] = json!(reason.as_str());
        err["per_source_reasons"] = json!(per_source_reasons);
    }
    if let GatewayError::ResultInvalid {
        structured: Some(f),
        ..
    } = e
    {
        err["strategy"] = json!(f.strategy);
        err["raw_text"] = json!(f.raw_text);
        err["repair_error"] = json!(f.repair_error);
        err["validation_errors"] = json!(f.validation_errors);
        err["reasks"] = json!(f.reasks);
    }
    if let GatewayError::BudgetExceeded {
        period,
        limit_usd,
        total_usd,
        needed_usd,
        resets_at,
        ..
    } = e
    {
        err["period"] = json!(period);
        err["limit_usd"] = json!(limit_usd);
        err["total_usd"] = json!(total_usd);
        err["needed_usd"] = json!(needed_usd);
        err["resets_at"] = json!(resets_at);
    }
    if let Some(s) = e.retry_after_s() {
        err["retry_after_s"] = json!(s);
    }
    (w.status, json!({ "error": err }))
}

/// `Retry-After` in RFC 9110 delay-seconds: whole seconds, rounded up (a wait of 0.2 s is
/// `1`, never `0`, which would invite a retry too early). Negative or NaN is `0`; a value
/// past `u64` seconds saturates.
pub(crate) fn retry_after_header(seconds: f64) -> HeaderValue {
    let secs = if seconds.is_nan() || seconds <= 0.0 {
        0
    } else {
        // `as` saturates at u64::MAX for huge and infinite values.
        seconds.ceil() as u64
    };
    HeaderValue::from(secs)
}

/// The HTTP response of an error.
pub fn error_response(e: &GatewayError) -> Response {
    let w = wire(e);
    let (status, body) = error_body(e);
    let mut resp = (status, axum::Json(body)).into_response();
    let headers = resp.headers_mut();
    if let Some(s) = e.retry_after_s() {
        headers.insert(axum::http::header::RETRY_AFTER, retry_after_header(s));
    }
    if let Some(retry) = w.should_retry {
        headers.insert(SHOULD_RETRY, HeaderValue::from_static(bool_str(retry)));
    }
    resp
}

fn bool_str(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// An error that is not a `GatewayError` (auth, body size): status, type, message.
pub(crate) fn plain_error(status: u16, ty: &str, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": ty, "param": null, "code": null}});
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn unavailable_err(reason: UnavailableReason, retry_after_s: f64) -> GatewayError {
        GatewayError::ScopeUnavailable {
            scope: "LLM".into(),
            reason,
            retry_after_s,
            per_source_reasons: BTreeMap::new(),
            message: "m".into(),
        }
    }

    /// The status, `type`, `code`, `Retry-After` and `x-should-retry` of `e`.
    fn check(
        e: GatewayError,
        status: u16,
        ty: &str,
        code: Option<&str>,
        retry_after: Option<&str>,
        should_retry: Option<&str>,
    ) {
        let resp = error_response(&e);
        assert_eq!(resp.status().as_u16(), status, "{e}");
        let (_, body) = error_body(&e);
        assert_eq!(body["error"]["type"], ty, "{e}");
        assert_eq!(body["error"]["code"].as_str(), code, "{e}");
        let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok());
        assert_eq!(header("retry-after"), retry_after, "{e}");
        assert_eq!(header("x-should-retry"), should_retry, "{e}");
    }

    #[test]
    fn status_code_and_retry_advice_per_error() {
        use UnavailableReason as R;
        let no = Some("false");
        check(
            GatewayError::invalid("messages", "x"),
            400,
            "invalid_request_error",
            None,
            None,
            None,
        );
        let missing = GatewayError::ModelNotFound {
            model: "m".into(),
            known: "llm".into(),
        };
        check(
            missing,
            404,
            "model_not_found",
            Some("model_not_found"),
            None,
            None,
        );
        let fault = GatewayError::PluginFault {
            plugin: "p".into(),
            message: "trap".into(),
        };
        check(fault, 502, "plugin_fault", None, None, no);
        let late = GatewayError::DeadlineExceeded { deadline_s: 1.0 };
        check(late, 504, "deadline_exceeded", None, None, no);
        check(
            GatewayError::Internal("bug".into()),
            500,
            "internal_error",
            None,
            None,
            None,
        );
        // Rate limiting: 429.
        let rl = "rate_limit_exceeded";
        check(
            unavailable_err(R::Stalled, 2.5),
            429,
            rl,
            Some("stalled"),
            Some("3"),
            no,
        );
        let hint = unavailable_err(R::RateLimited, 3600.0);
        check(hint, 429, rl, Some("rate_limited"), Some("3600"), no);
        let quota = unavailable_err(R::QuotaExhausted, 0.2);
        check(quota, 429, rl, Some("quota_exhausted"), Some("1"), None);
        // Everything else: 503.
        let su = "scope_unavailable";
        let spent = unavailable_err(R::RetryExhausted, 0.0);
        check(spent, 503, su, Some("retry_exhausted"), Some("0"), no);
        let open = unavailable_err(R::CircuitOpen, 19.001);
        check(open, 503, su, Some("circuit_open"), Some("20"), no);
        check(
            unavailable_err(R::NoSources, 0.0),
            503,
            su,
            Some("no_sources"),
            Some("0"),
            no,
        );
        let down = unavailable_err(R::GovernanceBackendDown, 5.0);
        check(
            down,
            503,
            su,
            Some("governance_backend_down"),
            Some("5"),
            None,
        );
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        let h = |s: f64| {
            retry_after_header(s)
                .to_str()
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(h(0.0), "0");
        assert_eq!(h(-3.0), "0");
        assert_eq!(h(f64::NAN), "0");
        assert_eq!(h(0.001), "1");
        assert_eq!(h(1.5), "2");
        assert_eq!(h(2.0), "2");
        assert_eq!(h(3600.0), "3600");
        // A hint of u64::MAX ms, as a saturating plugin reports 99999999999999999999 ms.
        assert_eq!(h(u64::MAX as f64 / 1000.0), "18446744073709552");
        assert_eq!(h(f64::INFINITY), u64::MAX.to_string());
    }
}
