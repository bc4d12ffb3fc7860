//! The circuit breaker (docs/breaker.md: the two channels, the retry hint): the algorithm's
//! types and the backend trait. One algorithm; backends differ only in where state lives
//! (`memory.rs` in the process, `redis.rs` shared by every process).
//!
//! States: closed → open (N consecutive failures, or failure rate ≥ `fail_rate` over two
//! 30 s buckets with at least `min_calls` samples, or a forced open for a dead source) →
//! half-open after the cooldown (exactly one probe on a TTL lease) → closed on the probe's
//! success, open again (longer) on its failure. 429s and invalid results are not failures.

mod memory;
mod redis;

use futures_util::future::BoxFuture;

pub use memory::MemoryBreaker;
pub use redis::RedisBreaker;

/// Breaker tuning for one scope (`{SCOPE}__BREAKER__*`).
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerConfig {
    /// Consecutive failures that open the breaker (`FAIL_THRESHOLD`, default 5); the
    /// effective value per source is `max(this, 2 × the source's MAX_CONCURRENCY)`.
    pub fail_threshold: u32,
    /// Base open time in ms (`COOLDOWN_S`, default 30 s).
    pub cooldown_ms: u64,
    /// Cap of the growing open time in ms (`MAX_COOLDOWN_S`, default max(300 s, cooldown)).
    pub max_cooldown_ms: u64,
    /// Failure rate (0..1] that opens the breaker (`FAIL_RATE`, default 0.6).
    pub fail_rate: f64,
    /// Fewest samples in the window before the rate channel may open (`MIN_CALLS`, default 10).
    pub min_calls: u32,
    /// Length of one of the two window buckets, in ms (30 s).
    pub bucket_ms: u64,
    /// Lease of a half-open probe in ms: a probe that never reports frees the slot after it.
    pub probe_ttl_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            fail_threshold: 5,
            cooldown_ms: 30_000,
            max_cooldown_ms: 300_000,
            fail_rate: 0.6,
            min_calls: 10,
            bucket_ms: 30_000,
            probe_ttl_ms: 130_000,
        }
    }
}

/// The state of one source's breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    /// Stable name for `/healthz` and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// A half-open probe's lease; report the outcome with it (or release it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeLease {
    /// The state generation that granted it: reports from older generations are fenced off.
    pub epoch: u64,
}

/// The gate's answer for one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// Closed: go ahead. `epoch` fences the later report.
    Allowed { epoch: u64 },
    /// Half-open: this attempt is the one probe.
    Probe(ProbeLease),
    /// Open (`retry_after_ms` = remaining cooldown) or half-open with a probe in flight
    /// (`retry_after_ms` = 0: no certain time, docs/breaker.md#retry-hint).
    Rejected { retry_after_ms: u64 },
}

/// What an attempt's outcome means to the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The source answered (also a request the upstream rejected as bad: not its fault).
    Success,
    /// Transient failure: counts in both channels.
    Failure,
    /// 429: back-pressure, not a fault; counts in neither channel. A probe is released
    /// without a verdict.
    RateLimited,
    /// A healthy service returned unusable content: recorded as success, not sampled.
    ResultInvalid,
    /// 401/403/insufficient quota: open at once.
    SourceDead,
}

/// A point-in-time view of one source's breaker.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BreakerSnapshot {
    pub state: BreakerState,
    /// Seconds until a retry is known to make sense (closed 0, open = remaining cooldown,
    /// half-open 0), in ms.
    pub retry_after_ms: u64,
    pub consecutive_failures: u32,
    /// Open-time exponent: opens so far without a stable recovery.
    pub streak: u32,
    /// Calls and failures in the current two-bucket window.
    pub window_calls: u32,
    pub window_failures: u32,
    /// Consecutive failures that open it (already `max(configured, 2 × concurrency)`).
    pub effective_threshold: u32,
}

/// The breaker's state store failed (Redis down, …): admission fails closed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BreakerError {
    #[error("breaker backend unavailable: {0}")]
    BackendDown(String),
    #[error("source `{0}` is not configured in this breaker")]
    UnknownSource(String),
}

/// Where breaker state lives. Async so that a shared (Redis) store fits; the memory backend
/// answers at once.
pub trait BreakerBackend: Send + Sync + 'static {
    /// May an attempt go to `source` now?
    fn try_enter<'a>(&'a self, source: &'a str) -> BoxFuture<'a, Result<Entry, BreakerError>>;
    /// Report an attempt's outcome; `probe` when the attempt was the half-open probe,
    /// `epoch` from its `Entry`.
    fn record<'a>(
        &'a self,
        source: &'a str,
        outcome: Outcome,
        epoch: u64,
        probe: bool,
    ) -> BoxFuture<'a, Result<(), BreakerError>>;
    /// Give a probe back without a verdict (cancelled, or a 429). Idempotent.
    fn release_probe<'a>(
        &'a self,
        source: &'a str,
        lease: ProbeLease,
    ) -> BoxFuture<'a, Result<(), BreakerError>>;
    /// The current view of `source` (for `/healthz`).
    fn snapshot(&self, source: &str) -> Option<BreakerSnapshot>;
}

/// Open time after `streak` escalations: `cooldown × 2^(streak−1)`, capped (streak 0 or 1 →
/// the base cooldown).
pub fn open_duration_ms(cfg: &BreakerConfig, streak: u32) -> u64 {
    let exp = streak.saturating_sub(1).min(32);
    cfg.cooldown_ms
        .saturating_mul(1u64 << exp)
        .min(cfg.max_cooldown_ms.max(cfg.cooldown_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_time_doubles_and_caps() {
        let cfg = BreakerConfig {
            cooldown_ms: 1000,
            max_cooldown_ms: 5000,
            ..BreakerConfig::default()
        };
        let d: Vec<u64> = (0..6).map(|s| open_duration_ms(&cfg, s)).collect();
        assert_eq!(d, vec![1000, 1000, 2000, 4000, 5000, 5000]);
    }
}
