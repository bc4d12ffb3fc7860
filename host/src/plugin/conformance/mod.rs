//! The conformance kit: the contract suite a plugin component must pass, run against the
//! component exactly as the host loads it (same engine, linker, sandbox limits, pools) —
//! `polygateway plugin check FILE.wasm` and the tests that hold every first-party plugin to
//! it. The cases are data files under `tests/fixtures/` (see
//! `tests/fixtures/conformance/README.md`), embedded in the binary.
//!
//! It lives in the host crate rather than in `tests/` because the `polygateway` binary runs
//! it, and the test crate already depends on the host crate (the other way round would be a
//! dependency cycle); the fixtures stay data files in `tests/fixtures/`.
//!
//! ```no_run
//! use polygateway::plugin::conformance::{CheckOptions, check_component};
//! use polygateway::plugin::{PluginEngine, PluginLimits};
//!
//! let engine = PluginEngine::new(PluginLimits::default(), None)?;
//! let bytes = std::fs::read("acme.wasm")?;
//! let report = check_component(&engine, "acme.wasm", &bytes, &CheckOptions::default())?;
//! report.render(&mut std::io::stderr(), false)?;
//! assert!(report.success());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod first_party;
mod fixtures;
mod provider;
mod report;
mod robustness;
mod selector;
mod services;
mod strategy;
mod streams;

use std::time::{Duration, Instant};

use super::engine::{CONTRACT_PACKAGE, PluginEngine};
use super::{PluginError, ProviderComponent, SelectorComponent, StrategyComponent};

pub use fixtures::embedded_paths;
pub use report::{CaseResult, Report, SlowestCall};

/// The plugin worlds of the contract (`wit/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    /// `provider`: exports `chat-provider`.
    Provider,
    /// `selector`: exports `source-selector`.
    Selector,
    /// `strategy`: exports `structured-strategy`.
    Strategy,
}

impl World {
    /// The world's name in WIT.
    pub fn name(self) -> &'static str {
        match self {
            World::Provider => "provider",
            World::Selector => "selector",
            World::Strategy => "strategy",
        }
    }

    /// The interface the world exports.
    fn interface(self) -> &'static str {
        match self {
            World::Provider => "chat-provider",
            World::Selector => "source-selector",
            World::Strategy => "structured-strategy",
        }
    }

    /// Whether the kit has a suite for the world (every world of the contract today).
    pub fn supported(self) -> bool {
        match self {
            World::Provider | World::Selector | World::Strategy => true,
        }
    }
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a check runs.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The world to check against; `None` = detect it from the component's exports.
    pub world: Option<World>,
    /// Every plugin call must use at most this much CPU time (the soft budget; the engine's
    /// hard deadline, `PGW_PLUGIN_TIMEOUT_MS`, interrupts a runaway call as a fault).
    pub budget: Duration,
    /// Run only the cases whose name contains this.
    pub filter: Option<String>,
    /// The component's own protocol fixtures (`plugin check --fixtures DIR`): its
    /// `requests.json`, `errors.json`, `responses.json` and `streams.json` (with the `.sse`
    /// and `.expected.json` files they name, relative to DIR) replace the embedded
    /// OpenAI-shaped ones. The contract-generic cases — describe, hostile inputs
    /// (`robustness.json`), embeddings and OCR, the canary key on every request built, the
    /// per-call budget — run for every component either way.
    pub fixtures: Option<std::path::PathBuf>,
}

impl Default for CheckOptions {
    /// Detect the world; 250 ms per call (a quarter of the host's default hard limit).
    fn default() -> Self {
        Self {
            world: None,
            budget: Duration::from_millis(250),
            filter: None,
            fixtures: None,
        }
    }
}

/// Why a check could not run at all (a component that loads but misbehaves gives a
/// [`Report`] with failed cases instead).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// `--world` names a world this host does not support.
    #[error(
        "unsupported world `{0}`: the conformance kit has suites for the provider, selector and strategy worlds"
    )]
    UnsupportedWorld(World),
    /// The component exports no contract interface this host knows.
    #[error("{origin}: unknown world: {message}")]
    UnknownWorld { origin: String, message: String },
    /// The component could not be compiled (not a component, corrupt bytes).
    #[error(transparent)]
    Load(#[from] PluginError),
}

