//! One pool per loaded component, in the bindings of the contract version it exports: the
//! host keeps a binding per version (`bindings.rs`) and picks one from the component's
//! exported interface at load. [`Versioned`] wraps the pool of either version and makes each
//! guest call through the world's calls trait `C` (`dyn ProviderCalls`, `dyn SelectorCalls`,
//! `dyn StrategyCalls`), so the code above it is written once, in 0.2 types.

use wasmtime::Store;

use super::engine::PluginLimits;
use super::error::PluginError;
use super::pool::{Pool, Warm, World, instantiate_fault};
use super::schedule::GuestFuture;
use super::state::HostState;

/// The contract versions of `polygateway:plugin` with a binding, oldest first.
pub const SUPPORTED_CONTRACT_VERSIONS: &[&str] = &["0.1.0", "0.2.0"];

/// Bindings that answer a world's calls as the trait object `C`.
pub(crate) trait Calls<C: ?Sized> {
    fn calls(&self) -> &C;
}

/// A guest call written once over the world's calls trait `C`.
pub(crate) trait CallFn<C: ?Sized, A: ?Sized, R>:
    for<'a> FnOnce(&'a mut Store<HostState>, &'a C, &'a A) -> GuestFuture<'a, R>
{
}
impl<C: ?Sized, A: ?Sized, R, F> CallFn<C, A, R> for F where
    F: for<'a> FnOnce(&'a mut Store<HostState>, &'a C, &'a A) -> GuestFuture<'a, R>
{
}

/// The pool of a component of contract 0.1 (`Old`) or 0.2 (`New`).
pub(crate) enum Versioned<Old: World, New: World> {
    V0_1(Pool<Old>),
    V0_2(Pool<New>),
}

/// One warm instance of a [`Versioned`] pool.
pub(crate) enum VersionedWarm<Old, New> {
    V0_1(Box<Warm<Old>>),
    V0_2(Box<Warm<New>>),
}

impl<Old, New> VersionedWarm<Old, New> {
    /// The largest linear memory the instance has grown to, in bytes.
    pub(crate) fn memory_high_water(&self) -> usize {
        match self {
            Self::V0_1(w) => w.memory_high_water(),
            Self::V0_2(w) => w.memory_high_water(),
        }
    }

    /// One guest call under a fresh budget (see [`Warm::call`]).
    pub(crate) fn call<C: ?Sized + 'static, A: ?Sized + Sync, R: Send>(
        &mut self,
        limits: &PluginLimits,
        args: &A,
        f: impl CallFn<C, A, R>,
    ) -> wasmtime::Result<R>
    where
        Old: Calls<C>,
        New: Calls<C>,
    {
        match self {
            Self::V0_1(w) => w.call(limits, args, |s, b, a| f(s, b.calls(), a)),
            Self::V0_2(w) => w.call(limits, args, |s, b, a| f(s, b.calls(), a)),
        }
    }
}

impl<Old: World, New: World> Versioned<Old, New> {
    /// A new instance, not from the pool.
    pub(crate) fn instantiate(&self) -> wasmtime::Result<VersionedWarm<Old, New>> {
        Ok(match self {
            Self::V0_1(p) => VersionedWarm::V0_1(p.instantiate()?),
            Self::V0_2(p) => VersionedWarm::V0_2(p.instantiate()?),
        })
    }

    /// An idle instance, or a new one.
    pub(crate) fn take(&self) -> wasmtime::Result<VersionedWarm<Old, New>> {
        Ok(match self {
            Self::V0_1(p) => VersionedWarm::V0_1(p.take()?),
            Self::V0_2(p) => VersionedWarm::V0_2(p.take()?),
        })
    }

    /// Return an instance after a call that returned (see [`Pool::give`]).
    pub(crate) fn give(&self, warm: VersionedWarm<Old, New>) {
        match (self, warm) {
            (Self::V0_1(p), VersionedWarm::V0_1(w)) => p.give(w),
            (Self::V0_2(p), VersionedWarm::V0_2(w)) => p.give(w),
            // An instance only ever comes back to the pool that made it.
            _ => {}
        }
    }

    /// Count a faulted call and describe it (see [`Pool::fault`]).
    pub(crate) fn fault(
        &self,
        plugin: &str,
        function: &'static str,
        e: &wasmtime::Error,
    ) -> PluginError {
        match self {
            Self::V0_1(p) => p.fault(plugin, function, e),
            Self::V0_2(p) => p.fault(plugin, function, e),
        }
    }

    /// One call on a pooled instance: taken, called, given back (or dropped after a fault).
    ///
    /// Errors: [`PluginError::Fault`] naming `plugin` and `function` (or `instantiate`).
    pub(crate) fn call<C: ?Sized + 'static, A: ?Sized + Sync, R: Send>(
        &self,
        plugin: &str,
        function: &'static str,
        args: &A,
        f: impl CallFn<C, A, R>,
    ) -> Result<R, PluginError>
    where
        Old: Calls<C>,
        New: Calls<C>,
    {
        let mut warm = self.take().map_err(|e| instantiate_fault(plugin, &e))?;
        match warm.call(self.limits(), args, f) {
            Ok(r) => {
                self.give(warm);
                Ok(r)
            }
            Err(e) => Err(self.fault(plugin, function, &e)),
        }
    }

    /// The sandbox limits every call runs under.
    pub(crate) fn limits(&self) -> &PluginLimits {
        match self {
            Self::V0_1(p) => p.limits(),
            Self::V0_2(p) => p.limits(),
        }
    }

    /// Calls that faulted since load.
    pub(crate) fn faults(&self) -> u64 {
        match self {
            Self::V0_1(p) => p.faults(),
            Self::V0_2(p) => p.faults(),
        }
    }

    /// Idle instances right now.
    pub(crate) fn idle(&self) -> usize {
        match self {
            Self::V0_1(p) => p.idle(),
            Self::V0_2(p) => p.idle(),
        }
    }
}
