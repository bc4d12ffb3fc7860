//! The warm-instance pool every component kind (provider, selector, strategy) shares: a
//! lock-free queue of idle instances, instantiation when it is empty, retirement of bloated
//! instances, the fault count, and the one way a guest call is made ([`Warm::call`]: armed
//! budget, the epoch ticker awake, scheduled by `schedule.rs`).
//!
//! **Invariant:** an instance goes back to the pool only after a call that returned; after
//! a trap it is dead ("cannot enter component instance") and is dropped, and the pool makes
//! a fresh one on demand.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;
use wasmtime::Store;

use super::engine::{PluginEngine, PluginLimits, fault_message};
use super::error::PluginError;
use super::schedule::{self, GuestFuture};
use super::state::HostState;
use super::ticker::Ticker;

/// An instance whose linear memory grew beyond this (e.g. after parsing a huge body) is
/// dropped instead of going back to the pool, so idle instances never pin much memory.
pub(crate) const RETIRE_MEMORY_BYTES: usize = 16 * 1024 * 1024;

/// A world's generated bindings: how to instantiate them from their pre-instantiation.
pub(crate) trait World: Sized + Send + 'static {
    /// The world's `…Pre` (linked, type-checked, ready to instantiate).
    type Pre: Send + Sync + 'static;

    /// Instantiate into `store` (runs the component's start code, under the store's budget).
    fn instantiate<'a>(
        pre: &'a Self::Pre,
        store: &'a mut Store<HostState>,
    ) -> GuestFuture<'a, Self>;
}

/// One instance: its store (sandbox state and limits), its bindings, and its engine's
/// epoch ticker (woken for every call).
pub(crate) struct Warm<B> {
    store: Store<HostState>,
    bindings: B,
    ticker: Arc<Ticker>,
}

impl<B> Warm<B> {
    /// Make one guest call under a fresh budget of `limits.call_timeout`. `f` starts the call
    /// from the store, the bindings and `args` (what it borrows must come through `args`,
    /// so the call's future can finish on another thread). An `Err` is a trap,
    /// an exhausted budget or the memory cap: the instance is dead and must be dropped.
    pub(crate) fn call<A: ?Sized + Sync, R: Send>(
        &mut self,
        limits: &PluginLimits,
        args: &A,
        f: impl for<'a> FnOnce(&'a mut Store<HostState>, &'a B, &'a A) -> GuestFuture<'a, R>,
    ) -> wasmtime::Result<R> {
        schedule::arm(&mut self.store, limits);
        let _awake = self.ticker.enter();
        schedule::run(f(&mut self.store, &self.bindings, args))
    }

    /// The largest linear memory the instance has grown to, in bytes.
    pub(crate) fn memory_high_water(&self) -> usize {
        self.store.data().limits.memory_high_water()
    }
}

/// The idle instances of one loaded component and its fault count.
pub(crate) struct Pool<B: World> {
    engine: PluginEngine,
    pre: B::Pre,
    idle: ArrayQueue<Box<Warm<B>>>,
    faults: AtomicU64,
}

impl<B: World> Pool<B> {
    /// An empty pool keeping at most `capacity` idle instances (more are created under load
    /// and dropped when they come back to a full pool).
    pub(crate) fn new(engine: &PluginEngine, pre: B::Pre, capacity: usize) -> Self {
        Self {
            engine: engine.clone(),
            pre,
            idle: ArrayQueue::new(capacity),
            faults: AtomicU64::new(0),
        }
    }

    /// A new instance, not from the pool (~30 µs).
    pub(crate) fn instantiate(&self) -> wasmtime::Result<Box<Warm<B>>> {
        let mut store = self.engine.sandboxed_store();
        let bindings = {
            let _awake = self.engine.ticker.enter();
            schedule::run(B::instantiate(&self.pre, &mut store))?
        };
        Ok(Box::new(Warm {
            store,
            bindings,
            ticker: self.engine.ticker.clone(),
        }))
    }

    /// An idle instance, or a new one when none is idle.
    pub(crate) fn take(&self) -> wasmtime::Result<Box<Warm<B>>> {
        match self.idle.pop() {
            Some(w) => Ok(w),
            None => self.instantiate(),
        }
    }

    /// Return an instance after a call that returned; a bloated one (linear memory over
    /// [`RETIRE_MEMORY_BYTES`]) or one beyond the capacity is dropped instead.
    pub(crate) fn give(&self, warm: Box<Warm<B>>) {
        if warm.memory_high_water() <= RETIRE_MEMORY_BYTES {
            let _ = self.idle.push(warm);
        }
    }

    /// Count a faulted call of plugin `plugin` and describe it as [`PluginError::Fault`].
    pub(crate) fn fault(
        &self,
        plugin: &str,
        function: &'static str,
        e: &wasmtime::Error,
    ) -> PluginError {
        self.faults.fetch_add(1, Ordering::Relaxed);
        PluginError::Fault {
            plugin: plugin.to_string(),
            function,
            message: fault_message(e, &self.engine.limits),
        }
    }

    /// The sandbox limits every call runs under.
    pub(crate) fn limits(&self) -> &PluginLimits {
        &self.engine.limits
    }

    /// Calls that faulted since load.
    pub(crate) fn faults(&self) -> u64 {
        self.faults.load(Ordering::Relaxed)
    }

    /// Idle instances right now.
    pub(crate) fn idle(&self) -> usize {
        self.idle.len()
    }
}

/// The fault of a failed instantiation (not counted: no call ran).
pub(crate) fn instantiate_fault(plugin: &str, e: &wasmtime::Error) -> PluginError {
    PluginError::Fault {
        plugin: plugin.to_string(),
        function: "instantiate",
        message: format!("{e:#}"),
    }
}
