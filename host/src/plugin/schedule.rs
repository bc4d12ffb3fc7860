//! Where guest code runs, and for how long.
//!
//! A call into a plugin starts inline on the calling thread: a normal call takes a few
//! microseconds, and handing it to another thread would cost more than the call. A call
//! still running after one slice ([`SLICE_TICKS`] epoch ticks, 1–2 ms) yields once (wasmtime's
//! epoch interruption with an async yield: the call is a future whose guest code runs on its
//! own fiber), and the rest of it runs where it cannot hold a Tokio worker: a thread of its
//! own at a lower CPU priority (nice +[`SLOW_CALL_NICENESS`]), while the calling worker waits
//! inside [`tokio::task::block_in_place`], which hands the worker's queued tasks to a fresh
//! worker thread. So four looping guest calls on a 2-core machine neither hold the runtime's
//! workers nor delay their wake-ups, and a good call waits at most one slice behind a bad one
//! (without this, guest code held a worker for its whole 1 s budget and good calls on other
//! scopes waited seconds). The lower priority only matters when the CPU is contended: a slow
//! guest call then gets a smaller share than the calls that are cheap, never none.
//!
//! When the whole budget ([`super::PluginLimits::call_timeout`], CPU time; see [`Slice`]) is
//! spent the call traps with `Trap::Interrupt` (the instance is then discarded by its pool).
//!
//! Outside a multi-threaded Tokio runtime (a current-thread runtime, a plain thread, the
//! conformance kit) there is no worker to free: the rest of the call runs on the calling
//! thread, as before.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use wasmtime::{Store, UpdateDeadline};

use super::engine::{EPOCH_TICK, PluginLimits};
use super::state::HostState;

/// Epoch ticks a call runs inline before it yields and moves off the runtime's worker. Two,
/// so a call is never moved before one whole tick (1 ms) has passed: a call that happens to
/// straddle one tick boundary stays inline.
pub(crate) const SLICE_TICKS: u64 = 2;

/// Niceness added to the thread that finishes a guest call past its first slice: its CPU
/// weight drops to about a tenth of a normal thread's (Linux `sched_prio_to_weight`: 110 vs
/// 1024), so the runtime's threads win every contended wake-up while a legitimately heavy
/// call (parsing a large body) still progresses.
pub(crate) const SLOW_CALL_NICENESS: i32 = 10;

/// One guest call in progress: the future of a generated async export (or instantiation),
/// boxed so it can finish on another thread.
pub(crate) type GuestFuture<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

/// A call that runs off the worker may take this many times its budget in wall-clock time
/// (when the CPU is contended and its lower priority gives it a smaller share) before it is
/// stopped regardless of the CPU it used.
pub(crate) const WALL_BACKSTOP_FACTOR: u64 = 10;

/// The per-call budget bookkeeping kept in the store (read by the epoch callback).
///
/// The budget is CPU time: the first slice runs inline (counted as its wall-clock ticks),
/// the rest is measured with the running thread's CPU clock, so a heavy but legitimate call
/// that the scheduler slows down under contention is not failed for it; a wall-clock
/// backstop of [`WALL_BACKSTOP_FACTOR`] budgets still bounds every call.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Slice {
    /// The call has yielded once and runs off the worker now.
    yielded: bool,
    /// The call's whole budget.
    budget: Duration,
    /// The budget spent inline, before the yield.
    inline: Duration,
    /// The running thread's CPU clock when the off-worker part was first checked.
    cpu_start: Option<Duration>,
    /// Epoch ticks left before the wall-clock backstop.
    wall_ticks_left: u64,
}

/// CPU time the current thread has used (zero if the clock cannot be read).
///
/// Read through libc's `clock_gettime`, not rustix's: rustix finds the vDSO by parsing the
/// auxiliary vector itself, and under valgrind (where `bench/instructions.py` counts a call's
/// instructions) that parse faulted, so the first guest call that moved off its worker
/// crashed the process in 4 of 9 runs. libc asks the kernel when it has no vDSO.
#[allow(unsafe_code)] // `clock_gettime` of a thread's CPU clock has no safe std wrapper
pub(crate) fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable `timespec` for the whole call, and the clock id is the
    // platform's constant for the calling thread's CPU clock.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// Install the epoch callback of a store: at the end of the first slice, yield once; from
