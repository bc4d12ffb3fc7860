//! `polygateway plugin check FILE.wasm [--world provider|selector|strategy]`: run the
//! conformance kit on a component and print the result like a test runner. Exit status 0
//! when every case passed, 1 when a case failed, 2 when the component could not be checked
//! at all (unreadable file, not a component, a component of no known world).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::conformance::{CheckOptions, World, check_component};
use super::{
    PluginEngine, PluginLimits, builtin_provider_bytes, builtin_selector_bytes,
    builtin_strategy_bytes,
};
use crate::config::FirstParty;

/// `polygateway plugin …`.
#[derive(Debug, clap::Subcommand)]
pub enum PluginCommand {
    /// Run the conformance suite of a component's world against it, loaded exactly as the
    /// gateway loads it (same sandbox, limits and pools).
    Check(CheckArgs),
}

/// The worlds `--world` accepts.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum WorldArg {
    /// A provider component (exports `chat-provider`).
    Provider,
    /// A source selector (exports `source-selector`).
    Selector,
    /// A structured-output strategy (exports `structured-strategy`).
    Strategy,
}

/// Arguments of `plugin check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The component: a `.wasm` path, or `builtin:<name>` for a first-party one (`openai`,
    /// `anthropic`, `gemini`, `deepseek`, `qwen`, `monkeyocr`, `health-aware`, `round-robin`, `least-inflight`, `json-repair`,
    /// `native-schema`, `unwrap-parameters`).
    pub file: String,
    /// The world to check against (default: detected from the component's exports).
    #[arg(long, value_enum)]
    pub world: Option<WorldArg>,
    /// Budget of one plugin call in milliseconds of CPU time (as `PGW_PLUGIN_TIMEOUT_MS`
    /// counts it, so a loaded machine fails no case): a costlier call fails its case.
    #[arg(long, default_value_t = 250)]
    pub budget_ms: u64,
    /// Run only the cases whose name contains this text.
    #[arg(long)]
    pub filter: Option<String>,
    /// The component's own protocol fixtures, for a provider that does not speak OpenAI chat
    /// completions: a directory with `requests.json`, `errors.json`, `responses.json` and
    /// `streams.json` (and the transcripts they name), which replace the embedded
    /// OpenAI-shaped ones; the contract-generic cases still run.
    #[arg(long, value_name = "DIR")]
    pub fixtures: Option<PathBuf>,
    /// Also print how long loading took (compile or compile-cache hit, link, instantiate,
    /// describe).
    #[arg(long)]
    pub timing: bool,
    /// The sandbox's hard limit per call in milliseconds (a call past it is interrupted and
    /// counts as a plugin fault).
    #[arg(long, env = "PGW_PLUGIN_TIMEOUT_MS", default_value_t = 1000)]
    pub timeout_ms: u64,
    /// The sandbox's memory cap per instance, in MiB.
    #[arg(long, env = "PGW_PLUGIN_MEMORY_MB", default_value_t = 64)]
    pub memory_mb: usize,
    /// Compiled-component cache directory (as the gateway's `PGW_PLUGIN_CACHE_DIR`).
    #[arg(long, env = "PGW_PLUGIN_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// Run a `plugin` subcommand; the exit code reports the result.
pub fn run(cmd: PluginCommand) -> ExitCode {
    match cmd {
        PluginCommand::Check(args) => check(&args),
    }
}

fn check(args: &CheckArgs) -> ExitCode {
    let mut err = std::io::stderr();
    let bytes = match component_bytes(&args.file) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(err, "polygateway plugin check: {e}");
            return ExitCode::from(2);
        }
    };
    let limits = PluginLimits {
        call_timeout: Duration::from_millis(args.timeout_ms.max(1)),
        memory_bytes: args.memory_mb.clamp(1, 4096) * 1024 * 1024,
        ..PluginLimits::default()
    };
    let engine = match PluginEngine::new(limits, args.cache_dir.clone()) {
        Ok(e) => e,
        Err(e) => {
            let _ = writeln!(err, "polygateway plugin check: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = CheckOptions {
        world: args.world.map(|w| match w {
            WorldArg::Provider => World::Provider,
            WorldArg::Selector => World::Selector,
            WorldArg::Strategy => World::Strategy,
        }),
        budget: Duration::from_millis(args.budget_ms.max(1)),
        filter: args.filter.clone(),
        fixtures: args.fixtures.clone(),
    };
    match check_component(&engine, &args.file, &bytes, &opts) {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            let _ = report.render(&mut out, args.timing);
            let _ = out.flush();
            if report.success() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            let _ = writeln!(err, "polygateway plugin check: {e}");
            ExitCode::from(2)
        }
    }
}

/// The bytes of a `.wasm` path or a `builtin:<name>` component.
fn component_bytes(file: &str) -> Result<Vec<u8>, String> {
    match file.strip_prefix("builtin:") {
        Some(name) => FirstParty::from_name(name)
            .map(builtin_provider_bytes)
            .or_else(|| builtin_selector_bytes(name))
            .or_else(|| builtin_strategy_bytes(name))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| {
                format!(
                    "no first-party component `{name}` (providers: openai, anthropic, gemini, deepseek, qwen, monkeyocr; selectors: health-aware, round-robin, least-inflight; strategies: json-repair, native-schema, unwrap-parameters)"
                )
            }),
        None => super::file::read_component(
            std::path::Path::new(file),
            super::DEFAULT_PLUGIN_MAX_BYTES,
        )
        .map_err(|e| e.to_string()),
    }
}
