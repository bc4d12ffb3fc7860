//! The virtual-key runtime of one gateway process (docs/keys.md, docs/budgets.md):
//! [`Tenancy`] — the key registry every request authenticates against, the budget store and
//! the per-owner rate gates (`gates.rs`) — started once with the first configuration and
//! kept by reloads, so spend and gates never reset on a reload. The layers that use it are
//! `pipeline/tenancy/`.
//!
//! A budget's counter is seeded from the ledger the first time this process charges it
//! (docs/budgets.md#restarts): after a start, and when an admin adds a budget to a key or
//! team that already spent in the period. From then on every charge of that budget goes
//! through the store, so a later period starts from the store's zero without a ledger read.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;

use crate::config::{Settings, StateBackend};
use crate::governance::SharedClock;
use crate::governance::budget::{
    BudgetBackend, BudgetLine, MemoryBudgets, RedisBudgets, usd_to_micro, window,
};
use crate::governance::limiter::LimiterConfig;
use crate::governance::redis_conn::RedisHandle;
use crate::keys::{BudgetSpec, KeyRegistry, Owner, Principal, spent_since};

use super::error::StartError;
use super::gates;

/// The virtual-key runtime of one gateway process.
pub(crate) struct Tenancy {
    /// The keys and teams, as every request authenticates against them.
    pub registry: Arc<KeyRegistry>,
    budgets: Arc<dyn BudgetBackend>,
    pub(crate) gates: gates::Gates,
    clock: SharedClock,
    /// Every budget this process has charged, and whether its seed from the ledger is done.
    /// Read lock-free; a new budget's first charge adds its entry.
    seeds: ArcSwap<HashMap<Arc<str>, Arc<Seed>>>,
}

/// The ledger seed of one budget in this process.
#[derive(Debug, Default)]
struct Seed {
    done: AtomicBool,
    /// Held by the one call that reads the ledger; the budget's other first calls wait for
    /// it, so none is admitted against an unseeded counter.
    running: tokio::sync::Mutex<()>,
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
        Ok(Some(Arc::new(Self {
            registry,
            budgets,
            gates,
            clock: clock.clone(),
            seeds: ArcSwap::from_pointee(HashMap::new()),
        })))
    }

    /// The budgets a call of `p` is charged against — the key's, then its team's — each
    /// seeded from the ledger if this process has not charged it before (see the module
    /// documentation). The first call of a budget waits for its seed; later calls check one
    /// flag per budget.
    pub(crate) async fn budget_lines(&self, p: &Principal) -> Vec<BudgetLine> {
        let owned = owned_lines(p);
        for (owner, l) in &owned {
            let seed = self.seed_of(&l.bucket);
            if seed.done.load(Ordering::Acquire) {
                continue;
            }
            let _running = seed.running.lock().await;
            if seed.done.load(Ordering::Acquire) {
                continue;
            }
            self.seed_from_ledger(*owner, l).await;
            seed.done.store(true, Ordering::Release);
        }
        owned.into_iter().map(|(_, l)| l).collect()
    }

    fn seed_of(&self, bucket: &Arc<str>) -> Arc<Seed> {
        if let Some(s) = self.seeds.load().get(bucket) {
            return s.clone();
        }
        let mut seed = None;
        self.seeds.rcu(|m| {
            let mut m = HashMap::clone(m);
            seed = Some(m.entry(bucket.clone()).or_default().clone());
            m
        });
        seed.unwrap_or_default()
    }

    /// Seed `line`'s current period with the owner's spend in it from the ledger. A ledger
    /// that cannot be read, or a store that refuses the seed, is a warning: the budget then
    /// counts from what the store holds.
    async fn seed_from_ledger(&self, owner: Owner<'_>, line: &BudgetLine) {
        let start = window(line.period, self.clock.unix_ms()).start_ms;
        match spent_since(self.registry.store(), owner, start).await {
            Ok(usd) => {
                if let Err(e) = self.budgets.seed(line, start, usd_to_micro(usd)).await {
                    tracing::warn!(budget = %line.bucket, error = %e, "cannot seed a budget from the ledger");
                }
            }
            Err(e) => {
                tracing::warn!(budget = %line.bucket, error = %e, "cannot read spend from the ledger; the budget counts from the store's value");
            }
        }
    }

    /// The budget store.
    pub(crate) fn budgets(&self) -> &Arc<dyn BudgetBackend> {
        &self.budgets
    }
}

/// Every budget of `p` with its owner: the key's, then its team's.
fn owned_lines(p: &Principal) -> Vec<(Owner<'_>, BudgetLine)> {
    let key = &p.key;
    let mut lines: Vec<_> = key
        .budgets
        .iter()
        .map(|b| (Owner::Key(&key.id), line("key", &key.id, b)))
        .collect();
    if let Some(team) = &p.team {
        lines.extend(
            team.budgets
                .iter()
                .map(|b| (Owner::Team(&team.id), line("team", &team.id, b))),
        );
    }
    lines
}

fn line(kind: &str, id: &str, b: &BudgetSpec) -> BudgetLine {
    BudgetLine {
        bucket: Arc::from(format!("{kind}:{id}:{}", b.period.as_str())),
        period: b.period,
        limit_micro_usd: usd_to_micro(b.limit_usd),
        soft_micro_usd: b.soft_limit_usd.map(usd_to_micro),
    }
}
