//! What the dialects' request translations (`messages/request.rs`, `responses/request.rs`)
//! share on the way to the neutral request: the body as a JSON object, the refusal of a
//! field the dialect does not know, `model` and `stream`, and the one normalisation that
//! lets two dialects asking the same thing build the same request (docs/dialects.md#the-cache-is-shared-across-dialects).

use serde_json::{Map, Value};

use crate::error::GatewayError;

/// The request body as a JSON object.
///
/// Errors: not JSON, or not an object → `InvalidRequest` without a field.
pub(crate) fn body_object(body: &[u8]) -> Result<Map<String, Value>, GatewayError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| GatewayError::InvalidRequest {
        param: None,
        message: format!("request body is not valid JSON: {e}"),
    })?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(GatewayError::InvalidRequest {
            param: None,
            message: "request body must be a JSON object".into(),
        }),
    }
}

/// Refuse the first top-level field that is in neither list, naming it.
pub(crate) fn refuse_unknown(
    map: &Map<String, Value>,
    known: &[&str],
    ignored: &[&str],
) -> Result<(), GatewayError> {
    match map
        .keys()
        .find(|k| !known.contains(&k.as_str()) && !ignored.contains(&k.as_str()))
    {
        Some(unknown) => Err(GatewayError::invalid(
            unknown.as_str(),
            format!("`{unknown}`: unknown or unsupported field"),
        )),
        None => Ok(()),
    }
}

/// `model`, taken: a non-empty string (a scope alias, resolved later).
pub(crate) fn take_model(map: &mut Map<String, Value>) -> Result<String, GatewayError> {
    match map.remove("model") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(_) => Err(GatewayError::invalid(
            "model",
            "`model` must be a non-empty string",
        )),
        None => Err(GatewayError::invalid("model", "`model` is required")),
    }
}

/// `stream`, taken: a boolean, absent or `null` = false.
pub(crate) fn take_stream(map: &mut Map<String, Value>) -> Result<bool, GatewayError> {
    match map.remove("stream") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(GatewayError::invalid(
            "stream",
            "`stream` must be a boolean",
        )),
    }
}

/// The content of a message: one plain text part (no `cache_control`) is a string, as an
/// OpenAI Chat client sends it, so the dialects asking the same thing build the same neutral
/// request (and share a cache entry); anything else stays a list of parts.
pub(crate) fn content_value(mut parts: Vec<Value>) -> Value {
    if let [part] = parts.as_mut_slice()
        && part.get("type").and_then(Value::as_str) == Some("text")
        && part.get("cache_control").is_none()
        && let Some(Value::String(text)) = part.get_mut("text")
    {
        return Value::String(std::mem::take(text));
    }
    Value::Array(parts)
}
