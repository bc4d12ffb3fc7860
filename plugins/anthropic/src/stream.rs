//! The Messages API stream parser: named server-sent events (`message_start`,
//! `content_block_start` / `_delta` / `_stop`, `message_delta`, `message_stop`, `ping`,
//! `error`) in, typed deltas out, with the state one attempt needs (the open blocks, the tool
//! call count, the running usage total).

use std::borrow::Cow;
use std::collections::BTreeMap;

use polygateway_plugin_sdk::{ClassifiedError, Delta, ErrorClass, SseEvent};
use serde_json::Value;

use crate::blocks::{BlockKind, arguments_delta, block_deltas, signature_delta};
use crate::errors::classify_event;
use crate::fields::{UsageTotals, finish_reason};
use crate::json::{self, RawObject};

/// How many characters of an unparseable event are quoted in the error message.
const QUOTE_CHARS: usize = 200;

/// A block between its `content_block_start` and `content_block_stop`.
#[derive(Debug, Clone)]
struct OpenBlock {
    kind: BlockKind,
    /// A tool block received a non-empty `input_json_delta`.
    arguments_sent: bool,
}

/// The stream parser of one attempt.
///
/// Per event (by the `type` in its data, else its SSE name):
/// - `message_start` → [`Delta::Model`] (the attempt's first non-empty model),
///   [`Delta::Role`], [`Delta::Usage`] when it reports usage;
/// - `content_block_start` → the block's deltas (see [`block_deltas`]); a `tool_use` block
///   gives its id and name, numbered by its ordinal among the message's tool_use blocks;
/// - `content_block_delta` → `text_delta` → [`Delta::Content`], `thinking_delta` →
///   [`Delta::Reasoning`], `signature_delta` → [`Delta::ReasoningSignature`] (format
///   `anthropic-claude-v1`), `input_json_delta` of a tool_use block → a
///   [`Delta::ToolCall`] arguments fragment (empty ones skipped);
/// - `content_block_stop` of a tool_use block that got no arguments → its start `input`
///   (`{}` when none) as the arguments;
/// - `message_delta` → [`Delta::Finish`] (`stop_reason`), [`Delta::Usage`] (the running
///   total: Anthropic's counts are cumulative, merged with `message_start`'s);
/// - `message_stop` → [`Delta::Done`]; `ping`, unknown events, block and delta types → none;
/// - `error` → `Err`, classified by the error's type.
///
/// Data that is not a JSON object → `Err(transient)`. Output does not depend on batching.
#[derive(Debug, Default)]
pub struct MessageStream {
    model_seen: bool,
    blocks: BTreeMap<u64, OpenBlock>,
    tools: u32,
    usage: UsageTotals,
}

impl MessageStream {
    /// A parser for one attempt.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse a batch of events in order (on `Err` the batch's deltas are dropped: the host
    /// ends the attempt).
    pub fn parse(&mut self, events: &[SseEvent]) -> Result<Vec<Delta>, ClassifiedError> {
        let mut out = Vec::with_capacity(events.len() * 2);
        for event in events {
            self.event(event, &mut out)?;
        }
        Ok(out)
    }

    /// The stream ended: nothing is held back between events, so nothing is left.
    pub fn finish(&mut self) -> Vec<Delta> {
        Vec::new()
    }

