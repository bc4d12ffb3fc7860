//! Native tests of the anthropic component: request bodies (`request`), the stream parser
//! (`stream`), non-streamed answers (`response`), error classes (`errors`), garbage inputs
//! (`robustness`) and the conformance fixtures of `plugins/anthropic/conformance/`
//! (`fixtures`), all through the exported WIT traits.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod errors;
mod fixtures;
mod request;
mod response;
mod robustness;
mod stream;

use polygateway_plugin_sdk::{
    BuildError, ChatRequest, ClassifiedError, Delta, Guest, GuestStreamParser, HttpRequest,
    SourceInfo, SseEvent,
};

use super::{Anthropic, AnthropicStreamParser};

/// The source most tests use: no thinking, no caps, no `EXTRA_BODY`.
fn source() -> SourceInfo {
    SourceInfo {
        model: "claude-sonnet-4-5".into(),
        base_url: "https://api.anthropic.com".into(),
        enable_thinking: None,
        extra_body_json: "{}".into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    }
}

/// The source with thinking on and the given budget.
fn thinking_source(budget: Option<u32>) -> SourceInfo {
    SourceInfo {
        enable_thinking: Some(true),
        thinking_budget_tokens: budget,
        ..source()
    }
}

/// A non-streamed chat request.
fn chat(messages: &str, overlay: &str) -> ChatRequest {
    ChatRequest {
        messages_json: messages.into(),
        overlay_json: overlay.into(),
        stream: false,
        prefill: None,
    }
}

/// `build-request` through the WIT trait.
fn build(req: ChatRequest, source: SourceInfo) -> Result<HttpRequest, BuildError> {
    <Anthropic as Guest>::build_request(req, source)
}

/// The body text of a request that must build.
fn body(req: ChatRequest, source: SourceInfo) -> String {
    String::from_utf8(build(req, source).unwrap().body).unwrap()
}

/// The body of a request that must build, as JSON.
fn body_json(req: ChatRequest, source: SourceInfo) -> serde_json::Value {
    serde_json::from_str(&body(req, source)).unwrap()
}

/// Replay events through a fresh stream parser in batches of `batch`, then `finish`.
fn replay(events: &[SseEvent], batch: usize) -> Result<Vec<Delta>, ClassifiedError> {
    let parser = <AnthropicStreamParser as GuestStreamParser>::new(source());
    let mut out = Vec::new();
    for chunk in events.chunks(batch.max(1)) {
        out.extend(parser.parse(chunk.to_vec())?);
    }
    out.extend(parser.finish());
    Ok(out)
}

/// Replay in every batch size and check they agree; returns the deltas.
fn replay_all_batchings(events: &[SseEvent]) -> Result<Vec<Delta>, ClassifiedError> {
    let whole = replay(events, events.len())?;
    for batch in 1..events.len() {
        assert_eq!(replay(events, batch)?, whole, "batches of {batch}");
    }
    Ok(whole)
}

/// An SSE event.
fn ev(name: &str, data: &str) -> SseEvent {
    SseEvent {
        event: (!name.is_empty()).then(|| name.to_owned()),
        data: data.to_owned(),
    }
}
