//! The retry loop — the only place that decides to retry (docs/retry.md#one-retry-loop).
//! One loop, generic over the operation ([`Operation`]): a chat call (`chat.rs`, with its
//! commit point and continuation as hooks) and the one-shot operations of embeddings and OCR
//! (`lean/`) run the same admission, settlement, triage, budget and back-off.
//!
//! Each attempt: admit a source (selector → breaker → pacer → limiter), run it (the
//! operation records its row), settle the permit and report to the breaker and statistics,
//! then decide: return the answer, stop (request rejected, result invalid, plugin fault, a
//! retry hint the call cannot wait for), switch source at once (source dead, unsupported), or
//! back off and go again (transient; bounded by what is left of the stall window and the call
//! deadline). The operation may take over a failure first (a streamed chat call that already
//! sent output continues elsewhere or ends; it never passes a truncated answer off as whole).

mod budget;
pub(crate) mod chat;

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::error::GatewayError;

use super::admission::{self, Admitted, CallAdmission};
use super::bookkeeping::{Settlement, Triage, final_error, settle_attempt, triage};
use super::failure::{AttemptFailure, UpstreamFailure};
use super::runtime::{Inner, ScopeRuntime, SourceRuntime};

pub(crate) use budget::RetryBudget;
pub(crate) use chat::Retry;

/// What the operation does with a classified failure before the loop's own rules apply.
pub(crate) enum AfterFailure {
    /// The loop decides: stop on a final class, else switch source or back off.
    Recover,
    /// Go straight to the next attempt (no back-off): the operation prepared it.
    Again,
    /// End the run with this error.
    Stop(GatewayError),
}

/// An operation the retry loop runs attempts of.
pub(crate) trait Operation: Send + Sync {
    /// What one successful attempt yields.
    type Output: Send;
    /// What the run returns when an attempt succeeded.
    type Answer;

    /// Whether `source` can take the next attempt (its provider's capabilities).
    fn serves(&self, source: &SourceRuntime) -> bool;

    /// The source the selector should treat the next attempt as a retry of (`None` for the
    /// first attempt of the run).
    fn previous_source(&self) -> Option<usize>;

    /// Tokens every attempt settles whatever its outcome, decided before anything is sent
    /// (so failure and cancellation settle it too), or `None` when the outcome decides.
    fn fixed_tokens(&self) -> Option<u64> {
        None
    }

    /// An attempt on source `idx` was admitted and is about to start.
    fn started(&mut self, idx: usize);

    /// Run one admitted attempt on `source` and record its telemetry row (also when the
    /// future is dropped mid-way). Returns the outcome and the attempt's duration.
    fn attempt<'a>(
        &'a mut self,
        inner: &'a Inner,
        scope: &'a ScopeRuntime,
        source: &'a SourceRuntime,
        attempt_id: &'a str,
    ) -> impl Future<Output = (Result<Self::Output, AttemptFailure>, Duration)> + Send + 'a;

    /// Measured tokens of an answer for the TPM settlement; `None` keeps the pre-charge.
    fn settle_tokens(&self, output: &Self::Output) -> Option<u64>;

    /// The run's answer from a successful attempt on source `idx`.
    fn answered(&mut self, scope: &ScopeRuntime, idx: usize, output: Self::Output) -> Self::Answer;

    /// A classified failure on source `idx` (already counted against the budget).
    fn after_failure(
        &mut self,
        _call: &mut CallAdmission,
        _idx: usize,
        _source: &SourceRuntime,
        _up: &UpstreamFailure,
    ) -> AfterFailure {
        AfterFailure::Recover
    }

    /// The error the run ends with when admission refuses or the budget is spent (`e`),
    /// as the operation reports it.
    fn give_up(&mut self, e: GatewayError) -> GatewayError {
        e
    }

    /// The loop slept `d` backing off.
    fn slept(&mut self, _d: Duration) {}
}

/// Run `op` to an answer or a final error. `deadline` bounds every wait and back-off;
/// `seed` feeds the selector (retries of a call keep it).
pub(crate) async fn run<O: Operation>(
    inner: &Inner,
    scope: &ScopeRuntime,
    op: &mut O,
    deadline: Option<Instant>,
    seed: u64,
) -> Result<O::Answer, GatewayError> {
    let mut call = CallAdmission::new(scope, deadline);
    let mut budget = RetryBudget::new(scope);
    loop {
        if budget.exhausted() {
            let e = budget.exhausted_error(scope, &mut call);
            return Err(op.give_up(e));
        }
        let previous = op.previous_source();
        let serves = |i: usize| op.serves(&scope.sources[i]);
        let admitted = admission::admit(scope, &mut call, previous, seed, &serves).await;
        for (reason, waited) in call.waits.drain(..) {
            inner
                .recorder
                .metrics()
                .admission_wait(&scope.settings.name, reason.as_str(), waited);
        }
        let Admitted {
            idx,
            epoch,
            probe,
            mut permit,
            _in_flight,
        } = match admitted {
            Ok(a) => a,
            Err(e) => return Err(op.give_up(e)),
        };
        if let Some(tokens) = op.fixed_tokens() {
            permit.usage_known(tokens);
        }
        let source = &scope.sources[idx];
        op.started(idx);
        let attempt_id = scope.entropy.uuid_v7(scope.clock.unix_ms()).to_string();
        permit.transport_started();
        let span = tracing::info_span!("attempt", attempt_id = %attempt_id, source = %source.settings.name);
        let (outcome, latency) = op
            .attempt(inner, scope, source, &attempt_id)
            .instrument(span)
            .await;
        drop(_in_flight);
        let settlement = match &outcome {
            Ok(out) => Settlement::Answered(op.settle_tokens(out)),
            Err(AttemptFailure::Upstream(u)) => Settlement::Failed(u),
            Err(_) => Settlement::Unclassified,
        };
        settle_attempt(scope, idx, epoch, probe, permit, settlement, latency).await;
        let failure = match outcome {
            Ok(output) => {
                scope.progress.mark(scope.clock.now_ms());
                return Ok(op.answered(scope, idx, output));
            }
            Err(f) => f,
        };
        let up = match triage(&mut call, idx, source, failure) {
            Triage::Stop(e) => return Err(e),
            Triage::NextSource => continue,
            Triage::Upstream(up) => up,
        };
        budget.count(&up);
        match op.after_failure(&mut call, idx, source, &up) {
            AfterFailure::Recover => {}
            AfterFailure::Again => continue,
            AfterFailure::Stop(e) => return Err(e),
        }
        if let Some(e) = final_error(&up, &source.settings.name) {
            return Err(e);
        }
        let slept = budget.recover(scope, &mut call, idx, &up, latency).await?;
        op.slept(slept);
    }
}
