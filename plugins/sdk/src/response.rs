//! Parsing a complete (non-streamed) OpenAI chat-completions response body into the same
//! delta list a stream of it would give.

use serde_json::Value;

use crate::choice::push_choice;
use crate::classify::{classify_error_object, collapse_and_cap};
use crate::fields::{choice_zero, text, usage_from_json};
use crate::{ClassifiedError, Delta, ErrorClass, ThinkSplitter};

/// Parse a 2xx chat-completions response body into deltas, in the streaming order:
/// [`Delta::Model`] (non-empty), [`Delta::Passthrough`] (the fields the gateway does not own,
/// with their bytes as sent, when there are any), then from choice 0's `message`:
/// [`Delta::Role`], [`Delta::Reasoning`] (`reasoning_content`, else `reasoning`),
/// [`Delta::Content`] (split by a [`ThinkSplitter`] when `split_inline_think`, flushed at the
/// end), [`Delta::Refusal`], one complete [`Delta::ToolCall`] per call (`index` = the call's
/// position unless it carries one), then
/// [`Delta::Finish`], [`Delta::Usage`], and always [`Delta::Done`] last.
///
/// Errors (all [`ErrorClass::Transient`] unless the upstream's error object says otherwise):
/// a body with a non-null `error` → classified by [`classify_error_object`]; a body that is not
/// a JSON object (or not UTF-8) → "malformed response body: …"; an object without a
/// `choices` array → "response has no choices".
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{parse_chat_response, Delta, FinishReason};
///
/// let body = br#"{"model":"deepseek-chat","choices":[{"index":0,
///   "message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}]}"#;
/// assert_eq!(parse_chat_response(body, false).unwrap(), vec![
///     Delta::Model("deepseek-chat".into()),
///     Delta::Role("assistant".into()),
///     Delta::Content("Hello".into()),
///     Delta::Finish(FinishReason::Stop),
///     Delta::Done,
/// ]);
/// assert!(parse_chat_response(b"<html>", false).is_err());
/// ```
pub fn parse_chat_response(
    body: &[u8],
    split_inline_think: bool,
) -> Result<Vec<Delta>, ClassifiedError> {
    let mut out = Vec::with_capacity(8);
    let mut think = split_inline_think.then(ThinkSplitter::new);
    if crate::stream_fast::parse_response_common(body, think.as_mut(), &mut out) {
        return Ok(out);
    }
    parse_chat_response_value(body, split_inline_think)
}

/// [`parse_chat_response`] without the typed fast path: the reference it is tested against.
pub(crate) fn parse_chat_response_value(
    body: &[u8],
    split_inline_think: bool,
) -> Result<Vec<Delta>, ClassifiedError> {
    let response = match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            let text = collapse_and_cap(&String::from_utf8_lossy(body));
            return Err(transient(format!("malformed response body: {text}")));
        }
    };
    if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
        return Err(classify_error_object(error));
    }
    if !response.get("choices").is_some_and(Value::is_array) {
        return Err(transient("response has no choices".to_owned()));
    }
    let mut out = Vec::with_capacity(8);
    if let Some(model) = text(&response, "model") {
        out.push(Delta::Model(model.to_owned()));
    }
    let mut think = split_inline_think.then(ThinkSplitter::new);
    // `from_slice` above proved the body is UTF-8 JSON.
    if let Ok(text) = std::str::from_utf8(body) {
        out.extend(crate::passthrough::from_text(text, "message"));
    }
    if let Some(choice) = choice_zero(&response) {
        push_choice(choice, "message", think.as_mut(), &mut out);
    }
    if let Some(split) = think.as_mut() {
        // A response without a finish reason still ends here.
        split.finish(&mut out);
    }
    if let Some(usage) = response.get("usage").and_then(usage_from_json) {
        out.push(Delta::Usage(usage));
    }
    out.push(Delta::Done);
    Ok(out)
}

fn transient(message: String) -> ClassifiedError {
    ClassifiedError {
        class: ErrorClass::Transient,
        message,
        code: None,
        retry_after_ms: None,
    }
}
