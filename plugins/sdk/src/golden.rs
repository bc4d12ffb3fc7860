//! Support for golden transcripts (`tests/fixtures/golden/`): the JSON encoding of a delta
//! list that the expected files use, and a minimal SSE framer for replaying `.sse` files.

use serde_json::{Value, json};

use crate::{ChatStreamParser, ClassifiedError, Delta, FinishReason, SseEvent};

/// The JSON form of one delta in a golden `.expected.json` file: `{"role": …}`,
/// `{"content": …}`, `{"reasoning": …}`, `{"tool_call": {"index", "id", "name",
/// "arguments"}}`, `{"finish": "stop" | … | {"other": …}}`, `{"usage": {"prompt_tokens",
/// "completion_tokens", "cached_prompt_tokens", "reasoning_tokens", "cache_write_tokens"?}}`
/// (`cache_write_tokens` only when reported, so 0.1 transcripts stay valid),
/// `{"reasoning_signature": {"signature", "format"}}`, `{"reasoning_encrypted": {"data", "id",
/// "format"}}`, `{"model": …}`, or `"done"`. Absent options are `null`.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{golden::delta_to_json, Delta, FinishReason};
/// use serde_json::json;
///
/// assert_eq!(delta_to_json(&Delta::Finish(FinishReason::ToolCalls)), json!({"finish": "tool_calls"}));
/// assert_eq!(delta_to_json(&Delta::Done), json!("done"));
/// ```
pub fn delta_to_json(delta: &Delta) -> Value {
    match delta {
        Delta::Role(r) => json!({ "role": r }),
        Delta::Content(c) => json!({ "content": c }),
        Delta::Reasoning(r) => json!({ "reasoning": r }),
        Delta::ToolCall(t) => json!({ "tool_call": {
            "index": t.index, "id": t.id, "name": t.name, "arguments": t.arguments } }),
        Delta::Finish(f) => json!({ "finish": finish_to_json(f) }),
        Delta::Usage(u) => {
            let mut usage = json!({
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "cached_prompt_tokens": u.cached_prompt_tokens,
                "reasoning_tokens": u.reasoning_tokens });
            if let (Some(w), Some(o)) = (u.cache_write_tokens, usage.as_object_mut()) {
                o.insert("cache_write_tokens".into(), json!(w));
            }
            json!({ "usage": usage })
        }
        Delta::ReasoningSignature(s) => json!({ "reasoning_signature": {
            "signature": s.signature, "format": s.format } }),
        Delta::ReasoningEncrypted(e) => json!({ "reasoning_encrypted": {
            "data": e.data, "id": e.id, "format": e.format } }),
        Delta::Refusal(r) => json!({ "refusal": r }),
        Delta::Model(m) => json!({ "model": m }),
        Delta::Done => json!("done"),
        Delta::Passthrough(p) => json!({ "passthrough": {
            "response": p.response_json, "choice": p.choice_json, "message": p.message_json } }),
    }
}

/// A delta list as a JSON array of [`delta_to_json`] items.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{golden::deltas_to_json, Delta};
///
/// assert_eq!(deltas_to_json(&[Delta::Done]), serde_json::json!(["done"]));
/// ```
pub fn deltas_to_json(deltas: &[Delta]) -> Value {
    Value::Array(deltas.iter().map(delta_to_json).collect())
}

fn finish_to_json(f: &FinishReason) -> Value {
    match f {
        FinishReason::Stop => json!("stop"),
        FinishReason::Length => json!("length"),
        FinishReason::ToolCalls => json!("tool_calls"),
        FinishReason::ContentFilter => json!("content_filter"),
        FinishReason::FunctionCall => json!("function_call"),
        FinishReason::Other(s) => json!({ "other": s }),
    }
}

/// Frame a whole SSE text into events the way the host does for the golden files: events are
/// separated by blank lines (`\n` or `\r\n`), `data:` lines are joined with `\n` (one space
/// after the colon is dropped), `event:` names the event, lines starting with `:` are
/// comments and skipped, other fields are ignored, and blocks without data are dropped.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::golden::frame_sse;
///
/// let events = frame_sse(": keep-alive\n\ndata: {\"a\":1}\n\nevent: x\ndata: y\ndata: z\n\n");
/// assert_eq!(events.len(), 2);
/// assert_eq!(events[0].data, "{\"a\":1}");
/// assert_eq!((events[1].event.as_deref(), events[1].data.as_str()), (Some("x"), "y\nz"));
/// ```
pub fn frame_sse(text: &str) -> Vec<SseEvent> {
    let mut events = Vec::new();
    let mut event: Option<String> = None;
    let mut data: Option<String> = None;
    for line in text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        if line.is_empty() {
            if let Some(data) = data.take() {
                events.push(SseEvent {
                    event: event.take(),
                    data,
                });
            }
            event = None;
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => match data.as_mut() {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            "event" => event = Some(value.to_owned()),
            _ => {}
        }
    }
    if let Some(data) = data {
        events.push(SseEvent { event, data });
    }
    events
}

/// Replay events through a stream parser as the host would: `parse` in batches of `batch`
/// events (at least 1), then `finish`; returns every delta in order.
///
/// Errors: the first `Err` a `parse` call returns.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::golden::{frame_sse, replay};
/// use polygateway_plugin_sdk::{ChatStreamParser, Delta};
///
/// let events = frame_sse("data: {\"choices\":[{\"delta\":{\"content\":\"<think>a\"}}]}\n\n");
/// let deltas = replay(&mut ChatStreamParser::new(true), &events, 1).unwrap();
/// assert_eq!(deltas, vec![Delta::Reasoning("a".into())]);
/// ```
pub fn replay(
    parser: &mut ChatStreamParser,
    events: &[SseEvent],
    batch: usize,
) -> Result<Vec<Delta>, ClassifiedError> {
    let mut out = Vec::new();
    for chunk in events.chunks(batch.max(1)) {
        out.extend(parser.parse(chunk)?);
    }
    out.extend(parser.finish());
    Ok(out)
}

/// Check one golden transcript: frame `sse` with [`frame_sse`], [`replay`] it through a fresh
/// parser from `new_parser` in every batch size from 1 to all events, and compare each result
/// with `expected_json` (the `.expected.json` text) as JSON values.
///
/// Errors: a description of the first mismatch (with the produced list), a parse error, or
/// an unreadable `expected_json`.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::golden::check_transcript;
/// use polygateway_plugin_sdk::ChatStreamParser;
///
/// let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n";
/// assert!(check_transcript(|| ChatStreamParser::new(false), sse, r#"[{"content":"Hi"},"done"]"#).is_ok());
/// assert!(check_transcript(|| ChatStreamParser::new(false), sse, r#"["done"]"#).is_err());
/// ```
pub fn check_transcript(
    new_parser: impl Fn() -> ChatStreamParser,
    sse: &str,
    expected_json: &str,
) -> Result<(), String> {
    let expected: Value =
        serde_json::from_str(expected_json).map_err(|e| format!("expected file: {e}"))?;
    let events = frame_sse(sse);
    for batch in 1..=events.len().max(1) {
        let got = replay(&mut new_parser(), &events, batch)
            .map_err(|e| format!("batches of {batch}: parse error {e:?}"))?;
        let got = deltas_to_json(&got);
        if got != expected {
            let pretty = serde_json::to_string_pretty(&got).unwrap_or_default();
            return Err(format!("batches of {batch}: got {pretty}"));
        }
    }
    Ok(())
}
