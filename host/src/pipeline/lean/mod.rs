//! The lean governance loop of one-shot operations — an embedding batch, an OCR attempt
//! (docs/pipeline.md#lean-loop): the same admission (selector → breaker → pacer → limiter), the
//! same bookkeeping, back-off, stall budget and attempt rows as chat, and nothing chat-only:
//! no streaming watchdog, no commit point, no continuation. An operation ([`LeanOp`]) says
//! which sources can serve it, runs one attempt on a source, and writes that attempt's row.

pub(crate) mod call;

use std::future::Future;
use std::time::Duration;

use tracing::Instrument;

use crate::error::GatewayError;
use crate::telemetry::CallRow;

use super::admission::{self, Admitted, CallAdmission};
use super::attempt::AttemptFailure;
use super::bookkeeping::{Settlement, Triage, final_error, settle_attempt, triage};
use super::gateway::{Inner, ScopeRuntime, SourceRuntime};
use super::retry::RetryBudget;
use super::rows::LeanAttemptRowGuard;

/// One kind of one-shot operation run through the lean loop.
pub(crate) trait LeanOp: Sync {
    /// A successful attempt's answer.
    type Output: Send;

    /// Whether `source` can serve this operation (its provider's capabilities).
    fn serves(&self, source: &SourceRuntime) -> bool;

    /// One attempt on `source` (admitted; the loop settles it).
    fn attempt(
        &self,
        inner: &Inner,
        source: &SourceRuntime,
    ) -> impl Future<Output = Result<Self::Output, AttemptFailure>> + Send;

    /// Measured tokens of an answer, for the TPM settlement: `Some(0)` for OCR (zero is a
    /// fact), `None` when the upstream reported no usage (the pre-charge stays).
    fn settle_tokens(&self, output: &Self::Output) -> Option<u64>;

    /// Tokens every attempt of this operation settles, whatever its outcome — answer,
    /// failure or cancellation — or `None` when the outcome decides. OCR: `Some(0)`, since
    /// its usage is not measured in tokens and the TPM window must not keep a made-up
    /// pre-charge.
    fn fixed_tokens(&self) -> Option<u64> {
        None
    }

    /// The telemetry row of one attempt (`attempt_id` is its row id).
    fn attempt_row(
        &self,
        inner: &Inner,
        attempt_id: &str,
        source: &SourceRuntime,
        outcome: &Result<Self::Output, AttemptFailure>,
        latency: Duration,
    ) -> CallRow;
}

/// What the loop knows of a call so far (for its terminal row).
#[derive(Debug, Default, Clone)]
pub(crate) struct LeanState {
    /// Attempts made (all runs of the loop in this call).
    pub attempts: u32,
    /// The source of the last attempt.
    pub last_source: Option<usize>,
    /// The last attempt's latency in ms.
    pub last_attempt_ms: Option<u64>,
    /// When the call's deadline passes; bounds the loop's waits and back-offs.
    pub deadline: Option<tokio::time::Instant>,
}

/// A successful run: the answer and the index of the source that gave it.
pub(crate) struct LeanAnswer<T> {
    pub output: T,
    pub source: usize,
}

/// Run `op` to an answer or a final error: admit a source, attempt, settle, and on failure
/// retry (transient, with back-off; 429s spend the stall budget instead of attempts), switch
/// at once (source dead, unsupported) or stop (request rejected, result invalid, plugin
/// fault). `seed` feeds the selector.
pub(crate) async fn run<O: LeanOp>(
    inner: &Inner,
    scope: &ScopeRuntime,
    op: &O,
    st: &mut LeanState,
    seed: u64,
) -> Result<LeanAnswer<O::Output>, GatewayError> {
    let mut call = CallAdmission::new(scope, st.deadline);
    let mut budget = RetryBudget::new(scope);
    // The source of this run's previous attempt: the selector treats it as a retry.
    let mut previous: Option<usize> = None;
    loop {
        if budget.exhausted() {
            return Err(budget.exhausted_error(scope, &mut call));
        }
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
        } = admitted?;
        if let Some(tokens) = op.fixed_tokens() {
            // Decided before anything is sent, so failure and cancellation settle it too.
            permit.usage_known(tokens);
        }
        let source = &scope.sources[idx];
        st.last_source = Some(idx);
        previous = Some(idx);
        st.attempts += 1;
        let attempt_id = uuid::Uuid::now_v7().to_string();
        permit.transport_started();
        let span = tracing::info_span!("attempt", attempt_id = %attempt_id, source = %source.settings.name);
        // Dropped mid-attempt (deadline, caller gone), the guard writes its `cancelled` row.
        let cut = LeanAttemptRowGuard::new(&inner.recorder, |latency| {
            op.attempt_row(
                inner,
                &attempt_id,
                source,
                &Err(AttemptFailure::SinkClosed),
                latency,
            )
        });
        let started = tokio::time::Instant::now();
        let outcome = op
            .attempt(inner, source)
            .instrument(span)
            .await
            .map_err(|f| super::upstream::scrub(source, f));
        let latency = started.elapsed();
        cut.finished();
        drop(_in_flight);
        st.last_attempt_ms = Some(u64::try_from(latency.as_millis()).unwrap_or(u64::MAX));
        inner
            .recorder
            .record(op.attempt_row(inner, &attempt_id, source, &outcome, latency));
        let settlement = match &outcome {
            Ok(out) => Settlement::Answered(op.settle_tokens(out)),
            Err(AttemptFailure::Upstream(u)) => Settlement::Failed(u),
            Err(_) => Settlement::Unclassified,
        };
        settle_attempt(scope, idx, epoch, probe, permit, settlement, latency).await;
        let name = source.settings.name.to_string();
        let failure = match outcome {
            Ok(output) => {
                scope.progress.mark(scope.clock.now_ms());
                return Ok(LeanAnswer {
                    output,
                    source: idx,
                });
            }
            Err(f) => f,
        };
        let up = match triage(&mut call, idx, source, failure) {
            Triage::Stop(e) => return Err(e),
            Triage::NextSource => continue,
            Triage::Upstream(up) => up,
        };
        budget.count(&up);
        if let Some(e) = final_error(&up, &name) {
            return Err(e);
        }
        budget.recover(scope, &mut call, idx, &up, latency).await?;
    }
}
