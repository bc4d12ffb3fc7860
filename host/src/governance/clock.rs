//! The injected clock of the governance state machines (breaker, limiter, stall budget):
//! monotonic milliseconds. `SystemClock` in production, `ManualClock` in tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A monotonic clock in milliseconds since an arbitrary origin.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the clock's origin; never decreases.
    fn now_ms(&self) -> u64;
}

/// The shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

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
}

/// A clock that moves only when told to (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A clock at `start_ms`.
    pub fn new(start_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            now: AtomicU64::new(start_ms),
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
}
