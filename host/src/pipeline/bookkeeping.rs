//! What happens after every attempt, chat or lean (docs/errors.md#degradation): the permit
//! settles (usage known, transport started, or failed per the S1–S8 table of
//! docs/limiter.md#settlement), the breaker
//! records the verdict under the admitting epoch, the probe lease is settled, and the
//! source's stats and pacer learn the outcome; then the failure is sorted into stop, next
//! source, or a classified upstream failure for the loop's retry decision. Shared, so the
//! chat loop and the lean loop of embeddings and OCR can never drift apart.

use std::time::Duration;

use crate::governance::breaker::Outcome;
use crate::governance::limiter::{FailureKind, Permit};
use crate::plugin::ErrorClass;

use crate::error::GatewayError;

use super::admission::{CallAdmission, ProbeGuard};
use super::failure::{AttemptFailure, UpstreamFailure};
use super::runtime::{ScopeRuntime, SourceRuntime};

/// How an attempt ended, as far as governance cares.
pub(crate) enum Settlement<'a> {
    /// An answer: `Some(tokens)` settles the TPM pre-charge to the measured usage (0 for
    /// OCR, S6 of docs/limiter.md#settlement); `None` keeps the pre-charge.
    Answered(Option<u64>),
    /// A classified upstream failure.
    Failed(&'a UpstreamFailure),
    /// No verdict on the source (plugin fault, unsupported, the caller went away): the
    /// permit is released, the breaker and stats are untouched.
    Unclassified,
}

/// The breaker outcome of a classified failure: a 429 is rate limiting, not a failure
/// ([`UpstreamFailure::is_rate_limit`]);
/// a rejected request or an invalid result says the service is healthy.
pub(crate) fn outcome_of(u: &UpstreamFailure) -> Outcome {
    if u.is_rate_limit() {
        return Outcome::RateLimited;
    }
    match u.class {
        ErrorClass::Transient => Outcome::Failure,
        ErrorClass::SourceDead => Outcome::SourceDead,
        ErrorClass::RequestRejected => Outcome::Success,
        ErrorClass::ResultInvalid => Outcome::ResultInvalid,
    }
}

/// Settle the permit, report to the breaker, and update stats and pacer for one attempt on
/// source `idx` admitted at breaker generation `epoch`. `latency` is the attempt's duration.
/// Breaker bookkeeping failures degrade to a warning (docs/errors.md#degradation).
pub(crate) async fn settle_attempt(
    scope: &ScopeRuntime,
    idx: usize,
    epoch: u64,
    mut probe: ProbeGuard<'_>,
    mut permit: Permit,
    settlement: Settlement<'_>,
    latency: Duration,
) {
    let verdict = match settlement {
        Settlement::Answered(tokens) => {
            match tokens {
                Some(t) => permit.usage_known(t),
                None => permit.transport_started(),
            }
            Some(Outcome::Success)
        }
        Settlement::Failed(u) => {
            permit.failed(FailureKind::from(u.class));
            Some(outcome_of(u))
        }
        Settlement::Unclassified => {
            permit.failed(FailureKind::Unclassified);
            None
        }
    };
    permit.settle_now().await;
    let Some(v) = verdict else {
        return;
    };
    let name = &scope.sources[idx].settings.name;
    let is_probe = probe.is_probe();
    if let Err(e) = scope.breaker.record(name, v, epoch, is_probe).await {
        tracing::warn!(source = %name, error = %e, "breaker bookkeeping failed");
    }
    probe.reported();
    let latency_ms = latency.as_secs_f64() * 1000.0;
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
        && let Some(snap) = scope.breaker.snapshot(name)
    {
        stats.cool_until(scope.clock.now_ms() + snap.retry_after_ms);
    }
}

/// What a loop does next with a failed attempt on source `idx`.
pub(crate) enum Triage {
    /// The call ends with this error (plugin fault, invalid request, the caller left).
    Stop(GatewayError),
    /// The source cannot serve this call: it is out for the rest of it; try another.
    NextSource,
    /// A classified upstream failure, noted as the source's reason and the last message:
    /// the loop decides on retry, back-off or switch by its class.
    Upstream(UpstreamFailure),
}

/// Sort a failed attempt (chat and lean loops alike), noting the per-source reason and the
/// call's last message in `call`.
pub(crate) fn triage(
    call: &mut CallAdmission,
    idx: usize,
    source: &SourceRuntime,
    failure: AttemptFailure,
) -> Triage {
    let name = source.settings.name.to_string();
    match failure {
        AttemptFailure::SinkClosed => {
            Triage::Stop(GatewayError::Internal("the client went away".into()))
        }
        AttemptFailure::Plugin(e) => Triage::Stop(GatewayError::PluginFault {
            plugin: source.component.info().name.clone(),
            message: e.to_string(),
        }),
        AttemptFailure::BuildInvalid(m) => Triage::Stop(GatewayError::InvalidRequest {
            param: None,
            message: format!("{name}: {m}"),
        }),
        AttemptFailure::Unsupported(m) => {
            call.per_source.insert(name, "unsupported".into());
            call.last_message = m;
            call.excluded[idx] = true;
            Triage::NextSource
        }
        AttemptFailure::Upstream(up) => {
            call.last_message = format!("{name}: {}", up.message);
            call.per_source.insert(name, up.short.to_string());
            Triage::Upstream(up)
        }
    }
}

/// The error that ends a call after a failure of a class no retry can help: the upstream
/// rejected the request (its message goes to the client), or its answer is unusable (no
/// failover: the service is healthy). `None` for the retryable classes.
pub(crate) fn final_error(up: &UpstreamFailure, source_name: &str) -> Option<GatewayError> {
    match up.class {
        ErrorClass::RequestRejected => Some(GatewayError::UpstreamRejected {
            source_name: source_name.to_string(),
            status: up.status.unwrap_or(400),
            message: up.message.clone(),
            code: up.code.clone(),
        }),
        ErrorClass::ResultInvalid => Some(GatewayError::ResultInvalid {
            source_name: source_name.to_string(),
            message: up.message.clone(),
            structured: None,
        }),
        ErrorClass::Transient | ErrorClass::SourceDead => None,
    }
}