/// Check a component: compile it, detect (or take) its world, load it as the host would
/// and run the world's suite. The returned report says what passed and what differed.
///
/// Errors: [`CheckError`] when the world is unsupported or unknown, or the bytes are not a
/// component at all; a component that compiles but fails to load (wrong contract version,
/// an import the sandbox refuses, a trap in `describe`) gives a report whose `load` case
/// failed.
pub fn check_component(
    engine: &PluginEngine,
    origin: &str,
    bytes: &[u8],
    opts: &CheckOptions,
) -> Result<Report, CheckError> {
    if let Some(w) = opts.world
        && !w.supported()
    {
        return Err(CheckError::UnsupportedWorld(w));
    }
    let started = Instant::now();
    let component = engine.compile(origin, bytes)?;
    let exports = engine.contract_exports(&component);
    let world = match opts.world {
        Some(w) => w,
        None => detect(origin, &exports)?,
    };
    let mut report = Report::new(origin, world, opts.budget);
    let mut case = report.case("load::component");
    match world {
        World::Provider => {
            let loaded = ProviderComponent::from_component(engine, origin, &component);
            report.load_time = started.elapsed();
            match loaded {
                Ok(c) => {
                    report.plugin = Some(c.info().name.clone());
                    report.contract_version = Some(c.info().contract_version.clone());
                    report.finish(case);
                    provider::run(&c, opts, &mut report);
                }
                Err(e) => {
                    case.fail(e.to_string());
                    report.finish(case);
                }
            }
        }
        World::Selector => {
            let loaded = SelectorComponent::from_component(engine, origin, &component);
            report.load_time = started.elapsed();
            match loaded {
                Ok(c) => {
                    report.plugin = Some(c.info().name.clone());
                    report.contract_version = Some(c.info().contract_version.clone());
                    report.finish(case);
                    selector::run(&c, opts, &mut report);
                }
                Err(e) => {
                    case.fail(e.to_string());
                    report.finish(case);
                }
            }
        }
        World::Strategy => {
            let loaded = StrategyComponent::from_component(engine, origin, &component);
            report.load_time = started.elapsed();
            match loaded {
                Ok(c) => {
                    report.plugin = Some(c.info().name.clone());
                    report.contract_version = Some(c.info().contract_version.clone());
                    report.finish(case);
                    strategy::run(&c, opts, &mut report);
                }
                Err(e) => {
                    case.fail(e.to_string());
                    report.finish(case);
                }
            }
        }
    }
    Ok(report)
}

/// The world of a component from its contract exports.
fn detect(origin: &str, exports: &[(String, String)]) -> Result<World, CheckError> {
    for world in [World::Provider, World::Selector, World::Strategy] {
        if exports.iter().any(|(i, _)| i == world.interface()) {
            if !world.supported() {
                return Err(CheckError::UnsupportedWorld(world));
            }
            return Ok(world);
        }
    }
    let message = match exports.first() {
        Some((i, v)) => format!(
            "it exports {CONTRACT_PACKAGE}/{i}@{v}, which belongs to no world the kit checks (provider, selector, strategy)"
        ),
        None => format!(
            "it exports no {CONTRACT_PACKAGE} interface (a provider exports {CONTRACT_PACKAGE}/chat-provider, a selector {CONTRACT_PACKAGE}/source-selector, a strategy {CONTRACT_PACKAGE}/structured-strategy)"
        ),
    };
    Err(CheckError::UnknownWorld {
        origin: origin.to_string(),
        message,
    })
}

/// Whether `name` passes the filter.
pub(crate) fn selected(opts: &CheckOptions, name: &str) -> bool {
    opts.filter.as_deref().is_none_or(|f| name.contains(f))
}
