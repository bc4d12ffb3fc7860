//! A whole answer as a Response object, and what the object and the stream share: the ids,
//! `status` and `incomplete_details`, `usage`, the output items and the request fields the
//! Response repeats.
//!
//! Output items go in the order a Responses answer lists them: one `reasoning` item (the
//! reasoning text as its summary, the `reasoning_details` entries in `encrypted_content`,
//! `reasoning.rs`), one assistant `message` (`output_text`, and `refusal` when the model
//! declined), then one `function_call` per tool call. Ids are derived from the call id and
//! the item's output index (`rs_`, `msg_`, `fc_`), so they are unique in the answer and stable
//! for a call.

use serde_json::{Map, Value, json};

use super::Echo;
use super::reasoning;
use crate::pipeline::{ChatResponse, TokenUsage};

/// The Response id of a call: `resp_` and the call id.
pub(crate) fn response_id(call_id: &str) -> String {
    format!("resp_{call_id}")
}

/// The id of output item `index` of a call, with its type's prefix (`rs`, `msg`, `fc`).
pub(crate) fn item_id(prefix: &str, call_id: &str, index: usize) -> String {
    format!("{prefix}_{call_id}_{index}")
}

/// The `call_id` of a function call: the upstream's tool-call id, or one derived from the
/// call id and the tool call's index when the upstream gave none.
pub(crate) fn function_call_id(call_id: &str, id: Option<&str>, index: u32) -> String {
    match id {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => format!("call_{call_id}_{index}"),
    }
}

/// `status` and `incomplete_details` of an answer with this neutral finish reason: `length`
/// → `incomplete` (`max_output_tokens`), `content_filter` → `incomplete` (`content_filter`),
/// anything else → `completed`.
pub(crate) fn status(finish: Option<&str>) -> (&'static str, Value) {
    match finish {
        Some("length") => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some("content_filter") => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

/// The Responses `usage`: `input_tokens` counts every prompt token (cache reads and writes
/// included, as OpenAI counts them), `output_tokens` every output token (reasoning included).
/// The detail counts are required integers in OpenAI's schema: 0 when the upstream reported
/// none. No usage reported at all is `null`, never invented zeros.
pub(crate) fn usage_json(u: Option<&TokenUsage>) -> Value {
    let Some(u) = u else {
        return Value::Null;
    };
    json!({
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": u.cached_prompt_tokens.unwrap_or(0),
            "cache_write_tokens": u.cache_write_tokens.unwrap_or(0),
        },
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens.unwrap_or(0)},
        "total_tokens": u.prompt_tokens.saturating_add(u.completion_tokens),
    })
}

/// A `reasoning` item: the text as one `summary_text` part (none when empty), the entries in
/// `encrypted_content` (left out when there are none).
pub(crate) fn reasoning_item(id: &str, text: &str, entries: &[Value]) -> Value {
    let summary: Vec<Value> = if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "summary_text", "text": text})]
    };
    let mut m = Map::new();
    m.insert("id".into(), Value::from(id));
    m.insert("type".into(), Value::from("reasoning"));
    m.insert("summary".into(), Value::Array(summary));
    if let Some(enc) = reasoning::encode(entries) {
        m.insert("encrypted_content".into(), Value::String(enc));
    }
    m.insert("status".into(), Value::from("completed"));
    Value::Object(m)
}

/// An `output_text` content part.
pub(crate) fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// A `refusal` content part.
pub(crate) fn refusal_part(text: &str) -> Value {
    json!({"type": "refusal", "refusal": text})
}

/// An assistant `message` item.
pub(crate) fn message_item(id: &str, content: Vec<Value>, status: &str) -> Value {
    json!({"id": id, "type": "message", "role": "assistant", "status": status, "content": content})
}

/// A `function_call` item.
pub(crate) fn function_call_item(
    id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    status: &str,
) -> Value {
    json!({"id": id, "type": "function_call", "status": status, "call_id": call_id,
           "name": name, "arguments": arguments})
}

/// What a Response object says beyond the echoed request fields.
pub(crate) struct Head<'a> {
    pub call_id: &'a str,
    pub created: u64,
    pub model: &'a str,
    pub status: &'a str,
    pub incomplete_details: Value,
    pub error: Value,
    pub output: Vec<Value>,
    pub usage: Value,
}

/// A Response object: the head and the request fields it repeats.
pub(crate) fn response_object(h: Head<'_>, echo: &Echo) -> Value {
    let mut m = echo.fields.clone();
    m.insert("id".into(), Value::from(response_id(h.call_id)));
    m.insert("object".into(), Value::from("response"));
    m.insert("created_at".into(), Value::from(h.created));
    m.insert("status".into(), Value::from(h.status));
    m.insert("background".into(), Value::Bool(false));
    m.insert("error".into(), h.error);
    m.insert("incomplete_details".into(), h.incomplete_details);
    m.insert("model".into(), Value::from(h.model));
    m.insert("output".into(), Value::Array(h.output));
    m.insert("previous_response_id".into(), Value::Null);
    m.insert("store".into(), Value::Bool(false));
    m.insert("truncation".into(), Value::from("disabled"));
    m.insert("usage".into(), h.usage);
    Value::Object(m)
}

/// The model an answer names: the one the upstream reported, else the source's.
pub(crate) fn model_of(r: &ChatResponse) -> &str {
    r.model_reported.as_deref().unwrap_or(&r.model)
}

/// The output items of a whole answer.
pub(crate) fn output_items(r: &ChatResponse, status: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let reasoning = r.reasoning.as_deref().unwrap_or_default();
    if !reasoning.is_empty() || !r.reasoning_details.is_empty() {
        let id = item_id("rs", &r.call_id, out.len());
        out.push(reasoning_item(&id, reasoning, &r.reasoning_details));
    }
    let refusal = r.refusal.as_deref().filter(|s| !s.is_empty());
    if !r.content.is_empty() || refusal.is_some() || r.tool_calls.is_empty() {
        let mut content = Vec::new();
        if !r.content.is_empty() || refusal.is_none() {
            content.push(output_text(&r.content));
        }
        if let Some(refusal) = refusal {
            content.push(refusal_part(refusal));
        }
        let id = item_id("msg", &r.call_id, out.len());
        let item_status = if status == "incomplete" {
            "incomplete"
        } else {
            "completed"
        };
        out.push(message_item(&id, content, item_status));
    }
    for t in &r.tool_calls {
        let id = item_id("fc", &r.call_id, out.len());
        let call_id = function_call_id(&r.call_id, t.id.as_deref(), t.index);
        out.push(function_call_item(
            &id,
            &call_id,
            t.name.as_deref().unwrap_or_default(),
            &t.arguments,
            "completed",
        ));
    }
    out
}

/// The Response object of a whole answer.
pub(crate) fn response_body(r: &ChatResponse, echo: &Echo) -> Vec<u8> {
    let (status, incomplete_details) = status(r.finish_reason.as_deref());
    let body = response_object(
        Head {
            call_id: &r.call_id,
            created: r.created,
            model: model_of(r),
            status,
            incomplete_details,
            error: Value::Null,
            output: output_items(r, status),
            usage: usage_json(r.usage.as_ref()),
        },
        echo,
    );
    serde_json::to_vec(&body).unwrap_or_default()
}
