//! The OpenAI chat-completions SSE parser: server-sent events in, typed deltas out, with the
//! state one streamed attempt needs (first model seen, an optional `<think>` splitter).

use serde_json::Value;

use crate::choice::push_choice;
use crate::classify::{classify_error_object, collapse_and_cap};
use crate::fields::{choice_zero, text, usage_from_json};
use crate::{ClassifiedError, Delta, ErrorClass, SseEvent, ThinkSplitter};

/// How many characters of an unparseable event are quoted in the error message.
const QUOTE_CHARS: usize = 200;

/// The stream parser for one attempt at an OpenAI-compatible chat-completions stream.
///
/// Per event (`data`, the joined `data:` lines):
/// - empty or whitespace-only data is ignored; `[DONE]` → [`Delta::Done`] (after flushing the
///   `<think>` splitter, if any);
/// - a JSON object carrying `error` (or any data of an event named `error`) → `Err`, classified
///   by [`classify_error_object`]; data that is not a JSON object → `Err(transient,
///   "malformed SSE data: …")`;
/// - otherwise, in this order: [`Delta::Model`] (the first non-empty `model` of the attempt
///   only), then [`Delta::Passthrough`] (the chunk's fields the gateway does not own, with
///   their bytes as sent: top level, choice 0, choice 0's `delta`; only when there are any),
///   then from choice 0's `delta`: [`Delta::Role`] (non-empty), [`Delta::Reasoning`]
///   (`reasoning_content`, else `reasoning`; non-empty), [`Delta::Content`] (non-empty; split
///   by a [`ThinkSplitter`] when enabled), [`Delta::Refusal`] (non-empty), [`Delta::ToolCall`]
///   fragments, then [`Delta::Finish`] (non-null `finish_reason`), then [`Delta::Usage`] (a
///   non-null `usage` object with token counts; such chunks may have `"choices": []`).
///
/// Other choices than index 0 are ignored. Output does not depend on how events are batched.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{ChatStreamParser, Delta, FinishReason, SseEvent};
///
/// let ev = |d: &str| SseEvent { event: None, data: d.into() };
/// let mut parser = ChatStreamParser::new(false);
/// let deltas = parser.parse(&[
///     ev(r#"{"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}"#),
///     ev(r#"{"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
///     ev("[DONE]"),
/// ]).unwrap();
/// assert_eq!(deltas, vec![
///     Delta::Model("gpt-4o".into()),
///     Delta::Role("assistant".into()),
///     Delta::Content("Hi".into()),
///     Delta::Finish(FinishReason::Stop),
///     Delta::Done,
/// ]);
/// assert!(parser.finish().is_empty());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ChatStreamParser {
    /// A non-empty model name was already reported.
    model_seen: bool,
    /// Splits inline `<think>` reasoning out of content, when enabled.
    think: Option<ThinkSplitter>,
}

impl ChatStreamParser {
    /// A parser for one attempt; `split_inline_think` runs content through a
    /// [`ThinkSplitter`].
    ///
    /// # Example
    /// ```
    /// let parser = polygateway_plugin_sdk::ChatStreamParser::new(true);
    /// # let _ = parser;
    /// ```
    pub fn new(split_inline_think: bool) -> Self {
        Self {
            model_seen: false,
            think: split_inline_think.then(ThinkSplitter::new),
        }
    }

    /// Parse a batch of events in order. On `Err` the deltas of the batch are dropped: the
    /// host ends the attempt with the error.
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::{ChatStreamParser, ErrorClass, SseEvent};
    ///
    /// let mut parser = ChatStreamParser::new(false);
    /// let err = parser.parse(&[SseEvent { event: None, data: "{not json".into() }]).unwrap_err();
    /// assert_eq!(err.class, ErrorClass::Transient);
    /// assert!(err.message.starts_with("malformed SSE data: "));
    /// ```
    pub fn parse(&mut self, events: &[SseEvent]) -> Result<Vec<Delta>, ClassifiedError> {
        let mut out = Vec::with_capacity(events.len() * 2);
        for event in events {
            self.parse_event(event, &mut out)?;
        }
        Ok(out)
    }

