//! The injected clock of the gateway: monotonic milliseconds for the governance state
//! machines (breaker, limiter, stall budget) and the wall clock for what a call reports
//! (its `created` time, its rows' timestamps, an HTTP-date `Retry-After`). `SystemClock` in
//! production, `ManualClock` in tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// A monotonic clock in milliseconds since an arbitrary origin, and the wall clock.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the clock's origin; never decreases.
    fn now_ms(&self) -> u64;

    /// The wall clock: milliseconds since the Unix epoch (may jump, as wall clocks do).
    fn unix_ms(&self) -> i64;
}

/// The shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// The system's wall clock as milliseconds since the Unix epoch (0 before it).
fn system_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Wall-clock time (via `tokio::time::Instant`, so a paused tokio clock also drives it).
#[derive(Debug)]
pub struct SystemClock {
    origin: tokio::time::Instant,
}

impl SystemClock {
    /// A clock starting now.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }

    /// As a shared handle.
    pub fn shared() -> SharedClock {
        Arc::new(Self::new())
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    fn unix_ms(&self) -> i64 {
        system_unix_ms()
    }
}

/// A clock that moves only when told to (tests). Its wall clock starts at the system's
/// wall-clock time when it is made and moves with it, so rows a test writes carry
/// believable timestamps.
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicU64,
    start_ms: u64,
    /// The wall-clock time (Unix ms) at `start_ms`.
    wall_at_start: i64,
}

impl Default for ManualClock {
    fn default() -> Self {
        Self {
            now: AtomicU64::new(0),
            start_ms: 0,
            wall_at_start: system_unix_ms(),
        }
    }
}

impl ManualClock {
    /// A clock at `start_ms`.
    pub fn new(start_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            now: AtomicU64::new(start_ms),
            start_ms,
            wall_at_start: system_unix_ms(),
        })
    }

    /// Move forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    /// Jump to `ms` (never backwards).
    pub fn set(&self, ms: u64) {
        self.now.fetch_max(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn unix_ms(&self) -> i64 {
        let moved = self.now_ms().saturating_sub(self.start_ms);
        self.wall_at_start
            .saturating_add(i64::try_from(moved).unwrap_or(i64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manual_wall_clock_moves_with_the_manual_clock() {
        let c = ManualClock::new(1_000);
        let w = c.unix_ms();
        assert!(w > 1_600_000_000_000, "starts at the system's wall time");
        c.advance(2_500);
        assert_eq!(c.unix_ms() - w, 2_500);
    }
}
