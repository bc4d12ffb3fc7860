//! The rate limiter (docs/limiter.md#six-gates): one admission algorithm over six gates —
//! global and per-source concurrency, RPM and TPM — behind the [`LimiterBackend`] trait, so
//! the in-process [`MemoryLimiter`] and the Redis backend are interchangeable for callers.
//! This file owns the shared vocabulary (limits, gates, admissions, errors, snapshots), the
//! backend trait and the effective TPM pre-charge rule (docs/limiter.md#tpm-pre-charge). The
//! caller's guard is [`Permit`] (`permit.rs`), the in-process backend is `memory.rs`, and the
//! AIMD back-off on a source's concurrency after 429s is [`AdaptivePacer`] (`pacer.rs`).
//!
//! Units: every time is in milliseconds of the injected [`Clock`](super::Clock), every
//! token count is in tokens. A limit of 0 switches that gate off.

mod memory;
mod pacer;
mod permit;
mod redis;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::Notify;

pub use memory::MemoryLimiter;
pub use pacer::AdaptivePacer;
pub use permit::{Denial, FailureKind, Permit};
pub use redis::RedisLimiter;

/// The limits of one gate group (the global group of a scope, or one source).
/// A value of 0 switches that gate off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// Most permits held at the same time (requests in flight).
    pub max_concurrency: u32,
    /// Most requests admitted in any window of `window_ms` (normally one minute).
    pub rpm: u32,
    /// Most tokens (pre-charges, replaced by real usage when settled) counted in any window
    /// of `window_ms`.
    pub tpm: u64,
}

impl Limits {
    /// The source's own limits from its settings (`MAX_CONCURRENCY`, `RPM`, `TPM`).
    pub fn from_source(source: &crate::config::SourceSettings) -> Self {
        Self {
            max_concurrency: source.max_concurrency,
            rpm: source.rpm,
            tpm: source.tpm,
        }
    }

    /// True when every gate is off.
    pub fn is_unlimited(&self) -> bool {
        self.max_concurrency == 0 && self.rpm == 0 && self.tpm == 0
    }
}

/// The configuration of one scope's limiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimiterConfig {
    /// Length of the sliding RPM/TPM window in ms: 60 000 in production (per *minute*);
    /// tests shrink it. A 0 is treated as 1.
    pub window_ms: u64,
    /// Lease of a permit in ms: a permit not settled within it is released (its concurrency
    /// slot freed, its TPM pre-charge kept) and its later settle is ignored. Must exceed the
    /// longest attempt (`timeout_s`), else a slot frees while the request still runs. A 0 is
    /// treated as 1.
    pub lease_ttl_ms: u64,
    /// The scope-wide gates, shared by every source of the scope.
    pub global: Limits,
    /// The per-source gates, by source name (unique; the first entry of a name wins).
    pub sources: Vec<(Arc<str>, Limits)>,
}

impl LimiterConfig {
    /// The production window: one minute.
    pub const MINUTE_MS: u64 = 60_000;
}

/// The TPM pre-charge of one attempt, in tokens (docs/limiter.md#tpm-pre-charge):
/// an explicit `est_tokens > 0` is used as is; otherwise, when the source's `tpm > 0`, one
/// second's share of the quota, `max(1, tpm / 60)`; otherwise 0 (no TPM gate, no pre-charge).
///
/// Admission and every settlement decision must use this same value, or the pre-charge is
/// refunded wholesale and the TPM gate lets everything in.
pub fn effective_est_tokens(est_tokens: u64, tpm: u64) -> u64 {
    if est_tokens > 0 {
        est_tokens
    } else if tpm > 0 {
        (tpm / 60).max(1)
    } else {
        0
    }
}

/// One of the six gates an admission passes, in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gate {
    /// Permits held across the whole scope.
    GlobalConcurrency,
    /// Permits held on the chosen source.
    SourceConcurrency,
    /// Requests in the window across the whole scope.
    GlobalRpm,
    /// Requests in the window on the chosen source.
    SourceRpm,
    /// Tokens in the window across the whole scope.
    GlobalTpm,
    /// Tokens in the window on the chosen source.
    SourceTpm,
}

impl Gate {
    /// Stable snake_case name for logs, metrics and error reasons.
    pub fn as_str(&self) -> &'static str {
        match self {
            Gate::GlobalConcurrency => "global_concurrency",
            Gate::SourceConcurrency => "source_concurrency",
            Gate::GlobalRpm => "global_rpm",
            Gate::SourceRpm => "source_rpm",
            Gate::GlobalTpm => "global_tpm",
            Gate::SourceTpm => "source_tpm",
        }
    }

    /// True for the two concurrency gates (they open on a release, not after a time).
    pub fn is_concurrency(&self) -> bool {
        matches!(self, Gate::GlobalConcurrency | Gate::SourceConcurrency)
    }
}

impl std::fmt::Display for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The identity of one granted permit, unique within its backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId(pub u64);

