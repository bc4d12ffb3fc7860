//! The engine's epoch ticker: a thread that advances the wasm engine's epoch every
//! [`EPOCH_TICK`] while guest code may be running, and sleeps without waking while none is.
//!
//! Guest deadlines are counted in epoch ticks (`schedule.rs`), so the ticker must tick while
//! a guest call runs. It need not tick otherwise: ticking at 1 kHz in an idle process cost
//! ~22 µs of CPU a tick on the 2-core benchmark VM (its timer interrupt and two context
//! switches; `perf stat --per-thread` of an idle gateway: 2,040 wake-ups and 66 ms of CPU in
//! 3 s), and on a loaded machine each wake-up preempts a thread doing real work. So after
//! [`IDLE_TICKS`] ticks in a row in which no guest call ran, the ticker parks, and the next
//! call to enter guest code wakes it ([`Ticker::enter`]). Under load the ticker never parks
//! and a call pays two atomic additions to one counter and one load of the `parked` flag;
//! after an idle spell the first call also pays one `unpark` (a futex wake).
//!
//! **Invariant:** no guest code runs without the ticker awake. [`Ticker::enter`] adds to the
//! counter, then reads `parked`; the ticker sets `parked`, then reads the counter (both
//! sequentially consistent), so at least one of them sees the other: either the ticker does
//! not park, or the caller unparks it (an `unpark` that comes before the `park` is kept).
//! The epoch does not advance while the ticker is parked, so a deadline armed then still
//! counts whole ticks from when the ticker resumes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use wasmtime::EngineWeak;

/// Epoch tick period: plugin deadlines are whole multiples of it, and a guest call's CPU
/// clock is probed after `schedule::SLICE_TICKS` of them and checked at each one after
/// (`schedule::SLICE_CPU`). 1 ms keeps a long call's move off the runtime's worker prompt.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Ticks in a row with no guest call entered or running before the ticker parks (50 ms):
/// a process serving a call every few milliseconds keeps ticking, one that stopped parks soon.
pub(crate) const IDLE_TICKS: u32 = 50;

/// One guest call entering adds this to [`Shared::calls`]: the high 32 bits count entries
/// (wrapping), the low 32 bits are the calls running now.
const ENTRY: u64 = (1 << 32) | 1;
/// Mask of the calls running now in [`Shared::calls`].
const RUNNING: u64 = (1 << 32) - 1;

/// What the ticker thread and the callers share.
#[derive(Debug, Default)]
struct Shared {
    /// Entries (high half) and calls running (low half).
    calls: AtomicU64,
    /// The ticker is parked or about to park.
    parked: AtomicBool,
    stop: AtomicBool,
    thread: OnceLock<Thread>,
    /// Ticks made (tests read it).
    #[cfg(test)]
    ticks: AtomicU64,
}

impl Shared {
    fn unpark(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

/// The ticker of one engine; dropping it stops the thread.
#[derive(Debug)]
pub(crate) struct Ticker {
    shared: Arc<Shared>,
}

/// Guest code may be running while this lives (see [`Ticker::enter`]).
#[must_use = "the ticker may park as soon as the guard is dropped"]
pub(crate) struct Awake<'a>(&'a Shared);

impl Drop for Awake<'_> {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::Release);
    }
}

impl Ticker {
    /// Start the ticker thread (`pgw-epoch`) of the engine behind `engine`; it ends when the
    /// ticker is dropped or the engine is gone.
    ///
    /// Errors: the thread could not be started (the OS error).
    pub(crate) fn start(engine: EngineWeak) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        let handle = std::thread::Builder::new()
            .name("pgw-epoch".into())
            .spawn(move || run(&theirs, &engine))?;
        let _ = shared.thread.set(handle.thread().clone());
        Ok(Self { shared })
    }

    /// Mark guest code as possibly running until the guard is dropped, waking the ticker if
    /// it parked. Every guest call (instantiation included) runs inside one.
    pub(crate) fn enter(&self) -> Awake<'_> {
        self.shared.calls.fetch_add(ENTRY, Ordering::SeqCst);
        if self.shared.parked.load(Ordering::SeqCst) {
            self.shared.unpark();
        }
        Awake(&self.shared)
    }

    /// Whether the ticker is parked (tests).
    #[cfg(test)]
    pub(crate) fn is_parked(&self) -> bool {
        self.shared.parked.load(Ordering::SeqCst)
    }

    /// Wait (up to 5 s, else panic) until the ticker has parked (tests).
    #[cfg(test)]
    pub(crate) fn wait_parked(&self) {
        tests::wait_until("the ticker parks", || self.is_parked());
    }

    /// Ticks made so far (tests).
    #[cfg(test)]
    fn ticks(&self) -> u64 {
        self.shared.ticks.load(Ordering::Relaxed)
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.unpark();
    }
}

