//! A streamed answer as the Responses event sequence, every event numbered by
//! `sequence_number` from 0: `response.created`, `response.in_progress`; per output item
//! `response.output_item.added`, its events and `response.output_item.done`; at the end
//! `response.completed` (or `response.incomplete`) with the whole Response; a failure after
//! the start as `error` and `response.failed` with `response.error`.
//!
//! Items open as the neutral deltas change kind: reasoning text opens a `reasoning` item
//! (`response.reasoning_summary_part.added`, `response.reasoning_summary_text.delta`s, their
//! `.done`s), answer text or a refusal a `message` item (`response.content_part.added`,
//! `response.output_text.delta` or `response.refusal.delta`, their `.done`s), a tool call a
//! `function_call` item (`response.function_call_arguments.delta`s and `.done`). A signature or
//! an encrypted block joins the open reasoning item (or opens one), and goes out in its
//! `encrypted_content` when the item is done. The final Response lists the items exactly as
//! they were streamed, so the SDKs' snapshot and the final object agree.
//!
//! Text deltas — nearly every event of a stream — are written straight into the frame from a
//! head built once per content part: no JSON value per delta.

use std::io::Write;

use serde_json::{Value, json};

use super::Echo;
use super::answer::{
    Head, function_call_id, function_call_item, item_id, message_item, model_of, output_text,
    reasoning_item, refusal_part, response_object, status, usage_json,
};
use crate::error::GatewayError;
use crate::pipeline::reasoning::{encrypted_entry, text_entry};
use crate::pipeline::{ChatResponse, StreamStart};
use crate::plugin::Delta;
use crate::proxy::errors::wire;

/// The kind of a message's content part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartKind {
    Text,
    Refusal,
}

/// The open content part of a message item.
struct Part {
    kind: PartKind,
    index: usize,
    text: String,
    /// `event: …\ndata: {"type":…,"item_id":…,"output_index":…,"content_index":…,"delta":`
    head: Vec<u8>,
}

/// The open output item.
enum Item {
    Reasoning {
        index: usize,
        id: String,
        text: String,
        entries: Vec<Value>,
        /// The head of a summary text delta, once the summary part is open.
        head: Option<Vec<u8>>,
    },
    Message {
        index: usize,
        id: String,
        done_parts: Vec<Value>,
        part: Option<Part>,
    },
    Function {
        index: usize,
        id: String,
        tool_index: u32,
        call_id: String,
        name: String,
        arguments: String,
    },
}

/// The encoder of one streamed Responses answer.
pub(crate) struct ResponsesStream {
    call_id: String,
    model: String,
    created: u64,
    echo: Echo,
    seq: u64,
    started: bool,
    open: Option<Item>,
    /// Items done, in output order (the final Response's `output`).
    output: Vec<Value>,
    /// The reasoning text since the last `reasoning_details` entry: a signature makes it one
    /// `reasoning.text` entry (as `pipeline/reasoning.rs` builds the whole answer's).
    block: String,
    /// Entries made so far (the next entry's `index`).
    entries: usize,
    /// Entries that arrived while a `function_call` item was open (a Gemini source signs a
    /// function call right after it): added once that call is done, so one call stays one
    /// item.
    pending: Vec<Value>,
}

/// The head of a text delta event (everything up to the delta's string).
fn delta_head(
    ty: &str,
    item_id: &str,
    output_index: usize,
    index_key: &str,
    index: usize,
) -> Vec<u8> {
    let mut h = Vec::with_capacity(160);
    let _ = write!(
        h,
        "event: {ty}\ndata: {{\"type\":\"{ty}\",\"item_id\":{},\"output_index\":{output_index},\"{index_key}\":{index},\"delta\":",
        Value::from(item_id)
    );
    h
}

impl ResponsesStream {
    pub(crate) fn new(start: &StreamStart, echo: Echo) -> Self {
        Self {
            call_id: start.call_id.clone(),
            model: start
                .model_reported
                .clone()
                .unwrap_or_else(|| start.model.clone()),
            created: start.created,
            echo,
            seq: 0,
            started: false,
            open: None,
            output: Vec::new(),
            block: String::new(),
            entries: 0,
            pending: Vec::new(),
        }
    }

