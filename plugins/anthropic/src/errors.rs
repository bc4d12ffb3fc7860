//! Error classification for the Messages API: non-2xx responses (`{"type":"error","error":
//! {"type","message"}}`, or any garbage a proxy sends), and error objects that arrive with a
//! 200 (an `error` stream event, an error body).

use polygateway_plugin_sdk::classify::collapse_and_cap;
use polygateway_plugin_sdk::{ClassifiedError, ErrorClass, Header, classify_http_error};
use serde_json::Value;

/// The `error.details.error_code` of a 429 sent when the organisation's monthly spend cap
/// is reached: it keeps failing until the cap resets, so waiting does not help.
pub const SPEND_LIMIT_CODE: &str = "enforced_spend_limit_reached";

/// Classify a non-2xx response. The class comes from the status as for any upstream
/// (the SDK's [`classify_http_error`]): 401, 402, 403, 404 → source-dead; 429 → transient;
/// 400, 413 and other 4xx → request-rejected; 408, 409, 425, 5xx and 529 → transient. Then
/// Anthropic's body refines it: a `billing_error`, or a `rate_limit_error` whose
/// `details.error_code` is [`SPEND_LIMIT_CODE`] → source-dead. `code` is the body's
/// `error.type`, `message` its `error.message` (else the body text, else `HTTP <status>`).
pub(crate) fn classify_http(status: u16, headers: &[Header], body: &[u8]) -> ClassifiedError {
    let mut classified = classify_http_error(status, headers, body);
    let error = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").cloned());
    if let Some(error) = error
        && account_is_blocked(&error)
    {
        classified.class = ErrorClass::SourceDead;
    }
    classified
}

/// Classify the data of an `error` stream event or an error body that came with a 200.
/// Not JSON → transient, with the text as message.
pub(crate) fn classify_event(data: &str) -> ClassifiedError {
    match serde_json::from_str::<Value>(data) {
        Ok(v) => classify_error_value(v.get("error").unwrap_or(&v)),
        Err(_) => ClassifiedError {
            class: ErrorClass::Transient,
            message: non_empty_or(
                collapse_and_cap(data),
                "anthropic sent an empty error event",
            ),
            code: None,
            retry_after_ms: None,
        },
    }
}

/// Classify an Anthropic `error` object by its `type` (no HTTP status to go by):
/// `invalid_request_error`, `request_too_large` → request-rejected;
/// `authentication_error`, `permission_error`, `billing_error`, `not_found_error` →
/// source-dead; a spend-cap `rate_limit_error` → source-dead; anything else
/// (`overloaded_error`, `api_error`, `timeout_error`, `rate_limit_error`, unknown) →
/// transient. `code` is the type, `message` the error's message.
pub(crate) fn classify_error_value(error: &Value) -> ClassifiedError {
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let class = match kind {
        _ if account_is_blocked(error) => ErrorClass::SourceDead,
        Some("invalid_request_error" | "request_too_large") => ErrorClass::RequestRejected,
        Some("authentication_error" | "permission_error" | "not_found_error") => {
            ErrorClass::SourceDead
        }
        _ => ErrorClass::Transient,
    };
    let message = match error {
        Value::String(s) => s.clone(),
        other => other
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    };
    ClassifiedError {
        class,
        message: non_empty_or(message, "anthropic sent an error without a message"),
        code: kind.map(str::to_owned),
        retry_after_ms: None,
    }
}

/// A `billing_error`, or a spend-cap `rate_limit_error`: the account cannot be served.
fn account_is_blocked(error: &Value) -> bool {
    match error.get("type").and_then(Value::as_str) {
        Some("billing_error") => true,
        Some("rate_limit_error") => {
            error.pointer("/details/error_code").and_then(Value::as_str) == Some(SPEND_LIMIT_CODE)
        }
        _ => false,
    }
}

fn non_empty_or(message: String, fallback: &str) -> String {
    if message.trim().is_empty() {
        fallback.to_owned()
    } else {
        message
    }
}
