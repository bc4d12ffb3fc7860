//! The one `wasmtime::Engine` of the process, its epoch ticker, the sandbox's WASI linker
//! (only the interfaces a Rust guest imports without doing I/O), component compilation (with
//! wasmtime's on-disk compilation cache when `PGW_PLUGIN_CACHE_DIR` is set), the
//! contract-version check, and whether guest code is named for a profiler
//! (`PGW_PLUGIN_PROFILER`).
//!
//! **Architecture invariant:** the linker provides `wasi:io`, `wasi:cli` (backed by an empty
//! context: no environment, no arguments, stdin closed, stdout and stderr discarded) and
//! `wasi:random` (a std `HashMap` seeds itself from it). There is no `wasi:clocks`,
//! `wasi:filesystem` or `wasi:sockets`: a component importing them is refused at load.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::component::{Component, HasData, Linker, ResourceTable};
use wasmtime::{Config, Engine, ProfilingStrategy};
use wasmtime_wasi::WasiView as _;
use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
use wasmtime_wasi::random::WasiRandom;

use super::compile::{self, ChildCompileError, Compiler};
use super::error::PluginError;
use super::sandbox_io::{SandboxIo, SandboxIoData};
use super::state::HostState;
use super::ticker::Ticker;

pub(crate) use super::ticker::EPOCH_TICK;

/// Default `PGW_PLUGIN_MAX_BYTES`: 100× a first-party component, yet a runaway file is refused.
pub const DEFAULT_PLUGIN_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Default `PGW_PLUGIN_STREAMS_PER_INSTANCE`: 512 concurrent streams need 32 instances
/// instead of 512 (each ~80 KiB of resident memory beside its store), while a fault in one
/// stream's parse call ends at most 15 other streams (see `plugin/stream_parser.rs`).
pub const DEFAULT_STREAMS_PER_INSTANCE: usize = 16;

/// Sandbox limits applied to every plugin call, and the size cap of a component file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginLimits {
    /// Budget of one call into a plugin (`PGW_PLUGIN_TIMEOUT_MS`): CPU time past its first
    /// slice, with a wall-clock backstop of `schedule::WALL_BACKSTOP_FACTOR` times it.
    pub call_timeout: Duration,
    /// Linear-memory cap of one instance in bytes (`PGW_PLUGIN_MEMORY_MB`).
    pub memory_bytes: usize,
    /// Largest component file loaded from disk, in bytes (`PGW_PLUGIN_MAX_BYTES`).
    pub max_component_bytes: u64,
    /// Most stream parsers of one provider component that share one instance
    /// (`PGW_PLUGIN_STREAMS_PER_INSTANCE`, ≥ 1; 1 = every streamed attempt holds an instance
    /// of its own). See `plugin/stream_parser.rs` for what sharing trades.
    pub streams_per_instance: usize,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(1),
            memory_bytes: 64 * 1024 * 1024,
            max_component_bytes: DEFAULT_PLUGIN_MAX_BYTES,
            streams_per_instance: DEFAULT_STREAMS_PER_INSTANCE,
        }
    }
}

impl PluginLimits {
    /// The call budget in epoch ticks (at least 2, so a call never starts already expired).
    pub(crate) fn deadline_ticks(&self) -> u64 {
        (self.call_timeout.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64 + 1
    }
}

/// Whether compiled guest code is named for a sampling profiler (`PGW_PLUGIN_PROFILER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profiler {
    /// Guest code is anonymous to profilers (the default).
    #[default]
    None,
    /// wasmtime appends each loaded component's functions (start address, size, name) to
    /// `/tmp/perf-<pid>.map`, the file `perf report` reads to name JIT code, so a profile of
    /// `polygateway serve` names a plugin's functions (their names come from the component's
    /// `name` section: keep it with `strip = false` in the plugin's release profile).
    /// The file grows with every component loaded, including on reload, and is never removed.
    PerfMap,
}

