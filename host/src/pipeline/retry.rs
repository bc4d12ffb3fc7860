//! The retry loop (reference §4.4, §6, §7.2) — the only place that decides to retry. Each
//! attempt: pick a source, run it, record its row; on failure classify and back off, switch
//! source at once (source dead), or stop (request rejected, result invalid, plugin fault).
//! A streamed call may fail over freely until it commits (its first token went out); after
//! that a failure ends the stream with an in-band error, never a truncated "success".

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::error::{GatewayError, UnavailableReason};
use crate::governance::backoff_delay;
use crate::governance::breaker::Outcome;
use crate::governance::limiter::FailureKind;
use crate::governance::stall::StallBudget;
use crate::plugin::{ErrorClass, PluginChatRequest};

use super::admission::{self, Admitted, CallAdmission};
use super::attempt::{self, AttemptAnswer, AttemptFailure, AttemptMetrics};
use super::gateway::{Inner, ScopeRuntime, SourceRuntime};
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::rows::attempt_row;
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
    let retry = scope.settings.retry;
    let n = scope.sources.len();
    let mut call = CallAdmission {
        excluded: vec![false; n],
        stall: StallBudget::new(scope.settings.governance.stall_window),
        per_source: BTreeMap::new(),
        last_message: String::from("no attempt was made"),
        waits: Vec::new(),
    };
    // Attempts that count against RETRY__MAX_ATTEMPTS (429s do not: they spend the stall
    // budget instead, reference §7.3 issue-8).
    let mut counted: u32 = 0;
    let mut backoffs: u32 = 0;
    let mut last_retry_after: Option<Duration> = None;
    // The failure that broke a started stream, reported if no continuation succeeds.
    let mut interrupted: Option<(String, String)> = None;
    let seed = scope
        .seed
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    loop {
        if counted >= retry.max_attempts {
            if let Some((source_name, message)) = interrupted {
                return Err(GatewayError::StreamInterrupted {
                    source_name,
                    message,
                });
            }
            return Err(GatewayError::ScopeUnavailable {
                scope: scope.settings.name.to_string(),
                reason: UnavailableReason::RetryExhausted,
                retry_after_s: last_retry_after.map(|d| d.as_secs_f64()).unwrap_or(0.0),
                per_source_reasons: call.per_source,
                message: format!(
                    "{counted} attempts failed; last error: {}",
                    call.last_message
                ),
            });
        }
        let continuing = preq.prefill.is_some();
        let can_continue = |i: usize| {
            !continuing
                || scope.sources[i]
                    .component
                    .info()
                    .capabilities
                    .prefill_continuation
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
                    // fallback's refusal (issue 3, item 7).
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
            mut probe,
            mut permit,
            _in_flight,
            ..
        } = admitted;
        st.last_source = Some(idx);
        st.attempts += 1;
        let attempt_id = uuid::Uuid::now_v7().to_string();
        permit.transport_started();
        let span = tracing::info_span!("attempt", attempt_id = %attempt_id, source = %source.settings.name);
        let (outcome, metrics) = attempt::run(inner, source, &preq, st, sink)
            .instrument(span)
            .await;
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
        let latency_ms = metrics.latency.as_secs_f64() * 1000.0;
        let name = source.settings.name.to_string();
        let is_probe = probe.is_probe();

        // Bookkeeping: permit settlement (§6.3), breaker, stats, pacer.
        let verdict = match &outcome {
            Ok(answer) => {
                match answer.acc.usage {
                    Some(u) => permit.usage_known(u.prompt_tokens + u.completion_tokens),
                    None => permit.transport_started(),
                }
                Some(Outcome::Success)
            }
            Err(AttemptFailure::Upstream(u)) => {
                permit.failed(FailureKind::from(u.class));
                Some(match (u.class, u.status) {
                    (ErrorClass::Transient, Some(429)) => Outcome::RateLimited,
                    (ErrorClass::Transient, _) => Outcome::Failure,
                    (ErrorClass::SourceDead, _) => Outcome::SourceDead,
                    (ErrorClass::RequestRejected, _) => Outcome::Success,
                    (ErrorClass::ResultInvalid, _) => Outcome::ResultInvalid,
                })
            }
            Err(_) => {
                permit.failed(FailureKind::Unclassified);
                None
            }
        };
        permit.settle_now().await;
        if let Some(v) = verdict {
            if let Err(e) = scope.breaker.record(&name, v, epoch, is_probe).await {
                // Bookkeeping after a finished call degrades to a warning (§7.3).
                tracing::warn!(source = %name, error = %e, "breaker bookkeeping failed");
            }
            probe.reported();
            let stats = &scope.stats[idx];
            match v {
                Outcome::Success | Outcome::ResultInvalid => {
                    stats.observe(true, latency_ms);
                    scope.pacers[idx].on_success();
                }
                Outcome::Failure | Outcome::SourceDead => stats.observe(false, latency_ms),
                Outcome::RateLimited => {
                    scope.pacers[idx].on_rate_limited(stats.in_flight() + 1);
                }
            }
            if v == Outcome::SourceDead
                && let Some(snap) = scope.breaker.snapshot(&name)
            {
                stats.cool_until(scope.clock.now_ms() + snap.retry_after_ms);
            }
        }
        drop(probe);

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
        let up = match failure {
            AttemptFailure::SinkClosed => {
                return Err(GatewayError::Internal("the client went away".into()));
            }
            AttemptFailure::Plugin(e) => {
                return Err(GatewayError::PluginFault {
                    plugin: source.component.info().name.clone(),
                    message: e.to_string(),
                });
            }
            AttemptFailure::BuildInvalid(m) => {
                return Err(GatewayError::InvalidRequest {
                    param: None,
                    message: format!("{name}: {m}"),
                });
            }
            AttemptFailure::Unsupported(m) => {
                call.per_source.insert(name, "unsupported".into());
                call.last_message = m;
                call.excluded[idx] = true;
                continue;
            }
            AttemptFailure::Upstream(u) => u,
        };
        call.per_source.insert(name.clone(), up.short.to_string());
        call.last_message = format!("{name}: {}", up.message);
        let rate_limited = up.class == ErrorClass::Transient && up.status == Some(429);
        if !rate_limited {
            counted += 1;
        }

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
        match up.class {
            ErrorClass::RequestRejected => {
                return Err(GatewayError::UpstreamRejected {
                    source_name: name,
                    status: up.status.unwrap_or(400),
                    message: up.message,
                    code: up.code,
                });
            }
            ErrorClass::ResultInvalid => {
                return Err(GatewayError::ResultInvalid {
                    source_name: name,
                    message: up.message,
                    structured: None,
                });
            }
            ErrorClass::SourceDead => {
                // Switch at once, no back-off; this source is out for the rest of the call.
                call.excluded[idx] = true;
                tracing::warn!(source = %name, scope = %scope.settings.name, "source dead: {}", up.message);
            }
            ErrorClass::Transient => {
                last_retry_after = up.retry_after;
                if counted >= retry.max_attempts {
                    continue; // reported as retry_exhausted at the top of the loop
                }
                let delay = backoff_delay(
                    retry.base_delay,
                    retry.max_delay,
                    backoffs,
                    rand::random::<f64>(),
                    up.retry_after,
                );
                backoffs += 1;
                tracing::debug!(source = %name, ?delay, "transient failure, backing off: {}", up.message);
                let slept = Instant::now();
                tokio::time::sleep(delay).await;
                st.sleeping += slept.elapsed();
                if rate_limited {
                    // Non-productive: the 429 attempt and its back-off spend the stall budget.
                    call.stall.charge(metrics.latency + slept.elapsed());
                    let age = scope
                        .progress
                        .age_ms(scope.clock.now_ms())
                        .map(Duration::from_millis);
                    if call.stall.stalled(age) {
                        return Err(GatewayError::ScopeUnavailable {
                            scope: scope.settings.name.to_string(),
                            reason: UnavailableReason::Stalled,
                            retry_after_s: up.retry_after.map(|d| d.as_secs_f64()).unwrap_or(0.0),
                            per_source_reasons: call.per_source,
                            message: format!(
                                "rate limited without progress for the stall window of {:?}",
                                scope.settings.governance.stall_window
                            ),
                        });
                    }
                }
            }
        }
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
        structured: None,
    }
}
