//! The in-process budget store (docs/budgets.md#stores): one atomic counter of micro-USD per
//! (bucket, period start), in a read-mostly `RwLock<HashMap>` (a write lock only when a
//! period's first touch adds its entry), on the injected clock's wall time. A reservation's
//! check-and-add across its lines runs under one small mutex (see [`MemoryBudgets::admit`]);
//! settlements are lone atomic additions. Entries are dropped a day after their period
//! ends ([`GRACE_MS`]), swept at most once a minute of the clock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use futures_util::future::BoxFuture;

use crate::governance::SharedClock;

use super::{
    BudgetAdmission, BudgetBackend, BudgetDenial, BudgetError, BudgetLine, Held, warnings, window,
};

/// How long after its period ends a counter is kept, ms: a settlement that arrives after
/// the period rolled over still corrects it.
const GRACE_MS: i64 = 86_400_000;
/// Least time between two sweeps of expired entries, ms of the clock.
const SWEEP_EVERY_MS: i64 = 60_000;

/// One period's counter.
#[derive(Debug)]
struct Entry {
    /// Spent + reserved, micro-USD.
    total: AtomicU64,
    /// When the entry may be dropped: the period's end + [`GRACE_MS`], Unix ms (`i64::MAX`
    /// for a total budget).
    expires_ms: i64,
}

type Map = HashMap<(Arc<str>, i64), Arc<Entry>>;

/// Budgets kept in this process (`PGW_LIMITER_BACKEND=memory`), on the injected clock.
pub struct MemoryBudgets {
    clock: SharedClock,
    entries: RwLock<Map>,
    /// Serialises the check-and-add of a reservation across its lines; see [`Self::admit`].
    admit: Mutex<()>,
    /// The clock's Unix ms from which the next sweep may run.
    next_sweep_ms: AtomicI64,
}

impl std::fmt::Debug for MemoryBudgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBudgets")
            .field("entries", &self.entry_count())
            .finish_non_exhaustive()
    }
}

/// When the counter of the period of `period` starting at `start_ms` may be dropped.
fn expires_ms(period: super::BudgetPeriod, start_ms: i64) -> i64 {
    window(period, start_ms)
        .resets_at_ms
        .map_or(i64::MAX, |r| r.saturating_add(GRACE_MS))
}

impl MemoryBudgets {
    /// An empty store whose periods follow `clock`'s wall time (`unix_ms`).
    pub fn new(clock: SharedClock) -> Self {
        Self {
            clock,
            entries: RwLock::new(HashMap::new()),
            admit: Mutex::new(()),
            next_sweep_ms: AtomicI64::new(i64::MIN),
        }
    }

    /// How many (bucket, period) counters are held (tests, `Debug`).
    pub(crate) fn entry_count(&self) -> usize {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn existing(&self, bucket: &Arc<str>, start: i64) -> Option<Arc<Entry>> {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(bucket.clone(), start))
            .cloned()
    }

    /// The counter of `bucket`'s period starting at `start`, created at `initial` if missing
    /// (then `created` is true).
    fn entry(
        &self,
        bucket: &Arc<str>,
        start: i64,
        expires: i64,
        initial: u64,
    ) -> (Arc<Entry>, bool) {
        if let Some(e) = self.existing(bucket, start) {
            return (e, false);
        }
        let mut map = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        let mut created = false;
        let e = map
            .entry((bucket.clone(), start))
            .or_insert_with(|| {
                created = true;
                Arc::new(Entry {
                    total: AtomicU64::new(initial),
                    expires_ms: expires,
                })
            })
            .clone();
        (e, created)
    }

    /// Drop the counters whose period ended more than [`GRACE_MS`] ago, at most once per
    /// [`SWEEP_EVERY_MS`] of the clock (one call wins the race; the rest skip).
    fn sweep(&self, now: i64) {
        let next = self.next_sweep_ms.load(Ordering::Relaxed);
        if now < next
            || self
                .next_sweep_ms
                .compare_exchange(
                    next,
                    now.saturating_add(SWEEP_EVERY_MS),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        self.entries
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, e| e.expires_ms > now);
    }

    /// The check-and-add of one reservation: every counter has room for `amount` → add it to
    /// all; otherwise report the first without room and change nothing.
    ///
    /// Why a mutex: per-counter atomics alone cannot make a check across several lines and
    /// the adds that follow all-or-nothing. Adding first and undoing on a full line would let
    /// a concurrent reservation see (and be refused for, or report) an amount that was never
    /// granted. The lock is held for a load and an add per line — nanoseconds, no await, no
    /// allocation, no other lock taken — and settlements (lone atomic adds) never take it:
    /// a settlement racing a check can only lower a total (the check was conservative) or
    /// add an extra charge (allowed by the bound, docs/budgets.md#reserve-then-settle).
    fn admit(
        &self,
        lines: &[BudgetLine],
        counters: &[Arc<Entry>],
        amount: u64,
    ) -> Result<Vec<u64>, usize> {
        let _guard = self.admit.lock().unwrap_or_else(PoisonError::into_inner);
        for (i, (l, e)) in lines.iter().zip(counters).enumerate() {
            if e.total.load(Ordering::Acquire).saturating_add(amount) > l.limit_micro_usd {
                return Err(i);
            }
        }
        Ok(counters.iter().map(|e| add(&e.total, amount)).collect())
    }

