//! Errors in Anthropic's shape, `{"type": "error", "error": {"type", "message"}}`, with the
//! status codes its SDKs map to exceptions: 400 `invalid_request_error` (`BadRequestError`),
//! 401 `authentication_error`, 403 `permission_error`, 404 `not_found_error`, 413
//! `request_too_large`, 429 `rate_limit_error` (`RateLimitError`), 500 `api_error`, 504
//! `timeout_error`, 529 `overloaded_error` (an unavailable scope: every source down, open or
//! exhausted). `Retry-After` and `x-should-retry` are the OpenAI dialect's (`../errors.rs`):
//! Anthropic's SDKs read both headers the same way.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::super::errors::{SHOULD_RETRY, retry_after_header, wire};
use crate::error::GatewayError;

/// Anthropic's status for "overloaded".
const OVERLOADED: u16 = 529;

/// Anthropic's status and error `type` of a gateway error.
fn status_and_type(e: &GatewayError) -> (u16, &'static str) {
    match e {
        GatewayError::InvalidRequest { .. } | GatewayError::UpstreamRejected { .. } => {
            (400, "invalid_request_error")
        }
        GatewayError::ModelNotFound { .. } => (404, "not_found_error"),
        GatewayError::ScopeUnavailable { reason, .. } if reason.is_rate_limit() => {
            (429, "rate_limit_error")
        }
        GatewayError::ScopeUnavailable { .. } => (OVERLOADED, "overloaded_error"),
        GatewayError::DeadlineExceeded { .. } => (504, "timeout_error"),
        GatewayError::ModelNotAllowed { .. } => (403, "permission_error"),
        GatewayError::KeyRateLimited { .. } | GatewayError::BudgetExceeded { .. } => {
            (429, "rate_limit_error")
        }
        // The answer failed validation (422) or the upstream's stream broke (502): the
        // gateway's status is kept, as an API error.
        GatewayError::ResultInvalid { .. }
        | GatewayError::PluginFault { .. }
        | GatewayError::StreamInterrupted { .. }
        | GatewayError::Internal(_) => (wire(e).status.as_u16(), "api_error"),
    }
}

/// The error body, also the data of a stream's `event: error`.
pub(crate) fn error_json(e: &GatewayError) -> Value {
    let (_, ty) = status_and_type(e);
    json!({"type": "error", "error": {"type": ty, "message": e.to_string()}})
}

/// The HTTP response of an error.
pub(crate) fn error_response(e: &GatewayError) -> Response {
    let (status, _) = status_and_type(e);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (status, axum::Json(error_json(e))).into_response();
    let headers = resp.headers_mut();
    if let Some(s) = e.retry_after_s() {
        headers.insert(axum::http::header::RETRY_AFTER, retry_after_header(s));
    }
    if let Some(retry) = wire(e).should_retry {
        headers.insert(
            SHOULD_RETRY,
            HeaderValue::from_static(if retry { "true" } else { "false" }),
        );
    }
    resp
}

/// An error that is not a `GatewayError` (auth, body size, an unsupported endpoint).
pub(crate) fn plain_error(status: u16, ty: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": ty, "message": message}});
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
    use crate::error::UnavailableReason;

    fn check(e: GatewayError, status: u16, ty: &str, should_retry: Option<&str>) {
        let resp = error_response(&e);
        assert_eq!(resp.status().as_u16(), status, "{e}");
        assert_eq!(error_json(&e)["error"]["type"], ty, "{e}");
        assert_eq!(error_json(&e)["type"], "error");
        let h = resp
            .headers()
            .get("x-should-retry")
            .and_then(|v| v.to_str().ok());
        assert_eq!(h, should_retry, "{e}");
    }

    #[test]
    fn statuses_are_the_ones_the_sdk_maps() {
        let unavailable = |reason| GatewayError::ScopeUnavailable {
            scope: "LLM".into(),
            reason,
            retry_after_s: 2.0,
            per_source_reasons: BTreeMap::new(),
            message: "m".into(),
        };
        check(
            GatewayError::invalid("max_tokens", "x"),
            400,
            "invalid_request_error",
            None,
        );
        check(
            GatewayError::ModelNotFound {
                model: "m".into(),
                known: "llm".into(),
            },
            404,
            "not_found_error",
            None,
        );
        check(
            unavailable(UnavailableReason::Stalled),
            429,
            "rate_limit_error",
            Some("false"),
        );
        check(
            unavailable(UnavailableReason::QuotaExhausted),
            429,
            "rate_limit_error",
            None,
        );
        check(
            unavailable(UnavailableReason::CircuitOpen),
            529,
            "overloaded_error",
            Some("false"),
        );
        check(
            GatewayError::DeadlineExceeded { deadline_s: 1.0 },
            504,
            "timeout_error",
            Some("false"),
        );
        check(GatewayError::Internal("bug".into()), 500, "api_error", None);
    }
}
