//! Error classification for the Gemini API: non-2xx answers (`classify-error`) and the error
//! objects that arrive inside a 200 (a stream chunk, a response body).
//!
//! Google's error body is `{"error": {"code": 429, "message": "…", "status":
//! "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
//! "retryDelay": "17s"}, …]}}`, sometimes wrapped in a top-level JSON array. The class comes
//! from `error.status` (the canonical gRPC code name):
//!
//! | status | class |
//! | --- | --- |
//! | `RESOURCE_EXHAUSTED` | transient, `retry-after-ms` from `RetryInfo.retryDelay` (`"17s"`, `"1.5s"`; rounded up to whole ms) |
//! | `UNAVAILABLE`, `INTERNAL`, `DEADLINE_EXCEEDED`, `ABORTED`, `UNKNOWN`, `CANCELLED` | transient |
//! | `PERMISSION_DENIED`, `UNAUTHENTICATED`, `NOT_FOUND`, `UNIMPLEMENTED` | source-dead |
//! | `FAILED_PRECONDITION` | source-dead |
//! | `INVALID_ARGUMENT`, `OUT_OF_RANGE`, `ALREADY_EXISTS` | request-rejected |
//!
//! `FAILED_PRECONDITION` is source-dead, not request-rejected: Google's troubleshooting table
//! gives it for "Gemini API free tier is not available in your country. Please enable
//! billing on your project" — a property of the source's key and project that no request can
//! fix and that another source may not have. A `google.rpc.ErrorInfo` detail whose `reason`
//! names the key or the project (`API_KEY_INVALID` — which Google sends as a 400
//! `INVALID_ARGUMENT` — and any other `API_KEY_…`, `SERVICE_DISABLED`, `BILLING_DISABLED`,
//! `CONSUMER_SUSPENDED`, `CONSUMER_INVALID`) is source-dead whatever the status.
//!
//! `code` is the status string, `message` the upstream's `message`. Without a known status the
//! class falls back to the HTTP status (the SDK's [`classify_http_error`] mapping: 401–404
//! source-dead, 408/409/425/429/5xx transient, other 4xx request-rejected), as do the message
//! and code of bodies that are not Google-shaped (HTML, empty, garbage, OpenAI-shaped JSON).
//! Never panics, whatever the input.

use polygateway_plugin_sdk::{
    ClassifiedError, ErrorClass, Header, classify_error_object, classify_http_error,
};
use serde_json::Value;

use crate::json::quote;

/// `classify-error` (see the module documentation).
pub fn classify_error(status: u16, headers: &[Header], body: &[u8]) -> ClassifiedError {
    let fallback = classify_http_error(status, headers, body);
    let parsed = serde_json::from_slice::<Value>(body).ok();
    match parsed.as_ref().and_then(error_object) {
        Some(error) => google(error, fallback),
        None => fallback,
    }
}

/// An error object found in a 2xx body or stream chunk (the value of its `error` key).
pub fn classify_in_band(error: &Value) -> ClassifiedError {
    let fallback = classify_error_object(error);
    google(error, fallback)
}

/// The error of an SSE event named `error`: its data classified as an in-band error object
/// when it is one, else `transient` with the data as the message.
pub fn classify_event_error(data: &str) -> ClassifiedError {
    let parsed = serde_json::from_str::<Value>(data).ok();
    if let Some(error) = parsed.as_ref().and_then(error_object) {
        return classify_in_band(error);
    }
    ClassifiedError {
        class: ErrorClass::Transient,
        message: if data.is_empty() {
            "the stream sent an error event".to_owned()
        } else {
            format!("the stream sent an error event: {}", quote(data, 200))
        },
        code: None,
        retry_after_ms: None,
    }
}

/// The `error` object of a body: `{"error": {…}}` or `[{"error": {…}}, …]`.
fn error_object(body: &Value) -> Option<&Value> {
    let body = match body {
        Value::Array(items) => items.first()?,
        other => other,
    };
    body.get("error").filter(|e| e.is_object())
}

/// Google's fields over `fallback`: class by status (or key/project `ErrorInfo`), the
/// status as code, the message, the `RetryInfo` hint.
fn google(error: &Value, fallback: ClassifiedError) -> ClassifiedError {
    let status = error
        .get("status")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let details = error
        .get("details")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let class = if details.iter().any(names_the_source) {
        ErrorClass::SourceDead
    } else {
        status.and_then(status_class).unwrap_or(fallback.class)
    };
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty())
        .map_or(fallback.message, str::to_owned);
    ClassifiedError {
        class,
        message,
        code: status.map(str::to_owned).or(fallback.code),
        retry_after_ms: details
            .iter()
            .find_map(retry_delay_ms)
            .or(fallback.retry_after_ms),
    }
}

/// The class of a canonical status name; none for names this table does not know.
fn status_class(status: &str) -> Option<ErrorClass> {
    Some(match status {
        "RESOURCE_EXHAUSTED" | "UNAVAILABLE" | "INTERNAL" | "DEADLINE_EXCEEDED" | "ABORTED"
        | "UNKNOWN" | "CANCELLED" => ErrorClass::Transient,
        "PERMISSION_DENIED"
        | "UNAUTHENTICATED"
        | "NOT_FOUND"
        | "UNIMPLEMENTED"
        | "FAILED_PRECONDITION" => ErrorClass::SourceDead,
        "INVALID_ARGUMENT" | "OUT_OF_RANGE" | "ALREADY_EXISTS" => ErrorClass::RequestRejected,
        _ => return None,
    })
}

/// The `@type` of a detail, when it is `google.rpc.<name>`.
fn detail_is(detail: &Value, name: &str) -> bool {
    detail
        .get("@type")
        .and_then(Value::as_str)
        .and_then(|t| t.strip_suffix(name))
        .is_some_and(|prefix| prefix.ends_with("google.rpc."))
}

/// Whether a detail is an `ErrorInfo` whose reason is the source's key or project.
fn names_the_source(detail: &Value) -> bool {
    if !detail_is(detail, "ErrorInfo") {
        return false;
    }
    let reason = detail
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default();
    reason.starts_with("API_KEY")
        || matches!(
            reason,
            "SERVICE_DISABLED" | "BILLING_DISABLED" | "CONSUMER_SUSPENDED" | "CONSUMER_INVALID"
        )
}

/// `RetryInfo.retryDelay` in milliseconds.
fn retry_delay_ms(detail: &Value) -> Option<u64> {
    if !detail_is(detail, "RetryInfo") {
        return None;
    }
    duration_ms(detail.get("retryDelay")?.as_str()?)
}

/// A protobuf JSON `Duration` (`"17s"`, `"1.5s"`, `"0.000250s"`) in whole milliseconds,
/// rounded up; none for anything else (negative, empty, garbage).
///
/// # Example
/// ```text
/// duration_ms("17s") == Some(17000); duration_ms("1.5s") == Some(1500); duration_ms("-1s") == None
/// ```
pub fn duration_ms(text: &str) -> Option<u64> {
    let number = text.trim().strip_suffix('s')?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) {
        return None;
    }
    let seconds: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    // Milliseconds from the first three fraction digits, plus one when any digit after them
    // is non-zero (rounding up).
    let mut millis = 0u64;
    for (i, b) in fraction.bytes().enumerate() {
        let d = u64::from(b - b'0');
        match i {
            0 => millis += d * 100,
            1 => millis += d * 10,
            2 => millis += d,
            _ if d > 0 => {
                millis += 1;
                break;
            }
            _ => {}
        }
    }
    Some(seconds.saturating_mul(1000).saturating_add(millis))
}
