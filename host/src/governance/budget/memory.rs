//! The in-process budget store: one counter per (budget, period start), each an atomic, in
//! a map swapped as a whole when a period's first reservation adds its entry (rare), so a
//! reservation takes no lock. A reservation adds its amount to every line's counter and
//! checks the limit on the value it produced; a line over its limit undoes what this
//! reservation added. Two reservations racing for the last room can therefore never both
//! get it; at worst the loser of a race that a third reservation then undoes is refused
//! although it would have fit — a budget may refuse early, never overspend. Entries of
//! periods that ended more than a day ago are dropped when a new entry is added.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use futures_util::future::BoxFuture;

use crate::governance::SharedClock;

use super::{
    BudgetAdmission, BudgetBackend, BudgetDenial, BudgetError, BudgetLine, Held, warnings, window,
};

/// How long an ended period's counter is kept (a late settlement still finds it).
const KEEP_ENDED_MS: i64 = 86_400_000;

struct Entry {
    total: AtomicU64,
    /// When the period ends (`i64::MAX` for a total budget).
    ends_ms: i64,
}

type Map = HashMap<(Arc<str>, i64), Arc<Entry>>;

/// Budgets kept in this process (`PGW_LIMITER_BACKEND=memory`), on the injected clock.
pub struct MemoryBudgets {
    clock: SharedClock,
    entries: ArcSwap<Map>,
}

impl std::fmt::Debug for MemoryBudgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBudgets")
            .field("entries", &self.entries.load().len())
            .finish()
    }
}

impl MemoryBudgets {
    pub fn new(clock: SharedClock) -> Self {
        Self {
            clock,
            entries: ArcSwap::from_pointee(HashMap::new()),
        }
    }

    /// The counter of `bucket`'s period starting at `start` (created at 0 if missing).
    fn entry(&self, bucket: &Arc<str>, start: i64, ends_ms: i64) -> Arc<Entry> {
        let key = (bucket.clone(), start);
        if let Some(e) = self.entries.load().get(&key) {
            return e.clone();
        }
        let now = self.clock.unix_ms();
        let fresh = Arc::new(Entry {
            total: AtomicU64::new(0),
            ends_ms,
        });
        let mut found = fresh.clone();
        self.entries.rcu(|m| {
            let mut m: Map = m
                .iter()
                .filter(|(_, e)| e.ends_ms.saturating_add(KEEP_ENDED_MS) > now)
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect();
            found = m
                .entry(key.clone())
                .or_insert_with(|| fresh.clone())
                .clone();
            m
        });
        found
    }

    fn existing(&self, bucket: &Arc<str>, start: i64) -> Option<Arc<Entry>> {
        self.entries.load().get(&(bucket.clone(), start)).cloned()
    }

    fn reserve_now(&self, lines: &[BudgetLine], amount: u64) -> BudgetAdmission {
        let now = self.clock.unix_ms();
        let mut added: Vec<Arc<Entry>> = Vec::with_capacity(lines.len());
        let mut charges = Vec::with_capacity(lines.len());
        let mut totals = Vec::with_capacity(lines.len());
        for l in lines {
            let w = window(l.period, now);
            let e = self.entry(&l.bucket, w.start_ms, w.resets_at_ms.unwrap_or(i64::MAX));
            let after = e
                .total
                .fetch_add(amount, Ordering::AcqRel)
                .saturating_add(amount);
            if after > l.limit_micro_usd {
                e.total.fetch_sub(amount, Ordering::AcqRel);
                for done in &added {
                    done.total.fetch_sub(amount, Ordering::AcqRel);
                }
                return BudgetAdmission::Denied(BudgetDenial {
                    bucket: l.bucket.clone(),
                    period: l.period,
                    limit_micro_usd: l.limit_micro_usd,
                    total_micro_usd: after - amount,
                    resets_at_ms: w.resets_at_ms,
                });
            }
            added.push(e);
            charges.push((l.bucket.clone(), w.start_ms));
            totals.push(after);
        }
        BudgetAdmission::Granted {
            held: Held {
                charges,
                amount_micro_usd: amount,
            },
            warnings: warnings(lines, &totals),
        }
    }

    /// Settle without awaiting (the guard's drop path).
    pub(crate) fn settle_now(&self, held: &Held, actual: u64) {
        for (bucket, start) in &held.charges {
            let Some(e) = self.existing(bucket, *start) else {
                continue;
            };
            if actual >= held.amount_micro_usd {
                e.total
                    .fetch_add(actual - held.amount_micro_usd, Ordering::AcqRel);
            } else {
                let refund = held.amount_micro_usd - actual;
                // Never below zero (a seed or a restart may have set a smaller total).
                let _ = e
                    .total
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                        Some(t.saturating_sub(refund))
                    });
            }
        }
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
        self.settle_now(held, actual_micro_usd);
        Box::pin(async { Ok(()) })
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
        let w = window(line.period, period_start_ms);
        let e = self.entry(
            &line.bucket,
            period_start_ms,
            w.resets_at_ms.unwrap_or(i64::MAX),
        );
        let _ = e
            .total
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.max(total_micro_usd))
            });
        Box::pin(async { Ok(()) })
    }
}
