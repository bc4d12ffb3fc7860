//! The `polygateway` binary: a thin shell over `polygateway::cli`, with jemalloc as its
//! global allocator and the allocator's configuration. Measured with `polygateway bench`
//! (non-streamed, concurrency 64): glibc malloc and free were ~13 % of the gateway's CPU;
//! jemalloc cut CPU per call by ~15 % at +15 MiB peak RSS (mimalloc: the same CPU at
//! +55–65 MiB). An application embedding the library picks its own allocator.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's compiled-in options (`malloc_conf`; `_RJEM_MALLOC_CONF` in the environment
/// still overrides them): **one arena per CPU** (`percpu_arena:percpu`), a thread allocating
/// from the arena of the CPU it runs on, instead of the default four arenas per CPU assigned
/// to threads round-robin. With per-thread arenas, the ~14 MiB that wasmtime's compiler
/// threads allocate and free while the built-in components compile at start-up stayed in
/// those threads' arenas, which nothing else allocates from, and the Tokio workers' memory
/// under load grew beside it: peak RSS under 512 paced streams (`polygateway bench --only
/// paced`, three runs of each configuration) fell from 144/131/138 MiB (default, telemetry
/// off, virtual keys) to 127/117/125 MiB with per-CPU arenas, with no change in
/// throughput beyond the run-to-run noise. Per-CPU arenas keep the number of arenas — and
/// so lock contention — scaling with the machine, where a single arena would not.
///
/// **Freed pages go back to the kernel after about a second** (`dirty_decay_ms:1000`;
/// jemalloc's default is 10 s). Freed pages count in the process's RSS until their decay runs
/// out, so the heap one burst of load grew (its calls' buffers, connections and futures)
/// stayed resident under the next: in `polygateway bench`, whose 512 paced streams start
/// right after the non-streamed and streamed loads, the gateway's peak RSS under the paced
/// load was 78.7–86.2 MiB (mean 81.6, four full runs) with the 10 s decay and 76.5–80.8 MiB
/// (mean 78.4, four runs) with 1 s — the ~77 MiB the paced load reaches alone is its own
/// (docs/benchmark-history.md). Purging sooner costs `madvise` calls; CPU per request in the same
/// runs stayed within their run-to-run noise. jemalloc purges as its arenas allocate and
/// free (there is no `background_thread`), so a process that goes idle right after a burst
/// keeps that heap until it next serves a call.
///
/// jemalloc reads the symbol before `main` runs: it must be a thin pointer to a
/// NUL-terminated string, under the prefixed name that tikv-jemalloc-sys builds jemalloc
/// with (`_rjem_`). jemalloc defines the symbol weakly; this definition replaces it.
#[allow(unsafe_code)] // `export_name` is an unsafe attribute: a symbol jemalloc reads by name.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: &u8 = &ALLOCATOR_OPTIONS[0];

/// The options [`MALLOC_CONF`] points to.
const ALLOCATOR_OPTIONS: &[u8] = b"percpu_arena:percpu,dirty_decay_ms:1000\0";

fn main() -> std::process::ExitCode {
    polygateway::cli::run()
}

#[cfg(test)]
mod tests {
    /// jemalloc took the compiled-in options: the symbol's name and shape are right (a wrong
    /// name or a fat pointer would leave jemalloc on its defaults: `disabled`).
    #[test]
    #[allow(unsafe_code)] // these two mallctl options have no safe wrapper in tikv-jemalloc-ctl
    fn jemalloc_runs_with_one_arena_per_cpu_and_a_one_second_decay() {
        // (`_RJEM_MALLOC_CONF` in the test run's environment would override the compiled-in
        // options and fail this check, as it should: the options are not the binary's then.)
        // SAFETY: `opt.percpu_arena` is a `const char *` option, set once at start-up.
        let mode = unsafe { tikv_jemalloc_ctl::raw::read_str(b"opt.percpu_arena\0") };
        // `read_str` keeps the string's terminating NUL.
        assert_eq!(mode.map_err(|e| e.to_string()), Ok(&b"percpu\0"[..]));
        // SAFETY: `opt.dirty_decay_ms` is an `ssize_t` option, set once at start-up.
        let decay = unsafe { tikv_jemalloc_ctl::raw::read::<isize>(b"opt.dirty_decay_ms\0") };
        assert_eq!(decay.map_err(|e| e.to_string()), Ok(1000));
    }
}