/// The thread: tick, and park after [`IDLE_TICKS`] idle ticks until a call enters.
fn run(shared: &Shared, engine: &EngineWeak) {
    let mut last = shared.calls.load(Ordering::SeqCst);
    let mut idle = 0;
    while !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(EPOCH_TICK);
        match engine.upgrade() {
            Some(engine) => engine.increment_epoch(),
            None => return,
        }
        #[cfg(test)]
        shared.ticks.fetch_add(1, Ordering::Relaxed);
        let now = shared.calls.load(Ordering::SeqCst);
        idle = if now == last && now & RUNNING == 0 {
            idle + 1
        } else {
            0
        };
        last = now;
        if idle < IDLE_TICKS {
            continue;
        }
        shared.parked.store(true, Ordering::SeqCst);
        // Park only if no call entered since the last look (see the module's invariant).
        while shared.calls.load(Ordering::SeqCst) == last && !shared.stop.load(Ordering::SeqCst) {
            std::thread::park();
        }
        shared.parked.store(false, Ordering::SeqCst);
        last = shared.calls.load(Ordering::SeqCst);
        idle = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    pub(super) fn wait_until(what: &str, cond: impl Fn() -> bool) {
        let started = Instant::now();
        while !cond() {
            assert!(started.elapsed() < Duration::from_secs(5), "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn parks_when_idle_ticks_while_a_call_runs_and_parks_again_after() {
        let engine = wasmtime::Engine::default();
        let ticker = Ticker::start(engine.weak()).unwrap();
        wait_until("parks after the idle ticks", || ticker.is_parked());
        let parked_at = ticker.ticks();
        std::thread::sleep(EPOCH_TICK * 20);
        assert_eq!(ticker.ticks(), parked_at, "no ticks while parked");

        let awake = ticker.enter();
        wait_until("woken by the call", || !ticker.is_parked());
        // While the call runs the ticker never parks, however long it runs.
        let from = ticker.ticks();
        std::thread::sleep(EPOCH_TICK * (IDLE_TICKS * 2));
        assert!(!ticker.is_parked());
        assert!(ticker.ticks() >= from + 10, "ticks while a call runs");
        drop(awake);
        wait_until("parks again after the call", || ticker.is_parked());
    }

    #[test]
    fn calls_that_enter_and_leave_between_two_ticks_keep_the_ticker_awake() {
        let engine = wasmtime::Engine::default();
        let ticker = Ticker::start(engine.weak()).unwrap();
        wait_until("parks", || ticker.is_parked());
        drop(ticker.enter());
        wait_until("woken", || !ticker.is_parked());
        // Short calls every 5 ms: the ticker sees their entries, not a call running at a
        // tick. It may park only after a gap of at least the idle ticks (a stalled test
        // thread), never after 5 ms.
        let idle_span = EPOCH_TICK * IDLE_TICKS;
        let started = Instant::now();
        let mut previous = Instant::now();
        drop(ticker.enter());
        let mut short_gaps = 0;
        while started.elapsed() < idle_span * 10 {
            std::thread::sleep(EPOCH_TICK * 5);
            // Parked first, then the gap: a stall between the two only lengthens the gap.
            let parked = ticker.is_parked();
            let gap = previous.elapsed();
            if gap < idle_span {
                assert!(!parked, "parked after a gap of {gap:?}");
                short_gaps += 1;
            }
            previous = Instant::now();
            drop(ticker.enter());
            if gap >= idle_span {
                wait_until("woken after a long gap", || !ticker.is_parked());
            }
        }
        assert!(short_gaps >= 10, "{short_gaps} short gaps");
    }

    #[test]
    fn dropping_the_ticker_ends_a_parked_thread() {
        let engine = wasmtime::Engine::default();
        let ticker = Ticker::start(engine.weak()).unwrap();
        wait_until("parks", || ticker.is_parked());
        let thread = ticker.shared.clone();
        drop(ticker);
        // The thread holds the last other reference to the shared state until it returns.
        wait_until("the thread ends", || Arc::strong_count(&thread) == 1);
    }
}
