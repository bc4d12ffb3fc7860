//! The one place that maps errors to HTTP (DESIGN §6): status, OpenAI error shape
//! `{"error": {"message", "type", "param", "code"}}` plus `reason`, `retry_after_s` and
//! `per_source_reasons` for an unavailable scope, `strategy`, `raw_text`, `repair_error`,
//! `validation_errors` and `reasks` for a structured answer the ladder gave up on (422), and
//! `Retry-After` on 503.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::GatewayError;

/// The status and JSON body of an error.
pub fn error_body(e: &GatewayError) -> (StatusCode, Value) {
    let (status, ty, param, code): (u16, &str, Option<&str>, Option<&str>) = match e {
        GatewayError::InvalidRequest { param, .. } => {
            (400, "invalid_request_error", param.as_deref(), None)
        }
        GatewayError::ModelNotFound { .. } => (
            404,
            "model_not_found",
            Some("model"),
            Some("model_not_found"),
        ),
        GatewayError::UpstreamRejected { code, .. } => {
            (400, "upstream_rejected", None, code.as_deref())
        }
        GatewayError::ResultInvalid { .. } => (422, "result_invalid", None, None),
        GatewayError::PluginFault { .. } => (502, "plugin_fault", None, None),
        GatewayError::ScopeUnavailable { reason, .. } => {
            (503, "scope_unavailable", None, Some(reason.as_str()))
        }
        GatewayError::DeadlineExceeded { .. } => (504, "deadline_exceeded", None, None),
        GatewayError::StreamInterrupted { .. } => (502, "stream_interrupted", None, None),
        GatewayError::Internal(_) => (500, "internal_error", None, None),
    };
    let mut err = json!({
        "message": e.to_string(),
        "type": ty,
        "param": param,
        "code": code,
    });
    if let GatewayError::ScopeUnavailable {
        reason,
        retry_after_s,
        per_source_reasons,
        ..
    } = e
    {
        err["reason"] = json!(reason.as_str());
        err["retry_after_s"] = json!(retry_after_s);
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
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        json!({ "error": err }),
    )
}

/// The HTTP response of an error.
pub fn error_response(e: &GatewayError) -> Response {
    let (status, body) = error_body(e);
    let mut resp = (status, axum::Json(body)).into_response();
    if let GatewayError::ScopeUnavailable { retry_after_s, .. } = e {
        // RFC 9110 delta-seconds: a whole number, rounded up.
        let secs = retry_after_s.max(0.0).ceil() as u64;
        if let Ok(v) = HeaderValue::try_from(secs.to_string()) {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, v);
        }
    }
    resp
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
