//! The breaker and limiter configuration of one scope, derived from its settings in one
//! place ([`BreakerConfig::for_scope`], [`LimiterConfig::for_scope`]), with the constants the
//! derivation adds and why (docs/breaker.md#states, docs/limiter.md#six-gates).

use std::time::Duration;

use crate::config::{DEFAULT_TIMEOUT, ScopeSettings};

use super::breaker::BreakerConfig;
use super::limiter::{LimiterConfig, Limits};

/// Length of one of the breaker's two failure-rate buckets, in ms. The rate channel reads the
/// last two buckets, so it sees the last 30–60 s: long enough for `MIN_CALLS` samples at a
/// modest call rate, short enough that failures from minutes ago do not open it.
pub const RATE_BUCKET_MS: u64 = 30_000;

/// How much longer than the longest attempt a limiter permit's lease lasts, in ms. The lease
/// frees the slot of a process that died holding it; it must never free one whose request
/// is still running, so it outlives `TIMEOUT__TOTAL_S` by the time a settle takes to arrive
/// (a Redis round trip, a busy runtime).
pub const LEASE_MARGIN_MS: u64 = 5_000;

/// The longest attempt any source of `scope` may take (its `TIMEOUT__TOTAL_S`), in ms. A
/// scope without sources (rejected by validation; kept total here) uses the default timeout.
pub fn longest_attempt_ms(scope: &ScopeSettings) -> u64 {
    scope
        .sources
        .iter()
        .map(|s| s.timeouts.total)
        .max()
        .unwrap_or(DEFAULT_TIMEOUT)
        .as_millis() as u64
}

impl BreakerConfig {
    /// The breaker of `scope`: its `{SCOPE}__BREAKER__*` tuning, the rate buckets of
    /// [`RATE_BUCKET_MS`], and a probe lease of at least twice the longest attempt (a probe
    /// may be a slow success) and at least the cooldown (a lost probe never frees the slot
    /// sooner than the source was meant to rest).
    pub fn for_scope(scope: &ScopeSettings) -> Self {
        let g = &scope.governance;
        let cooldown_ms = g.cooldown.as_millis() as u64;
        Self {
            fail_threshold: g.fail_threshold,
            cooldown_ms,
            max_cooldown_ms: g.max_cooldown.as_millis() as u64,
            fail_rate: g.fail_rate,
            min_calls: g.min_calls,
            bucket_ms: RATE_BUCKET_MS,
            probe_ttl_ms: (2 * longest_attempt_ms(scope)).max(cooldown_ms),
        }
    }
}

impl LimiterConfig {
    /// The limiter of `scope`: its `{SCOPE}__GLOBAL__*` gates, each source's own gates, the
    /// RPM/TPM window (`window`: the state store's override, e.g. a shorter one for tests of
    /// a shared Redis, else the scope's `rate_window`), and a lease of the longest attempt plus
    /// [`LEASE_MARGIN_MS`].
    pub fn for_scope(scope: &ScopeSettings, window: Option<Duration>) -> Self {
        let g = &scope.governance;
        Self {
            window_ms: window.unwrap_or(g.rate_window).as_millis() as u64,
            lease_ttl_ms: longest_attempt_ms(scope) + LEASE_MARGIN_MS,
            global: Limits {
                max_concurrency: g.global_max_concurrency,
                rpm: g.global_rpm,
                tpm: g.global_tpm,
            },
            sources: scope
                .sources
                .iter()
                .map(|s| (s.name.clone(), Limits::from_source(s)))
                .collect(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A scope `LLM` with one source per entry, each with that `TIMEOUT_S`.
    fn scope(totals_s: &[u64]) -> ScopeSettings {
        let mut vars: Vec<(String, String)> = Vec::new();
        for (i, t) in totals_s.iter().enumerate() {
            let key = |k: &str| format!("LLM__OPENAI__{}__{k}", i + 1);
            vars.push((key("BASE_URL"), "http://a".into()));
            vars.push((key("MODEL"), "m".into()));
            vars.push((key("TIMEOUT_S"), t.to_string()));
            vars.push((key("TTFT_TIMEOUT_S"), "2".into()));
            vars.push((key("INTER_TOKEN_TIMEOUT_S"), "1".into()));
        }
        crate::config::settings_from_vars(vars)
            .unwrap()
            .scopes
            .remove(0)
    }

    #[test]
    fn the_probe_lease_is_twice_the_longest_attempt_but_at_least_the_cooldown() {
        let b = BreakerConfig::for_scope(&scope(&[10, 40]));
        assert_eq!((b.probe_ttl_ms, b.bucket_ms), (80_000, 30_000));
        let b = BreakerConfig::for_scope(&scope(&[5]));
        assert_eq!(b.probe_ttl_ms, 30_000, "the default cooldown is 30 s");
    }

    #[test]
    fn the_permit_lease_outlives_the_longest_attempt_by_the_margin() {
        let l = LimiterConfig::for_scope(&scope(&[10, 40]), None);
        assert_eq!((l.lease_ttl_ms, l.window_ms), (45_000, 60_000));
        let mut empty = scope(&[10]);
        empty.sources.clear();
        let l = LimiterConfig::for_scope(&empty, Some(Duration::from_millis(500)));
        assert_eq!((l.lease_ttl_ms, l.window_ms), (125_000, 500));
    }
}
