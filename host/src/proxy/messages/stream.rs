//! A streamed answer as Anthropic's event sequence: `message_start`, `ping`, then per content
//! block `content_block_start`, its `content_block_delta`s (`text_delta`, `thinking_delta`,
//! `signature_delta`, `input_json_delta`) and `content_block_stop`; at the end
//! `message_delta` (`stop_reason`, usage) and `message_stop`; a failure after the start as
//! `event: error`. The `ping` goes after the first `content_block_start`, where Anthropic
//! sends it; a `tool_use` block's first `input_json_delta` is sent even when empty, as
//! Anthropic's are.
//!
//! The neutral deltas arrive interleaved by kind; each change of kind (text after thinking, a
//! new tool call) closes the open block and opens the next, numbered from 0. A signature closes
//! its `thinking` block; an encrypted block is a `redacted_thinking` block of its own. Usage is
//! only known at the end: `message_start` carries `null` counts and `message_delta` the real
//! ones (the SDKs take `message_delta`'s counts into the final message).
//!
//! Text, thinking and tool-argument deltas — nearly every event of a stream — are written
//! straight into the frame, without an intermediate JSON value.

use std::io::Write;

use serde_json::{Value, json};

use super::answer::{message_id, stop_reason, tool_use_id, usage_json};
use super::errors::error_json;
use super::signatures::{self, Block};
use crate::error::GatewayError;
use crate::pipeline::reasoning::{encrypted_entry, text_entry};
use crate::pipeline::{ChatResponse, StreamStart};
use crate::plugin::Delta;

/// The kind of the open content block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    /// A `tool_use` block, with the neutral tool-call index it carries.
    Tool(u32),
}

/// The encoder of one streamed Messages answer.
pub(crate) struct MessagesStream {
    call_id: String,
    model: String,
    started: bool,
    /// The `ping` was sent.
    pinged: bool,
    /// The open block and its index.
    open: Option<(usize, Open)>,
    /// The index the next block gets.
    next: usize,
    /// Reasoning blocks that arrived while a `tool_use` block was open (a Gemini source
    /// signs a function call right after it): written once that block closes, so one tool
    /// call stays one block.
    pending: Vec<Block>,
}

/// Append one SSE event: `event: <name>` and its data.
fn event(out: &mut Vec<u8>, name: &str, data: &Value) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    // Writing a value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, data);
    out.extend_from_slice(b"\n\n");
}

impl MessagesStream {
    pub(crate) fn new(start: &StreamStart) -> Self {
        Self {
            call_id: start.call_id.clone(),
            model: start
                .model_reported
                .clone()
                .unwrap_or_else(|| start.model.clone()),
            started: false,
            pinged: false,
            open: None,
            next: 0,
            pending: Vec::new(),
        }
    }

    /// `message_start`, before anything else.
    fn begin(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let message = json!({
            "id": message_id(&self.call_id),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": null, "output_tokens": null},
        });
        event(
            out,
            "message_start",
            &json!({"type": "message_start", "message": message}),
        );
    }

    fn ping(&mut self, out: &mut Vec<u8>) {
        if !self.pinged {
            self.pinged = true;
            event(out, "ping", &json!({"type": "ping"}));
        }
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        if let Some((index, kind)) = self.open.take() {
            event(
                out,
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            );
            if let Open::Tool(_) = kind {
                for b in std::mem::take(&mut self.pending) {
                    self.reasoning_block(b, out);
                }
            }
        }
    }

    /// A reasoning block now, or after the open `tool_use` block.
    fn reasoning_or_defer(&mut self, b: Block, out: &mut Vec<u8>) {
        if let Some((_, Open::Tool(_))) = self.open {
            self.pending.push(b);
        } else {
            self.reasoning_block(b, out);
        }
    }

    /// Make a block of `kind` the open one (closing another), starting it with
    /// `content_block`; returns its index.
    fn ensure(
        &mut self,
        kind: Open,
        content_block: impl FnOnce() -> Value,
        out: &mut Vec<u8>,
    ) -> usize {
        if let Some((index, open)) = self.open
            && open == kind
        {
            return index;
        }
        self.close(out);
        let index = self.next;
        self.next += 1;
        self.open = Some((index, kind));
        event(
            out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": content_block()}),
        );
        self.ping(out);
        index
    }

