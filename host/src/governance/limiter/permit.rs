//! The caller's side of the limiter: the [`Permit`] guard that settles a granted admission
//! exactly once — explicitly with [`Permit::settle_now`] or, on cancellation, in `Drop` —
//! with the value the settlement table of docs/limiter.md#settlement (S1–S8) prescribes for
//! what the attempt knows at that moment. What a denied call does next (the wait policy) is
//! decided in one place, `pipeline/admission.rs`, across every source of the scope.

use std::sync::Arc;

use super::{Admission, Gate, LimiterBackend, LimiterError, PermitId};

/// How an attempt failed, for its TPM settlement (docs/limiter.md#settlement, S5/S8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// Timeout, 5xx, 429, broken stream: the upstream may have billed; keep the pre-charge.
    Transient,
    /// 401/403/quota: the source is out; full refund (it must not keep holding quota).
    SourceDead,
    /// 400: full refund.
    RequestRejected,
    /// Bad content from a healthy service: full refund (S5).
    ResultInvalid,
    /// A failure no class covers (a plugin fault, a host bug): full refund (S8, unchanged).
    Unclassified,
}

impl FailureKind {
    /// The tokens to settle for this failure given the pre-charge `est_tokens`.
    pub fn settlement(self, est_tokens: u64) -> u64 {
        match self {
            FailureKind::Transient => est_tokens,
            FailureKind::SourceDead
            | FailureKind::RequestRejected
            | FailureKind::ResultInvalid
            | FailureKind::Unclassified => 0,
        }
    }
}

impl From<crate::plugin::ErrorClass> for FailureKind {
    fn from(class: crate::plugin::ErrorClass) -> Self {
        use crate::plugin::ErrorClass;
        match class {
            ErrorClass::Transient => FailureKind::Transient,
            ErrorClass::SourceDead => FailureKind::SourceDead,
            ErrorClass::RequestRejected => FailureKind::RequestRejected,
            ErrorClass::ResultInvalid => FailureKind::ResultInvalid,
        }
    }
}

/// A denied admission: which gate, and for RPM/TPM how long (ms) until it can fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial {
    /// The first full gate.
    pub gate: Gate,
    /// ms until the window has room (RPM/TPM, ≥ 1); `None` for concurrency (wait for a
    /// release).
    pub retry_after_ms: Option<u64>,
}

/// What the attempt knows about its usage (docs/limiter.md#settlement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Admitted, transport not started (S1): nothing was sent, settle 0.
    Admitted,
    /// The upstream call is in flight, usage unknown (S3): settle the pre-charge.
    InTransport,
    /// Usage known (S4) or a failure decided (S5/S8): settle this, never overwritten.
    Decided(u64),
}

/// One granted admission, held by the attempt. Settles exactly once: by
/// [`settle_now`](Self::settle_now), or in `Drop` with the value of the current stage (a
/// cancelled attempt). The settlement value follows docs/limiter.md#settlement:
///
/// | call sequence | settles |
/// | --- | --- |
/// | nothing (S1: cancelled before transport) | 0 |
/// | `transport_started` (S3: cancelled in flight) | `est` |
/// | `usage_known(n)` (S4), whatever follows | `n` |
/// | `failed(kind)` (S5/S8), unless usage was known | `est` for transient, else 0 |
///
/// The first decision (`usage_known` or `failed`) wins; `transport_started` never overrides
/// a decision. Settle failures never fail the call: they are logged (warn) and counted.
pub struct Permit {
    backend: Arc<dyn LimiterBackend>,
    id: PermitId,
    est: u64,
    stage: Stage,
    settled: bool,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit")
            .field("id", &self.id)
            .field("est", &self.est)
            .field("stage", &self.stage)
            .field("settled", &self.settled)
            .finish_non_exhaustive()
    }
}

impl Permit {
    /// Wrap a granted admission `id` whose pre-charge was `est_tokens`.
    pub fn new(backend: Arc<dyn LimiterBackend>, id: PermitId, est_tokens: u64) -> Self {
        Self {
            backend,
            id,
            est: est_tokens,
            stage: Stage::Admitted,
            settled: false,
        }
    }

