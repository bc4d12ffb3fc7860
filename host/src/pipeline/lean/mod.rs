//! One-shot operations in the retry loop — an embedding batch, an OCR attempt
//! (docs/pipeline.md#lean-loop): the same retry loop as chat (`retry::run`: admission, bookkeeping,
//! back-off, stall budget) with attempt rows of their own, and nothing chat-only:
//! no streaming watchdog, no commit point, no continuation. An operation ([`LeanOp`]) says
//! which sources can serve it, runs one attempt on a source, and writes that attempt's row.

pub(crate) mod call;

use std::future::Future;
use std::time::Duration;

use crate::error::GatewayError;
use crate::telemetry::CallRow;
use crate::telemetry::otel::{AttemptEnd, AttemptSpan, CallTrace};

use super::failure::AttemptFailure;
use super::retry::{self, Operation};
use super::rows::LeanAttemptRowGuard;
use super::runtime::{Inner, ScopeRuntime, SourceRuntime};
use super::traces;

/// One kind of one-shot operation run through the lean loop.
pub(crate) trait LeanOp: Sync {
    /// A successful attempt's answer.
    type Output: Send;

    /// Whether `source` can serve this operation (its provider's capabilities).
    fn serves(&self, source: &SourceRuntime) -> bool;

    /// One attempt on `source` (admitted; the loop settles it); `trace` is its span, whose
    /// trace context the upstream request carries.
    fn attempt(
        &self,
        inner: &Inner,
        source: &SourceRuntime,
        trace: Option<&AttemptSpan>,
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
    /// Raised when the first attempt starts (a budget reservation's cancellation rule).
    pub upstream_sent: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// What the call's attempts were billed (their rows' cost).
    pub billed: super::sink::Billed,
    /// The call's span, its attempts' parent (docs/tracing.md); `None` when the call is not
    /// traced.
    pub trace: Option<CallTrace>,
}

/// A successful run: the answer and the index of the source that gave it.
pub(crate) struct LeanAnswer<T> {
    pub output: T,
    pub source: usize,
}

/// Run `op` to an answer or a final error through the retry loop (`retry::run`): admit a
/// source, attempt, settle, and on failure retry (transient, with back-off; 429s spend the
/// stall budget instead of attempts), switch at once (source dead, unsupported) or stop
/// (request rejected, result invalid, plugin fault). `seed` feeds the selector.
pub(crate) async fn run<O: LeanOp>(
    inner: &Inner,
    scope: &ScopeRuntime,
    op: &O,
    st: &mut LeanState,
    seed: u64,
) -> Result<LeanAnswer<O::Output>, GatewayError> {
    let deadline = st.deadline;
    let mut lean = Lean {
        op,
        st,
        previous: None,
    };
    retry::run(inner, scope, &mut lean, deadline, seed).await
}

/// A lean operation as the retry loop sees it.
struct Lean<'o, O> {
    op: &'o O,
    st: &'o mut LeanState,
    /// The source of this run's previous attempt: the selector treats it as a retry.
    previous: Option<usize>,
}

impl<O: LeanOp> Operation for Lean<'_, O> {
    type Output = O::Output;
    type Answer = LeanAnswer<O::Output>;

    fn serves(&self, source: &SourceRuntime) -> bool {
        self.op.serves(source)
    }

    fn previous_source(&self) -> Option<usize> {
        self.previous
    }

    fn fixed_tokens(&self) -> Option<u64> {
        self.op.fixed_tokens()
    }

    fn started(&mut self, idx: usize) {
        self.st.last_source = Some(idx);
        self.previous = Some(idx);
        self.st.attempts += 1;
        if let Some(sent) = &self.st.upstream_sent {
            sent.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    async fn attempt<'a>(
        &'a mut self,
        inner: &'a Inner,
        _scope: &'a ScopeRuntime,
        source: &'a SourceRuntime,
        attempt_id: &'a str,
    ) -> (Result<O::Output, AttemptFailure>, Duration) {
        let op = self.op;
        // The attempt's span when the call is traced; dropped mid-attempt, it ends as
        // cancelled.
        let span = traces::attempt(self.st.trace.as_ref(), source, self.st.attempts, attempt_id);
        // Dropped mid-attempt (deadline, caller gone), the guard writes its `cancelled` row.
        let cut = LeanAttemptRowGuard::new(&inner.recorder, |latency| {
            op.attempt_row(
                inner,
                attempt_id,
                source,
                &Err(AttemptFailure::SinkClosed),
                latency,
            )
        });
        let started = tokio::time::Instant::now();
        let outcome = op
            .attempt(inner, source, span.as_ref())
            .await
            .map_err(|f| super::upstream::scrub(source, f));
        let latency = started.elapsed();
        cut.finished();
        self.st.last_attempt_ms = Some(u64::try_from(latency.as_millis()).unwrap_or(u64::MAX));
        let row = op.attempt_row(inner, attempt_id, source, &outcome, latency);
        if let Some(span) = span {
            span.end(match &outcome {
                Ok(_) => AttemptEnd {
                    response_model: row.model_reported.as_deref(),
                    input_tokens: row.prompt_tokens,
                    ..AttemptEnd::default()
                },
                Err(f) => traces::failed_attempt(f),
            });
        }
        let had_usage = row.prompt_tokens.is_some();
        let cost = inner.recorder.record(row);
        self.st.billed.add(had_usage, cost);
        (outcome, latency)
    }

    fn settle_tokens(&self, output: &O::Output) -> Option<u64> {
        self.op.settle_tokens(output)
    }

    fn answered(&mut self, _scope: &ScopeRuntime, idx: usize, output: O::Output) -> Self::Answer {
        LeanAnswer {
            output,
            source: idx,
        }
    }
}
