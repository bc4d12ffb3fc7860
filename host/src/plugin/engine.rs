//! The one `wasmtime::Engine` of the process, its epoch ticker, and component compilation
//! (with wasmtime's on-disk compilation cache when `PGW_PLUGIN_CACHE_DIR` is set).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

use super::error::PluginError;
use super::state::HostState;

/// Epoch tick period: plugin deadlines are whole multiples of it.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Sandbox limits applied to every plugin call.
#[derive(Debug, Clone, Copy)]
pub struct PluginLimits {
    /// Wall-clock budget of one call into a plugin (`PGW_PLUGIN_TIMEOUT_MS`).
    pub call_timeout: Duration,
    /// Linear-memory cap of one instance in bytes (`PGW_PLUGIN_MEMORY_MB`).
    pub memory_bytes: usize,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(1),
            memory_bytes: 64 * 1024 * 1024,
        }
    }
}

impl PluginLimits {
    /// The call budget in epoch ticks (at least 2, so a call never starts already expired).
    pub(crate) fn deadline_ticks(&self) -> u64 {
        (self.call_timeout.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64 + 1
    }
}

struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The process's wasm engine, shared by every plugin component.
#[derive(Clone)]
pub struct PluginEngine {
    pub(crate) engine: Engine,
    pub(crate) linker: Arc<Linker<HostState>>,
    pub(crate) limits: PluginLimits,
    _ticker: Arc<Ticker>,
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
        let load_err = |message: String| PluginError::Load {
            origin: "engine".into(),
            message,
        };
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        if let Some(dir) = cache_dir {
            let mut cache_config = wasmtime::CacheConfig::new();
            cache_config.with_directory(dir);
            let cache = wasmtime::Cache::new(cache_config).map_err(|e| load_err(e.to_string()))?;
            config.cache(Some(cache));
        }
        let engine = Engine::new(&config).map_err(|e| load_err(e.to_string()))?;
        let mut linker: Linker<HostState> = Linker::new(&engine);
        // A Rust std guest imports wasi:cli/io interfaces even when it does no I/O; they are
        // satisfied by an empty context (see `state.rs`).
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| load_err(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let stop_thread = stop.clone();
        std::thread::Builder::new()
            .name("pgw-epoch".into())
            .spawn(move || {
                while !stop_thread.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| load_err(format!("cannot start the epoch ticker: {e}")))?;
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            limits,
            _ticker: Arc::new(Ticker { stop }),
        })
    }

    /// Compile a component from its bytes; `origin` names it in errors.
    pub(crate) fn compile(&self, origin: &str, bytes: &[u8]) -> Result<Component, PluginError> {
        Component::new(&self.engine, bytes).map_err(|e| PluginError::Load {
            origin: origin.to_string(),
            message: format!("{e:#}"),
        })
    }

    /// Find the exported `polygateway:plugin/<interface>@<version>` and check the version.
    pub(crate) fn check_version(
        &self,
        origin: &str,
        component: &Component,
        interface: &'static str,
    ) -> Result<String, PluginError> {
        let prefix = format!("polygateway:plugin/{interface}@");
        let ty = component.component_type();
        let found: Vec<String> = ty
            .exports(&self.engine)
            .filter_map(|(name, _)| name.strip_prefix(&prefix).map(str::to_string))
            .collect();
        let supported = super::SUPPORTED_CONTRACT_VERSIONS.join(", ");
        match found.first() {
            None => Err(PluginError::Load {
                origin: origin.to_string(),
                message: format!(
                    "it does not export polygateway:plugin/{interface} (is it a {interface} component?)"
                ),
            }),
            Some(v) if super::SUPPORTED_CONTRACT_VERSIONS.contains(&v.as_str()) => Ok(v.clone()),
            Some(v) => Err(PluginError::Version {
                origin: origin.to_string(),
                interface: match interface {
                    "chat-provider" => "polygateway:plugin/chat-provider",
                    _ => "polygateway:plugin",
                },
                found: v.clone(),
                supported,
            }),
        }
    }
}