/// The process's wasm engine, shared by every plugin component.
#[derive(Clone)]
pub struct PluginEngine {
    pub(crate) engine: Engine,
    pub(crate) linker: Arc<Linker<HostState>>,
    pub(crate) limits: PluginLimits,
    cache_dir: Option<PathBuf>,
    compiler: Compiler,
    /// Components this engine compiled in this process (in-process compiler, or a failed child).
    compiled_here: Arc<AtomicU64>,
    /// Advances the epoch while guest code may run (see `ticker.rs`).
    pub(crate) ticker: Arc<Ticker>,
    profiler: Profiler,
}

impl std::fmt::Debug for PluginEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEngine")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl PluginEngine {
    /// Create the engine (component model, epoch interruption) and start its epoch ticker.
    /// `cache_dir`: where compiled components are cached, keyed by content and engine hash.
    pub fn new(limits: PluginLimits, cache_dir: Option<PathBuf>) -> Result<Self, PluginError> {
        Self::new_with_profiler(limits, cache_dir, Profiler::None)
    }

    /// [`PluginEngine::new`], with guest code named for `profiler`.
    pub fn new_with_profiler(
        limits: PluginLimits,
        cache_dir: Option<PathBuf>,
        profiler: Profiler,
    ) -> Result<Self, PluginError> {
        let load_err = |message: String| PluginError::Load {
            origin: "engine".into(),
            message,
        };
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        config.profiler(match profiler {
            Profiler::None => ProfilingStrategy::None,
            Profiler::PerfMap => ProfilingStrategy::PerfMap,
        });
        if let Some(dir) = &cache_dir {
            let mut cache_config = wasmtime::CacheConfig::new();
            cache_config.with_directory(dir);
            let cache = wasmtime::Cache::new(cache_config).map_err(|e| load_err(e.to_string()))?;
            config.cache(Some(cache));
        }
        let engine = Engine::new(&config).map_err(|e| match profiler {
            // wasmtime opens `/tmp/perf-<pid>.map` here: say which key asked for it.
            Profiler::PerfMap => load_err(format!(
                "PGW_PLUGIN_PROFILER=perfmap: cannot open /tmp/perf-{}.map: {e}",
                std::process::id()
            )),
            Profiler::None => load_err(e.to_string()),
        })?;
        let mut linker: Linker<HostState> = Linker::new(&engine);
        link_sandbox_wasi(&mut linker).map_err(|e| load_err(e.to_string()))?;
        let ticker = Ticker::start(engine.weak())
            .map_err(|e| load_err(format!("cannot start the epoch ticker: {e}")))?;
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            limits,
            cache_dir,
            compiler: Compiler::InProcess,
            compiled_here: Arc::new(AtomicU64::new(0)),
            ticker: Arc::new(ticker),
            profiler,
        })
    }

    /// Which profiler compiled guest code is named for.
    pub fn profiler(&self) -> Profiler {
        self.profiler
    }

    /// The sandbox limits of every call.
    pub fn limits(&self) -> PluginLimits {
        self.limits
    }

    /// The bytes of a component file, refused unless it is a regular file within
    /// `PGW_PLUGIN_MAX_BYTES` ([`PluginLimits::max_component_bytes`]); the size is checked
    /// before reading and the read is capped.
    ///
    /// Errors: [`PluginError::File`] naming the file and what was wrong with it.
    pub fn read_component(&self, path: &std::path::Path) -> Result<Vec<u8>, PluginError> {
        Ok(super::file::read_component(
            path,
            self.limits.max_component_bytes,
        )?)
    }

    /// The compiled-component cache directory, if any.
    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.cache_dir.as_deref()
    }

    /// The same engine, compiling components where `compiler` says (in-process by default).
    #[must_use]
    pub fn with_compiler(mut self, compiler: Compiler) -> Self {
        self.compiler = compiler;
        self
    }

    /// Where this engine compiles components.
    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// How many components this engine (and its clones) compiled in this process: every
    /// compile with [`Compiler::InProcess`], and the fallbacks of [`Compiler::Subprocess`]
    /// whose child failed. A load answered by the on-disk cache counts too.
    pub fn in_process_compiles(&self) -> u64 {
        self.compiled_here.load(Ordering::Relaxed)
    }

    /// Compile a component from its bytes; `origin` names it in errors. With a cache
    /// directory, wasmtime looks the compiled artifact up on disk first (keyed by the bytes'
    /// hash and the engine's compatibility hash) and stores it after compiling. With
    /// [`Compiler::Subprocess`], a child process compiles (`compile.rs`); when the child
    /// itself fails, the component is compiled here instead and a warning says why.
    pub(crate) fn compile(&self, origin: &str, bytes: &[u8]) -> Result<Component, PluginError> {
        let load_err = |message: String| PluginError::Load {
            origin: origin.to_string(),
            message,
        };
        if let Compiler::Subprocess { program } = &self.compiler {
            match compile::in_child(&self.engine, program, self.cache_dir.as_deref(), bytes) {
                Ok(c) => return Ok(c),
                Err(ChildCompileError::Invalid(message)) => return Err(load_err(message)),
                Err(e @ ChildCompileError::Child(_)) => {
                    tracing::warn!(plugin = origin, error = %e, "compiling in this process instead");
                }
            }
        }
        self.compiled_here.fetch_add(1, Ordering::Relaxed);
        Component::new(&self.engine, bytes).map_err(|e| load_err(format!("{e:#}")))
    }

    /// The plugin-contract interfaces a component exports, as `(interface, version)` pairs
    /// (e.g. `("chat-provider", "0.1.0")`).
    pub(crate) fn contract_exports(&self, component: &Component) -> Vec<(String, String)> {
        component
            .component_type()
            .exports(&self.engine)
            .filter_map(|(name, _)| {
                let rest = name.strip_prefix(CONTRACT_PACKAGE)?.strip_prefix('/')?;
                let (interface, version) = rest.split_once('@')?;
                Some((interface.to_string(), version.to_string()))
            })
            .collect()
    }

    /// Refuse a component that imports an interface the sandbox does not provide (clocks,
    /// files, sockets, anything outside WASI), naming the first such import.
    pub(crate) fn check_imports(
        &self,
        origin: &str,
        component: &Component,
    ) -> Result<(), PluginError> {
        let refused: Vec<String> = component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_string())
            .filter(|name| !PROVIDED_IMPORTS.iter().any(|p| name.starts_with(p)))
            .collect();
        match refused.first() {
            None => Ok(()),
            Some(first) => Err(PluginError::Load {
                origin: origin.to_string(),
                message: format!(
                    "it imports {first}{}, which the plugin sandbox does not provide (plugins get no clock, files, sockets or environment; only wasi:io, wasi:cli with an empty context, and wasi:random)",
                    match refused.len() {
                        1 => String::new(),
                        n => format!(" and {} other interface(s)", n - 1),
                    }
                ),
            }),
        }
    }

    /// A store for one warm instance: the memory cap as its limiter and an epoch deadline
    /// armed, since instantiation itself runs guest code.
    pub(crate) fn sandboxed_store(&self) -> wasmtime::Store<super::state::HostState> {
        let mut store = wasmtime::Store::new(
            &self.engine,
            super::state::HostState::new(self.limits.memory_bytes),
        );
        store.limiter(|s| &mut s.limits);
        super::schedule::install(&mut store);
        super::schedule::arm(&mut store, &self.limits);
        store
    }

    /// The checks every component kind gets at load — it exports `interface` at a supported
    /// version and imports nothing the sandbox lacks — then its pre-instantiation. Returns
    /// the exported version with the `InstancePre`.
    pub(crate) fn prepare(
        &self,
        origin: &str,
        component: &Component,
        interface: &'static str,
    ) -> Result<
        (
            String,
            wasmtime::component::InstancePre<super::state::HostState>,
        ),
        PluginError,
    > {
        let version = self.check_version(origin, component, interface)?;
        self.check_imports(origin, component)?;
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|e| PluginError::Load {
                origin: origin.to_string(),
                message: format!("{e:#}"),
            })?;
        Ok((version, pre))
    }

    /// Find the exported `polygateway:plugin/<interface>@<version>` and check the version.
    pub(crate) fn check_version(
        &self,
        origin: &str,
        component: &Component,
        interface: &'static str,
    ) -> Result<String, PluginError> {
        let found: Vec<String> = self
            .contract_exports(component)
            .into_iter()
            .filter(|(i, _)| i == interface)
            .map(|(_, v)| v)
            .collect();
        let supported = super::SUPPORTED_CONTRACT_VERSIONS.join(" and ");
        match found.first() {
            None => Err(PluginError::Load {
                origin: origin.to_string(),
                message: format!(
                    "it does not export {CONTRACT_PACKAGE}/{interface} (is it a {interface} component?)"
                ),
            }),
            Some(v) if super::SUPPORTED_CONTRACT_VERSIONS.contains(&v.as_str()) => Ok(v.clone()),
            Some(v) => Err(PluginError::Version {
                origin: origin.to_string(),
                interface: format!("{CONTRACT_PACKAGE}/{interface}"),
                found: v.clone(),
                supported,
            }),
        }
    }
}

