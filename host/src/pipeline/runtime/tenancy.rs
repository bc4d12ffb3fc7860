//! The virtual-key runtime of one gateway process (docs/keys.md, docs/budgets.md):
//! [`Tenancy`] — the key registry every request authenticates against, the budget store and
//! the per-owner rate gates (`gates.rs`) — started once with the first configuration and
//! kept by reloads, so spend and gates never reset on a reload. The layers that use it are
//! `pipeline/tenancy/`.

use std::sync::Arc;

use crate::config::{Settings, StateBackend};
use crate::governance::SharedClock;
use crate::governance::budget::{
    BudgetBackend, BudgetLine, MemoryBudgets, RedisBudgets, usd_to_micro, window,
};
use crate::governance::limiter::LimiterConfig;
use crate::governance::redis_conn::RedisHandle;
use crate::keys::{KeyRegistry, Owner, Principal, spent_since};

use super::error::StartError;
use super::gates;

/// The virtual-key runtime of one gateway process.
pub(crate) struct Tenancy {
    /// The keys and teams, as every request authenticates against them.
    pub registry: Arc<KeyRegistry>,
    budgets: Arc<dyn BudgetBackend>,
    pub(crate) gates: gates::Gates,
}

impl std::fmt::Debug for Tenancy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenancy").finish_non_exhaustive()
    }
}

impl Tenancy {
    /// Start the virtual-key runtime when `PGW_VIRTUAL_KEYS` is on (`None` otherwise): open
    /// the key store, and put budgets and rate gates in the limiter's store
    /// (`PGW_LIMITER_BACKEND`: memory, or Redis shared by every replica).
    ///
    /// Errors: the key store cannot be opened or migrated.
    pub(crate) async fn start(
        settings: &Settings,
        clock: &SharedClock,
        injected_clock: bool,
    ) -> Result<Option<Arc<Self>>, StartError> {
        let p = &settings.process;
        if !p.keys.enabled {
            return Ok(None);
        }
        let registry = KeyRegistry::start(settings, clock.clone())
            .await
            .map_err(|e| StartError::Keys(e.to_string()))?;
        let backends = &p.backends;
        let redis = match (&backends.redis_url, backends.limiter) {
            (Some(url), StateBackend::Redis) => Some(Arc::new(
                RedisHandle::new(url, &backends.redis_prefix).map_err(StartError::Transport)?,
            )),
            _ => None,
        };
        let budgets: Arc<dyn BudgetBackend> = match &redis {
            Some(r) => Arc::new(RedisBudgets::new(r.clone())),
            None => Arc::new(MemoryBudgets::new(clock.clone())),
        };
        let window = backends
            .rate_window
            .map_or(LimiterConfig::MINUTE_MS, |w| w.as_millis() as u64);
        let gates = gates::Gates::new(
            backends.limiter,
            redis,
            clock.clone(),
            injected_clock,
            window,
        );
        let t = Self {
            registry,
            budgets,
            gates,
        };
        t.seed_from_ledger(clock.unix_ms()).await;
        Ok(Some(Arc::new(t)))
    }

    /// Rebuild every loaded key's and team's spend of its current periods from the ledger
    /// (docs/budgets.md#restarts): the sum of the owner's `cost` since each period's start,
    /// seeded into the store only where it holds nothing yet. A ledger that cannot be read
    /// is a warning: the budgets then count from zero.
    async fn seed_from_ledger(&self, now_ms: i64) {
        let (keys, teams) = self.registry.snapshot();
        let mut owners: Vec<(Owner<'_>, &str, &[crate::keys::BudgetSpec])> = Vec::new();
        for k in &keys {
            owners.push((Owner::Key(&k.id), "key", &k.budgets));
        }
        for t in &teams {
            owners.push((Owner::Team(&t.id), "team", &t.budgets));
        }
        for (owner, kind, budgets) in owners {
            let id = match owner {
                Owner::Key(id) | Owner::Team(id) => id,
            };
            for b in budgets {
                let start = window(b.period, now_ms).start_ms;
                match spent_since(self.registry.store(), owner, start).await {
                    Ok(usd) => {
                        let l = line(kind, id, b);
                        if let Err(e) = self.budgets.seed(&l, start, usd_to_micro(usd)).await {
                            tracing::warn!(budget = %l.bucket, error = %e, "cannot seed a budget from the ledger");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(owner = %id, error = %e, "cannot read spend from the ledger; the budget counts from zero");
                    }
                }
            }
        }
    }

    /// The budgets a call of `p` is charged against: the key's, then its team's.
    pub(crate) fn budget_lines(p: &Principal) -> Vec<BudgetLine> {
        let mut lines = Vec::new();
        let key = &p.key;
        for b in &key.budgets {
            lines.push(line("key", &key.id, b));
        }
        if let Some(team) = &p.team {
            for b in &team.budgets {
                lines.push(line("team", &team.id, b));
            }
        }
        lines
    }

    /// The budget store.
    pub(crate) fn budgets(&self) -> &Arc<dyn BudgetBackend> {
        &self.budgets
    }
}

fn line(kind: &str, id: &str, b: &crate::keys::BudgetSpec) -> BudgetLine {
    BudgetLine {
        bucket: Arc::from(format!("{kind}:{id}:{}", b.period.as_str())),
        period: b.period,
        limit_micro_usd: usd_to_micro(b.limit_usd),
        soft_micro_usd: b.soft_limit_usd.map(usd_to_micro),
    }
}
