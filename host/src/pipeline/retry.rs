//! The retry loop — the only place that decides to retry. Each attempt: pick a source, run
//! it, record its row; on failure classify and back off (bounded by what is left of the
//! stall window and the call deadline), switch source at once (source dead), or stop
//! (request rejected, result invalid, plugin fault, a retry hint the call cannot wait for).
//! A streamed call may fail over freely until it commits (its first token went out); after
//! that a failure ends the stream with an in-band error, never a truncated "success".

use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::error::{GatewayError, UnavailableReason};
use crate::governance::backoff_delay;
use crate::plugin::{ErrorClass, PluginChatRequest};

use super::admission::{self, Admitted, CallAdmission};
use super::attempt::{self, AttemptAnswer, AttemptFailure, AttemptMetrics, UpstreamFailure};
use super::bookkeeping::{Settlement, Triage, final_error, settle_attempt, triage};
use super::gateway::{Inner, ScopeRuntime, SourceRuntime};
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::rows::{AttemptRowGuard, attempt_row};
use super::sink::{CallState, Sink};

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The retry loop of one logical call (below the cache and structured-output layers).
pub(crate) async fn retry_loop(
    inner: &Inner,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let mut preq = PluginChatRequest {
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
    let mut call = CallAdmission::new(scope, deadline);
    let mut budget = RetryBudget::new(scope);
    // The failure that broke a started stream, reported if no continuation succeeds.
    let mut interrupted: Option<(String, String)> = None;
    let seed = scope
        .seed
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    loop {
        if budget.exhausted() {
            if let Some((source_name, message)) = interrupted {
                return Err(GatewayError::StreamInterrupted {
                    source_name,
                    message,
                });
            }
            return Err(budget.exhausted_error(scope, &mut call));
        }
        let continuing = preq.prefill.is_some();
        let can_continue = |i: usize| {
            let caps = &scope.sources[i].component.info().capabilities;
            caps.chat && (!continuing || caps.prefill_continuation)
        };
        let admitted =
            admission::admit(scope, &mut call, st.last_source, seed, &can_continue).await;
        for (reason, waited) in call.waits.drain(..) {
            inner
                .recorder
                .metrics()
                .admission_wait(&scope.settings.name, reason.as_str(), waited);
        }
        let admitted = match admitted {
            Ok(a) => a,
            Err(e) => {
                if let Some((source_name, message)) = interrupted {
                    // No source can continue: report the original failure, never the
                    // fallback's refusal (which only says nobody could take over; the
                    // client must learn what broke its stream).
                    return Err(GatewayError::StreamInterrupted {
                        source_name,
                        message,
                    });
                }
                return Err(e);
            }
        };
        let idx = admitted.idx;
        let source = &scope.sources[idx];
        let Admitted {
            epoch,
            probe,
            mut permit,
            _in_flight,
            ..
        } = admitted;
        st.last_source = Some(idx);
        st.attempts += 1;
        let attempt_id = uuid::Uuid::now_v7().to_string();
        permit.transport_started();
        let span = tracing::info_span!("attempt", attempt_id = %attempt_id, source = %source.settings.name);
        // Dropped mid-attempt (deadline, caller gone), the guard writes its `cancelled` row.
        let mut cut = AttemptRowGuard::new(&inner.recorder, &attempt_id, scope, source, req, st);
        let (outcome, metrics) = attempt::run(inner, source, &preq, cut.state(), sink)
            .instrument(span)
            .await;
        cut.finished();
        drop(_in_flight);
        st.last_attempt_ms = Some(u64::try_from(metrics.latency.as_millis()).unwrap_or(u64::MAX));
        inner.recorder.record(attempt_row(
            &inner.recorder,
            &attempt_id,
            scope,
            source,
            req,
            st,
            &outcome,
            &metrics,
        ));
        let name = source.settings.name.to_string();
        let settlement = match &outcome {
            Ok(answer) => Settlement::Answered(
                answer
                    .acc
                    .usage
                    .map(|u| u.prompt_tokens + u.completion_tokens),
            ),
            Err(AttemptFailure::Upstream(u)) => Settlement::Failed(u),
            Err(_) => Settlement::Unclassified,
        };
        settle_attempt(
            scope,
            idx,
            epoch,
            probe,
            permit,
            settlement,
            metrics.latency,
        )
        .await;

        let failure = match outcome {
            Ok(mut answer) => {
                scope.progress.mark(scope.clock.now_ms());
                if continuing {
                    answer.acc.content =
                        format!("{}{}", st.sent_content_before, answer.acc.content);
                }
                return Ok(response(scope, source, st, answer, metrics));
            }
            Err(f) => f,
        };
        let up = match triage(&mut call, idx, source, failure) {
            Triage::Stop(e) => return Err(e),
            Triage::NextSource => continue,
            Triage::Upstream(up) => up,
        };
        budget.count(&up);

        if st.committed {
            // Output already reached the client: continue on a source that supports
            // prefill continuation, or end with the original failure.
            if interrupted.is_none() {
                interrupted = Some((name.clone(), up.message.clone()));
            }
            let retryable = matches!(up.class, ErrorClass::Transient | ErrorClass::SourceDead);
            if up.class == ErrorClass::SourceDead {
                call.excluded[idx] = true;
            }
            if (!retryable || st.sent_tool_calls || !sink.forwards())
                && let Some((source_name, message)) = interrupted
            {
                return Err(GatewayError::StreamInterrupted {
                    source_name,
                    message,
                });
            }
            if !continuing {
                st.sent_content_before = st.sent_content.clone();
            } else {
                st.sent_content_before.push_str(&st.sent_content);
            }
            st.sent_content.clear();
            preq.prefill = Some(st.sent_content_before.clone());
            tracing::info!(source = %name, chars = st.sent_content_before.len(), "stream broke after output; trying a continuation");
            continue;
        }
        if let Some(e) = final_error(&up, &name) {
            return Err(e);
        }
        st.sleeping += budget
            .recover(scope, &mut call, idx, &up, metrics.latency)
            .await?;
    }
}

/// The retry budget of one loop run (chat or lean): attempts counted against
/// `RETRY__MAX_ATTEMPTS` (429s are not: they spend the stall budget instead), back-offs
/// taken, and the last failure's retry hint.
pub(crate) struct RetryBudget {
    max_attempts: u32,
    counted: u32,
    backoffs: u32,
    last_retry_after: Option<Duration>,
}

impl RetryBudget {
    pub(crate) fn new(scope: &ScopeRuntime) -> Self {
        Self {
            max_attempts: scope.settings.retry.max_attempts,
            counted: 0,
            backoffs: 0,
            last_retry_after: None,
        }
    }

    /// Whether no counted attempt is left.
    pub(crate) fn exhausted(&self) -> bool {
        self.counted >= self.max_attempts
    }

    /// The 503 `retry_exhausted` of a run whose budget is spent.
    pub(crate) fn exhausted_error(
        &self,
        scope: &ScopeRuntime,
        call: &mut CallAdmission,
    ) -> GatewayError {
        GatewayError::ScopeUnavailable {
            scope: scope.settings.name.to_string(),
            reason: UnavailableReason::RetryExhausted,
            retry_after_s: self
                .last_retry_after
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            per_source_reasons: std::mem::take(&mut call.per_source),
            message: format!(
                "{} attempts failed; last error: {}",
                self.counted, call.last_message
            ),
        }
    }

    /// Count a classified failure (a 429 is not counted).
    pub(crate) fn count(&mut self, up: &UpstreamFailure) {
        if !(up.class == ErrorClass::Transient && up.status == Some(429)) {
            self.counted += 1;
        }
    }

    /// After a retryable failure on source `idx`: a dead source is out for the rest of the
    /// call (switch at once, no back-off); a transient one backs off, unless no attempt is
    /// left (the top of the loop then reports `retry_exhausted`). Returns the time slept.
    pub(crate) async fn recover(
        &mut self,
        scope: &ScopeRuntime,
        call: &mut CallAdmission,
        idx: usize,
        up: &UpstreamFailure,
        attempt_latency: Duration,
    ) -> Result<Duration, GatewayError> {
        match up.class {
            ErrorClass::SourceDead => {
                call.excluded[idx] = true;
                let name = &scope.sources[idx].settings.name;
                tracing::warn!(source = %name, scope = %scope.settings.name, "source dead: {}", up.message);
                Ok(Duration::ZERO)
            }
            ErrorClass::Transient => {
                self.last_retry_after = up.retry_after;
                if self.exhausted() {
                    return Ok(Duration::ZERO);
                }
                let slept = back_off(scope, call, up, self.backoffs, attempt_latency).await?;
                self.backoffs += 1;
                Ok(slept)
            }
            // Final classes end the call before recovery (`bookkeeping::final_error`).
            ErrorClass::RequestRejected | ErrorClass::ResultInvalid => Ok(Duration::ZERO),
        }
    }
}

/// After a transient failure: sleep the jittered exponential back-off (the larger of it and
/// the failure's retry hint), bounded before it starts by [`CallAdmission::wait_bound`] —
/// what is left of the stall window and of the call deadline. A hint beyond that bound ends
/// the call at once with that hint (429 `rate_limited` after a 429, else 503
/// `retry_exhausted`): sleeping would only end in a stall or the deadline. A 429's attempt
/// and sleep are charged to the stall budget (non-productive time), and the call gives up
/// with 429 `stalled` once the budget is spent and the scope made no progress. Returns the
/// time slept. Shared by the chat loop and the lean loop.
pub(crate) async fn back_off(
    scope: &ScopeRuntime,
    call: &mut CallAdmission,
    up: &UpstreamFailure,
    backoffs: u32,
    attempt_latency: Duration,
) -> Result<Duration, GatewayError> {
    let retry = scope.settings.retry;
    let rate_limited = up.class == ErrorClass::Transient && up.status == Some(429);
    if rate_limited {
        call.stall.charge(attempt_latency);
        if call.stall.stalled(progress_age(scope)) {
            return Err(stalled(scope, call, up));
        }
    }
    let planned = backoff_delay(
        retry.base_delay,
        retry.max_delay,
        backoffs,
        rand::random::<f64>(),
        up.retry_after,
    );
    let bound = call.wait_bound(progress_age(scope));
    let beyond = up.retry_after.filter(|&hint| hint > bound);
    if beyond.is_some() || (bound.is_zero() && !planned.is_zero()) {
        return Err(no_time_to_wait(scope, call, beyond, bound, rate_limited));
    }
    let delay = planned.min(bound);
    tracing::debug!(
        ?delay,
        ?planned,
        "transient failure, backing off: {}",
        up.message
    );
    let started = Instant::now();
    tokio::time::sleep(delay).await;
    let slept = started.elapsed();
    if rate_limited {
        call.stall.charge(slept);
        if call.stall.stalled(progress_age(scope)) {
            return Err(stalled(scope, call, up));
        }
    }
    Ok(slept)
}

/// Time since the scope's last answer (`None`: it never answered).
fn progress_age(scope: &ScopeRuntime) -> Option<Duration> {
    scope
        .progress
        .age_ms(scope.clock.now_ms())
        .map(Duration::from_millis)
}

/// The 429 `stalled` of a call whose 429s spent its stall window.
fn stalled(scope: &ScopeRuntime, call: &mut CallAdmission, up: &UpstreamFailure) -> GatewayError {
    GatewayError::ScopeUnavailable {
        scope: scope.settings.name.to_string(),
        reason: UnavailableReason::Stalled,
        retry_after_s: up.retry_after.map(|d| d.as_secs_f64()).unwrap_or(0.0),
        per_source_reasons: std::mem::take(&mut call.per_source),
        message: format!(
            "rate limited without progress for the stall window of {:?}; last error: {}",
            scope.settings.governance.stall_window, call.last_message
        ),
    }
}

/// The error of a failure whose retry hint (`beyond`) is longer than the call may still wait,
/// or that leaves no time at all for a back-off.
fn no_time_to_wait(
    scope: &ScopeRuntime,
    call: &mut CallAdmission,
    beyond: Option<Duration>,
    bound: Duration,
    rate_limited: bool,
) -> GatewayError {
    tracing::info!(
        scope = %scope.settings.name,
        hint_s = beyond.map(|h| h.as_secs_f64()),
        left_s = bound.as_secs_f64(),
        "no time left to back off within the stall window and deadline: giving up at once"
    );
    let why = match beyond {
        Some(hint) => format!(
            "the upstream asked to wait {:.3} s, longer than the call may still wait within its stall window and deadline",
            hint.as_secs_f64()
        ),
        None => "no time is left for a back-off within the stall window and deadline".to_string(),
    };
    GatewayError::ScopeUnavailable {
        scope: scope.settings.name.to_string(),
        reason: if rate_limited {
            UnavailableReason::RateLimited
        } else {
            UnavailableReason::RetryExhausted
        },
        retry_after_s: beyond.map_or(0.0, |hint| hint.as_secs_f64()),
        per_source_reasons: std::mem::take(&mut call.per_source),
        message: format!("{why}; last error: {}", call.last_message),
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
        ttft_ms: metrics.ttft.map(ms),
        max_inter_token_ms: metrics.max_inter_token.map(ms),
        salvaged: answer.salvaged,
        overhead_us: st.overhead().as_micros() as u64,
        cache_hit: false,
        refusal: (!acc.refusal.is_empty()).then_some(acc.refusal),
        upstream_fields: acc.fields.answer(),
        structured: None,
    }
}
