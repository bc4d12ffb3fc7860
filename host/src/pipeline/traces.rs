//! The pipeline's side of the OpenTelemetry spans (docs/tracing.md#spans): what a call
//! and an attempt tell their spans, read from the pipeline's own values (the request, the
//! answer, the attempt's outcome), so each hook in the layers is one line and one branch on
//! an `Option` — `None` when traces are off, and then nothing here runs.

use crate::error::GatewayError;
use crate::telemetry::otel::{
    AttemptEnd, AttemptSpan, AttemptStart, CallEnd, CallSpan, CallStart, CallTrace, GenAiOperation,
    OutputMessage, ToolCallPart,
};

use super::attempt::AttemptAnswer;
use super::failure::AttemptFailure;
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::rows::attempt_error;
use super::runtime::{Inner, ScopeRuntime, SourceRuntime};

/// The span of a chat call, when traces are on.
pub(crate) fn chat_call(
    inner: &Inner,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    call_id: &str,
) -> Option<CallSpan> {
    let otel = inner.otel.as_ref()?;
    Some(otel.call(CallStart {
        operation: GenAiOperation::Chat,
        alias: &req.model,
        scope: &scope.settings.name,
        call_id,
        conversation_id: req.session_id.as_deref(),
        parent: req.trace_parent.as_ref(),
        overlay: Some(&req.overlay),
        embedding_dimensions: None,
        messages: &req.messages,
    }))
}

/// End a chat call's span with its result: `attempts` the call made (0 for a cache hit),
/// `last` the source of its last attempt (named on a failure).
pub(crate) fn end_chat_call(
    span: CallSpan,
    result: &Result<ChatResponse, GatewayError>,
    attempts: u32,
    last: Option<&SourceRuntime>,
) {
    match result {
        Ok(r) => {
            let output = span.captures_content().then(|| OutputMessage {
                text: &r.content,
                reasoning: r.reasoning.as_deref(),
                tool_calls: r
                    .tool_calls
                    .iter()
                    .map(|t| ToolCallPart {
                        id: t.id.as_deref().unwrap_or_default(),
                        name: t.name.as_deref().unwrap_or_default(),
                        arguments: &t.arguments,
                    })
                    .collect(),
                finish_reason: r.finish_reason.as_deref(),
            });
            span.end(CallEnd {
                error_type: None,
                source: Some(&r.source_name),
                provider: Some(&r.provider),
                response_model: r.model_reported.as_deref(),
                finish_reason: r.finish_reason.as_deref(),
                input_tokens: r.usage.map(|u| u.prompt_tokens),
                output_tokens: r.usage.map(|u| u.completion_tokens),
                attempts,
                cache_hit: r.cache_hit,
                output,
            });
        }
        Err(e) => span.end(failed_call(e, attempts, last)),
    }
}

/// The end of a call that failed.
pub(crate) fn failed_call<'a>(
    e: &GatewayError,
    attempts: u32,
    last: Option<&'a SourceRuntime>,
) -> CallEnd<'a> {
    CallEnd {
        error_type: Some(e.kind()),
        source: last.map(|s| &*s.settings.name),
        provider: last.map(|s| &*s.settings.provider),
        attempts,
        ..CallEnd::default()
    }
}

/// The span of attempt number `attempt` (1 for the call's first) on `source`, when the
/// call is traced.
pub(crate) fn attempt(
    trace: Option<&CallTrace>,
    source: &SourceRuntime,
    attempt: u32,
    attempt_id: &str,
) -> Option<AttemptSpan> {
    Some(trace?.attempt(AttemptStart {
        provider: &source.settings.provider,
        model: &source.settings.model,
        source: &source.settings.name,
        base_url: &source.base_url,
        attempt,
        attempt_id,
    }))
}

/// End a chat attempt's span with its outcome.
pub(crate) fn end_chat_attempt(
    span: Option<AttemptSpan>,
    outcome: &Result<AttemptAnswer, AttemptFailure>,
) {
    let Some(span) = span else { return };
    match outcome {
        Ok(a) => span.end(AttemptEnd {
            response_model: a.acc.model_reported.as_deref(),
            finish_reason: a.acc.finish_reason.as_deref(),
            input_tokens: a.acc.usage.map(|u| u.prompt_tokens),
            output_tokens: a.acc.usage.map(|u| u.completion_tokens),
            ..AttemptEnd::default()
        }),
        Err(f) => span.end(failed_attempt(f)),
    }
}

/// The end of an attempt that failed: `error.type` is the failure's short reason
/// (`server_error`, `timeout`, `rate_limited`, `network_error`, …) or, for a failure that is
/// not the upstream's, its ledger class (`plugin_fault`, `unsupported`, `cancelled`, …).
pub(crate) fn failed_attempt(f: &AttemptFailure) -> AttemptEnd<'_> {
    let class = attempt_error(f).0;
    match f {
        AttemptFailure::Upstream(u) => AttemptEnd {
            error_type: Some(u.short),
            error_class: Some(class),
            http_status: u.status,
            ..AttemptEnd::default()
        },
        _ => AttemptEnd {
            error_type: Some(class),
            error_class: Some(class),
            ..AttemptEnd::default()
        },
    }
}