    /// A `text_delta`, `thinking_delta` or `input_json_delta`, written directly.
    fn text_delta(out: &mut Vec<u8>, index: usize, ty: &str, key: &str, text: &str) {
        out.extend_from_slice(
            b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":",
        );
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{index}");
        out.extend_from_slice(b",\"delta\":{\"type\":\"");
        out.extend_from_slice(ty.as_bytes());
        out.extend_from_slice(b"\",\"");
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        let _ = serde_json::to_writer(&mut *out, text);
        out.extend_from_slice(b"}}\n\n");
    }

    fn block_delta(out: &mut Vec<u8>, index: usize, delta: Value) {
        event(
            out,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
    }

    fn reasoning_block(&mut self, b: Block, out: &mut Vec<u8>) {
        match b {
            Block::Thinking { signature, .. } => {
                let index = self.ensure(
                    Open::Thinking,
                    || json!({"type": "thinking", "thinking": "", "signature": ""}),
                    out,
                );
                Self::block_delta(
                    out,
                    index,
                    json!({"type": "signature_delta", "signature": signature}),
                );
                self.close(out);
            }
            Block::Redacted { data } => {
                self.close(out);
                self.ensure(
                    Open::Thinking,
                    || json!({"type": "redacted_thinking", "data": data}),
                    out,
                );
                self.close(out);
            }
        }
    }
}

impl super::super::dialect::StreamEncoder for MessagesStream {
    fn delta(&mut self, d: &Delta, out: &mut Vec<u8>) {
        self.begin(out);
        match d {
            Delta::Content(t) | Delta::Refusal(t) if !t.is_empty() => {
                let index = self.ensure(Open::Text, || json!({"type": "text", "text": ""}), out);
                Self::text_delta(out, index, "text_delta", "text", t);
            }
            Delta::Reasoning(t) if !t.is_empty() => {
                let index = self.ensure(
                    Open::Thinking,
                    || json!({"type": "thinking", "thinking": "", "signature": ""}),
                    out,
                );
                Self::text_delta(out, index, "thinking_delta", "thinking", t);
            }
            Delta::ReasoningSignature(s) => {
                // The entry's text is not needed here: the block's text was streamed already.
                if let Some(b) = signatures::block(&text_entry("", s, 0)) {
                    self.reasoning_or_defer(b, out);
                }
            }
            Delta::ReasoningEncrypted(e) => {
                if let Some(b) = signatures::block(&encrypted_entry(e, 0)) {
                    self.reasoning_or_defer(b, out);
                }
            }
            Delta::ToolCall(t) => {
                let opening = self.open.map(|(_, k)| k) != Some(Open::Tool(t.index));
                // The block's head only when it opens: argument fragments are most of a tool
                // call's deltas.
                let block = opening.then(|| {
                    json!({"type": "tool_use",
                           "id": tool_use_id(&self.call_id, t.id.as_deref(), t.index),
                           "name": t.name.as_deref().unwrap_or_default(), "input": {}})
                });
                let index = self.ensure(Open::Tool(t.index), || block.unwrap_or_default(), out);
                // A new block's first delta is sent even when empty, as Anthropic's are.
                let args = t.arguments.as_deref().unwrap_or_default();
                if opening || !args.is_empty() {
                    Self::text_delta(out, index, "input_json_delta", "partial_json", args);
                }
            }
            Delta::Content(_)
            | Delta::Refusal(_)
            | Delta::Reasoning(_)
            | Delta::Role(_)
            | Delta::Finish(_)
            | Delta::Usage(_)
            | Delta::Model(_)
            | Delta::Done
            | Delta::Passthrough(_) => {}
        }
    }

    fn end(&mut self, r: &ChatResponse, out: &mut Vec<u8>) {
        self.begin(out);
        self.close(out);
        self.ping(out);
        event(
            out,
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(r.finish_reason.as_deref(), !r.tool_calls.is_empty()), "stop_sequence": null},
                "usage": usage_json(r.usage.as_ref()),
            }),
        );
        event(out, "message_stop", &json!({"type": "message_stop"}));
    }

    fn failed(&mut self, e: &GatewayError, out: &mut Vec<u8>) {
        self.begin(out);
        event(out, "error", &error_json(e));
    }
}
