//! Encoding of the OpenAI chat-completions wire format: stream chunks (SSE) and the
//! non-streamed completion object.

use std::cell::{Cell, RefCell};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::error::GatewayError;
use crate::pipeline::passthrough::{Flat, members};
use crate::pipeline::reasoning::{encrypted_entry, text_entry};
use crate::pipeline::{AnswerFields, ChatResponse, StreamStart, TokenUsage};
use crate::plugin::{Delta, Passthrough, finish_reason_str};

/// Encodes the chunks of one streamed answer; the chunk head is built once per call.
///
/// A passthrough delta (fields the gateway does not own) is held and written into the chunk
/// of the delta after it: its top-level fields after `model`, its choice fields on
/// `choices[0]` (a `logprobs` of its own replaces the default `null`), its message fields in
/// `delta`. The pipeline gives every forwarded passthrough a delta after it.
pub(crate) struct ChunkEncoder {
    head: String,
    /// `data: {"id":…,"object":…,"created":…,"model":…` (no comma after): the head of a
    /// chunk that carries top-level passthrough fields.
    head_open: String,
    id: String,
    created: u64,
    model: String,
    /// A passthrough delta waiting for the delta it goes with.
    held: Cell<Option<Passthrough>>,
    /// The reasoning text streamed since the last `reasoning_details` entry: a signature
    /// makes it one `reasoning.text` entry (see `pipeline/reasoning.rs`).
    block: RefCell<String>,
    /// `reasoning_details` entries written so far (the next entry's `index`).
    details: Cell<usize>,
}

