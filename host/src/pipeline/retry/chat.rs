//! The chat operation of the retry loop, and the loop as the innermost layer of a chat call
//! ([`Retry`]). What only chat has rides on the loop's hooks: an attempt streams through the
//! call's sink and commits at its first token; a failure after the commit either continues
//! the answer on a source that supports prefill continuation (never when tool calls went out
//! or the sink does not forward) or ends the stream with the original failure, in-band.

use std::sync::Arc;
use std::time::Duration;

use crate::error::GatewayError;
use crate::plugin::{ErrorClass, PluginChatRequest};

use super::super::admission::{self, CallAdmission};
use super::super::attempt::{self, AttemptAnswer, AttemptMetrics};
use super::super::failure::{AttemptFailure, UpstreamFailure};
use super::super::layer::Layer;
use super::super::request::ChatRequest;
use super::super::response::ChatResponse;
use super::super::rows::{AttemptRowGuard, attempt_row, ms};
use super::super::runtime::{Inner, ScopeRuntime, SourceRuntime};
use super::super::sink::{CallState, Sink};
use super::super::traces;
use super::{AfterFailure, Operation};

/// The innermost layer of a chat call: the retry loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retry;

impl Layer for Retry {
    fn serve<'a>(
        self,
        inner: &'a Arc<Inner>,
        scope: &'a ScopeRuntime,
        req: &'a ChatRequest,
        st: &'a mut CallState,
        sink: &'a mut Sink,
    ) -> impl Future<Output = Result<ChatResponse, GatewayError>> + Send + 'a {
        retry_loop(inner, scope, req, st, sink)
    }
}

/// The retry loop of one chat call (below the cache and structured-output layers).
pub(crate) async fn retry_loop(
    inner: &Inner,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let preq = PluginChatRequest {
        messages_json: serde_json::to_string(&req.messages)
            .map_err(|e| GatewayError::invalid("messages", e.to_string()))?,
        overlay_json: serde_json::to_string(&req.overlay)
            .map_err(|e| GatewayError::invalid("overlay", e.to_string()))?,
        stream: req.stream,
        prefill: None,
    };
    let deadline = admission::deadline_at(
        st.started,
        req.call_deadline.or(scope.settings.call_deadline),
    );
    let seed = scope
        .seed
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut op = Chat {
        req,
        st,
        sink,
        preq,
        interrupted: None,
    };
    super::run(inner, scope, &mut op, deadline, seed).await
}

/// One chat call in the retry loop.
struct Chat<'c> {
    req: &'c ChatRequest,
    st: &'c mut CallState,
    sink: &'c mut Sink,
    /// The request as the provider component gets it; `prefill` is set to what the client
    /// already has while continuing a broken stream.
    preq: PluginChatRequest,
    /// The failure that broke a started stream (source, message), reported if no
    /// continuation succeeds.
    interrupted: Option<(String, String)>,
}

impl Chat<'_> {
    fn continuing(&self) -> bool {
        self.preq.prefill.is_some()
    }

    /// The error that ends a stream that broke after output reached the client.
    fn interrupted_error(&mut self) -> Option<GatewayError> {
        self.interrupted
            .take()
            .map(|(source_name, message)| GatewayError::StreamInterrupted {
                source_name,
                message,
            })
    }
}