/// What a failed guest call says in its `PluginError::Fault`: the time budget for an epoch
/// interrupt, the trap for a trap (a Rust guest's panic is an `unreachable` trap), else the
/// error chain (e.g. the memory cap). The wasm backtrace goes to the debug log only.
pub(crate) fn fault_message(e: &wasmtime::Error, limits: &PluginLimits) -> String {
    tracing::debug!(error = format!("{e:?}"), "plugin call failed");
    match e.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => format!(
            "exceeded its time budget of {} ms (PGW_PLUGIN_TIMEOUT_MS)",
            limits.call_timeout.as_millis()
        ),
        Some(wasmtime::Trap::UnreachableCodeReached) => {
            "wasm trap: unreachable code executed (a Rust guest panicked)".to_string()
        }
        Some(trap) => trap.to_string(),
        None => e
            .chain()
            .map(ToString::to_string)
            .filter(|m| !m.starts_with("error while executing at wasm backtrace"))
            .collect::<Vec<_>>()
            .join(": "),
    }
}

/// The WIT package of the plugin contract, without its version.
pub(crate) const CONTRACT_PACKAGE: &str = "polygateway:plugin";

/// Import-name prefixes the sandbox's linker provides (see [`link_sandbox_wasi`]), plus the
/// contract's shared `types` interface (types only: nothing to provide).
const PROVIDED_IMPORTS: [&str; 4] = [
    "wasi:io/",
    "wasi:cli/",
    "wasi:random/",
    "polygateway:plugin/types@",
];

