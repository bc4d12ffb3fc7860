//! Where guest code runs, and for how long.
//!
//! A call into a plugin starts inline on the calling thread: a normal call takes a few
//! microseconds, and handing it to another thread would cost more than the call. A call
//! still running after one slice yields once (wasmtime's epoch interruption with an async
//! yield: the call is a future whose guest code runs on its own fiber). The slice is CPU
//! time, not wall-clock time: the first [`SLICE_TICKS`] epoch ticks only arm a probe of the
//! thread's CPU clock, and the call yields at the first tick after that by which it has used
//! [`SLICE_CPU`] of CPU since the probe. A short call whose thread the operating system
//! descheduled across the ticks (a busy machine does, for milliseconds) has used almost no
//! CPU and finishes inline; moving it cost a thread, a worker hand-off and a wait at low
//! priority — `polygateway bench` counted ~430 such moves in a 5 s non-streamed run at
//! concurrency 128, every one of them a call of a few microseconds. The rest of a call that
//! yields runs where it cannot hold a Tokio worker: a thread of its
//! own at a lower CPU priority (nice +[`SLOW_CALL_NICENESS`]), while the calling worker waits
//! inside [`tokio::task::block_in_place`], which hands the worker's queued tasks to a fresh
//! worker thread. So four looping guest calls on a 2-core machine neither hold the runtime's
//! workers nor delay their wake-ups, and a good call waits at most one slice (two ticks, then
//! 0.5 ms of the bad call's CPU and up to a tick more) behind a bad one (without this, guest code held a worker for its whole 1 s budget and good calls on other
//! scopes waited seconds). The lower priority only matters when the CPU is contended: a slow
//! guest call then gets a smaller share than the calls that are cheap, never none.
//!
//! When the whole budget ([`super::PluginLimits::call_timeout`], CPU time; see [`Slice`]) is
//! spent the call traps with `Trap::Interrupt` (the instance is then discarded by its pool).
//!
//! Outside a multi-threaded Tokio runtime (a current-thread runtime, a plain thread, the
//! conformance kit) there is no worker to free, and the rest of the call still runs on a
//! slow-call thread at the lower priority while the calling thread waits: the priority is
//! what keeps a runaway guest from taking a core from the rest of the process, and the
//! conformance kit reads the call's CPU time off that thread ([`take_off_thread_cpu`]).

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use wasmtime::{Store, UpdateDeadline};

use super::engine::{EPOCH_TICK, PluginLimits};
use super::state::HostState;

/// Epoch ticks a call runs inline before its CPU clock is first read (the probe). Two, so a
/// call that happens to straddle one tick boundary never reads it.
pub(crate) const SLICE_TICKS: u64 = 2;

/// CPU time a call uses after the probe before it yields and moves off the runtime's
/// worker: half a tick, so a call that runs through the ticks moves at the first or second
/// tick after the probe (1–2 ms later), one that shares its core with others a little
/// later, and one that was only descheduled (its guest code a few microseconds) never.
pub(crate) const SLICE_CPU: Duration = Duration::from_micros(500);

/// Niceness added to the thread that finishes a guest call past its first slice: its CPU
/// weight drops to about a tenth of a normal thread's (Linux `sched_prio_to_weight`: 110 vs
/// 1024), so the runtime's threads win every contended wake-up while a legitimately heavy
/// call (parsing a large body) still progresses.
pub(crate) const SLOW_CALL_NICENESS: i32 = 10;

/// One guest call in progress: the future of a generated async export (or instantiation),
/// boxed so it can finish on another thread.
pub(crate) type GuestFuture<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

/// A call may take this many times its budget in epoch callbacks (when the CPU is contended
/// and its lower priority gives it a smaller share) before it is stopped regardless of the
/// CPU it used. A callback comes once a tick while the call's thread runs; ticks that pass
/// while the thread is descheduled count once, so the backstop is at least this many
/// budgets of wall-clock time, more on a machine that deschedules the thread often.
pub(crate) const WALL_BACKSTOP_FACTOR: u64 = 10;

/// The per-call budget bookkeeping kept in the store (read by the epoch callback).
///
/// The budget is CPU time: the ticks before the probe count as if the call ran through them,
/// the rest is measured with the running thread's CPU clock (the calling thread's after the
/// probe, the slow-call thread's after the yield), so a heavy but legitimate call that the
/// scheduler slows down under contention is not failed for it; a backstop of
/// [`WALL_BACKSTOP_FACTOR`] budgets in epoch callbacks still bounds every call.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Slice {
    /// The call has yielded once and runs off the worker now.
    yielded: bool,
    /// The call's whole budget.
    budget: Duration,
    /// The budget spent inline, before the yield.
    inline: Duration,
    /// The calling thread's CPU clock at the probe (the deadline [`SLICE_TICKS`] ticks in).
    probe: Option<Duration>,
    /// The running thread's CPU clock when the off-worker part was first checked.
    cpu_start: Option<Duration>,
    /// Epoch callbacks left before the backstop (inline and after the yield).
    wall_ticks_left: u64,
}

