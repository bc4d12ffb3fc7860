//! Native tests of the gemini component: request bodies ([`request`]), answers and streams
//! ([`answer`]), error classes ([`errors`]), embeddings ([`embedding`]), the component's own
//! conformance fixtures replayed natively ([`conformance`]) and hostile inputs
//! ([`robustness`]), and the small JSON and path helpers ([`helpers`]). Shared test helpers
//! live here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::golden::{deltas_to_json, frame_sse};
use polygateway_plugin_sdk::{BuildError, ChatRequest, ClassifiedError, Delta, Guest, SourceInfo};
use serde_json::Value;

use crate::Gemini;
use crate::stream::StreamParser;

mod answer;
mod conformance;
mod embedding;
mod errors;
mod helpers;
mod request;
mod robustness;

/// A source for `gemini-2.5-flash` with no thinking switch, EXTRA_BODY or caps.
fn source() -> SourceInfo {
    SourceInfo {
        model: "gemini-2.5-flash".into(),
        base_url: "https://generativelanguage.googleapis.com".into(),
        enable_thinking: None,
        extra_body_json: "{}".into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    }
}

/// A non-streamed request with these messages and overlay (JSON values).
fn chat(messages: Value, overlay: Value) -> ChatRequest {
    ChatRequest {
        messages_json: messages.to_string(),
        overlay_json: overlay.to_string(),
        stream: false,
        prefill: None,
    }
}

/// Build and return the body as a JSON value (panics on a build error).
fn body(req: ChatRequest, source: SourceInfo) -> Value {
    let http = <Gemini as Guest>::build_request(req, source).unwrap();
    serde_json::from_slice(&http.body).unwrap()
}

/// Build and return the body's exact text.
fn body_text(req: ChatRequest, source: SourceInfo) -> String {
    let http = <Gemini as Guest>::build_request(req, source).unwrap();
    String::from_utf8(http.body).unwrap()
}

/// Build and return the error.
fn build_error(req: ChatRequest, source: SourceInfo) -> BuildError {
    <Gemini as Guest>::build_request(req, source).unwrap_err()
}

/// Replay an SSE text through a fresh parser in batches of `batch` events, then `finish`.
fn replay(sse: &str, batch: usize) -> Result<Vec<Delta>, ClassifiedError> {
    let events = frame_sse(sse);
    let mut parser = StreamParser::new();
    let mut out = Vec::new();
    for chunk in events.chunks(batch.max(1)) {
        out.extend(parser.parse(chunk)?);
    }
    out.extend(parser.finish());
    Ok(out)
}

/// Replay in every batch size from 1 to all events and require one same result; return it
/// in the golden encoding.
fn replay_all_batches(sse: &str) -> Result<Value, ClassifiedError> {
    let events = frame_sse(sse).len().max(1);
    let first = replay(sse, 1).map(|d| deltas_to_json(&d));
    for batch in 2..=events {
        let again = replay(sse, batch).map(|d| deltas_to_json(&d));
        assert_eq!(again, first, "batches of {batch} differ from batches of 1");
    }
    first
}