    /// Try to admit one attempt on `source` with a pre-charge of `est_tokens` tokens.
    /// `Ok(Ok(permit))`: granted; `Ok(Err(denial))`: a gate is full, nothing changed;
    /// `Err`: the backend could not decide — fail closed.
    pub async fn try_acquire(
        backend: &Arc<dyn LimiterBackend>,
        source: &str,
        est_tokens: u64,
    ) -> Result<Result<Permit, Denial>, LimiterError> {
        Ok(match backend.try_acquire(source, est_tokens).await? {
            Admission::Granted(id) => Ok(Permit::new(backend.clone(), id, est_tokens)),
            Admission::Denied {
                gate,
                retry_after_ms,
            } => Err(Denial {
                gate,
                retry_after_ms,
            }),
        })
    }

    /// The permit's id.
    pub fn id(&self) -> PermitId {
        self.id
    }

    /// The pre-charge in tokens.
    pub fn est_tokens(&self) -> u64 {
        self.est
    }

    /// The tokens this permit would settle with right now.
    pub fn settlement(&self) -> u64 {
        match self.stage {
            Stage::Admitted => 0,
            Stage::InTransport => self.est,
            Stage::Decided(v) => v,
        }
    }

    /// The upstream request is about to be sent: from now a cancellation keeps the
    /// pre-charge (S3). No effect once usage is known or a failure decided.
    pub fn transport_started(&mut self) {
        if matches!(self.stage, Stage::Admitted) {
            self.stage = Stage::InTransport;
        }
    }

    /// The real usage (prompt + completion tokens; the pre-charge when usage is
    /// unavailable) is known (S4). Not overwritten by anything that follows; ignored if a
    /// failure was decided first.
    pub fn usage_known(&mut self, actual_tokens: u64) {
        if !matches!(self.stage, Stage::Decided(_)) {
            self.stage = Stage::Decided(actual_tokens);
        }
    }

    /// The attempt failed with `kind` (S5/S8): transient keeps the pre-charge, every other
    /// kind refunds it. Call it first thing in the failure branch, before any await. No
    /// effect when usage is already known or a failure was already decided.
    pub fn failed(&mut self, kind: FailureKind) {
        if !matches!(self.stage, Stage::Decided(_)) {
            self.stage = Stage::Decided(kind.settlement(self.est));
        }
    }