/// then on, at every tick, trap once the call's CPU time (or the wall-clock backstop) is
/// spent.
pub(crate) fn install(store: &mut Store<HostState>) {
    store.epoch_deadline_callback(|mut cx| {
        let slice = &mut cx.data_mut().slice;
        if !slice.yielded {
            slice.yielded = true;
            return Ok(UpdateDeadline::Yield(1));
        }
        slice.wall_ticks_left = slice.wall_ticks_left.saturating_sub(1);
        let now = thread_cpu();
        let used = slice.inline + now.saturating_sub(*slice.cpu_start.get_or_insert(now));
        if used >= slice.budget || slice.wall_ticks_left == 0 {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Continue(1))
        }
    });
}

/// Arm the budget of the next call on `store` (instantiation included: it runs guest code).
pub(crate) fn arm(store: &mut Store<HostState>, limits: &PluginLimits) {
    let total = limits.deadline_ticks();
    let first = SLICE_TICKS.min(total);
    store.data_mut().slice = Slice {
        yielded: false,
        budget: limits.call_timeout,
        inline: EPOCH_TICK * u32::try_from(first).unwrap_or(u32::MAX),
        cpu_start: None,
        wall_ticks_left: total.saturating_mul(WALL_BACKSTOP_FACTOR),
    };
    store.set_epoch_deadline(first);
}

/// Drive one guest call to completion: inline first; if the guest yields (its slice is
/// spent), finish it off the runtime's worker (see the module docs).
pub(crate) fn run<R: Send>(mut call: GuestFuture<'_, R>) -> wasmtime::Result<R> {
    // The guest does no I/O: the only way it returns `Pending` is the slice's yield, which
    // wakes itself, so the first poll needs no real waker.
    let mut cx = Context::from_waker(Waker::noop());
    if let Poll::Ready(out) = call.as_mut().poll(&mut cx) {
        return out;
    }
    if on_worker_pool() {
        tokio::task::block_in_place(|| finish_on_slow_thread(call))
    } else {
        finish_on_slow_thread(call)
    }
}

/// Whether the calling thread is a worker of a multi-threaded Tokio runtime (so a wait may
/// hand its queued tasks to another worker with [`tokio::task::block_in_place`]).
pub(crate) fn on_worker_pool() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

thread_local! {
    /// CPU time the guest calls made from this thread spent on slow-call threads, since
    /// [`take_off_thread_cpu`] last read it.
    static OFF_THREAD_CPU: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// The CPU time the guest calls made from this thread spent off it (the part of a slow call
/// that finished on a slow-call thread) since the last read, which resets it. With
/// [`thread_cpu`] around a call, the call's whole CPU time (the conformance kit's budget).
pub(crate) fn take_off_thread_cpu() -> Duration {
    OFF_THREAD_CPU.with(|c| c.replace(Duration::ZERO))
}

/// Finish `call` on a scoped thread of lower priority, the caller waiting; on this thread if
/// no thread can be started.
fn finish_on_slow_thread<R: Send>(mut call: GuestFuture<'_, R>) -> wasmtime::Result<R> {
    let finished = std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("pgw-slow-guest".into())
            .spawn_scoped(scope, || {
                // Best effort: without permission the call simply keeps normal priority.
                let _ = rustix::process::setpriority_process(
                    Some(rustix::thread::gettid()),
                    SLOW_CALL_NICENESS,
                );
                let started = thread_cpu();
                let out = block_on(call.as_mut());
                (out, thread_cpu().saturating_sub(started))
            });
        spawned.ok().map(|thread| thread.join())
    });
    match finished {
        Some(Ok((out, cpu))) => {
            OFF_THREAD_CPU.with(|c| c.set(c.get() + cpu));
            out
        }
        // The guest cannot panic the host (a guest panic is a trap); a host bug can.
        Some(Err(panic)) => std::panic::resume_unwind(panic),
        None => {
            tracing::warn!("cannot start a thread for a slow plugin call; finishing it here");
            block_on(call.as_mut())
        }
    }
}

/// Park the current thread until `fut` is ready (the guest's yield wakes it at once).
fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let mut fut = pin!(fut);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}
