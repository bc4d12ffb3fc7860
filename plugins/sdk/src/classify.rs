//! Error classification for OpenAI-compatible upstreams: non-2xx HTTP responses, and error
//! objects that arrive inside a 200 (stream chunks, response bodies).

use serde_json::Value;

use crate::{ClassifiedError, ErrorClass, Header};

/// The most characters of a non-JSON error body kept in a message; longer bodies keep their
/// head and tail around an ellipsis.
pub const MAX_MESSAGE_CHARS: usize = 2048;

/// The marker between the head and tail of a capped message.
const ELLIPSIS: &str = " … ";

/// The response header carrying a retry hint in milliseconds (OpenAI sends it with 429s).
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{classify::RETRY_AFTER_MS_HEADER, classify_http_error, Header};
///
/// let h = Header { name: RETRY_AFTER_MS_HEADER.into(), value: "800".into() };
/// assert_eq!(classify_http_error(429, &[h], b"").retry_after_ms, Some(800));
/// ```
pub const RETRY_AFTER_MS_HEADER: &str = "retry-after-ms";

/// Classify a non-2xx HTTP response from an OpenAI-compatible upstream.
///
/// Class by `status`:
/// - 401, 403 → [`ErrorClass::SourceDead`] (the credential or account is not usable);
/// - 402 → `SourceDead` (payment required: DeepSeek's "insufficient balance", OpenRouter's
///   out-of-credits; never the request's fault);
/// - 404 → `SourceDead` (this model or endpoint is not at this source: switch source);
/// - 429 → [`ErrorClass::Transient`], but `SourceDead` when the body mentions
///   `insufficient_quota` (in `error.code`, `error.type` or anywhere in its text);
/// - 408, 409, 425 and 5xx → `Transient`;
/// - 400, 413, 422 and every other 4xx → [`ErrorClass::RequestRejected`];
/// - anything else (1xx, 2xx, 3xx, ≥ 600) → `Transient`.
///
/// `message` is the upstream's `error.message` when the body is OpenAI-shaped JSON (or a
/// top-level `message` in a JSON object, as vLLM and DashScope send), else the body text
/// (lossy UTF-8, whitespace collapsed, capped to [`MAX_MESSAGE_CHARS`] characters keeping head
/// and tail), else `HTTP <status>` for an empty body. `code` is `error.code` (a string, or a
/// number written in decimal), else `error.type`. `retry_after_ms` comes from a
/// [`RETRY_AFTER_MS_HEADER`] header (milliseconds; a fractional value is rounded up), else
/// none: the host parses `Retry-After` itself. Never panics, whatever the input.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{classify_http_error, ErrorClass, Header};
///
/// let body = br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
/// let headers = [Header { name: "Retry-After-Ms".into(), value: "1500".into() }];
/// let e = classify_http_error(429, &headers, body);
/// assert_eq!(e.class, ErrorClass::SourceDead);
/// assert_eq!(e.message, "You exceeded your current quota");
/// assert_eq!(e.code.as_deref(), Some("insufficient_quota"));
/// assert_eq!(e.retry_after_ms, Some(1500));
///
/// let e = classify_http_error(502, &[], b"<html>\n  Bad   gateway\n</html>");
/// assert_eq!((e.class, e.message.as_str()), (ErrorClass::Transient, "<html> Bad gateway </html>"));
/// ```
pub fn classify_http_error(status: u16, headers: &[Header], body: &[u8]) -> ClassifiedError {
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let fields = parsed
        .as_ref()
        .map(ErrorFields::of_body)
        .unwrap_or_default();
    let class = status_class(status, || mentions_insufficient_quota(body));
    let message = match fields.message {
        Some(m) => m,
        None => {
            let text = collapse_and_cap(&String::from_utf8_lossy(body));
            if text.is_empty() {
                format!("HTTP {status}")
            } else {
                text
            }
        }
    };
    ClassifiedError {
        class,
        message,
        code: fields.code,
        retry_after_ms: retry_after_ms(headers),
    }
}

/// Classify an error object that arrived in-band with a 2xx (an SSE chunk `{"error": {…}}` or
/// a response body carrying `error`). `error` is the value of the `error` key.
///
/// Class: a numeric HTTP status in `error.status` or `error.code` (OpenRouter sends these)
/// is classified as [`classify_http_error`] does; otherwise `insufficient_quota` and
/// authentication or permission failures (`invalid_api_key`, `authentication…`,
/// `permission…`, `unauthorized`) → [`ErrorClass::SourceDead`], anything else (rate limits,
/// server errors, overload, unknown) → [`ErrorClass::Transient`]. `message` is
/// `error.message` (or `error` itself when it is a string), else a fixed description;
/// `code` is `error.code`, else `error.type`. No retry hint.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{classify_error_object, ErrorClass};
/// use serde_json::json;
///
/// let e = classify_error_object(&json!({"message": "Overloaded", "type": "server_error"}));
/// assert_eq!((e.class, e.code.as_deref()), (ErrorClass::Transient, Some("server_error")));
///
/// let e = classify_error_object(&json!({"code": "insufficient_quota", "message": "no money"}));
/// assert_eq!(e.class, ErrorClass::SourceDead);
///
/// let e = classify_error_object(&json!({"code": 400, "message": "context too long"}));
/// assert_eq!(e.class, ErrorClass::RequestRejected);
/// ```
pub fn classify_error_object(error: &Value) -> ClassifiedError {
    let fields = ErrorFields::of_error(error);
    let status = ["status", "code"]
        .iter()
        .filter_map(|k| error.get(*k).and_then(Value::as_u64))
        .find_map(|n| u16::try_from(n).ok().filter(|s| (100..600).contains(s)));
    let words = [fields.code.as_deref(), fields.kind.as_deref()];
    let mentions = |needle: &str| {
        words
            .iter()
            .flatten()
            .any(|w| w.to_ascii_lowercase().contains(needle))
    };
    let class = match status {
        Some(s) => status_class(s, || mentions("insufficient_quota")),
        None if mentions("insufficient_quota")
            || mentions("invalid_api_key")
            || mentions("authentication")
            || mentions("permission")
            || mentions("unauthorized") =>
        {
            ErrorClass::SourceDead
        }
        None => ErrorClass::Transient,
    };
    ClassifiedError {
        class,
        message: fields
            .message
            .unwrap_or_else(|| "the upstream sent an error without a message".to_owned()),
        code: fields.code,
        retry_after_ms: None,
    }
}