    fn reserve_now(&self, lines: &[BudgetLine], amount: u64) -> BudgetAdmission {
        let now = self.clock.unix_ms();
        self.sweep(now);
        let windows: Vec<_> = lines.iter().map(|l| window(l.period, now)).collect();
        let counters: Vec<Arc<Entry>> = lines
            .iter()
            .zip(&windows)
            .map(|(l, w)| {
                let expires = w
                    .resets_at_ms
                    .map_or(i64::MAX, |r| r.saturating_add(GRACE_MS));
                self.entry(&l.bucket, w.start_ms, expires, 0).0
            })
            .collect();
        match self.admit(lines, &counters, amount) {
            Ok(totals) => BudgetAdmission::Granted {
                held: Held {
                    charges: lines
                        .iter()
                        .zip(&windows)
                        .map(|(l, w)| (l.bucket.clone(), w.start_ms))
                        .collect(),
                    amount_micro_usd: amount,
                },
                warnings: warnings(lines, &totals),
            },
            Err(i) => {
                let (l, w, e) = (&lines[i], windows[i], &counters[i]);
                BudgetAdmission::Denied(BudgetDenial {
                    bucket: l.bucket.clone(),
                    period: l.period,
                    limit_micro_usd: l.limit_micro_usd,
                    total_micro_usd: e.total.load(Ordering::Acquire),
                    resets_at_ms: w.resets_at_ms,
                })
            }
        }
    }

    /// Settle without awaiting: replace the held amount by `actual` in each charged period
    /// that still has a counter (never below 0).
    fn settle_inline(&self, held: &Held, actual: u64) {
        if actual == held.amount_micro_usd {
            return;
        }
        for (bucket, start) in &held.charges {
            let Some(e) = self.existing(bucket, *start) else {
                continue; // the period's counter expired: nothing to correct
            };
            if actual > held.amount_micro_usd {
                add(&e.total, actual - held.amount_micro_usd);
            } else {
                let refund = held.amount_micro_usd - actual;
                // Never below zero (a seed may have replaced a smaller total).
                let _ = e
                    .total
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                        Some(t.saturating_sub(refund))
                    });
            }
        }
    }
}

/// Add `amount` to `total`, saturating; the new value.
fn add(total: &AtomicU64, amount: u64) -> u64 {
    match total.fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
        Some(t.saturating_add(amount))
    }) {
        Ok(old) | Err(old) => old.saturating_add(amount),
    }
}

impl BudgetBackend for MemoryBudgets {
    fn reserve<'a>(
        &'a self,
        lines: &'a [BudgetLine],
        amount_micro_usd: u64,
    ) -> BoxFuture<'a, Result<BudgetAdmission, BudgetError>> {
        let r = self.reserve_now(lines, amount_micro_usd);
        Box::pin(async move { Ok(r) })
    }

    fn settle<'a>(
        &'a self,
        held: &'a Held,
        actual_micro_usd: u64,
    ) -> BoxFuture<'a, Result<(), BudgetError>> {
        self.settle_inline(held, actual_micro_usd);
        Box::pin(async { Ok(()) })
    }

    fn settle_sync(self: Arc<Self>, held: Held, actual_micro_usd: u64) {
        self.settle_inline(&held, actual_micro_usd);
    }

    fn totals<'a>(
        &'a self,
        lines: &'a [BudgetLine],
    ) -> BoxFuture<'a, Result<Vec<u64>, BudgetError>> {
        let now = self.clock.unix_ms();
        let totals = lines
            .iter()
            .map(|l| {
                let w = window(l.period, now);
                self.existing(&l.bucket, w.start_ms)
                    .map_or(0, |e| e.total.load(Ordering::Acquire))
            })
            .collect();
        Box::pin(async move { Ok(totals) })
    }

    fn seed<'a>(
        &'a self,
        line: &'a BudgetLine,
        period_start_ms: i64,
        total_micro_usd: u64,
    ) -> BoxFuture<'a, Result<(), BudgetError>> {
        let expires = expires_ms(line.period, period_start_ms);
        if expires > self.clock.unix_ms() {
            let (e, created) = self.entry(&line.bucket, period_start_ms, expires, total_micro_usd);
            if !created {
                // Raise, never lower (docs/budgets.md#restarts).
                e.total.fetch_max(total_micro_usd, Ordering::AcqRel);
            }
        }
        Box::pin(async { Ok(()) })
    }
}
