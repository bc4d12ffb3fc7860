//! Spend budgets in USD (docs/budgets.md): reserve-then-settle, the limiter's TPM shape in
//! money. A call reserves the most it can cost against every budget it is charged to (a
//! virtual key's, its team's), atomically — all fit and all are charged, or none is — and
//! settles to its actual cost when it ends; the guard that settles exactly once, with the
//! limiter's cancellation rule, is [`Reservation`] (`reservation.rs`). One algorithm behind
//! [`BudgetBackend`], two stores: [`MemoryBudgets`] for one process (`memory.rs`) and
//! [`RedisBudgets`] shared by every replica, one Lua script per operation on the server's
//! clock (`redis.rs`). Calendar periods in UTC are `period.rs`.
//!
//! Units: money is integer micro-USD (1 USD = 1 000 000) in every store and every argument,
//! so concurrent additions never round; time is Unix milliseconds.

mod memory;
mod period;
mod redis;
mod reservation;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use futures_util::future::BoxFuture;

pub use memory::MemoryBudgets;
pub use period::{PeriodWindow, rfc3339, window};
pub use redis::RedisBudgets;
pub use reservation::Reservation;

/// How long a budget lasts before it resets: calendar periods in UTC (`period.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetPeriod {
    /// From 00:00 UTC to the next.
    Daily,
    /// From Monday 00:00 UTC to the next Monday.
    Weekly,
    /// From the 1st, 00:00 UTC, to the next month's.
    Monthly,
    /// Never resets.
    Total,
}

impl BudgetPeriod {
    /// The period containing `unix_ms`: its start and when it resets, Unix ms (UTC);
    /// `resets_at_ms` is `None` for `Total`, whose start is 0. Same as [`window`].
    pub fn window(self, unix_ms: i64) -> PeriodWindow {
        period::window(self, unix_ms)
    }

    /// The stable name (`daily`, `weekly`, `monthly`, `total`): the admin API's and the
    /// Redis script's.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetPeriod::Daily => "daily",
            BudgetPeriod::Weekly => "weekly",
            BudgetPeriod::Monthly => "monthly",
            BudgetPeriod::Total => "total",
        }
    }
}

/// One budget a call is charged against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetLine {
    /// The budget's identity, e.g. `key:key_abc:daily` (the store keys its periods by it).
    pub bucket: Arc<str>,
    /// How long one budget lasts.
    pub period: BudgetPeriod,
    /// The most the period may hold (spent plus reserved), micro-USD.
    pub limit_micro_usd: u64,
    /// Crossing this only warns, micro-USD.
    pub soft_micro_usd: Option<u64>,
}

/// What one granted reservation charged: each line's bucket and the start of the period it
/// was charged to (a settlement corrects that period, even after it ended), and the amount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// `(bucket, start of the period charged, Unix ms)` of each line, in the order given.
    pub charges: Vec<(Arc<str>, i64)>,
    /// The amount reserved on every line, micro-USD.
    pub amount_micro_usd: u64,
}

/// A soft limit a reservation crossed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoftWarning {
    /// The line's bucket.
    pub bucket: Arc<str>,
    /// The line's soft limit, micro-USD.
    pub soft_micro_usd: u64,
    /// The period's total (spent + reserved) with this reservation, micro-USD.
    pub total_micro_usd: u64,
}

/// Why a reservation did not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetDenial {
    /// The first line (in the order given) without room.
    pub bucket: Arc<str>,
    /// That line's period.
    pub period: BudgetPeriod,
    /// That line's limit, micro-USD.
    pub limit_micro_usd: u64,
    /// The period's total (spent + reserved) now, without this reservation.
    pub total_micro_usd: u64,
    /// When the period resets (`None` for a total budget), Unix ms.
    pub resets_at_ms: Option<i64>,
}

/// The answer of [`BudgetBackend::reserve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetAdmission {
    /// Every line had room: the amount is counted in each line's current period.
    Granted {
        /// What was charged where: wrap it in a [`Reservation`].
        held: Held,
        /// The lines whose total is now above their soft limit (every grant while it is).
        warnings: Vec<SoftWarning>,
    },
    /// A line had no room; nothing was changed anywhere.
    Denied(BudgetDenial),
}

