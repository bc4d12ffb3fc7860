//! `parse-response`: a complete non-streamed Messages API answer (a `message` object) →
//! deltas, as if it had streamed in one piece.

use polygateway_plugin_sdk::{ClassifiedError, Delta, ErrorClass};
use serde_json::Value;

use crate::blocks::{BlockKind, block_deltas};
use crate::errors::classify_event;
use crate::fields::{UsageTotals, finish_reason};
use crate::json;

/// Parse a 2xx body: [`Delta::Model`] (`model`), [`Delta::Role`] (`role`, else
/// `assistant`), the content blocks in order (see [`block_deltas`]; a tool call in one delta
/// with id, name and its `input` as compact JSON text), [`Delta::Finish`] (`stop_reason`),
/// [`Delta::Usage`], [`Delta::Done`].
///
/// Errors: an error object (`{"type":"error","error":…}`) → classified by its type; a body
/// that is not a JSON object with a `content` array → transient.
pub(crate) fn parse_response(body: &[u8]) -> Result<Vec<Delta>, ClassifiedError> {
    let text = std::str::from_utf8(body).map_err(|_| unusable("the body is not UTF-8"))?;
    let obj = json::object(text).ok_or_else(|| unusable("the body is not a JSON object"))?;
    if json::string_field(&obj, "type").as_deref() == Some("error")
        || json::field(&obj, "error").is_some()
    {
        return Err(classify_event(text));
    }
    let content = json::field(&obj, "content")
        .and_then(|c| json::array(c.get()))
        .ok_or_else(|| unusable("the body has no `content` array"))?;
    let mut out = Vec::with_capacity(content.len() + 5);
    if let Some(model) = json::text_field(&obj, "model") {
        out.push(Delta::Model(model));
    }
    let role = json::text_field(&obj, "role").unwrap_or_else(|| "assistant".to_owned());
    out.push(Delta::Role(role));
    let mut tools = 0;
    for block in &content {
        let Some(block) = json::object(block.get()) else {
            continue;
        };
        if let BlockKind::Tool { input, .. } = block_deltas(&block, &mut tools, &mut out)
            && let Some(Delta::ToolCall(call)) = out.last_mut()
        {
            call.arguments = Some(input);
        }
    }
    if let Some(reason) = json::text_field(&obj, "stop_reason") {
        out.push(Delta::Finish(finish_reason(&reason)));
    }
    let mut totals = UsageTotals::default();
    if let Some(usage) =
        json::field(&obj, "usage").and_then(|u| serde_json::from_str::<Value>(u.get()).ok())
        && totals.merge(&usage)
        && let Some(usage) = totals.usage()
    {
        out.push(Delta::Usage(usage));
    }
    out.push(Delta::Done);
    Ok(out)
}

/// A 2xx body that is not an answer: transient (a broken proxy or a truncated body).
fn unusable(why: &str) -> ClassifiedError {
    ClassifiedError {
        class: ErrorClass::Transient,
        message: format!("anthropic response unusable: {why}"),
        code: None,
        retry_after_ms: None,
    }
}