/// `HasData` projection of the store onto its resource table (for `wasi:io`).
struct Io;

impl HasData for Io {
    type Data<'a> = &'a mut ResourceTable;
}

/// Link the WASI interfaces a Rust std guest imports even when it does no I/O — `wasi:io`,
/// `wasi:cli` (all backed by the empty context of `state.rs`) — and `wasi:random` (seeding a
/// std `HashMap`). Clocks, filesystem and sockets are deliberately absent.
fn link_sandbox_wasi(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::sync::io::{poll, streams};
    use wasmtime_wasi::p2::bindings::{cli, random};
    wasmtime_wasi::p2::bindings::sync::io::error::add_to_linker::<HostState, Io>(l, |t| {
        t.ctx().table
    })?;
    // Streams and poll never block nor enter a Tokio runtime (see `sandbox_io.rs`).
    poll::add_to_linker::<HostState, SandboxIoData>(l, |t| SandboxIo(t.ctx().table))?;
    streams::add_to_linker::<HostState, SandboxIoData>(l, |t| SandboxIo(t.ctx().table))?;
    cli::exit::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    cli::environment::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    cli::stdin::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    cli::stdout::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    cli::stderr::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    cli::terminal_input::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    cli::terminal_output::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    cli::terminal_stdin::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    cli::terminal_stdout::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    cli::terminal_stderr::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    random::random::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    Ok(())
}