    fn next_seq(&mut self) -> u64 {
        let n = self.seq;
        self.seq += 1;
        n
    }

    /// Append one event: `event: <type>` and its data with `type` and `sequence_number`.
    fn event(&mut self, out: &mut Vec<u8>, ty: &str, mut data: Value) {
        if let Value::Object(m) = &mut data {
            m.insert("type".into(), Value::from(ty));
            m.insert("sequence_number".into(), Value::from(self.next_seq()));
        }
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(ty.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        // Writing a value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, &data);
        out.extend_from_slice(b"\n\n");
    }

    /// A text delta from its head, written directly.
    fn text_delta(&mut self, out: &mut Vec<u8>, head: &[u8], text: &str, logprobs: bool) {
        let seq = self.next_seq();
        out.extend_from_slice(head);
        let _ = serde_json::to_writer(&mut *out, text);
        if logprobs {
            out.extend_from_slice(b",\"logprobs\":[]");
        }
        let _ = write!(out, ",\"sequence_number\":{seq}}}\n\n");
    }

    fn response(&self, status: &str, output: Vec<Value>) -> Value {
        response_object(
            Head {
                call_id: &self.call_id,
                created: self.created,
                model: &self.model,
                status,
                incomplete_details: Value::Null,
                error: Value::Null,
                output,
                usage: Value::Null,
            },
            &self.echo,
        )
    }

    /// `response.created` and `response.in_progress`, before anything else.
    fn begin(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let r = self.response("in_progress", Vec::new());
        self.event(out, "response.created", json!({"response": r.clone()}));
        self.event(out, "response.in_progress", json!({"response": r}));
    }

    /// Close the open item (its open part first); `status` is the item's.
    fn close(&mut self, out: &mut Vec<u8>, item_status: &str) {
        let Some(item) = self.open.take() else {
            return;
        };
        let (index, done) = match item {
            Item::Reasoning {
                index,
                id,
                text,
                entries,
                head,
            } => {
                if head.is_some() {
                    let part = json!({"type": "summary_text", "text": text});
                    self.event(
                        out,
                        "response.reasoning_summary_text.done",
                        json!({"item_id": id, "output_index": index, "summary_index": 0, "text": text}),
                    );
                    self.event(
                        out,
                        "response.reasoning_summary_part.done",
                        json!({"item_id": id, "output_index": index, "summary_index": 0, "part": part}),
                    );
                }
                (index, reasoning_item(&id, &text, &entries))
            }
            Item::Message {
                index,
                id,
                mut done_parts,
                part,
            } => {
                if let Some(p) = part {
                    done_parts.push(self.close_part(out, &id, index, p));
                }
                (index, message_item(&id, done_parts, item_status))
            }
            Item::Function {
                index,
                id,
                call_id,
                name,
                arguments,
                ..
            } => {
                self.event(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": index, "arguments": arguments}),
                );
                (
                    index,
                    function_call_item(&id, &call_id, &name, &arguments, "completed"),
                )
            }
        };
        self.event(
            out,
            "response.output_item.done",
            json!({"output_index": index, "item": done.clone()}),
        );
        self.output.push(done);
    }

    /// The `.done` events of a content part; returns the part.
    fn close_part(&mut self, out: &mut Vec<u8>, id: &str, index: usize, p: Part) -> Value {
        let (done_ty, part) = match p.kind {
            PartKind::Text => ("response.output_text.done", output_text(&p.text)),
            PartKind::Refusal => ("response.refusal.done", refusal_part(&p.text)),
        };
        let mut done = json!({"item_id": id, "output_index": index, "content_index": p.index});
        match p.kind {
            PartKind::Text => {
                done["text"] = Value::String(p.text);
                done["logprobs"] = json!([]);
            }
            PartKind::Refusal => done["refusal"] = Value::String(p.text),
        }
        self.event(out, done_ty, done);
        self.event(
            out,
            "response.content_part.done",
            json!({"item_id": id, "output_index": index, "content_index": p.index, "part": part.clone()}),
        );
        part
    }

    /// Open an item (closing another) and announce it.
    fn open_item(
        &mut self,
        out: &mut Vec<u8>,
        make: impl FnOnce(usize, String) -> (Item, Value),
        prefix: &str,
    ) {
        self.close(out, "completed");
        let index = self.output.len();
        let id = item_id(prefix, &self.call_id, index);
        let (item, announced) = make(index, id);
        self.event(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": announced}),
        );
        self.open = Some(item);
    }

    fn ensure_reasoning(&mut self, out: &mut Vec<u8>) {
        if matches!(self.open, Some(Item::Reasoning { .. })) {
            return;
        }
        self.open_item(
            out,
            |index, id| {
                let announced =
                    json!({"id": id, "type": "reasoning", "summary": [], "status": "in_progress"});
                (
                    Item::Reasoning {
                        index,
                        id,
                        text: String::new(),
                        entries: Vec::new(),
                        head: None,
                    },
                    announced,
                )
            },
            "rs",
        );
    }

    fn reasoning_text(&mut self, out: &mut Vec<u8>, t: &str) {
        self.ensure_reasoning(out);
        self.block.push_str(t);
        let Some(Item::Reasoning {
            index,
            id,
            mut text,
            entries,
            head,
        }) = self.open.take()
        else {
            return;
        };
        let head = match head {
            Some(h) => h,
            None => {
                self.event(
                    out,
                    "response.reasoning_summary_part.added",
                    json!({"item_id": id, "output_index": index, "summary_index": 0,
                           "part": {"type": "summary_text", "text": ""}}),
                );
                delta_head(
                    "response.reasoning_summary_text.delta",
                    &id,
                    index,
                    "summary_index",
                    0,
                )
            }
        };
        text.push_str(t);
        self.text_delta(out, &head, t, false);
        self.open = Some(Item::Reasoning {
            index,
            id,
            text,
            entries,
            head: Some(head),
        });
    }

    /// Add an entry (its `index` already taken) to the reasoning item, or hold it while a
    /// function call is open.
    fn reasoning_entry(&mut self, out: &mut Vec<u8>, entry: Value) {
        if let Some(Item::Function { .. }) = self.open {
            self.pending.push(entry);
            return;
        }
        self.ensure_reasoning(out);
        if let Some(Item::Reasoning { entries, .. }) = &mut self.open {
            entries.push(entry);
        }
    }

    /// The held entries, now that the function call they followed is done.
    fn flush_pending(&mut self, out: &mut Vec<u8>) {
        if self.pending.is_empty() {
            return;
        }
        if let Some(Item::Function { .. }) = self.open {
            self.close(out, "completed");
        }
        for entry in std::mem::take(&mut self.pending) {
            self.reasoning_entry(out, entry);
        }
    }

    fn message_text(&mut self, out: &mut Vec<u8>, kind: PartKind, t: &str) {
        if !matches!(self.open, Some(Item::Message { .. })) {
            self.open_item(
                out,
                |index, id| {
                    let announced = message_item(&id, Vec::new(), "in_progress");
                    (
                        Item::Message {
                            index,
                            id,
                            done_parts: Vec::new(),
                            part: None,
                        },
                        announced,
                    )
                },
                "msg",
            );
        }
        let Some(Item::Message {
            index,
            id,
            mut done_parts,
            part,
        }) = self.open.take()
        else {
            return;
        };
        let mut part = match part {
            Some(p) if p.kind == kind => p,
            other => {
                if let Some(p) = other {
                    done_parts.push(self.close_part(out, &id, index, p));
                }
                let content_index = done_parts.len();
                let (ty, empty) = match kind {
                    PartKind::Text => ("response.output_text.delta", output_text("")),
                    PartKind::Refusal => ("response.refusal.delta", refusal_part("")),
                };
                self.event(
                    out,
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": index, "content_index": content_index, "part": empty}),
                );
                Part {
                    kind,
                    index: content_index,
                    text: String::new(),
                    head: delta_head(ty, &id, index, "content_index", content_index),
                }
            }
        };
        if !t.is_empty() {
            part.text.push_str(t);
            self.text_delta(out, &part.head, t, kind == PartKind::Text);
        }
        self.open = Some(Item::Message {
            index,
            id,
            done_parts,
            part: Some(part),
        });
    }

    fn tool_call(&mut self, out: &mut Vec<u8>, t: &crate::plugin::ToolCallDelta) {
        let same =
            matches!(&self.open, Some(Item::Function { tool_index, .. }) if *tool_index == t.index);
        if !same {
            let call_id = function_call_id(&self.call_id, t.id.as_deref(), t.index);
            let name = t.name.clone().unwrap_or_default();
            let tool_index = t.index;
            self.open_item(
                out,
                |index, id| {
                    let announced = function_call_item(&id, &call_id, &name, "", "in_progress");
                    (
                        Item::Function {
                            index,
                            id,
                            tool_index,
                            call_id,
                            name,
                            arguments: String::new(),
                        },
                        announced,
                    )
                },
                "fc",
            );
        }
        let Some(args) = t.arguments.as_deref().filter(|a| !a.is_empty()) else {
            return;
        };
        let mut event = None;
        if let Some(Item::Function {
            index,
            id,
            arguments,
            ..
        }) = &mut self.open
        {
            arguments.push_str(args);
            event = Some(json!({"item_id": id, "output_index": index, "delta": args}));
        }
        if let Some(e) = event {
            self.event(out, "response.function_call_arguments.delta", e);
        }
    }
}

impl super::super::dialect::StreamEncoder for ResponsesStream {
    fn delta(&mut self, d: &Delta, out: &mut Vec<u8>) {
        self.begin(out);
        let continues_call = match d {
            Delta::ToolCall(t) => {
                matches!(&self.open, Some(Item::Function { tool_index, .. }) if *tool_index == t.index)
            }
            Delta::ReasoningSignature(_) | Delta::ReasoningEncrypted(_) => true,
            _ => false,
        };
        if !continues_call {
            self.flush_pending(out);
        }
        match d {
            Delta::Content(t) if !t.is_empty() => self.message_text(out, PartKind::Text, t),
            Delta::Refusal(t) if !t.is_empty() => self.message_text(out, PartKind::Refusal, t),
            Delta::Reasoning(t) if !t.is_empty() => self.reasoning_text(out, t),
            Delta::ReasoningSignature(s) => {
                let entry = text_entry(&std::mem::take(&mut self.block), s, self.entries);
                self.entries += 1;
                self.reasoning_entry(out, entry);
            }
            Delta::ReasoningEncrypted(e) => {
                self.block.clear();
                let entry = encrypted_entry(e, self.entries);
                self.entries += 1;
                self.reasoning_entry(out, entry);
            }
            Delta::ToolCall(t) => self.tool_call(out, t),
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
        self.flush_pending(out);
        let (status, incomplete_details) = status(r.finish_reason.as_deref());
        let item_status = if status == "incomplete" {
            "incomplete"
        } else {
            "completed"
        };
        let answered = self.output.iter().any(|i| i["type"] != "reasoning")
            || matches!(
                self.open,
                Some(Item::Message { .. } | Item::Function { .. })
            );
        if !answered {
            // An answer without text or tool calls still has its (empty) message, as the whole
            // Response has.
            self.message_text(out, PartKind::Text, "");
        }
        self.close(out, item_status);
        let output = std::mem::take(&mut self.output);
        let mut response = self.response(status, output);
        response["incomplete_details"] = incomplete_details;
        // The model the upstream reported may have come after the stream's start.
        response["model"] = Value::from(model_of(r));
        response["usage"] = usage_json(r.usage.as_ref());
        let ty = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        self.event(out, ty, json!({"response": response}));
    }

    fn failed(&mut self, e: &GatewayError, out: &mut Vec<u8>) {
        self.begin(out);
        let w = wire(e);
        let code = if w.ty == "rate_limit_exceeded" {
            "rate_limit_exceeded"
        } else {
            "server_error"
        };
        let message = e.to_string();
        self.event(
            out,
            "error",
            json!({"code": code, "message": message, "param": w.param}),
        );
        let output = std::mem::take(&mut self.output);
        let mut response = self.response("failed", output);
        response["error"] =
            json!({"code": code, "message": message, "type": w.ty, "param": w.param});
        self.event(out, "response.failed", json!({"response": response}));
    }
}