impl Operation for Chat<'_> {
    type Output = (AttemptAnswer, AttemptMetrics);
    type Answer = ChatResponse;

    fn serves(&self, source: &SourceRuntime) -> bool {
        let caps = &source.component.info().capabilities;
        caps.chat && (!self.continuing() || caps.prefill_continuation)
    }

    fn previous_source(&self) -> Option<usize> {
        self.st.last_source
    }

    fn started(&mut self, idx: usize) {
        self.st.last_source = Some(idx);
        self.st.attempts += 1;
        if let Some(sent) = &self.st.upstream_sent {
            sent.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    async fn attempt<'a>(
        &'a mut self,
        inner: &'a Inner,
        scope: &'a ScopeRuntime,
        source: &'a SourceRuntime,
        attempt_id: &'a str,
    ) -> (Result<Self::Output, AttemptFailure>, Duration) {
        let req = self.req;
        // The attempt's span (a child of the call's; its traceparent goes upstream), when
        // the call is traced; dropped mid-attempt, it ends as cancelled.
        let span = traces::attempt(self.st.trace.as_ref(), source, self.st.attempts, attempt_id);
        // Dropped mid-attempt (deadline, caller gone), the guard writes its `cancelled` row.
        let mut cut =
            AttemptRowGuard::new(&inner.recorder, attempt_id, scope, source, req, self.st);
        let (outcome, metrics) = attempt::run(
            inner,
            source,
            &self.preq,
            cut.state(),
            self.sink,
            span.as_ref(),
        )
        .await;
        cut.finished();
        traces::end_chat_attempt(span, &outcome);
        let st = &mut *self.st;
        st.last_attempt_ms = Some(u64::try_from(metrics.latency.as_millis()).unwrap_or(u64::MAX));
        let row = attempt_row(
            &inner.recorder,
            attempt_id,
            scope,
            source,
            req,
            st,
            &outcome,
            &metrics,
        );
        let had_usage = row.prompt_tokens.is_some();
        let cost = inner.recorder.record(row);
        st.billed.add(had_usage, cost);
        let latency = metrics.latency;
        (outcome.map(|answer| (answer, metrics)), latency)
    }

    fn settle_tokens(&self, (answer, _): &Self::Output) -> Option<u64> {
        answer
            .acc
            .usage
            .map(|u| u.prompt_tokens + u.completion_tokens)
    }

    fn answered(
        &mut self,
        scope: &ScopeRuntime,
        idx: usize,
        (mut answer, metrics): Self::Output,
    ) -> ChatResponse {
        if self.continuing() {
            answer.acc.content = format!("{}{}", self.st.sent_content_before, answer.acc.content);
        }
        response(scope, &scope.sources[idx], self.st, answer, metrics)
    }

    fn after_failure(
        &mut self,
        call: &mut CallAdmission,
        idx: usize,
        source: &SourceRuntime,
        up: &UpstreamFailure,
    ) -> AfterFailure {
        if !self.st.committed {
            return AfterFailure::Recover;
        }
        // Output already reached the client: continue on a source that supports prefill
        // continuation, or end with the original failure.
        let name = &source.settings.name;
        if self.interrupted.is_none() {
            self.interrupted = Some((name.to_string(), up.message.clone()));
        }
        let retryable = matches!(up.class, ErrorClass::Transient | ErrorClass::SourceDead);
        if up.class == ErrorClass::SourceDead {
            call.excluded[idx] = true;
        }
        if (!retryable || self.st.sent_tool_calls || !self.sink.forwards())
            && let Some(e) = self.interrupted_error()
        {
            return AfterFailure::Stop(e);
        }
        let st = &mut *self.st;
        if self.preq.prefill.is_none() {
            st.sent_content_before = st.sent_content.clone();
        } else {
            st.sent_content_before.push_str(&st.sent_content);
        }
        st.sent_content.clear();
        self.preq.prefill = Some(st.sent_content_before.clone());
        tracing::info!(source = %name, chars = st.sent_content_before.len(), "stream broke after output; trying a continuation");
        AfterFailure::Again
    }

    fn give_up(&mut self, e: GatewayError) -> GatewayError {
        // No source can continue: report the original failure, never the fallback's refusal
        // (which only says nobody could take over; the client must learn what broke its
        // stream).
        self.interrupted_error().unwrap_or(e)
    }

    fn slept(&mut self, d: Duration) {
        self.st.sleeping += d;
    }
}

fn response(
    scope: &ScopeRuntime,
    source: &SourceRuntime,
    st: &CallState,
    answer: AttemptAnswer,
    metrics: AttemptMetrics,
) -> ChatResponse {
    let acc = answer.acc;
    ChatResponse {
        call_id: st.call_id.clone(),
        scope: scope.settings.name.to_string(),
        content: acc.content,
        reasoning: (!acc.reasoning.is_empty()).then_some(acc.reasoning),
        reasoning_details: acc.reasoning_details.into_entries(),
        tool_calls: acc.tool_calls,
        finish_reason: acc.finish_reason,
        usage: acc.usage,
        usage_source: answer.usage_source,
        model: source.settings.model.clone(),
        model_reported: acc.model_reported,
        source_name: source.settings.name.to_string(),
        provider: source.settings.provider.to_string(),
        attempts: st.attempts,
        latency_ms: st.started.elapsed().as_millis() as u64,
        created: st.created_unix,
        ttft_ms: metrics.ttft.map(ms),
        max_inter_token_ms: metrics.max_inter_token.map(ms),
        salvaged: answer.salvaged,
        overhead_us: st.overhead().as_micros() as u64,
        cache_hit: false,
        refusal: (!acc.refusal.is_empty()).then_some(acc.refusal),
        upstream_fields: acc.fields.answer(),
        structured: None,
        budget_warnings: Vec::new(),
    }
}
