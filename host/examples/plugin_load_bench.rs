//! Plugin start-up benchmark: how long loading every first-party component (3 providers, 3
//! selectors, plus any `.wasm` given on the command line) takes with a cold compilation
//! cache (compile with Cranelift, store the artifact), with a warm one (a fresh engine —
//! as in a second start of the process — finding every artifact on disk), and with no
//! cache at all. Loading = compile or cache lookup, link, instantiate, `describe`.
//!
//! ```sh
//! cargo run --release -p polygateway --example plugin_load_bench [-- extra.wasm ...]
//! ```

use std::io::Write;
use std::time::{Duration, Instant};

use polygateway::config::FirstParty;
use polygateway::plugin::{
    BUILTIN_SELECTORS, PluginEngine, PluginError, PluginLimits, ProviderComponent,
    SelectorComponent, builtin_provider_bytes, builtin_selector_bytes,
};

/// Runs per mode; the median is reported.
const RUNS: usize = 5;

enum Kind {
    Provider,
    Selector,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut components: Vec<(String, Kind, Vec<u8>)> = Vec::new();
    for p in FirstParty::ALL {
        let bytes = builtin_provider_bytes(p).to_vec();
        components.push((format!("builtin:{}", p.name()), Kind::Provider, bytes));
    }
    for name in BUILTIN_SELECTORS {
        if let Some(bytes) = builtin_selector_bytes(name) {
            components.push((format!("builtin:{name}"), Kind::Selector, bytes.to_vec()));
        }
    }
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path)?;
        components.push((path, Kind::Provider, bytes));
    }
    let load_all = |engine: &PluginEngine| -> Result<Duration, PluginError> {
        let started = Instant::now();
        for (origin, kind, bytes) in &components {
            match kind {
                Kind::Provider => {
                    ProviderComponent::load(engine, origin, bytes)?;
                }
                Kind::Selector => {
                    SelectorComponent::load(engine, origin, bytes)?;
                }
            }
        }
        Ok(started.elapsed())
    };

    let mut cold = Vec::new();
    let mut warm = Vec::new();
    let mut none = Vec::new();
    for _ in 0..RUNS {
        let dir = tempfile::tempdir()?;
        // First start: empty cache directory.
        let engine = PluginEngine::new(PluginLimits::default(), Some(dir.path().to_path_buf()))?;
        cold.push(load_all(&engine)?);
        drop(engine);
        // Second start: a new engine (as a new process would have) on the same directory.
        let engine = PluginEngine::new(PluginLimits::default(), Some(dir.path().to_path_buf()))?;
        warm.push(load_all(&engine)?);
        let engine = PluginEngine::new(PluginLimits::default(), None)?;
        none.push(load_all(&engine)?);
    }
    let median = |v: &mut [Duration]| {
        v.sort();
        v[v.len() / 2]
    };
    let (cold, warm, none) = (median(&mut cold), median(&mut warm), median(&mut none));
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "loading {} components (median of {RUNS} runs)",
        components.len()
    )?;
    writeln!(
        out,
        "| start | compile cache | total ms | per component ms |"
    )?;
    writeln!(out, "| --- | --- | ---: | ---: |")?;
    let n = components.len() as f64;
    for (label, cache, d) in [
        ("first", "cold (compile + store)", cold),
        ("second", "warm (load from disk)", warm),
        ("any", "none", none),
    ] {
        writeln!(
            out,
            "| {label} | {cache} | {:.1} | {:.2} |",
            ms(d),
            ms(d) / n
        )?;
    }
    writeln!(
        out,
        "warm start is {:.1}x faster than cold",
        cold.as_secs_f64() / warm.as_secs_f64().max(1e-9)
    )?;
    Ok(())
}