    /// Parse one event, appending its deltas to `out` (see the type's rules).
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::{ChatStreamParser, Delta, SseEvent};
    ///
    /// let mut parser = ChatStreamParser::new(false);
    /// let mut out = Vec::new();
    /// parser.parse_event(&SseEvent { event: None, data: " [DONE] ".into() }, &mut out).unwrap();
    /// assert_eq!(out, vec![Delta::Done]);
    /// ```
    pub fn parse_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<Delta>,
    ) -> Result<(), ClassifiedError> {
        self.parse_event_with(event, out, true)
    }

    /// [`Self::parse_event`] without the typed fast path (the reference it is tested
    /// against).
    #[cfg(test)]
    pub(crate) fn parse_event_value(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<Delta>,
    ) -> Result<(), ClassifiedError> {
        self.parse_event_with(event, out, false)
    }

    /// One event: blank and `[DONE]` first, then (when `fast`) the typed fast path for the
    /// common chunk shape, else the `Value` path.
    fn parse_event_with(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<Delta>,
        fast: bool,
    ) -> Result<(), ClassifiedError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            if let Some(split) = self.think.as_mut() {
                split.finish(out);
            }
            out.push(Delta::Done);
            return Ok(());
        }
        if fast
            && event.event.as_deref() != Some("error")
            && crate::stream_fast::parse_common(
                data,
                &mut self.model_seen,
                self.think.as_mut(),
                out,
            )
        {
            return Ok(());
        }
        self.parse_value(event, data, out)
    }

    /// Parse one event's (trimmed, non-empty, not `[DONE]`) data through a
    /// `serde_json::Value`: every shape, every lenient rule.
    fn parse_value(
        &mut self,
        event: &SseEvent,
        data: &str,
        out: &mut Vec<Delta>,
    ) -> Result<(), ClassifiedError> {
        let chunk = match serde_json::from_str::<Value>(data) {
            Ok(v @ Value::Object(_)) => v,
            _ if event.event.as_deref() == Some("error") => {
                return Err(classify_error_object(&Value::String(collapse_and_cap(
                    data,
                ))));
            }
            _ => return Err(malformed(data)),
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(classify_error_object(error));
        }
        if event.event.as_deref() == Some("error") {
            return Err(classify_error_object(&chunk));
        }
        if !self.model_seen
            && let Some(model) = text(&chunk, "model")
        {
            self.model_seen = true;
            out.push(Delta::Model(model.to_owned()));
        }
        out.extend(crate::passthrough::from_text(data, "delta"));
        if let Some(choice) = choice_zero(&chunk) {
            push_choice(choice, "delta", self.think.as_mut(), out);
        }
        if let Some(usage) = chunk.get("usage").and_then(usage_from_json) {
            out.push(Delta::Usage(usage));
        }
        Ok(())
    }

    /// The stream ended (after `[DONE]` or at EOF): whatever is still held (a partial
    /// `<think>` tag, as content or reasoning per the splitter's mode).
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::{ChatStreamParser, Delta, SseEvent};
    ///
    /// let mut parser = ChatStreamParser::new(true);
    /// let chunk = r#"{"choices":[{"index":0,"delta":{"content":"a <thi"}}]}"#;
    /// let out = parser.parse(&[SseEvent { event: None, data: chunk.into() }]).unwrap();
    /// assert_eq!(out, vec![Delta::Content("a ".into())]);
    /// assert_eq!(parser.finish(), vec![Delta::Content("<thi".into())]);
    /// ```
    pub fn finish(&mut self) -> Vec<Delta> {
        let mut out = Vec::new();
        if let Some(split) = self.think.as_mut() {
            split.finish(&mut out);
        }
        out
    }
}

/// The error for data that is not a JSON object.
fn malformed(data: &str) -> ClassifiedError {
    let quoted: String = data.chars().take(QUOTE_CHARS).collect();
    let more = if quoted.len() < data.len() { "…" } else { "" };
    ClassifiedError {
        class: ErrorClass::Transient,
        message: format!("malformed SSE data: {quoted}{more}"),
        code: None,
        retry_after_ms: None,
    }
}