    /// Settle now with [`settlement`](Self::settlement) and release the slot. Never fails:
    /// a backend error is logged (warn) and counted in the snapshot's `settle_failures`;
    /// the lease expiry then frees the slot. If this future is dropped mid-way, `Drop`
    /// settles again (the backend's settle is idempotent).
    pub async fn settle_now(mut self) {
        let value = self.settlement();
        let result = self.backend.settle(self.id, value).await;
        self.settled = true;
        if let Err(e) = result {
            self.backend.record_settle_failure();
            tracing::warn!(permit = %self.id, tokens = value, error = %e, "limiter settle failed; the lease expiry will free the slot");
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.settled {
            self.settled = true;
            self.backend.clone().settle_sync(self.id, self.settlement());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::ManualClock;
    use crate::governance::limiter::{
        LimiterConfig, LimiterSnapshot, Limits, MemoryLimiter, effective_est_tokens,
    };
    use futures_util::future::BoxFuture;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
    use std::time::Duration;
    use tokio::sync::Notify;

    const EST: u64 = 100;

    fn backend(source: Limits) -> Arc<dyn LimiterBackend> {
        Arc::new(MemoryLimiter::new(
            LimiterConfig {
                window_ms: 60_000,
                lease_ttl_ms: 60_000,
                global: Limits {
                    max_concurrency: 0,
                    rpm: 0,
                    tpm: 10_000,
                },
                sources: vec![(Arc::from("a"), source)],
            },
            ManualClock::new(0),
        ))
    }

    fn tokens(b: &Arc<dyn LimiterBackend>) -> (u64, u64) {
        let s = b.snapshot();
        (s.global.tokens_in_window, s.sources[0].1.tokens_in_window)
    }

    async fn permit(b: &Arc<dyn LimiterBackend>) -> Permit {
        Permit::try_acquire(b, "a", EST).await.unwrap().unwrap()
    }

    /// Drop a permit after `steps` and return the tokens left in the window.
    async fn dropped_after(steps: impl FnOnce(&mut Permit)) -> u64 {
        let b = backend(Limits::default());
        let mut p = permit(&b).await;
        assert_eq!(tokens(&b), (EST, EST));
        steps(&mut p);
        drop(p);
        let s = b.snapshot();
        assert_eq!(s.global.in_flight, 0, "the drop released the slot");
        assert_eq!(s.global.tokens_in_window, s.sources[0].1.tokens_in_window);
        s.global.tokens_in_window
    }

    #[tokio::test]
    async fn s1_cancelled_before_transport_refunds_everything() {
        assert_eq!(dropped_after(|_| {}).await, 0);
    }

    #[tokio::test]
    async fn s3_cancelled_in_flight_keeps_the_precharge() {
        assert_eq!(dropped_after(|p| p.transport_started()).await, EST);
    }

    #[tokio::test]
    async fn s4_known_usage_is_never_overwritten() {
        let known = |p: &mut Permit| {
            p.transport_started();
            p.usage_known(37);
        };
        assert_eq!(dropped_after(known).await, 37);
        assert_eq!(
            dropped_after(|p| {
                known(p);
                p.failed(FailureKind::Transient);
                p.transport_started();
            })
            .await,
            37
        );
        assert_eq!(
            dropped_after(|p| {
                known(p);
                p.failed(FailureKind::SourceDead);
            })
            .await,
            37
        );
        assert_eq!(dropped_after(|p| p.usage_known(250)).await, 250);
        // a real usage of 0 is a fact, not "unknown"
        assert_eq!(
            dropped_after(|p| {
                p.transport_started();
                p.usage_known(0);
                p.failed(FailureKind::Transient);
            })
            .await,
            0
        );
    }

    #[tokio::test]
    async fn s5_failure_decisions() {
        let after = |kind| {
            move |p: &mut Permit| {
                p.transport_started();
                p.failed(kind);
                // a later stage change does not undo the decision
                p.transport_started();
            }
        };
        assert_eq!(dropped_after(after(FailureKind::Transient)).await, EST);
        assert_eq!(dropped_after(after(FailureKind::SourceDead)).await, 0);
        assert_eq!(dropped_after(after(FailureKind::RequestRejected)).await, 0);
        assert_eq!(dropped_after(after(FailureKind::ResultInvalid)).await, 0);
        assert_eq!(dropped_after(after(FailureKind::Unclassified)).await, 0);
        // the first decision wins
        assert_eq!(
            dropped_after(|p| {
                p.failed(FailureKind::SourceDead);
                p.failed(FailureKind::Transient);
                p.usage_known(55);
            })
            .await,
            0
        );
    }

    #[test]
    fn failure_kinds_map_from_error_classes() {
        use crate::plugin::ErrorClass;
        assert_eq!(
            FailureKind::from(ErrorClass::Transient),
            FailureKind::Transient
        );
        assert_eq!(
            FailureKind::from(ErrorClass::SourceDead),
            FailureKind::SourceDead
        );
        assert_eq!(
            FailureKind::from(ErrorClass::RequestRejected),
            FailureKind::RequestRejected
        );
        assert_eq!(
            FailureKind::from(ErrorClass::ResultInvalid),
            FailureKind::ResultInvalid
        );
    }

    #[tokio::test]
    async fn settle_now_settles_with_the_current_value() {
        let b = backend(Limits::default());
        let mut p = permit(&b).await;
        p.transport_started();
        p.usage_known(420);
        assert_eq!(p.settlement(), 420);
        p.settle_now().await;
        assert_eq!(tokens(&b), (420, 420));
        assert_eq!(b.snapshot().global.in_flight, 0);
    }

    #[tokio::test]
    async fn derived_estimate_round_trip_leaves_the_precharge() {
        // est from tpm alone; a transient failure settles the same value: delta 0
        let est = effective_est_tokens(0, 6_000);
        let b = backend(Limits::default());
        let mut p = Permit::try_acquire(&b, "a", est).await.unwrap().unwrap();
        assert_eq!(p.est_tokens(), 100);
        p.transport_started();
        p.failed(FailureKind::Transient);
        p.settle_now().await;
        assert_eq!(tokens(&b), (100, 100));
    }

    #[tokio::test]
    async fn denial_is_reported_without_a_permit() {
        let b = backend(Limits {
            max_concurrency: 1,
            rpm: 0,
            tpm: 0,
        });
        let _held = permit(&b).await;
        let d = Permit::try_acquire(&b, "a", EST)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(
            d,
            Denial {
                gate: Gate::SourceConcurrency,
                retry_after_ms: None
            }
        );
        assert!(matches!(
            Permit::try_acquire(&b, "zzz", EST).await,
            Err(LimiterError::UnknownSource(_))
        ));
    }

    /// A backend around the memory one that counts settles, can fail them, and keeps the
    /// trait's default `settle_sync` (spawn on the runtime).
    struct Flaky {
        inner: MemoryLimiter,
        fail: bool,
        settles: AtomicU64,
        failures: AtomicU64,
        settled: Notify,
    }

    impl Flaky {
        fn new(fail: bool) -> Arc<Self> {
            Arc::new(Self {
                inner: MemoryLimiter::new(
                    LimiterConfig {
                        window_ms: 60_000,
                        lease_ttl_ms: 60_000,
                        global: Limits::default(),
                        sources: vec![(Arc::from("a"), Limits::default())],
                    },
                    ManualClock::new(0),
                ),
                fail,
                settles: AtomicU64::new(0),
                failures: AtomicU64::new(0),
                settled: Notify::new(),
            })
        }
    }

    impl LimiterBackend for Flaky {
        fn try_acquire<'a>(
            &'a self,
            source: &'a str,
            est_tokens: u64,
        ) -> BoxFuture<'a, Result<Admission, LimiterError>> {
            self.inner.try_acquire(source, est_tokens)
        }
        fn settle(
            &self,
            permit: PermitId,
            actual_tokens: u64,
        ) -> BoxFuture<'_, Result<(), LimiterError>> {
            Box::pin(async move {
                self.settles.fetch_add(1, Ordering::SeqCst);
                self.settled.notify_one();
                if self.fail {
                    Err(LimiterError::BackendDown("connection refused".into()))
                } else {
                    self.inner.settle(permit, actual_tokens).await
                }
            })
        }
        fn record_settle_failure(&self) {
            self.failures.fetch_add(1, Ordering::SeqCst);
        }
        fn snapshot(&self) -> LimiterSnapshot {
            let mut s = self.inner.snapshot();
            s.settle_failures = self.failures.load(Ordering::SeqCst);
            s
        }
        fn released(&self) -> Arc<Notify> {
            self.inner.released()
        }
    }

