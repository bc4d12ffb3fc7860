//! The per-instance store data: an empty WASI context (no preopens, env, args or sockets;
//! stdio discarded) and the sandbox's resource limiter (linear-memory cap that traps with a
//! readable message, and a high-water mark the pools use to retire bloated instances).

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Most table elements one instance may grow to (function tables of a Rust guest hold a few
/// hundred entries).
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// Data owned by one plugin instance's `Store`.
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limits: SandboxLimiter,
    /// The budget of the call in progress (see `schedule.rs`).
    pub(crate) slice: super::schedule::Slice,
}

impl HostState {
    /// A sandbox with nothing in it and a linear-memory cap of `memory_bytes`.
    pub(crate) fn new(memory_bytes: usize) -> Self {
        Self {
            wasi: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
            limits: SandboxLimiter {
                memory_cap: memory_bytes,
                memory_high_water: 0,
            },
            slice: super::schedule::Slice::default(),
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The memory and table limits of one instance. Growing a memory past the cap traps the call
/// (the instance is then discarded) instead of returning -1 to the guest, so the fault names
/// the cause.
pub(crate) struct SandboxLimiter {
    /// Linear-memory cap in bytes (`PGW_PLUGIN_MEMORY_MB`).
    memory_cap: usize,
    /// The largest linear memory this instance has had, in bytes.
    memory_high_water: usize,
}

impl SandboxLimiter {
    /// The largest linear memory the instance has grown to, in bytes.
    pub(crate) fn memory_high_water(&self) -> usize {
        self.memory_high_water
    }
}

impl ResourceLimiter for SandboxLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            return Err(wasmtime::format_err!(
                "memory cap exceeded: the plugin tried to grow its memory to {} MiB; the cap is {} MiB (PGW_PLUGIN_MEMORY_MB)",
                desired.div_ceil(1024 * 1024),
                self.memory_cap / (1024 * 1024)
            ));
        }
        if maximum.is_some_and(|m| desired > m) {
            return Ok(false);
        }
        self.memory_high_water = self.memory_high_water.max(desired);
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        Err(error.context("memory growth failed"))
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            return Err(wasmtime::format_err!(
                "table limit exceeded: the plugin tried to grow a table to {desired} elements"
            ));
        }
        Ok(maximum.is_none_or(|m| desired <= m))
    }

    fn instances(&self) -> usize {
        8
    }

    fn tables(&self) -> usize {
        16
    }

    fn memories(&self) -> usize {
        4
    }
}