/// A budget store that could not answer: the caller fails closed (503
/// `governance_backend_down`), never lets spend through unmetered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// The store is unreachable (500 ms bound) or answered garbage.
    #[error("budget backend down: {0}")]
    BackendDown(String),
}

/// Where budget state lives. Futures are boxed so the trait is object-safe.
pub trait BudgetBackend: Send + Sync + 'static {
    /// Atomically: if for every line the current period's total plus `amount` is at most its
    /// limit, add `amount` to every line's period and grant; otherwise deny naming the first
    /// line without room, changing nothing.
    fn reserve<'a>(
        &'a self,
        lines: &'a [BudgetLine],
        amount_micro_usd: u64,
    ) -> BoxFuture<'a, Result<BudgetAdmission, BudgetError>>;

    /// Replace `held`'s amount by `actual` in the periods it was charged to (a refund or an
    /// extra charge; a period whose entry has expired is left alone). Called once per
    /// reservation, by its guard.
    fn settle<'a>(
        &'a self,
        held: &'a Held,
        actual_micro_usd: u64,
    ) -> BoxFuture<'a, Result<(), BudgetError>>;

    /// Settle from a synchronous context (a [`Reservation`] dropped before it was sent). The
    /// default spawns [`settle`](Self::settle) on the current tokio runtime (the Redis
    /// store); without a runtime the correction is lost and logged, and the reservation stays
    /// counted. A store that can settle without awaiting (memory) overrides it to settle
    /// inline. Never fails; failures are logged (warn).
    fn settle_sync(self: Arc<Self>, held: Held, actual_micro_usd: u64) {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Err(e) = self.settle(&held, actual_micro_usd).await {
                        tracing::warn!(error = %e, actual_micro_usd, "budget settle failed; the reservation stays counted");
                    }
                });
            }
            Err(_) => {
                tracing::warn!(
                    actual_micro_usd,
                    "budget reservation dropped outside a tokio runtime; the reservation stays counted"
                );
            }
        }
    }

    /// The current period's total (spent + reserved) of each line, in order.
    fn totals<'a>(
        &'a self,
        lines: &'a [BudgetLine],
    ) -> BoxFuture<'a, Result<Vec<u64>, BudgetError>>;

    /// Set `line`'s total for the period starting at `period_start_ms` when the store has
    /// none (rebuilding spend from the ledger after a restart); never lowers a value. A
    /// value already there that is lower than the seed is raised to it (docs/budgets.md#restarts:
    /// a reservation made before the seed must not hide the ledger's spend). A period whose
    /// counter would already have expired (a day after its end) is not seeded.
    fn seed<'a>(
        &'a self,
        line: &'a BudgetLine,
        period_start_ms: i64,
        total_micro_usd: u64,
    ) -> BoxFuture<'a, Result<(), BudgetError>>;
}

/// USD as micro-USD, rounded up (a reservation or a cost is never under-counted); negative
/// or NaN is 0, and huge values saturate.
pub fn usd_to_micro(usd: f64) -> u64 {
    if usd.is_nan() || usd <= 0.0 {
        return 0;
    }
    // `as` saturates at u64::MAX. Round away float noise below a millionth of a micro-USD
    // first, so 0.1 + 0.2 USD is 300 000, not 300 001.
    let micro = usd * 1_000_000.0;
    let rounded = micro.round();
    if (micro - rounded).abs() < 1e-6 {
        rounded as u64
    } else {
        micro.ceil() as u64
    }
}

/// The soft warnings of a granted reservation, from each line's new total.
fn warnings(lines: &[BudgetLine], totals_after: &[u64]) -> Vec<SoftWarning> {
    lines
        .iter()
        .zip(totals_after)
        .filter_map(|(l, &t)| {
            l.soft_micro_usd
                .filter(|&soft| t > soft)
                .map(|soft| SoftWarning {
                    bucket: l.bucket.clone(),
                    soft_micro_usd: soft,
                    total_micro_usd: t,
                })
        })
        .collect()
}