    #[tokio::test]
    async fn settlement_happens_exactly_once() {
        let flaky = Flaky::new(false);
        let b: Arc<dyn LimiterBackend> = flaky.clone();
        let p = permit(&b).await;
        p.settle_now().await; // consumed: no second settle from Drop
        tokio::task::yield_now().await;
        assert_eq!(flaky.settles.load(Ordering::SeqCst), 1);

        let mut p = permit(&b).await;
        p.transport_started();
        drop(p); // default settle_sync: spawned on this runtime
        flaky.settled.notified().await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(flaky.settles.load(Ordering::SeqCst), 2);
        let s = b.snapshot();
        assert_eq!(s.global.in_flight, 0);
        assert_eq!(s.global.tokens_in_window, EST);
    }

    #[tokio::test]
    async fn a_failed_settle_degrades_to_a_counted_warning() {
        let flaky = Flaky::new(true);
        let b: Arc<dyn LimiterBackend> = flaky.clone();
        permit(&b).await.settle_now().await; // no panic, no error
        assert_eq!(b.snapshot().settle_failures, 1);
        drop(permit(&b).await); // the spawned settle fails too
        flaky.settled.notified().await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(b.snapshot().settle_failures, 2);
        assert_eq!(flaky.settles.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_drop_outside_a_runtime_is_counted_not_a_panic() {
        let flaky = Flaky::new(false);
        let b: Arc<dyn LimiterBackend> = flaky.clone();
        let p = futures_util::FutureExt::now_or_never(permit(&b))
            .expect("the memory backend answers at once");
        drop(p);
        assert_eq!(b.snapshot().settle_failures, 1);
        assert_eq!(flaky.settles.load(Ordering::SeqCst), 0);
    }

    /// Try until granted, sleeping on the release notify between tries (re-checking every
    /// 5 s). The test's own wait: the gateway's wait policy is admission's.
    async fn acquire_waiting(b: &Arc<dyn LimiterBackend>, source: &str) -> Permit {
        let notify = b.released();
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            // Registered before the attempt, so a release in between is not missed.
            notified.as_mut().enable();
            if let Ok(p) = Permit::try_acquire(b, source, 0).await.unwrap() {
                return p;
            }
            let _ = tokio::time::timeout(Duration::from_secs(5), notified).await;
        }
    }

    /// 200 tasks contend for 5 slots (global 8, source 5), waiting on the release notify:
    /// the slots are never over-used and all return.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrency_holds_under_load() {
        let b: Arc<dyn LimiterBackend> = Arc::new(MemoryLimiter::new(
            LimiterConfig {
                window_ms: 60_000,
                lease_ttl_ms: 600_000,
                global: Limits {
                    max_concurrency: 8,
                    rpm: 0,
                    tpm: 0,
                },
                sources: vec![
                    (
                        Arc::from("a"),
                        Limits {
                            max_concurrency: 5,
                            rpm: 0,
                            tpm: 0,
                        },
                    ),
                    (Arc::from("b"), Limits::default()),
                ],
            },
            ManualClock::new(0),
        ));
        let in_a = Arc::new(AtomicU32::new(0));
        let max_a = Arc::new(AtomicU32::new(0));
        let in_all = Arc::new(AtomicU32::new(0));
        let max_all = Arc::new(AtomicU32::new(0));
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let (b, in_a, max_a, in_all, max_all) = (
                    b.clone(),
                    in_a.clone(),
                    max_a.clone(),
                    in_all.clone(),
                    max_all.clone(),
                );
                tokio::spawn(async move {
                    let source = if i % 4 == 0 { "b" } else { "a" };
                    let mut p = acquire_waiting(&b, source).await;
                    let all = in_all.fetch_add(1, Ordering::SeqCst) + 1;
                    max_all.fetch_max(all, Ordering::SeqCst);
                    if source == "a" {
                        let n = in_a.fetch_add(1, Ordering::SeqCst) + 1;
                        max_a.fetch_max(n, Ordering::SeqCst);
                    }
                    p.transport_started();
                    for _ in 0..3 {
                        tokio::task::yield_now().await;
                    }
                    p.usage_known(1);
                    // leave the counters before the slot is freed
                    if source == "a" {
                        in_a.fetch_sub(1, Ordering::SeqCst);
                    }
                    in_all.fetch_sub(1, Ordering::SeqCst);
                    if i % 2 == 0 {
                        p.settle_now().await;
                    } else {
                        drop(p);
                    }
                })
            })
            .collect();
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(60), t)
                .await
                .expect("no task hangs")
                .unwrap();
        }
        assert!(max_a.load(Ordering::SeqCst) <= 5, "source a over its limit");
        assert!(max_all.load(Ordering::SeqCst) <= 8, "scope over its limit");
        assert!(max_all.load(Ordering::SeqCst) >= 2, "there was contention");
        let s = b.snapshot();
        assert_eq!(s.global.in_flight, 0);
        assert!(s.sources.iter().all(|(_, u)| u.in_flight == 0));
        assert_eq!(s.global.requests_in_window, 200);
        assert_eq!(s.global.tokens_in_window, 200);
        assert_eq!(s.expired_leases, 0);
    }
}
