//! A whole answer as an Anthropic Messages object, and what the object and the stream share:
//! the message id, `stop_reason` and `usage`.
//!
//! Content blocks go in the order Anthropic writes them: reasoning (`thinking` /
//! `redacted_thinking`, from the answer's `reasoning_details` and its unsigned reasoning
//! text), then text, then `tool_use`. Usage is Anthropic's split: `input_tokens` excludes the
//! prompt-cache reads and writes the neutral `prompt_tokens` includes (`wit/types.wit`).

use serde_json::{Map, Value, json};

use super::signatures::{self, Block};
use crate::pipeline::{ChatResponse, TokenUsage, ToolCall};

/// The Messages id of a call: `msg_` and the call id.
pub(crate) fn message_id(call_id: &str) -> String {
    format!("msg_{call_id}")
}

/// The `tool_use` id of a tool call: the upstream's, or one derived from the call id and
/// the call's index when the upstream gave none (Anthropic requires one).
pub(crate) fn tool_use_id(call_id: &str, id: Option<&str>, index: u32) -> String {
    match id {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => format!("toolu_{call_id}_{index}"),
    }
}

/// The neutral finish reason as `stop_reason`: `stop` → `end_turn`, `length` → `max_tokens`,
/// `tool_calls` → `tool_use`, `content_filter` → `refusal`; one of Anthropic's own
/// (`pause_turn`, `stop_sequence`, …) as given; none or another → `end_turn`. An answer with
/// tool calls that says only `stop` (some OpenAI-compatible servers do) is `tool_use`: an
/// agent loop runs the tools on that reason alone.
pub(crate) fn stop_reason(finish: Option<&str>, has_tool_calls: bool) -> &str {
    match finish {
        Some("stop") | None if has_tool_calls => "tool_use",
        Some("length") => "max_tokens",
        Some("tool_calls") => "tool_use",
        Some("content_filter") => "refusal",
        Some(
            own @ ("end_turn"
            | "max_tokens"
            | "stop_sequence"
            | "tool_use"
            | "pause_turn"
            | "refusal"
            | "model_context_window_exceeded"),
        ) => own,
        _ => "end_turn",
    }
}

/// Anthropic's `usage`: `input_tokens` (uncached), `output_tokens`, and the cache counts when
/// reported; every count `null` when the upstream reported no usage (never an invented 0).
pub(crate) fn usage_json(u: Option<&TokenUsage>) -> Value {
    let Some(u) = u else {
        return json!({"input_tokens": null, "output_tokens": null});
    };
    let cached = u.cached_prompt_tokens.unwrap_or(0);
    let written = u.cache_write_tokens.unwrap_or(0);
    json!({
        "input_tokens": u.prompt_tokens.saturating_sub(cached).saturating_sub(written),
        "output_tokens": u.completion_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
        "cache_read_input_tokens": u.cached_prompt_tokens,
    })
}

/// The JSON of one reasoning block.
pub(crate) fn block_json(b: &Block) -> Value {
    match b {
        Block::Thinking { text, signature } => {
            json!({"type": "thinking", "thinking": text, "signature": signature})
        }
        Block::Redacted { data } => json!({"type": "redacted_thinking", "data": data}),
    }
}

/// The reasoning blocks of an answer: one per `reasoning_details` entry, and the reasoning
/// text no signed entry holds (an unsigned source's, or text after the last signature) as a
/// `thinking` block with an empty signature.
fn reasoning_blocks(r: &ChatResponse) -> Vec<Block> {
    let mut blocks: Vec<Block> = r
        .reasoning_details
        .iter()
        .filter_map(signatures::block)
        .collect();
    let signed: usize = blocks
        .iter()
        .map(|b| match b {
            Block::Thinking { text, .. } => text.len(),
            Block::Redacted { .. } => 0,
        })
        .sum();
    if let Some(rest) = r
        .reasoning
        .as_deref()
        .and_then(|t| t.get(signed.min(t.len())..))
        .filter(|rest| !rest.is_empty())
    {
        blocks.push(Block::Thinking {
            text: rest.to_string(),
            signature: String::new(),
        });
    }
    blocks
}

/// A `tool_use` block: `input` is the arguments parsed; arguments that are not a JSON object
/// (a model's broken output) are kept whole as `{"_raw": text}` rather than dropped, and
/// handed back upstream as that text (`request.rs`).
pub(crate) fn tool_use_json(call_id: &str, t: &ToolCall) -> Value {
    let input = match serde_json::from_str::<Value>(&t.arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ if t.arguments.trim().is_empty() => json!({}),
        _ => json!({ "_raw": t.arguments }),
    };
    json!({
        "type": "tool_use",
        "id": tool_use_id(call_id, t.id.as_deref(), t.index),
        "name": t.name.as_deref().unwrap_or_default(),
        "input": input,
    })
}

/// The Messages object of a whole answer.
pub(crate) fn message_body(r: &ChatResponse) -> Vec<u8> {
    let mut content: Vec<Value> = reasoning_blocks(r).iter().map(block_json).collect();
    let text = match (&r.refusal, r.content.is_empty()) {
        (Some(refusal), true) => refusal.as_str(),
        _ => r.content.as_str(),
    };
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    content.extend(r.tool_calls.iter().map(|t| tool_use_json(&r.call_id, t)));
    let mut m = Map::new();
    m.insert("id".into(), Value::from(message_id(&r.call_id)));
    m.insert("type".into(), Value::from("message"));
    m.insert("role".into(), Value::from("assistant"));
    m.insert(
        "model".into(),
        Value::from(r.model_reported.as_deref().unwrap_or(&r.model)),
    );
    m.insert("content".into(), Value::Array(content));
    m.insert(
        "stop_reason".into(),
        Value::from(stop_reason(
            r.finish_reason.as_deref(),
            !r.tool_calls.is_empty(),
        )),
    );
    m.insert("stop_sequence".into(), Value::Null);
    m.insert("usage".into(), usage_json(r.usage.as_ref()));
    serde_json::to_vec(&Value::Object(m)).unwrap_or_default()
}
