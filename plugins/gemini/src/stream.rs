//! The stream parser of one `streamGenerateContent?alt=sse` attempt: every SSE event's data
//! is one `GenerateContentResponse` chunk, turned into deltas by [`crate::answer::Answer`].
//!
//! Gemini sends no end marker (no `[DONE]`): [`Delta::Done`] follows the chunk that carries
//! a `finishReason` (or a prompt block). Per event: blank data is ignored; `[DONE]` (which a
//! proxy may add) ends the answer like a finish without reason; an event named `error`, or a
//! chunk with an `error` object → `Err` (classified); data that is not a chunk → `Err(transient,
//! "malformed SSE data: …")`. [`StreamParser::finish`] returns the usage still held when the
//! stream ended before a finish. The output does not depend on how events are batched.

use polygateway_plugin_sdk::{ClassifiedError, Delta, SseEvent};

use crate::answer::{Answer, Chunk};
use crate::errors::classify_event_error;

/// Per-attempt state (see the module documentation).
#[derive(Debug, Default)]
pub struct StreamParser {
    answer: Answer,
}

impl StreamParser {
    /// A parser for one attempt.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse a batch of events in order. On `Err` the batch's deltas are dropped: the host
    /// ends the attempt with the error.
    pub fn parse(&mut self, events: &[SseEvent]) -> Result<Vec<Delta>, ClassifiedError> {
        let mut out = Vec::with_capacity(events.len() * 2);
        for event in events {
            self.event(event, &mut out)?;
        }
        Ok(out)
    }

    fn event(&mut self, event: &SseEvent, out: &mut Vec<Delta>) -> Result<(), ClassifiedError> {
        let data = event.data.trim();
        if event.event.as_deref() == Some("error") {
            return Err(classify_event_error(data));
        }
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.answer.end(out);
            return Ok(());
        }
        let chunk = Chunk::parse(data, "malformed SSE data")?;
        self.answer.chunk(&chunk, out)
    }

    /// The stream ended: the usage still held (a stream cut before its finish), if any.
    pub fn finish(&mut self) -> Vec<Delta> {
        let mut out = Vec::new();
        self.answer.flush_usage(&mut out);
        out
    }
}