impl std::fmt::Display for PermitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The answer of [`LimiterBackend::try_acquire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// All six gates passed: a permit is held (lease started, request counted, `est_tokens`
    /// pre-charged). Wrap it in a [`Permit`] so it is settled exactly once.
    Granted(PermitId),
    /// A gate is full; nothing was changed.
    Denied {
        /// The first full gate, in [`Gate`] order.
        gate: Gate,
        /// For RPM/TPM: ms until enough old entries leave the window for this request to
        /// fit (≥ 1). `None` for concurrency: wait for a release.
        retry_after_ms: Option<u64>,
    },
}

/// A limiter backend failure. On admission it fails the attempt closed (the caller answers
/// `governance_backend_down`, never lets traffic through unmetered); on settlement the
/// [`Permit`] degrades it to a warning and a counted failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimiterError {
    /// The state store is unreachable or answered garbage.
    #[error("limiter backend down: {0}")]
    BackendDown(String),
    /// `try_acquire` named a source the limiter was not configured with.
    #[error("limiter has no source named {0:?}")]
    UnknownSource(String),
}

/// Usage of one gate group at the moment of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateUsage {
    /// Permits held now.
    pub in_flight: u32,
    /// Requests admitted in the current window (the last `window_ms`).
    pub requests_in_window: u64,
    /// Tokens counted in the current window: pre-charges of open permits and of expired
    /// leases, settled values of settled permits.
    pub tokens_in_window: u64,
    /// The configured limits (0 = gate off).
    pub limits: Limits,
}

/// A point-in-time view of one scope's limiter, for `/healthz` and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimiterSnapshot {
    /// The window length in ms.
    pub window_ms: u64,
    /// The scope-wide gates.
    pub global: GateUsage,
    /// Each configured source, in configuration order.
    pub sources: Vec<(Arc<str>, GateUsage)>,
    /// Leases that expired unsettled since start (each one a permit whose holder never
    /// settled it in time: a stuck attempt or a lost settle).
    pub expired_leases: u64,
    /// Settle/release calls that failed since start (degraded to a warning,
    /// docs/errors.md#degradation).
    pub settle_failures: u64,
}

/// Where a scope's limiter state lives. One algorithm, several stores: the in-process
/// [`MemoryLimiter`] and (later) Redis. Futures are boxed so the trait is object-safe
/// (`Arc<dyn LimiterBackend>`) and may do I/O.
pub trait LimiterBackend: Send + Sync + 'static {
    /// Admit one attempt on `source` with a pre-charge of `est_tokens` tokens (use
    /// [`effective_est_tokens`]). Checks all six gates atomically: either every gate passes
    /// and the permit is recorded (lease expiring `lease_ttl_ms` from now, one request counted
    /// in the global and source RPM windows, `est_tokens` charged in both TPM windows), or
    /// the first full gate is reported and nothing changes.
    ///
    /// `Err` means the backend could not decide (fail closed) or the source is unknown.
    fn try_acquire<'a>(
        &'a self,
        source: &'a str,
        est_tokens: u64,
    ) -> BoxFuture<'a, Result<Admission, LimiterError>>;

    /// Settle a permit: replace its pre-charge by `actual_tokens` in both TPM windows
    /// (refund or extra charge, if the charge is still inside the window) and free its
    /// concurrency slots. Idempotent: settling an unknown, already settled or expired
    /// permit does nothing and returns `Ok`.
    fn settle(
        &self,
        permit: PermitId,
        actual_tokens: u64,
    ) -> BoxFuture<'_, Result<(), LimiterError>>;

    /// Settle from a synchronous context (a [`Permit`] dropped without `settle_now`).
    /// The default spawns [`settle`](Self::settle) on the current tokio runtime, if any;
    /// without a runtime it only logs and counts a failure and the lease expiry reclaims the
    /// slot. A backend that can settle without awaiting (memory) overrides it to settle
    /// inline. Never fails; failures are logged and counted.
    fn settle_sync(self: Arc<Self>, permit: PermitId, actual_tokens: u64) {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Err(e) = self.settle(permit, actual_tokens).await {
                        self.record_settle_failure();
                        tracing::warn!(%permit, error = %e, "limiter settle failed; the lease expiry will free the slot");
                    }
                });
            }
            Err(_) => {
                self.record_settle_failure();
                tracing::warn!(%permit, "limiter permit dropped outside a tokio runtime; the lease expiry will free the slot");
            }
        }
    }

    /// Count one failed settle/release (shown as `settle_failures` in the snapshot).
    fn record_settle_failure(&self);

    /// The current usage of every gate, synchronously (a networked backend answers from its
    /// last known state).
    fn snapshot(&self) -> LimiterSnapshot;

    /// Notified (`notify_waiters`) whenever permits are settled or leases expire, so a
    /// waiting caller wakes on a release instead of polling. Register interest
    /// (`Notified::enable`) *before* the `try_acquire` whose denial you then wait on.
    fn released(&self) -> Arc<Notify>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_estimate_explicit_wins() {
        assert_eq!(effective_est_tokens(4000, 6000), 4000);
        assert_eq!(effective_est_tokens(7, 0), 7);
    }

    #[test]
    fn effective_estimate_derived_from_tpm() {
        assert_eq!(effective_est_tokens(0, 6000), 100);
        assert_eq!(effective_est_tokens(0, 600_000), 10_000);
        // floor of 1: a tiny quota still pre-charges something
        assert_eq!(effective_est_tokens(0, 30), 1);
        assert_eq!(effective_est_tokens(0, 59), 1);
        assert_eq!(effective_est_tokens(0, 61), 1);
        assert_eq!(effective_est_tokens(0, 120), 2);
    }

    #[test]
    fn effective_estimate_zero_when_gate_off() {
        assert_eq!(effective_est_tokens(0, 0), 0);
    }

    #[test]
    fn gate_names_are_stable() {
        let all = [
            (Gate::GlobalConcurrency, "global_concurrency"),
            (Gate::SourceConcurrency, "source_concurrency"),
            (Gate::GlobalRpm, "global_rpm"),
            (Gate::SourceRpm, "source_rpm"),
            (Gate::GlobalTpm, "global_tpm"),
            (Gate::SourceTpm, "source_tpm"),
        ];
        for (g, s) in all {
            assert_eq!(g.as_str(), s);
            assert_eq!(g.to_string(), s);
        }
        assert!(Gate::GlobalConcurrency.is_concurrency());
        assert!(!Gate::SourceTpm.is_concurrency());
    }
}
