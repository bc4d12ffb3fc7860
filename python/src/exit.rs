//! Interpreter exit. `pyo3-async-runtimes` completes an asyncio future from a tokio thread
//! that holds the GIL while it hands the result to the loop (`call_soon_threadsafe`). When
//! that future is the program's last await, the main thread can get the GIL in between,
//! return from `asyncio.run` and start finalizing while the tokio thread still has to release
//! the GIL: Python aborts ("PyGILState_Release: thread state … must be current") or crashes.
//! `quiesce()`, registered with `atexit` by the package (atexit handlers run before
//! finalization starts), releases the GIL until no completion has started for a moment, so
//! such a thread finishes first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// Milliseconds since `EPOCH` at the last completion's start (0: none yet).
static LAST_COMPLETION_MS: AtomicU64 = AtomicU64::new(0);
static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Quiet time after the last completion before the interpreter may finalize.
const QUIET: Duration = Duration::from_millis(20);
/// The most `quiesce` waits.
const MAX_WAIT: Duration = Duration::from_millis(500);

fn now_ms() -> u64 {
    let epoch = EPOCH.get_or_init(Instant::now);
    // +1: 0 means "never".
    epoch.elapsed().as_millis() as u64 + 1
}

/// A future's result is being handed to Python (called under the GIL by the converter).
pub fn completing() {
    LAST_COMPLETION_MS.store(now_ms(), Ordering::Release);
}

/// Wait, with the GIL released, until no future completion has started for `QUIET` (at most
/// `MAX_WAIT`). Instant when no call was ever made.
#[pyfunction]
pub fn quiesce(py: Python<'_>) {
    if LAST_COMPLETION_MS.load(Ordering::Acquire) == 0 {
        return;
    }
    py.detach(|| {
        let started = Instant::now();
        let quiet_ms = QUIET.as_millis() as u64;
        while started.elapsed() < MAX_WAIT {
            let last = LAST_COMPLETION_MS.load(Ordering::Acquire);
            if now_ms().saturating_sub(last) >= quiet_ms {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // The thread that started the last completion releases the GIL right after it.
        std::thread::sleep(Duration::from_millis(5));
    });
}
