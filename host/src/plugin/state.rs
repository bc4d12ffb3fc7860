//! The per-instance store data: an empty WASI context (no preopens, env, args or sockets;
//! stdio discarded) and the memory limiter.

use wasmtime::component::ResourceTable;
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Data owned by one plugin instance's `Store`.
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limits: StoreLimits,
}

impl HostState {
    /// A sandbox with nothing in it and a linear-memory cap of `memory_bytes`.
    pub(crate) fn new(memory_bytes: usize) -> Self {
        Self {
            wasi: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(memory_bytes)
                .instances(8)
                .tables(16)
                .memories(4)
                .trap_on_grow_failure(true)
                .build(),
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