impl ChunkEncoder {
    pub(crate) fn new(start: &StreamStart) -> Self {
        let model = start
            .model_reported
            .clone()
            .unwrap_or_else(|| start.model.clone());
        let id = format!("chatcmpl-{}", start.call_id);
        let head_open = format!(
            r#"data: {{"id":{},"object":"chat.completion.chunk","created":{},"model":{}"#,
            Value::String(id.clone()),
            start.created,
            Value::String(model.clone()),
        );
        let head = format!(r#"{head_open},"choices":[{{"index":0,"delta":"#);
        Self {
            head,
            head_open,
            id,
            created: start.created,
            model,
            held: Cell::new(None),
            block: RefCell::new(String::new()),
            details: Cell::new(0),
        }
    }

    /// The SSE frame of one delta, or `None` for deltas that are not forwarded.
    #[cfg(test)]
    pub(crate) fn delta(&self, d: &Delta) -> Option<Bytes> {
        let mut out = Vec::new();
        self.encode_delta(d, &mut out).then(|| Bytes::from(out))
    }

    /// Append the SSE frame of one delta to `out`; false (nothing appended) for deltas that
    /// are not forwarded.
    ///
    /// Content, reasoning and finish deltas (all but a stream's first and tool-call
    /// fragments) are written straight into `out`: no intermediate JSON value. The bytes
    /// are exactly those of `delta_via_value`.
    pub(crate) fn encode_delta(&self, d: &Delta, out: &mut Vec<u8>) -> bool {
        if let Delta::Reasoning(r) = d {
            self.block.borrow_mut().push_str(r);
        }
        if let Delta::ReasoningSignature(_) | Delta::ReasoningEncrypted(_) = d {
            return self.encode_reasoning_detail(d, out);
        }
        if let Delta::Passthrough(p) = d {
            // Two in a row: the first had no delta of its own after all.
            if let Some(prev) = self.held.replace(Some(p.clone())) {
                return self.encode_with_fields(&Delta::Content(String::new()), &prev, out);
            }
            return false;
        }
        if let Some(p) = self.held.take() {
            return self.encode_with_fields(d, &p, out);
        }
        let mark = out.len();
        let (key, text) = match d {
            Delta::Content(c) => ("content", c.as_str()),
            Delta::Reasoning(r) => ("reasoning_content", r.as_str()),
            Delta::Refusal(r) => ("refusal", r.as_str()),
            Delta::Finish(f) => {
                out.extend_from_slice(self.head.as_bytes());
                out.extend_from_slice(br#"{},"logprobs":null,"finish_reason":"#);
                if serde_json::to_writer(&mut *out, finish_reason_str(f)).is_err() {
                    out.truncate(mark);
                    return self.delta_via_value(d, out);
                }
                out.extend_from_slice(b"}]}\n\n");
                return true;
            }
            Delta::Role(_) | Delta::ToolCall(_) => return self.delta_via_value(d, out),
            Delta::Usage(_)
            | Delta::Model(_)
            | Delta::Done
            | Delta::Passthrough(_)
            | Delta::ReasoningSignature(_)
            | Delta::ReasoningEncrypted(_) => {
                return false;
            }
        };
        out.extend_from_slice(self.head.as_bytes());
        out.extend_from_slice(b"{\"");
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        // Writing a string into a Vec cannot fail; the fallback only keeps this total.
        if serde_json::to_writer(&mut *out, text).is_err() {
            out.truncate(mark);
            return self.delta_via_value(d, out);
        }
        out.extend_from_slice(br#"},"logprobs":null,"finish_reason":null}]}"#);
        out.extend_from_slice(b"\n\n");
        true
    }

    /// Append the chunk of a reasoning signature or encrypted block: `delta` is
    /// `{"reasoning_details": [<the whole entry>]}` (a signed entry carries the text of its
    /// block, already streamed as `reasoning_content`, so a client needs no merging). A held
    /// passthrough is written first, in a chunk of its own.
    fn encode_reasoning_detail(&self, d: &Delta, out: &mut Vec<u8>) -> bool {
        if let Some(p) = self.held.take() {
            self.encode_with_fields(&Delta::Content(String::new()), &p, out);
        }
        let index = self.details.get();
        let entry = match d {
            Delta::ReasoningSignature(sig) => text_entry(&self.block.borrow(), sig, index),
            Delta::ReasoningEncrypted(e) => encrypted_entry(e, index),
            _ => return false,
        };
        self.block.borrow_mut().clear();
        self.details.set(index + 1);
        let mut s = String::with_capacity(self.head.len() + 160);
        s.push_str(&self.head);
        s.push_str(&json!({ "reasoning_details": [entry] }).to_string());
        s.push_str(r#","logprobs":null,"finish_reason":null}]}"#);
        s.push_str("\n\n");
        out.extend_from_slice(s.as_bytes());
        true
    }

    /// Append the SSE frame of `d` with the fields of the passthrough `p` merged in (see the
    /// type); false (nothing appended) when `d` is not forwarded.
    fn encode_with_fields(&self, d: &Delta, p: &Passthrough, out: &mut Vec<u8>) -> bool {
        let text = match d {
            Delta::Content(c) => Some(("content", c)),
            Delta::Reasoning(r) => Some(("reasoning_content", r)),
            Delta::Refusal(r) => Some(("refusal", r)),
            _ => None,
        };
        let message = p.message_json.as_deref().map(members);
        // A text delta without message fields (the common case) is written directly; the
        // others through their JSON value, reopened for the message fields.
        let (delta, finish) = match (text, &message) {
            (Some(_), None) => (None, None),
            _ => match Self::delta_value(d) {
                Some((v, f)) => (Some(v.to_string()), f),
                None => return false,
            },
        };
        let response = p.response_json.as_deref().map(members);
        let choice = p.choice_json.as_deref().map(members);
        out.extend_from_slice(self.head_open.as_bytes());
        if let Some(m) = &response {
            m.write_each_after_comma(out);
        }
        out.extend_from_slice(br#","choices":[{"index":0,"delta":"#);
        match (delta, text) {
            (Some(delta), _) => {
                // `delta` is a JSON object: reopen it for the message fields.
                let inner = &delta[..delta.len() - 1];
                let mark = out.len();
                out.extend_from_slice(inner.as_bytes());
                if let Some(m) = &message {
                    m.write_each_after_comma(out);
                    if inner == "{" && !m.0.is_empty() {
                        out.remove(mark + 1);
                    }
                }
                out.push(b'}');
            }
            (None, Some((key, text))) => {
                out.extend_from_slice(b"{\"");
                out.extend_from_slice(key.as_bytes());
                out.extend_from_slice(b"\":");
                // Writing a string into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *out, text);
                out.push(b'}');
            }
            (None, None) => out.extend_from_slice(b"{}"),
        }
        if !choice.as_ref().is_some_and(|c| c.has("logprobs")) {
            out.extend_from_slice(br#","logprobs":null"#);
        }
        out.extend_from_slice(br#","finish_reason":"#);
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, &finish);
        if let Some(m) = &choice {
            m.write_each_after_comma(out);
        }
        out.extend_from_slice(b"}]}\n\n");
        true
    }

    /// Append the SSE frame of one delta built through a `serde_json::Value` (role and
    /// tool-call deltas, whose key order is the JSON map's); false for deltas that are not
    /// forwarded.
    fn delta_via_value(&self, d: &Delta, out: &mut Vec<u8>) -> bool {
        let Some((delta, finish)) = Self::delta_value(d) else {
            return false;
        };
        let mut s = String::with_capacity(self.head.len() + 96);
        s.push_str(&self.head);
        s.push_str(&delta.to_string());
        match finish {
            None => s.push_str(r#","logprobs":null,"finish_reason":null}]}"#),
            Some(f) => {
                s.push_str(r#","logprobs":null,"finish_reason":"#);
                s.push_str(&Value::String(f.to_string()).to_string());
                s.push_str("}]}");
            }
        }
        s.push_str("\n\n");
        out.extend_from_slice(s.as_bytes());
        true
    }

    /// The `delta` object of a forwarded delta and its finish reason; `None` for deltas that
    /// are not forwarded.
    fn delta_value(d: &Delta) -> Option<(Value, Option<&str>)> {
        Some(match d {
            Delta::Role(r) => (json!({"role": r, "content": ""}), None),
            Delta::Content(c) => (json!({ "content": c }), None),
            Delta::Reasoning(r) => (json!({ "reasoning_content": r }), None),
            Delta::Refusal(r) => (json!({ "refusal": r }), None),
            Delta::ToolCall(t) => {
                let mut call = serde_json::Map::new();
                call.insert("index".into(), json!(t.index));
                if let Some(id) = &t.id {
                    call.insert("id".into(), json!(id));
                    call.insert("type".into(), json!("function"));
                }
                let mut function = serde_json::Map::new();
                if let Some(n) = &t.name {
                    function.insert("name".into(), json!(n));
                }
                if let Some(a) = &t.arguments {
                    function.insert("arguments".into(), json!(a));
                }
                call.insert("function".into(), Value::Object(function));
                (json!({ "tool_calls": [call] }), None)
            }
            Delta::Finish(f) => (json!({}), Some(finish_reason_str(f))),
            Delta::Usage(_)
            | Delta::Model(_)
            | Delta::Done
            | Delta::Passthrough(_)
            | Delta::ReasoningSignature(_)
            | Delta::ReasoningEncrypted(_) => return None,
        })
    }

    /// The final usage chunk (`choices: []`); `usage` is `null` when the upstream reported none.
    pub(crate) fn usage(&self, usage: Option<&TokenUsage>) -> Bytes {
        let v = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model, "choices": [], "usage": usage.map(usage_json),
        });
        Bytes::from(format!("data: {v}\n\n"))
    }
}

/// `data: [DONE]`.
pub(crate) fn done() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// The in-band error event of a stream that cannot complete.
pub(crate) fn error_event(e: &GatewayError) -> Bytes {
    let (_, body) = super::errors::error_body(e);
    Bytes::from(format!("data: {body}\n\n"))
}

/// OpenAI `usage` object, typed: serialized straight into an answer, with its keys in sorted
/// order (the order a `serde_json::Value` map writes them, so both encodings give the same
/// bytes).
#[derive(serde::Serialize)]
pub(crate) struct UsageOut {
    completion_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    completion_tokens_details: Option<CompletionDetails>,
    prompt_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_tokens_details: Option<PromptDetails>,
    total_tokens: u64,
}

#[derive(serde::Serialize)]
struct CompletionDetails {
    reasoning_tokens: u64,
}

/// `cache_write_tokens` is OpenRouter's name for prompt-cache writes (OpenAI has none).
#[derive(serde::Serialize)]
struct PromptDetails {
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_write_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cached_tokens: Option<u64>,
}

impl UsageOut {
    pub(crate) fn of(u: &TokenUsage) -> Self {
        let cached = u.cached_prompt_tokens;
        let written = u.cache_write_tokens;
        Self {
            completion_tokens: u.completion_tokens,
            completion_tokens_details: u.reasoning_tokens.map(|r| CompletionDetails {
                reasoning_tokens: r,
            }),
            prompt_tokens: u.prompt_tokens,
            prompt_tokens_details: (cached.is_some() || written.is_some()).then_some(
                PromptDetails {
                    cache_write_tokens: written,
                    cached_tokens: cached,
                },
            ),
            total_tokens: u.prompt_tokens.saturating_add(u.completion_tokens),
        }
    }
}

/// OpenAI `usage` object as a `Value` (for answers built as values).
pub(crate) fn usage_json(u: &TokenUsage) -> Value {
    serde_json::to_value(UsageOut::of(u)).unwrap_or(Value::Null)
}

/// Whether something other than text answers (tool calls, a refusal, a legacy
/// `function_call`, a `content_filter` stop): an empty `content` is then written `null`, as
/// the OpenAI API does.
fn answered_without_text(r: &ChatResponse) -> bool {
    !r.tool_calls.is_empty()
        || r.refusal.is_some()
        || r.finish_reason.as_deref() == Some("content_filter")
        || r.upstream_fields
            .as_ref()
            .and_then(|f| f.message.as_deref())
            .is_some_and(|m| members(m).has("function_call"))
}

/// Bytes of a completion object around its text: ids, usage, finish reason.
const COMPLETION_BYTES_HINT: usize = 320;

/// The non-streamed completion object, serialized; keys are in the order the `Value` map
/// wrote them (sorted), so the bytes equal [`completion_json`]'s.
///
/// An answer of the common shape (text, and perhaps reasoning or a refusal: no tool calls,
/// no `reasoning_details`, no pass-through fields) is written straight into the buffer with
/// its keys as constant bytes; any other through [`completion_body_typed`]. Serde writes
/// every key of a struct through its string escaper, and the pass-through levels'
/// `#[serde(flatten)]` turns each struct into a map: the typed encoder took ~6k instructions
/// per call for a short answer, most of them escaping the ~25 constant keys
/// (`instructions.py`, docs/benchmark-history.md).
pub(crate) fn completion_body(r: &ChatResponse, created: u64) -> Vec<u8> {
    if common_shape(r) {
        let mut out = Vec::with_capacity(COMPLETION_BYTES_HINT + r.content.len());
        if write_common_completion(r, created, &mut out).is_ok() {
            return out;
        }
    }
    completion_body_typed(r, created)
}

/// Whether `r` has the common shape [`write_common_completion`] writes: no tool calls, no
/// `reasoning_details`, no pass-through fields.
fn common_shape(r: &ChatResponse) -> bool {
    r.tool_calls.is_empty() && r.reasoning_details.is_empty() && r.upstream_fields.is_none()
}

/// Write the completion object of an answer of the common shape (see [`completion_body`]):
/// the same bytes as [`completion_body_typed`]. Writing into a `Vec` cannot fail; the
/// `Result` is serde_json's signature.
fn write_common_completion(
    r: &ChatResponse,
    created: u64,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    out.extend_from_slice(br#"{"choices":[{"finish_reason":"#);
    serde_json::to_writer(&mut *out, &r.finish_reason)?;
    out.extend_from_slice(br#","index":0,"logprobs":null,"message":{"content":"#);
    let content = (!r.content.is_empty() || !answered_without_text(r)).then_some(&r.content);
    serde_json::to_writer(&mut *out, &content)?;
    if let Some(reasoning) = &r.reasoning {
        out.extend_from_slice(br#","reasoning_content":"#);
        serde_json::to_writer(&mut *out, reasoning)?;
    }
    if let Some(refusal) = &r.refusal {
        out.extend_from_slice(br#","refusal":"#);
        serde_json::to_writer(&mut *out, refusal)?;
    }
    out.extend_from_slice(br#","role":"assistant"}}],"created":"#);
    serde_json::to_writer(&mut *out, &created)?;
    out.extend_from_slice(br#","id":"#);
    serde_json::to_writer(&mut *out, &format_args!("chatcmpl-{}", r.call_id))?;
    out.extend_from_slice(br#","model":"#);
    serde_json::to_writer(&mut *out, r.model_reported.as_deref().unwrap_or(&r.model))?;
    out.extend_from_slice(br#","object":"chat.completion","usage":"#);
    match &r.usage {
        Some(u) => write_usage(u, out)?,
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
    Ok(())
}

/// Write the OpenAI `usage` object: the same bytes as [`UsageOut`]'s serialization.
fn write_usage(u: &TokenUsage, out: &mut Vec<u8>) -> serde_json::Result<()> {
    out.extend_from_slice(br#"{"completion_tokens":"#);
    serde_json::to_writer(&mut *out, &u.completion_tokens)?;
    if let Some(reasoning) = u.reasoning_tokens {
        out.extend_from_slice(br#","completion_tokens_details":{"reasoning_tokens":"#);
        serde_json::to_writer(&mut *out, &reasoning)?;
        out.push(b'}');
    }
    out.extend_from_slice(br#","prompt_tokens":"#);
    serde_json::to_writer(&mut *out, &u.prompt_tokens)?;
    if u.cached_prompt_tokens.is_some() || u.cache_write_tokens.is_some() {
        out.extend_from_slice(br#","prompt_tokens_details":{"#);
        if let Some(written) = u.cache_write_tokens {
            out.extend_from_slice(br#""cache_write_tokens":"#);
            serde_json::to_writer(&mut *out, &written)?;
        }
        if let Some(cached) = u.cached_prompt_tokens {
            if u.cache_write_tokens.is_some() {
                out.push(b',');
            }
            out.extend_from_slice(br#""cached_tokens":"#);
            serde_json::to_writer(&mut *out, &cached)?;
        }
        out.push(b'}');
    }
    out.extend_from_slice(br#","total_tokens":"#);
    serde_json::to_writer(
        &mut *out,
        &u.prompt_tokens.saturating_add(u.completion_tokens),
    )?;
    out.push(b'}');
    Ok(())
}

/// The non-streamed completion object of any answer, serialized through typed structs
/// borrowed from the answer (no intermediate `serde_json::Value`).
fn completion_body_typed(r: &ChatResponse, created: u64) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Completion<'a> {
        choices: [Choice<'a>; 1],
        created: u64,
        id: String,
        model: &'a str,
        object: &'static str,
        usage: Option<UsageOut>,
        #[serde(flatten)]
        extra: Flat<'a>,
    }
    #[derive(serde::Serialize)]
    struct Choice<'a> {
        finish_reason: &'a Option<String>,
        index: u32,
        /// Left out when the upstream's own `logprobs` is among the extra fields.
        #[serde(skip_serializing_if = "Option::is_none")]
        logprobs: Option<Option<()>>,
        message: Message<'a>,
        #[serde(flatten)]
        extra: Flat<'a>,
    }
    #[derive(serde::Serialize)]
    struct Message<'a> {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<&'a str>,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        reasoning_details: &'a [Value],
        #[serde(skip_serializing_if = "Option::is_none")]
        refusal: Option<&'a str>,
        role: &'static str,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        tool_calls: &'a [ToolCallOut<'a>],
        #[serde(flatten)]
        extra: Flat<'a>,
    }
    #[derive(serde::Serialize)]
    struct ToolCallOut<'a> {
        function: Function<'a>,
        id: Option<&'a str>,
        #[serde(rename = "type")]
        kind: &'static str,
    }
    #[derive(serde::Serialize)]
    struct Function<'a> {
        arguments: &'a str,
        name: Option<&'a str>,
    }
    let tool_calls: Vec<ToolCallOut<'_>> = r
        .tool_calls
        .iter()
        .map(|t| ToolCallOut {
            function: Function {
                arguments: &t.arguments,
                name: t.name.as_deref(),
            },
            id: t.id.as_deref(),
            kind: "function",
        })
        .collect();
    let fields = r.upstream_fields.as_ref();
    let level =
        |f: fn(&AnswerFields) -> &Option<String>| Flat(fields.and_then(|x| f(x).as_deref()));
    let own_logprobs = fields
        .and_then(|f| f.choice.as_deref())
        .is_some_and(|c| members(c).has("logprobs"));
    let body = Completion {
        choices: [Choice {
            finish_reason: &r.finish_reason,
            index: 0,
            logprobs: (!own_logprobs).then_some(None),
            message: Message {
                content: (!r.content.is_empty() || !answered_without_text(r))
                    .then_some(r.content.as_str()),
                reasoning_content: r.reasoning.as_deref(),
                reasoning_details: &r.reasoning_details,
                refusal: r.refusal.as_deref(),
                role: "assistant",
                tool_calls: &tool_calls,
                extra: level(|f| &f.message),
            },
            extra: level(|f| &f.choice),
        }],
        created,
        id: format!("chatcmpl-{}", r.call_id),
        model: r.model_reported.as_deref().unwrap_or(&r.model),
        object: "chat.completion",
        usage: r.usage.as_ref().map(UsageOut::of),
        extra: level(|f| &f.response),
    };
    // Sized for the answer's text and the object around it, so the buffer is seldom grown.
    let mut out = Vec::with_capacity(COMPLETION_BYTES_HINT + r.content.len());
    // Serializing borrowed strings and numbers cannot fail.
    match serde_json::to_writer(&mut out, &body) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

/// The non-streamed completion object as a `Value` (the reference the typed
/// [`completion_body`] is tested against).
#[cfg(test)]
pub(crate) fn completion_json(r: &ChatResponse, created: u64) -> Value {
    let mut message = json!({"role": "assistant", "content": r.content});
    if let Some(reasoning) = &r.reasoning {
        message["reasoning_content"] = json!(reasoning);
    }
    if !r.reasoning_details.is_empty() {
        message["reasoning_details"] = Value::Array(r.reasoning_details.clone());
    }
    if !r.tool_calls.is_empty() {
        message["tool_calls"] = r
            .tool_calls
            .iter()
            .map(|t| {
                json!({"id": t.id, "type": "function",
                       "function": {"name": t.name, "arguments": t.arguments}})
            })
            .collect();
    }
    if let Some(refusal) = &r.refusal {
        message["refusal"] = json!(refusal);
    }
    if r.content.is_empty() && answered_without_text(r) {
        message["content"] = Value::Null;
    }
    json!({
        "id": format!("chatcmpl-{}", r.call_id),
        "object": "chat.completion",
        "created": created,
        "model": r.model_reported.as_deref().unwrap_or(&r.model),
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": r.finish_reason}],
        "usage": r.usage.as_ref().map(usage_json),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{FinishReason, ToolCallDelta};

    fn encoder() -> ChunkEncoder {
        ChunkEncoder::new(&StreamStart {
            call_id: "0190-abc".into(),
            source_name: "llm-openai-1".into(),
            model: "m\"odel".into(),
            model_reported: None,
            attempts: 1,
            overhead_us: 0,
            created: 1_700_000_000,
            cache_hit: false,
            budget_warnings: Vec::new(),
        })
    }

    /// The typed completion body is byte for byte the `Value` one, for every shape.
    #[test]
    fn the_usage_object_has_openais_keys_in_sorted_order() {
        let usage = |cached, written, reasoning| {
            let u = TokenUsage {
                prompt_tokens: 8,
                completion_tokens: 5,
                cached_prompt_tokens: cached,
                reasoning_tokens: reasoning,
                cache_write_tokens: written,
            };
            let bytes = serde_json::to_string(&UsageOut::of(&u)).unwrap();
            // The `Value` form (stream chunks, other answers) says the same, and so does the
            // common completion's writer.
            assert_eq!(usage_json(&u).to_string(), bytes);
            let mut written = Vec::new();
            write_usage(&u, &mut written).unwrap();
            assert_eq!(String::from_utf8(written).unwrap(), bytes);
            bytes
        };
        assert_eq!(
            usage(None, None, None),
            r#"{"completion_tokens":5,"prompt_tokens":8,"total_tokens":13}"#
        );
        assert_eq!(
            usage(Some(3), None, Some(2)),
            r#"{"completion_tokens":5,"completion_tokens_details":{"reasoning_tokens":2},"prompt_tokens":8,"prompt_tokens_details":{"cached_tokens":3},"total_tokens":13}"#
        );
        assert_eq!(
            usage(None, Some(4), None),
            r#"{"completion_tokens":5,"prompt_tokens":8,"prompt_tokens_details":{"cache_write_tokens":4},"total_tokens":13}"#
        );
        assert_eq!(
            usage(Some(3), Some(4), None),
            r#"{"completion_tokens":5,"prompt_tokens":8,"prompt_tokens_details":{"cache_write_tokens":4,"cached_tokens":3},"total_tokens":13}"#
        );
        // Counts an upstream reported are added without overflowing.
        let huge = TokenUsage {
            prompt_tokens: u64::MAX,
            completion_tokens: 1,
            cached_prompt_tokens: None,
            reasoning_tokens: None,
            cache_write_tokens: None,
        };
        assert_eq!(UsageOut::of(&huge).total_tokens, u64::MAX);
    }

    #[test]
    fn completion_body_equals_value_json() {
        let base = ChatResponse {
            call_id: "0190-abc".into(),
            scope: "LLM".into(),
            content: "Hello \u{1} 漢字".into(),
            reasoning: None,
            reasoning_details: Vec::new(),
            tool_calls: Vec::new(),
            finish_reason: Some("stop".into()),
            usage: None,
            usage_source: crate::telemetry::UsageSource::Unavailable,
            model: "m\"odel".into(),
            model_reported: None,
            source_name: "llm-openai-1".into(),
            provider: "openai".into(),
            attempts: 1,
            latency_ms: 3,
            created: 0,
            ttft_ms: None,
            max_inter_token_ms: None,
            salvaged: false,
            overhead_us: 10,
            cache_hit: false,
            refusal: None,
            upstream_fields: None,
            structured: None,
            budget_warnings: Vec::new(),
        };
        let mut refused = base.clone();
        refused.content.clear();
        refused.refusal = Some("I can't help with that.".into());
        let mut filtered = base.clone();
        filtered.content.clear();
        filtered.finish_reason = Some("content_filter".into());
        let mut empty_text = base.clone();
        empty_text.content.clear();
        let mut with_all = base.clone();
        with_all.reasoning = Some("why".into());
        with_all.model_reported = Some("reported".into());
        with_all.usage = Some(TokenUsage {
            prompt_tokens: 8,
            completion_tokens: 6,
            cached_prompt_tokens: Some(2),
            reasoning_tokens: Some(3),
            cache_write_tokens: Some(4),
        });
        with_all.reasoning_details = vec![
            serde_json::json!({"type": "reasoning.text", "text": "why", "signature": "c2ln",
                               "format": "anthropic-claude-v1", "index": 0}),
        ];
        let mut tools_only = base.clone();
        tools_only.content.clear();
        tools_only.finish_reason = None;
        tools_only.tool_calls = vec![
            crate::pipeline::ToolCall {
                index: 0,
                id: Some("call_1".into()),
                name: Some("f".into()),
                arguments: "{\"a\":1}".into(),
            },
            crate::pipeline::ToolCall {
                index: 1,
                id: None,
                name: None,
                arguments: String::new(),
            },
        ];
        let mut tools_and_text = tools_only.clone();
        tools_and_text.content = "text".into();
        // The common shape with everything it may carry: reasoning, a refusal beside text,
        // a reported model, usage with every detail, no finish reason, an id to escape.
        let mut common_all = with_all.clone();
        common_all.reasoning_details.clear();
        common_all.refusal = Some("partly \"no\"".into());
        common_all.finish_reason = None;
        common_all.call_id = "id\"\\\n".into();
        let usage = |cached, written, reasoning| {
            let mut r = base.clone();
            r.usage = Some(TokenUsage {
                prompt_tokens: 0,
                completion_tokens: u64::MAX,
                cached_prompt_tokens: cached,
                reasoning_tokens: reasoning,
                cache_write_tokens: written,
            });
            r
        };
        let common = [
            usage(None, None, None),
            usage(Some(0), None, None),
            usage(None, Some(9), Some(1)),
            common_all,
            refused.clone(),
            filtered.clone(),
            empty_text.clone(),
            base.clone(),
        ];
        let other = [with_all, tools_only, tools_and_text];
        for (i, r) in common.iter().chain(&other).enumerate() {
            let want = serde_json::to_vec(&completion_json(r, 1_700_000_000)).unwrap();
            let want = String::from_utf8(want).unwrap();
            assert_eq!(
                String::from_utf8(completion_body(r, 1_700_000_000)).unwrap(),
                want,
                "case {i}"
            );
            assert_eq!(
                String::from_utf8(completion_body_typed(r, 1_700_000_000)).unwrap(),
                want,
                "case {i}, typed"
            );
            // The common writer takes exactly the answers of the common shape.
            let mut direct = Vec::new();
            let shape = common_shape(r);
            assert_eq!(shape, i < common.len(), "case {i}");
            if shape {
                write_common_completion(r, 1_700_000_000, &mut direct).unwrap();
                assert_eq!(String::from_utf8(direct).unwrap(), want, "case {i}, direct");
            }
        }
    }

    /// Pass-through fields land on their level with the upstream's bytes; an own `logprobs`
    /// replaces the default `null`; a `function_call` answer has `content: null`.
    #[test]
    fn completion_body_carries_upstream_fields() {
        let logprobs = r#"{"content":[{"token":"Hi","logprob":-1.9361265e-07,"bytes":[72,105],"top_logprobs":[]}],"refusal":null}"#;
        let r = ChatResponse {
            call_id: "c".into(),
            scope: "LLM".into(),
            content: String::new(),
            reasoning: None,
            reasoning_details: Vec::new(),
            tool_calls: Vec::new(),
            finish_reason: Some("function_call".into()),
            usage: None,
            usage_source: crate::telemetry::UsageSource::Unavailable,
            model: "m".into(),
            model_reported: None,
            source_name: "s".into(),
            provider: "openai".into(),
            attempts: 1,
            latency_ms: 0,
            created: 0,
            ttft_ms: None,
            max_inter_token_ms: None,
            salvaged: false,
            overhead_us: 0,
            cache_hit: false,
            refusal: None,
            upstream_fields: Some(AnswerFields {
                response: Some(r#"{"system_fingerprint":"fp_1","service_tier":"default"}"#.into()),
                choice: Some(format!(r#"{{"logprobs":{logprobs}}}"#)),
                message: Some(r#"{"function_call":{"name":"f","arguments":"{}"}}"#.into()),
            }),
            structured: None,
            budget_warnings: Vec::new(),
        };
        let body = String::from_utf8(completion_body(&r, 7)).unwrap();
        assert_eq!(
            body,
            format!(
                r#"{{"choices":[{{"finish_reason":"function_call","index":0,"message":{{"content":null,"role":"assistant","function_call":{{"name":"f","arguments":"{{}}"}}}},"logprobs":{logprobs}}}],"created":7,"id":"chatcmpl-c","model":"m","object":"chat.completion","usage":null,"system_fingerprint":"fp_1","service_tier":"default"}}"#
            )
        );
    }

    /// A passthrough goes into the chunk of the delta after it, each level in its place; two
    /// in a row give the first a chunk of its own; the common frames are unchanged after it.
    #[test]
    fn a_signature_writes_its_whole_reasoning_details_entry() {
        use crate::plugin::{EncryptedReasoning, ReasoningSignature};
        let enc = encoder();
        let head = r#"data: {"id":"chatcmpl-0190-abc","object":"chat.completion.chunk","created":1700000000,"model":"m\"odel","choices":[{"index":0,"delta":"#;
        let tail = r#","logprobs":null,"finish_reason":null}]}"#;
        let mut out = Vec::new();
        for d in [
            Delta::Reasoning("Let me ".into()),
            Delta::Reasoning("think.".into()),
            Delta::ReasoningSignature(ReasoningSignature {
                signature: "EqQBCgIYAhIM".into(),
                format: "anthropic-claude-v1".into(),
            }),
            Delta::ReasoningEncrypted(EncryptedReasoning {
                data: "EmwKAhgBEgy3".into(),
                id: None,
                format: "anthropic-claude-v1".into(),
            }),
        ] {
            assert!(enc.encode_delta(&d, &mut out));
        }
        let expected = [
            r#"{"reasoning_content":"Let me "}"#.to_string(),
            r#"{"reasoning_content":"think."}"#.to_string(),
            r#"{"reasoning_details":[{"format":"anthropic-claude-v1","index":0,"signature":"EqQBCgIYAhIM","text":"Let me think.","type":"reasoning.text"}]}"#.to_string(),
            r#"{"reasoning_details":[{"data":"EmwKAhgBEgy3","format":"anthropic-claude-v1","index":1,"type":"reasoning.encrypted"}]}"#.to_string(),
        ]
        .map(|delta| format!("{head}{delta}{tail}\n\n"))
        .concat();
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn chunks_carry_passthrough_fields() {
        let enc = encoder();
        let p = |r: Option<&str>, c: Option<&str>, m: Option<&str>| {
            Delta::Passthrough(Passthrough {
                response_json: r.map(str::to_owned),
                choice_json: c.map(str::to_owned),
                message_json: m.map(str::to_owned),
            })
        };
        let head = r#"data: {"id":"chatcmpl-0190-abc","object":"chat.completion.chunk","created":1700000000,"model":"m\"odel""#;
        let mut out = Vec::new();
        assert!(!enc.encode_delta(
            &p(
                Some(r#"{"system_fingerprint":"fp"}"#),
                Some(r#"{"logprobs":{"content":[{"logprob":-1e-7}]}}"#),
                None
            ),
            &mut out
        ));
        assert!(out.is_empty());
        assert!(enc.encode_delta(&Delta::Content("Hi".into()), &mut out));
        assert_eq!(
            String::from_utf8(std::mem::take(&mut out)).unwrap(),
            format!(
                r#"{head},"system_fingerprint":"fp","choices":[{{"index":0,"delta":{{"content":"Hi"}},"finish_reason":null,"logprobs":{{"content":[{{"logprob":-1e-7}}]}}}}]}}"#
            ) + "

"
        );
        // Message fields into an empty delta; then a second passthrough flushes the first.
        enc.encode_delta(
            &p(None, None, Some(r#"{"function_call":{"name":"f"}}"#)),
            &mut out,
        );
        enc.encode_delta(
            &p(Some(r#"{"service_tier":"default"}"#), None, None),
            &mut out,
        );
        assert!(enc.encode_delta(&Delta::Finish(FinishReason::FunctionCall), &mut out));
        assert_eq!(
            String::from_utf8(std::mem::take(&mut out)).unwrap(),
            format!(
                r#"{head},"choices":[{{"index":0,"delta":{{"content":"","function_call":{{"name":"f"}}}},"logprobs":null,"finish_reason":null}}]}}"#
            ) + "

" + &format!(
                r#"{head},"service_tier":"default","choices":[{{"index":0,"delta":{{}},"logprobs":null,"finish_reason":"function_call"}}]}}"#
            ) + "

"
        );
        // Nothing held: the direct frame.
        assert_eq!(
            enc.delta(&Delta::Refusal("no".into())),
            Some(Bytes::from(
                format!(
                    r#"{head},"choices":[{{"index":0,"delta":{{"refusal":"no"}},"logprobs":null,"finish_reason":null}}]}}"#
                ) + "

"
            ))
        );
    }

    /// The direct writer produces exactly the bytes of the `serde_json::Value` path.
    #[test]
    fn direct_frames_equal_value_frames() {
        let enc = encoder();
        let texts = [
            "",
            "tok1 ",
            "quote \" backslash \\ newline \n tab \t ctrl \u{1} end",
            "unicode é 漢字 🦀 \u{2028}",
            "</script>",
        ];
        let mut deltas: Vec<Delta> = Vec::new();
        for t in texts {
            deltas.push(Delta::Content(t.into()));
            deltas.push(Delta::Reasoning(t.into()));
            deltas.push(Delta::Role(t.into()));
            deltas.push(Delta::Refusal(t.into()));
            deltas.push(Delta::Finish(FinishReason::Other(t.into())));
        }
        deltas.extend([
            Delta::Finish(FinishReason::Stop),
            Delta::Finish(FinishReason::Length),
            Delta::Finish(FinishReason::ToolCalls),
            Delta::Finish(FinishReason::ContentFilter),
            Delta::Finish(FinishReason::FunctionCall),
            Delta::ToolCall(ToolCallDelta {
                index: 0,
                id: Some("call_1".into()),
                name: Some("get_weather".into()),
                arguments: Some("{\"city\":".into()),
            }),
        ]);
        for d in &deltas {
            let mut via_value = Vec::new();
            assert!(enc.delta_via_value(d, &mut via_value), "{d:?}");
            assert_eq!(enc.delta(d), Some(Bytes::from(via_value)), "{d:?}");
        }
        // Frames appended to one buffer are the frames one after the other.
        let mut all = Vec::new();
        let mut each = Vec::new();
        for d in &deltas {
            assert!(enc.encode_delta(d, &mut all));
            each.extend_from_slice(&enc.delta(d).unwrap_or_default());
        }
        assert_eq!(all, each);
        for d in [Delta::Done, Delta::Model("x".into())] {
            assert_eq!(enc.delta(&d), None);
        }
    }
}
