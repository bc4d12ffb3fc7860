//! The per-key and per-team rate gates (docs/keys.md#limits): a virtual key's or its team's
//! `rpm`, `tpm` and `max_concurrency`, enforced by the same limiter as a scope's gates (one
//! algorithm, `governance/limiter/`), one limiter per owner in the configured store — memory
//! for one process, Redis shared by every replica. A gate holds for the whole call (a client
//! request), not per attempt: the key's RPM counts the requests its client sends, and a
//! retry or a failover inside the gateway is not a new request.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::config::StateBackend;
use crate::error::{GatewayError, UnavailableReason};
use crate::governance::SharedClock;
use crate::governance::limiter::{
    Gate, LimiterBackend, LimiterConfig, Limits, MemoryLimiter, Permit, RedisLimiter,
};
use crate::governance::redis_conn::RedisHandle;

/// The one gate group of an owner's limiter (its limits are the limiter's global group).
const GROUP: &str = "call";

/// How long a call may hold a key's concurrency slot before the lease frees it: longer than
/// any call should run (a slot freed early lets one more call in; it never blocks one).
const CALL_LEASE_MS: u64 = 15 * 60 * 1000;

/// A key's or a team's limits as the limiter's.
pub(crate) fn limits(l: &crate::keys::KeyLimits) -> Limits {
    Limits {
        max_concurrency: l.max_concurrency.unwrap_or(0),
        rpm: l.rpm.unwrap_or(0),
        tpm: l.tpm.unwrap_or(0),
    }
}

/// One owner's limiter and the limits it was built with.
struct OwnerGate {
    limits: Limits,
    limiter: Arc<dyn LimiterBackend>,
}

/// Every owner's limiter, created on the owner's first call and replaced when its limits
/// change (an admin update). Reads are lock-free (an `ArcSwap` of the map).
pub(crate) struct Gates {
    backend: StateBackend,
    redis: Option<Arc<RedisHandle>>,
    clock: SharedClock,
    /// A test injected the clock: Redis scripts use it instead of the server's `TIME`.
    injected_clock: bool,
    window_ms: u64,
    owners: ArcSwap<HashMap<Arc<str>, Arc<OwnerGate>>>,
}

impl Gates {
    pub(crate) fn new(
        backend: StateBackend,
        redis: Option<Arc<RedisHandle>>,
        clock: SharedClock,
        injected_clock: bool,
        window_ms: u64,
    ) -> Self {
        Self {
            backend,
            redis,
            clock,
            injected_clock,
            window_ms,
            owners: ArcSwap::from_pointee(HashMap::new()),
        }
    }

    fn limiter(&self, owner: &str, limits: Limits) -> Result<Arc<dyn LimiterBackend>, String> {
        if let Some(g) = self.owners.load().get(owner)
            && g.limits == limits
        {
            return Ok(g.limiter.clone());
        }
        let config = LimiterConfig {
            window_ms: self.window_ms,
            lease_ttl_ms: CALL_LEASE_MS,
            global: limits,
            sources: vec![(Arc::from(GROUP), Limits::default())],
        };
        let limiter: Arc<dyn LimiterBackend> = match (&self.redis, self.backend) {
            (Some(r), StateBackend::Redis) => RedisLimiter::new(
                r.clone(),
                owner,
                config,
                self.injected_clock.then(|| self.clock.clone()),
            )
            .map_err(|e| e.to_string())?,
            _ => Arc::new(MemoryLimiter::new(config, self.clock.clone())),
        };
        let gate = Arc::new(OwnerGate {
            limits,
            limiter: limiter.clone(),
        });
        let key: Arc<str> = Arc::from(owner);
        // A concurrent first call of the same owner may race: the last insert wins and the
        // loser's limiter serves only its own call (memory) or shares the state (Redis).
        self.owners.rcu(|m| {
            let mut m = HashMap::clone(m);
            m.insert(key.clone(), gate.clone());
            m
        });
        Ok(limiter)
    }

    /// Admit one call of `owner` (`key <id>` / `team <id>`) with a TPM pre-charge of
    /// `est_tokens`. `Ok(None)` when the owner has no limits.
    ///
    /// Errors: 429 `key_rate_limited` naming the gate, with the window's `Retry-After`; a
    /// store that cannot answer fails closed (503 `governance_backend_down`).
    pub(crate) async fn admit(
        &self,
        owner: &str,
        limits: Limits,
        est_tokens: u64,
        scope: &str,
    ) -> Result<Option<Permit>, GatewayError> {
        if limits.is_unlimited() {
            return Ok(None);
        }
        let est = if limits.tpm > 0 { est_tokens } else { 0 };
        let down = |message: String| GatewayError::ScopeUnavailable {
            scope: scope.to_string(),
            reason: UnavailableReason::GovernanceBackendDown,
            retry_after_s: 5.0,
            per_source_reasons: Default::default(),
            message: format!("the rate limits of {owner} cannot be checked: {message}"),
        };
        let limiter = self.limiter(owner, limits).map_err(down)?;
        match Permit::try_acquire(&limiter, GROUP, est).await {
            Ok(Ok(mut permit)) => {
                // The call is about to go on: from here a cancelled call keeps its TPM
                // pre-charge (S3), as an attempt in flight does.
                permit.transport_started();
                Ok(Some(permit))
            }
            Ok(Err(denial)) => Err(GatewayError::KeyRateLimited {
                owner: owner.to_string(),
                gate: match denial.gate {
                    Gate::GlobalConcurrency | Gate::SourceConcurrency => "max_concurrency",
                    Gate::GlobalRpm | Gate::SourceRpm => "rpm",
                    Gate::GlobalTpm | Gate::SourceTpm => "tpm",
                },
                retry_after_s: denial
                    .retry_after_ms
                    .map_or(1.0, |ms| (ms as f64 / 1000.0).max(0.001)),
            }),
            Err(e) => Err(down(e.to_string())),
        }
    }
}
