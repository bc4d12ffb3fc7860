//! The state-backends section: where the governance state lives (`PGW_LIMITER_BACKEND`, `PGW_BREAKER_BACKEND`,
//! `PGW_REDIS_URL`, `PGW_REDIS_PREFIX`) and the limiter's window length
//! (`PGW_RATE_WINDOW_S`, 60 s; shorter only to test window behaviour without waiting).

use std::time::Duration;

use super::problems::Problems;
use super::vars::Vars;

/// `PGW_REDIS_PREFIX`: one short namespace, so the gateway's keys are told apart from any
/// other user's of the same Redis.
pub const DEFAULT_REDIS_PREFIX: &str = "pgw:";

/// The process keys this section parses.
pub(super) const KEYS: &[&str] = &[
    "PGW_REDIS_URL",
    "PGW_REDIS_PREFIX",
    "PGW_RATE_WINDOW_S",
    "PGW_LIMITER_BACKEND",
    "PGW_BREAKER_BACKEND",
];

/// A state store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateBackend {
    /// In process memory: one process's own state.
    #[default]
    Memory,
    /// Redis: shared by every gateway process that uses the same URL and prefix.
    Redis,
}

/// The governance state stores. `Debug` shows the Redis URL without its userinfo.
#[derive(Clone, PartialEq, Eq)]
pub struct StateBackends {
    pub limiter: StateBackend,
    pub breaker: StateBackend,
    /// `PGW_REDIS_URL`, required when any backend is `redis`.
    pub redis_url: Option<String>,
    /// `PGW_REDIS_PREFIX` (default `pgw:`): every key starts with it.
    pub redis_prefix: String,
    /// `PGW_RATE_WINDOW_S`: the RPM/TPM sliding window (default 60 s).
    pub rate_window: Option<Duration>,
}

impl std::fmt::Debug for StateBackends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateBackends")
            .field("limiter", &self.limiter)
            .field("breaker", &self.breaker)
            .field(
                "redis_url",
                &self
                    .redis_url
                    .as_deref()
                    .map(crate::transport::strip_userinfo),
            )
            .field("redis_prefix", &self.redis_prefix)
            .field("rate_window", &self.rate_window)
            .finish()
    }
}

/// Parse the keys (named by the whole key), reporting problems by key.
pub(super) fn parse(vars: &Vars, problems: &mut Problems) -> StateBackends {
    let backend = |key: &str, problems: &mut Problems| match vars.get(key) {
        None | Some("memory") => StateBackend::Memory,
        Some("redis") => StateBackend::Redis,
        Some(v) => {
            problems.add(key, format!("expected memory|redis, got `{v}`"));
            StateBackend::Memory
        }
    };
    let limiter = backend("PGW_LIMITER_BACKEND", problems);
    let breaker = backend("PGW_BREAKER_BACKEND", problems);
    let redis_url = vars.get("PGW_REDIS_URL").map(str::to_string);
    if let Some(url) = &redis_url
        && redis::Client::open(url.as_str()).is_err()
    {
        problems.add(
            "PGW_REDIS_URL",
            format!(
                "not a Redis URL: `{}`",
                crate::transport::strip_userinfo(url)
            ),
        );
    }
    let needs_redis = limiter == StateBackend::Redis || breaker == StateBackend::Redis;
    if needs_redis && redis_url.is_none() {
        let key = if limiter == StateBackend::Redis {
            "PGW_LIMITER_BACKEND"
        } else {
            "PGW_BREAKER_BACKEND"
        };
        problems.add(key, "`redis` needs PGW_REDIS_URL");
    }
    let rate_window = vars
        .get("PGW_RATE_WINDOW_S")
        .and_then(|v| match v.parse::<f64>() {
            Ok(x) if (0.01..=86_400.0).contains(&x) => Some(Duration::from_secs_f64(x)),
            _ => {
                problems.add(
                    "PGW_RATE_WINDOW_S",
                    format!("expected seconds in [0.01, 86400], got `{v}`"),
                );
                None
            }
        });
    StateBackends {
        limiter,
        breaker,
        redis_url,
        redis_prefix: vars
            .get("PGW_REDIS_PREFIX")
            .unwrap_or(DEFAULT_REDIS_PREFIX)
            .to_string(),
        rate_window,
    }
}