/// The class of an HTTP status; `quota` is asked only for 429.
fn status_class(status: u16, quota: impl FnOnce() -> bool) -> ErrorClass {
    match status {
        401..=404 => ErrorClass::SourceDead,
        429 if quota() => ErrorClass::SourceDead,
        408 | 409 | 425 | 429 => ErrorClass::Transient,
        400..=499 => ErrorClass::RequestRejected,
        _ => ErrorClass::Transient,
    }
}

/// Whether `body` contains `insufficient_quota`, ASCII case-insensitively, in any encoding
/// that keeps ASCII bytes (no allocation, no UTF-8 needed).
fn mentions_insufficient_quota(body: &[u8]) -> bool {
    const NEEDLE: &[u8] = b"insufficient_quota";
    body.windows(NEEDLE.len())
        .any(|w| w.eq_ignore_ascii_case(NEEDLE))
}

/// The value of the `retry-after-ms` header in milliseconds, when present and a finite,
/// non-negative number.
fn retry_after_ms(headers: &[Header]) -> Option<u64> {
    let value = headers
        .iter()
        .find(|h| h.name.trim().eq_ignore_ascii_case(RETRY_AFTER_MS_HEADER))?
        .value
        .trim();
    if let Ok(ms) = value.parse::<u64>() {
        return Some(ms);
    }
    let ms = value.parse::<f64>().ok()?;
    // `as` saturates; the guard keeps NaN, infinities and negatives out.
    (ms.is_finite() && ms >= 0.0).then(|| ms.ceil() as u64)
}

/// Collapse every run of whitespace to one space, trim, and cap to [`MAX_MESSAGE_CHARS`]
/// characters keeping the head and the tail around `" … "`.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::classify::{collapse_and_cap, MAX_MESSAGE_CHARS};
///
/// assert_eq!(collapse_and_cap("  a \n\t b  "), "a b");
/// let long = "x".repeat(10_000) + "END";
/// let capped = collapse_and_cap(&long);
/// assert_eq!(capped.chars().count(), MAX_MESSAGE_CHARS);
/// assert!(capped.ends_with("END") && capped.contains(" … "));
/// ```
pub fn collapse_and_cap(text: &str) -> String {
    let mut collapsed = String::with_capacity(text.len().min(MAX_MESSAGE_CHARS * 4));
    let mut chars = 0usize;
    for word in text.split_whitespace() {
        if !collapsed.is_empty() {
            collapsed.push(' ');
            chars += 1;
        }
        collapsed.push_str(word);
        chars += word.chars().count();
    }
    if chars <= MAX_MESSAGE_CHARS {
        return collapsed;
    }
    let marker = ELLIPSIS.chars().count();
    let head = (MAX_MESSAGE_CHARS - marker) / 2;
    let tail = MAX_MESSAGE_CHARS - marker - head;
    let head_end = collapsed
        .char_indices()
        .nth(head)
        .map_or(collapsed.len(), |(i, _)| i);
    let tail_start = collapsed
        .char_indices()
        .nth(chars - tail)
        .map_or(collapsed.len(), |(i, _)| i);
    let mut out = String::with_capacity(head_end + ELLIPSIS.len() + collapsed.len() - tail_start);
    out.push_str(collapsed.get(..head_end).unwrap_or_default());
    out.push_str(ELLIPSIS);
    out.push_str(collapsed.get(tail_start..).unwrap_or_default());
    out
}

/// The message, code and type found in an error body or error object.
#[derive(Debug, Default)]
struct ErrorFields {
    message: Option<String>,
    code: Option<String>,
    kind: Option<String>,
}

impl ErrorFields {
    /// From a whole JSON body: `{"error": {…}}` / `{"error": "text"}`, else a top-level
    /// `message` (vLLM's `{"object": "error", "message": …}`, DashScope's native shape).
    fn of_body(body: &Value) -> Self {
        match body.get("error") {
            Some(error @ (Value::Object(_) | Value::String(_))) => Self::of_error(error),
            _ => {
                let mut fields = Self::of_error(body);
                if fields.message.is_none() {
                    // Not an error shape at all: keep nothing, the caller uses the text.
                    fields = Self::default();
                }
                fields
            }
        }
    }

    /// From the value of an `error` key.
    fn of_error(error: &Value) -> Self {
        if let Value::String(s) = error {
            return Self {
                message: non_empty(s),
                ..Self::default()
            };
        }
        let text = |key: &str| match error.get(key) {
            Some(Value::String(s)) => non_empty(s),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let kind = text("type");
        Self {
            message: error
                .get("message")
                .and_then(Value::as_str)
                .and_then(non_empty),
            code: text("code").or_else(|| kind.clone()),
            kind,
        }
    }
}

/// `Some(s)` unless `s` is empty or whitespace.
fn non_empty(s: &str) -> Option<String> {
    (!s.trim().is_empty()).then(|| s.to_owned())
}
