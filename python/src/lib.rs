//! `polygateway._native`: the Python binding of the embedded gateway. It wraps
//! `polygateway::Gateway` — the same crate the proxy runs, no second implementation — and
//! bridges its futures to asyncio with `pyo3-async-runtimes` on one shared tokio runtime.
//! The Python package (`python/polygateway/`) gives it its public API.
//!
//! **Invariant:** the GIL is never held while the gateway waits: async methods return an
//! asyncio future at once (`future_into_py`), the blocking ones release the GIL
//! (`Python::detach`) before they block. Cancelling the asyncio future drops the Rust future,
//! so the call's permits, leases and upstream request are released as in Rust.
//!
//! One file per concern: `convert.rs` (Python ⇄ JSON), `request.rs` (call arguments →
//! requests), `answer.rs` (answers → the package's Python types), `errors.rs` (errors → the
//! package's exception tree), `gateway.rs` (the gateway object), `stream.rs` (a streamed call), `exit.rs` (interpreter exit).

// PyO3's macros expand to `unsafe` FFI glue; this crate writes none of its own.
#![allow(unsafe_code)]

mod answer;
mod convert;
mod errors;
mod exit;
mod gateway;
mod request;
mod stream;

use pyo3::prelude::*;

/// Rust's allocations in the extension (the gateway's) go to jemalloc; Python's own stay
/// with the interpreter's allocator. glibc malloc's per-thread arenas fragmented under
/// bursts of concurrent calls (RSS kept growing); jemalloc keeps it flat (python/README.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Threads of the runtime's blocking pool. `pyo3-async-runtimes` completes every asyncio
/// future from it (each takes the GIL, so more threads only wait for one another); left at
/// tokio's default of 512, a burst of 1,000 concurrent calls starts hundreds of threads, and
/// their malloc arenas kept RSS growing by ~10 MiB per 1,000 calls.
const BLOCKING_THREADS: usize = 8;

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime
        .enable_all()
        .thread_name("polygateway")
        .max_blocking_threads(BLOCKING_THREADS);
    pyo3_async_runtimes::tokio::init(runtime);
    m.add_class::<gateway::NativeGateway>()?;
    m.add_class::<stream::NativeStream>()?;
    m.add_function(wrap_pyfunction!(gateway::start, m)?)?;
    m.add_function(wrap_pyfunction!(gateway::start_from_env, m)?)?;
    m.add_function(wrap_pyfunction!(gateway::bench_roundtrip, m)?)?;
    m.add_function(wrap_pyfunction!(exit::quiesce, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