/// CPU time the current thread has used (zero if the clock cannot be read).
pub(crate) fn thread_cpu() -> Duration {
    read_thread_cpu().unwrap_or(Duration::ZERO)
}

/// CPU time the current thread has used; `None` if the clock cannot be read.
///
/// Read through libc's `clock_gettime`, not rustix's: rustix finds the vDSO by parsing the
/// auxiliary vector itself, and under valgrind (where `bench/instructions.py` counts a call's
/// instructions) that parse faulted, so the first guest call that moved off its worker
/// crashed the process in 4 of 9 runs. libc asks the kernel when it has no vDSO.
#[allow(unsafe_code)] // `clock_gettime` of a thread's CPU clock has no safe std wrapper
fn read_thread_cpu() -> Option<Duration> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable `timespec` for the whole call, and the clock id is the
    // platform's constant for the calling thread's CPU clock.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return None;
    }
    Some(Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    ))
}

/// Install the epoch callback of a store: inline, probe the CPU clock and yield once the
/// call has used [`SLICE_CPU`] since the probe; from then on, at every tick, trap once the
/// call's CPU time (or the wall-clock backstop) is spent.
pub(crate) fn install(store: &mut Store<HostState>) {
    store.epoch_deadline_callback(|mut cx| {
        let slice = &mut cx.data_mut().slice;
        if !slice.yielded {
            return Ok(slice.inline_tick(read_thread_cpu()));
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

impl Slice {
    /// A tick reached while the call still runs inline, the calling thread's CPU clock
    /// reading `now`: probe, keep going, yield, or (budget or backstop spent) trap.
    ///
    /// Without a readable clock the call yields at once, as every call past its first
    /// slice did before the probe.
    fn inline_tick(&mut self, now: Option<Duration>) -> UpdateDeadline {
        self.wall_ticks_left = self.wall_ticks_left.saturating_sub(1);
        let Some(now) = now else {
            self.yielded = true;
            return UpdateDeadline::Yield(1);
        };
        let Some(probe) = self.probe else {
            self.probe = Some(now);
            return UpdateDeadline::Continue(1);
        };
        let since_probe = now.saturating_sub(probe);
        if self.inline + since_probe >= self.budget || self.wall_ticks_left == 0 {
            return UpdateDeadline::Interrupt;
        }
        if since_probe >= SLICE_CPU {
            // The CPU before the probe is not known; the ticks it took are counted as if
            // it ran through them.
            self.inline += since_probe;
            self.yielded = true;
            return UpdateDeadline::Yield(1);
        }
        UpdateDeadline::Continue(1)
    }
}

/// Arm the budget of the next call on `store` (instantiation included: it runs guest code).
pub(crate) fn arm(store: &mut Store<HostState>, limits: &PluginLimits) {
    let total = limits.deadline_ticks();
    let first = SLICE_TICKS.min(total);
    store.data_mut().slice = Slice {
        yielded: false,
        budget: limits.call_timeout,
        inline: EPOCH_TICK * u32::try_from(first).unwrap_or(u32::MAX),
        probe: None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::engine::PluginEngine;

    /// `nap` calls the host's `sleep_ms` ten times (3 ms each: the epoch moves on ~30 ticks
    /// while the thread uses next to no CPU, as when the operating system deschedules it);
    /// `spin` loops until stopped.
    const MODULE: &str = r#"(module
        (import "host" "sleep_ms" (func $sleep (param i32)))
        (func (export "nap") (local i32)
            (local.set 0 (i32.const 10))
            (loop $l
                (call $sleep (i32.const 3))
                (local.set 0 (i32.sub (local.get 0) (i32.const 1)))
                (br_if $l (local.get 0))))
        (func (export "spin") (loop $l (br $l))))"#;

    fn instance(engine: &PluginEngine) -> (Store<HostState>, wasmtime::Instance) {
        let module =
            wasmtime::Module::new(&engine.engine, wat::parse_str(MODULE).unwrap()).unwrap();
        let mut linker = wasmtime::Linker::new(&engine.engine);
        linker
            .func_wrap("host", "sleep_ms", |ms: i32| {
                std::thread::sleep(Duration::from_millis(u64::try_from(ms).unwrap()));
            })
            .unwrap();
        let mut store = engine.sandboxed_store();
        let instance = run(Box::pin(linker.instantiate_async(&mut store, &module))).unwrap();
        (store, instance)
    }

    fn poll_once<R>(call: &mut GuestFuture<'_, R>) -> Poll<wasmtime::Result<R>> {
        call.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn a_call_that_spends_its_ticks_off_the_cpu_finishes_inline() {
        let limits = PluginLimits::default();
        let engine = PluginEngine::new(limits, None).unwrap();
        let _awake = engine.ticker.enter();
        // The premise is a call whose thread uses less than the slice's CPU while the ticks
        // pass. A loaded machine (CI runs the suite's tests in parallel on two cores) can
        // charge ten short sleeps more than that in the kernel; such an attempt proves
        // nothing either way and is repeated, on a fresh instance, up to five times.
        let mut charged = Vec::new();
        for _ in 0..5 {
            let (mut store, instance) = instance(&engine);
            let nap = instance
                .get_typed_func::<(), ()>(&mut store, "nap")
                .unwrap();
            arm(&mut store, &limits);
            let started = thread_cpu();
            let mut call: GuestFuture<'_, ()> = Box::pin(nap.call_async(&mut store, ()));
            let polled = poll_once(&mut call);
            let spent = thread_cpu().saturating_sub(started);
            drop(call);
            if spent >= SLICE_CPU {
                charged.push(spent);
                continue;
            }
            // Before the probe, the first callback past the slice's two ticks yielded: the
            // call went to a slow thread although its guest code ran for microseconds.
            assert!(matches!(polled, Poll::Ready(Ok(()))), "{spent:?}");
            assert!(!store.data().slice.yielded);
            assert!(
                store.data().slice.probe.is_some(),
                "the ticks passed during the call"
            );
            return;
        }
        panic!("every attempt's thread used the slice's CPU or more: {charged:?}");
    }

    #[test]
    fn a_call_that_runs_through_its_ticks_yields_once_it_has_used_the_slice() {
        let limits = PluginLimits::default();
        let engine = PluginEngine::new(limits, None).unwrap();
        let (mut store, instance) = {
            let _awake = engine.ticker.enter();
            instance(&engine)
        };
        let spin = instance
            .get_typed_func::<(), ()>(&mut store, "spin")
            .unwrap();
        // The ticker parks when no guest code runs; entering wakes it, so the deadline counts.
        engine.ticker.wait_parked();
        let _awake = engine.ticker.enter();
        arm(&mut store, &limits);
        let started = thread_cpu();
        let mut call: GuestFuture<'_, ()> = Box::pin(spin.call_async(&mut store, ()));
        assert!(poll_once(&mut call).is_pending(), "a looping call yields");
        let spent = thread_cpu().saturating_sub(started);
        drop(call);
        let slice = store.data().slice;
        assert!(slice.yielded);
        // At least the slice's CPU after the probe; well under the 1 s budget.
        assert!(spent >= SLICE_CPU, "{spent:?}");
        assert!(spent < Duration::from_millis(100), "{spent:?}");
        assert!(slice.inline >= EPOCH_TICK * 2 + SLICE_CPU, "{slice:?}");
    }

    fn armed() -> Slice {
        Slice {
            budget: Duration::from_millis(10),
            inline: EPOCH_TICK * 2,
            wall_ticks_left: 100,
            ..Slice::default()
        }
    }

    #[test]
    fn inline_ticks_probe_then_continue_then_yield_with_the_cpu_counted() {
        let ms = Duration::from_millis;
        let mut s = armed();
        assert!(matches!(
            s.inline_tick(Some(ms(40))),
            UpdateDeadline::Continue(1)
        ));
        assert_eq!(s.probe, Some(ms(40)));
        // Descheduled: ticks pass, the CPU clock barely moves.
        for _ in 0..5 {
            assert!(matches!(
                s.inline_tick(Some(ms(40) + Duration::from_micros(30))),
                UpdateDeadline::Continue(1)
            ));
        }
        assert!(!s.yielded);
        assert!(matches!(
            s.inline_tick(Some(ms(40) + SLICE_CPU)),
            UpdateDeadline::Yield(1)
        ));
        assert!(s.yielded);
        assert_eq!(s.inline, EPOCH_TICK * 2 + SLICE_CPU);
        assert_eq!(s.wall_ticks_left, 93);
    }

    #[test]
    fn an_unreadable_clock_yields_at_once_and_a_spent_budget_or_backstop_traps_inline() {
        let mut s = armed();
        assert!(matches!(s.inline_tick(None), UpdateDeadline::Yield(1)));
        assert!(s.yielded);

        let ms = Duration::from_millis;
        let mut s = armed();
        s.budget = ms(2);
        let _ = s.inline_tick(Some(ms(1)));
        assert!(matches!(
            s.inline_tick(Some(ms(1) + Duration::from_micros(1))),
            UpdateDeadline::Interrupt
        ));

        let mut s = armed();
        s.wall_ticks_left = 2;
        let _ = s.inline_tick(Some(ms(1)));
        assert!(matches!(
            s.inline_tick(Some(ms(1))),
            UpdateDeadline::Interrupt
        ));
    }
}