    fn event(&mut self, event: &SseEvent, out: &mut Vec<Delta>) -> Result<(), ClassifiedError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if event.event.as_deref() == Some("error") {
            return Err(classify_event(data));
        }
        if self.text_fast_path(data, out) {
            return Ok(());
        }
        let obj = json::object(data).ok_or_else(|| malformed(data))?;
        let kind = json::string_field(&obj, "type").or_else(|| event.event.clone());
        match kind.as_deref() {
            Some("message_start") => self.message_start(&obj, out),
            Some("content_block_start") => self.block_start(&obj, out),
            Some("content_block_delta") => self.block_delta(&obj, out),
            Some("content_block_stop") => self.block_stop(&obj, out),
            Some("message_delta") => self.message_delta(&obj, out),
            Some("message_stop") => out.push(Delta::Done),
            Some("error") => return Err(classify_event(data)),
            _ => {}
        }
        Ok(())
    }

    /// The stream's bulk — `content_block_delta` events of text and thinking — read in one
    /// typed pass with borrowed strings (no map of the event's keys, no second parse of its
    /// `delta`). True when the event was handled; anything else (another event, a field of
    /// an unexpected type, a delta for a block of another kind) goes the general way, which
    /// gives the same deltas for what this handles.
    fn text_fast_path(&mut self, data: &str, out: &mut Vec<Delta>) -> bool {
        #[derive(serde::Deserialize)]
        struct Event<'a> {
            #[serde(rename = "type", borrow)]
            kind: Cow<'a, str>,
            index: Option<u64>,
            #[serde(borrow)]
            delta: Option<Inner<'a>>,
        }
        #[derive(serde::Deserialize)]
        struct Inner<'a> {
            #[serde(rename = "type", borrow)]
            kind: Cow<'a, str>,
            #[serde(borrow)]
            text: Option<Cow<'a, str>>,
            #[serde(borrow)]
            thinking: Option<Cow<'a, str>>,
        }
        if !data.starts_with(r#"{"type":"content_block_delta""#) {
            return false;
        }
        let Ok(Event {
            kind,
            index: Some(index),
            delta: Some(delta),
        }) = serde_json::from_str::<Event<'_>>(data)
        else {
            return false;
        };
        if kind != "content_block_delta" {
            return false;
        }
        let open = self.blocks.get(&index).map(|b| &b.kind);
        let is = |want: &BlockKind| open.is_none_or(|k| k == want);
        match (delta.kind.as_ref(), delta.text, delta.thinking) {
            ("text_delta", Some(text), _) if is(&BlockKind::Text) => {
                out.push(Delta::Content(text.into_owned()));
                true
            }
            ("thinking_delta", _, Some(thinking)) if is(&BlockKind::Thinking) => {
                out.push(Delta::Reasoning(thinking.into_owned()));
                true
            }
            _ => false,
        }
    }

    fn message_start(&mut self, obj: &RawObject<'_>, out: &mut Vec<Delta>) {
        let Some(message) = sub_object(obj, "message") else {
            return;
        };
        if !self.model_seen
            && let Some(model) = json::text_field(&message, "model")
        {
            self.model_seen = true;
            out.push(Delta::Model(model));
        }
        let role = json::text_field(&message, "role").unwrap_or_else(|| "assistant".to_owned());
        out.push(Delta::Role(role));
        self.push_usage(&message, out);
    }

    fn block_start(&mut self, obj: &RawObject<'_>, out: &mut Vec<Delta>) {
        let Some(block) = sub_object(obj, "content_block") else {
            return;
        };
        let kind = block_deltas(&block, &mut self.tools, out);
        self.blocks.insert(
            index(obj),
            OpenBlock {
                kind,
                arguments_sent: false,
            },
        );
    }

    fn block_delta(&mut self, obj: &RawObject<'_>, out: &mut Vec<Delta>) {
        let Some(delta) = sub_object(obj, "delta") else {
            return;
        };
        let open = self.blocks.get_mut(&index(obj));
        let kind = open.as_ref().map(|b| &b.kind);
        // Text and thinking deltas of a block whose start was not seen are kept too.
        let is = |want: &BlockKind| kind.is_none_or(|k| k == want);
        match json::string_field(&delta, "type").as_deref() {
            Some("text_delta") if is(&BlockKind::Text) => {
                if let Some(text) = json::text_field(&delta, "text") {
                    out.push(Delta::Content(text));
                }
            }
            Some("thinking_delta") if is(&BlockKind::Thinking) => {
                if let Some(text) = json::text_field(&delta, "thinking") {
                    out.push(Delta::Reasoning(text));
                }
            }
            Some("signature_delta") if is(&BlockKind::Thinking) => {
                if let Some(signature) = json::text_field(&delta, "signature") {
                    out.push(signature_delta(signature));
                }
            }
            Some("input_json_delta") => {
                if let Some(open) = open
                    && let BlockKind::Tool { index, .. } = open.kind
                    && let Some(fragment) = json::text_field(&delta, "partial_json")
                {
                    open.arguments_sent = true;
                    out.push(arguments_delta(index, fragment));
                }
            }
            _ => {}
        }
    }

    fn block_stop(&mut self, obj: &RawObject<'_>, out: &mut Vec<Delta>) {
        if let Some(OpenBlock {
            kind: BlockKind::Tool { index, input },
            arguments_sent: false,
        }) = self.blocks.remove(&index(obj))
        {
            out.push(arguments_delta(index, input));
        }
    }

    fn message_delta(&mut self, obj: &RawObject<'_>, out: &mut Vec<Delta>) {
        if let Some(delta) = sub_object(obj, "delta")
            && let Some(reason) = json::text_field(&delta, "stop_reason")
        {
            out.push(Delta::Finish(finish_reason(&reason)));
        }
        self.push_usage(obj, out);
    }

    /// Merge `obj.usage` into the running total and report it, when it has counts.
    fn push_usage(&mut self, obj: &RawObject<'_>, out: &mut Vec<Delta>) {
        if let Some(usage) =
            json::field(obj, "usage").and_then(|u| serde_json::from_str::<Value>(u.get()).ok())
            && self.usage.merge(&usage)
            && let Some(total) = self.usage.usage()
        {
            out.push(Delta::Usage(total));
        }
    }
}

/// `obj[key]` as a raw object, when it is one.
fn sub_object<'a>(obj: &RawObject<'a>, key: &str) -> Option<RawObject<'a>> {
    json::field(obj, key).and_then(|v| json::object(v.get()))
}

/// The block `index` of an event (a missing or odd one maps to one shared slot).
fn index(obj: &RawObject<'_>) -> u64 {
    json::field(obj, "index")
        .and_then(|v| v.get().parse::<u64>().ok())
        .unwrap_or(u64::MAX)
}

/// Data that cannot be an event: transient, quoting its start.
fn malformed(data: &str) -> ClassifiedError {
    let quote: String = data.chars().take(QUOTE_CHARS).collect();
    ClassifiedError {
        class: ErrorClass::Transient,
        message: format!("malformed SSE data: {quote}"),
        code: None,
        retry_after_ms: None,
    }
}
