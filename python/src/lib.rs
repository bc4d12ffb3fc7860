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

/// jemalloc's counters for the extension's Rust heap, in bytes: `{"allocated": live
/// allocations, "resident": pages jemalloc holds in RAM (live, dirty and metadata)}`. With
/// `purge`, jemalloc first returns its dirty pages to the system (they are otherwise kept
/// for reuse and decay over about ten seconds), so `resident` — and the process's RSS — show
/// what is live. The load test asserts that both stay flat across rounds of calls.
///
/// Errors: `RuntimeError` if jemalloc's statistics cannot be read or the purge fails.
#[pyfunction]
#[pyo3(signature = (purge = false))]
fn allocator_stats(py: Python<'_>, purge: bool) -> PyResult<Py<pyo3::types::PyDict>> {
    let err = |what: &str, e: String| {
        pyo3::exceptions::PyRuntimeError::new_err(format!("jemalloc {what}: {e}"))
    };
    if purge {
        // MALLCTL_ARENAS_ALL (4096): every arena. The control takes no value either way.
        let name = c"arena.4096.purge";
        // SAFETY: a NUL-terminated name and null old/new pointers with zero length, the
        // calling convention of a control that neither reads nor writes a value.
        let rc = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 {
            return Err(err("purge", format!("mallctl returned {rc}")));
        }
    }
    let read = || -> Result<(usize, usize), tikv_jemalloc_ctl::Error> {
        // The counters are cached; advancing the epoch refreshes them.
        tikv_jemalloc_ctl::epoch::advance()?;
        Ok((
            tikv_jemalloc_ctl::stats::allocated::read()?,
            tikv_jemalloc_ctl::stats::resident::read()?,
        ))
    };
    let (allocated, resident) = read().map_err(|e| err("statistics", e.to_string()))?;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("allocated", allocated)?;
    d.set_item("resident", resident)?;
    Ok(d.unbind())
}

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
    m.add_function(wrap_pyfunction!(allocator_stats, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
