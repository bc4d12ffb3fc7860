//! Host-owned per-source statistics the selectors see (in-flight, success and latency
//! EWMAs), the process-local cooldown memo (sources known to be open are skipped without
//! asking the breaker store), and the scope's progress marker for the stall budget. All
//! atomics: no lock on the hot path.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Weight of the newest sample in the EWMAs.
const ALPHA: f64 = 0.2;

/// Statistics of one source.
#[derive(Debug)]
pub struct SourceStats {
    in_flight: AtomicU32,
    success_ewma: AtomicU64,
    latency_ewma_ms: AtomicU64,
    cooldown_until_ms: AtomicU64,
}

impl Default for SourceStats {
    fn default() -> Self {
        Self {
            in_flight: AtomicU32::new(0),
            success_ewma: AtomicU64::new(1f64.to_bits()),
            latency_ewma_ms: AtomicU64::new(0f64.to_bits()),
            cooldown_until_ms: AtomicU64::new(0),
        }
    }
}

fn blend(cell: &AtomicU64, sample: f64) {
    let mut cur = cell.load(Ordering::Relaxed);
    loop {
        let next = (f64::from_bits(cur) * (1.0 - ALPHA) + sample * ALPHA).to_bits();
        match cell.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => cur = actual,
        }
    }
}

impl SourceStats {
    /// Attempts currently in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Success-rate EWMA in [0, 1] (starts at 1).
    pub fn success_ewma(&self) -> f64 {
        f64::from_bits(self.success_ewma.load(Ordering::Relaxed))
    }

    /// Latency EWMA of answered attempts, in ms (0 before the first).
    pub fn latency_ewma_ms(&self) -> f64 {
        f64::from_bits(self.latency_ewma_ms.load(Ordering::Relaxed))
    }

    /// Record an attempt's outcome (`ok` = the source answered) and its latency.
    pub fn observe(&self, ok: bool, latency_ms: f64) {
        blend(&self.success_ewma, if ok { 1.0 } else { 0.0 });
        if ok {
            blend(&self.latency_ewma_ms, latency_ms);
        }
    }

    /// Count an attempt in flight until the guard drops.
    pub fn enter(&self) -> InFlightGuard<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlightGuard(self)
    }

    /// The cooldown memo: the source is known to be open until `until_ms` (never moves
    /// back, so a stale report cannot shorten a newer cooldown).
    pub fn cool_until(&self, until_ms: u64) {
        self.cooldown_until_ms
            .fetch_max(until_ms, Ordering::Relaxed);
    }

    /// Forget the memo (the breaker said the source is usable again).
    pub fn clear_cooldown(&self) {
        self.cooldown_until_ms.store(0, Ordering::Relaxed);
    }

    /// Remaining memo cooldown at `now_ms` (0 = not known to be open).
    pub fn cooldown_remaining_ms(&self, now_ms: u64) -> u64 {
        self.cooldown_until_ms
            .load(Ordering::Relaxed)
            .saturating_sub(now_ms)
    }
}

/// Decrements the in-flight count on drop (cancellation included).
#[derive(Debug)]
pub struct InFlightGuard<'a>(&'a SourceStats);

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// When the scope last produced an answer: the scope-wide progress signal of the stall
/// budget's condition B (docs/limiter.md#stall-budget).
#[derive(Debug)]
pub struct ScopeProgress(AtomicU64);

impl Default for ScopeProgress {
    fn default() -> Self {
        Self(AtomicU64::new(u64::MAX))
    }
}

impl ScopeProgress {
    /// An answer was produced at `now_ms`.
    pub fn mark(&self, now_ms: u64) {
        self.0.store(now_ms, Ordering::Relaxed);
    }

    /// Milliseconds since the last answer; `None` if the scope never produced one.
    pub fn age_ms(&self, now_ms: u64) -> Option<u64> {
        match self.0.load(Ordering::Relaxed) {
            u64::MAX => None,
            t => Some(now_ms.saturating_sub(t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ewma_in_flight_and_memo() {
        let s = SourceStats::default();
        assert_eq!(s.success_ewma(), 1.0);
        s.observe(false, 0.0);
        assert!((s.success_ewma() - 0.8).abs() < 1e-12);
        s.observe(true, 100.0);
        assert!((s.latency_ewma_ms() - 20.0).abs() < 1e-12);
        {
            let _a = s.enter();
            let _b = s.enter();
            assert_eq!(s.in_flight(), 2);
        }
        assert_eq!(s.in_flight(), 0);
        s.cool_until(5000);
        s.cool_until(3000);
        assert_eq!(s.cooldown_remaining_ms(1000), 4000);
        s.clear_cooldown();
        assert_eq!(s.cooldown_remaining_ms(1000), 0);
        let p = ScopeProgress::default();
        assert_eq!(p.age_ms(10), None);
        p.mark(10);
        assert_eq!(p.age_ms(25), Some(15));
    }
}
