//! `polygateway bench`: gateway overhead measured side by side with the direct path, in one
//! run — a fast mock upstream, the bare pass-through proxy (the floor on the same HTTP stack),
//! the gateway as a child process with the default governance on and with everything off,
//! a load generator, and the plugin microbenchmark (wasm versus native). Prints one table
//! and writes it as JSON. Numbers are only meaningful on a quiet machine.

mod load;
mod micro;
mod passthrough;
mod process;
mod soak;
mod upstream;

use std::io::Write;
use std::time::Duration;

pub use load::Stats;
pub use micro::Micro;
pub use passthrough::start as passthrough_start;
pub use soak::{SoakOptions, SoakReport, run as run_soak};

/// Benchmark parameters.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Length of each measured run.
    pub duration: Duration,
    /// SSE chunks per streamed answer.
    pub chunks: usize,
    /// The high concurrency level (the low one is 1).
    pub concurrency: usize,
    /// Where the JSON report goes.
    pub out: std::path::PathBuf,
    /// Only the rows these select (empty: all).
    pub only: Vec<RowFilter>,
}

/// A selection of benchmark rows (`--only`): by mode or by concurrency level. Filters of the
/// same kind add up; a mode and a level must both match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RowFilter {
    NonStream,
    Stream,
    /// Concurrency 1.
    C1,
    /// The high concurrency level.
    High,
}

impl BenchOptions {
    /// Whether the rows of `stream` at concurrency `conc` are measured.
    fn wants(&self, stream: bool, conc: usize) -> bool {
        let modes = [RowFilter::NonStream, RowFilter::Stream];
        let levels = [RowFilter::C1, RowFilter::High];
        let pick = |kinds: [RowFilter; 2], this: RowFilter| {
            !self.only.iter().any(|f| kinds.contains(f)) || self.only.contains(&this)
        };
        let mode = if stream {
            RowFilter::Stream
        } else {
            RowFilter::NonStream
        };
        let level = if conc == 1 {
            RowFilter::C1
        } else {
            RowFilter::High
        };
        pick(modes, mode) && pick(levels, level)
    }
}

/// One measured row.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub mode: &'static str,
    pub concurrency: usize,
    pub path: &'static str,
    pub stats: Stats,
    /// p50 / p99 / p99.9 minus the direct path's, in µs (gateway and pass-through rows).
    pub added_p50_us: Option<f64>,
    pub added_p99_us: Option<f64>,
    pub added_p999_us: Option<f64>,
    /// CPU seconds of the serving process (gateway or pass-through) per 1,000 requests.
    pub cpu_s_per_1k: Option<f64>,
    /// Throughput relative to the pass-through proxy.
    pub vs_passthrough: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub machine: String,
    pub duration_s: f64,
    pub chunks: usize,
    pub rows: Vec<Row>,
    pub gateway_peak_rss_mib: Option<f64>,
    pub gateway_off_peak_rss_mib: Option<f64>,
    pub micro: Option<Micro>,
    pub derived: Derived,
}

/// Figures computed from the rows and the microbenchmark, checked against the gateway's
/// overhead targets (README, "Benchmark").
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Derived {
    /// Added p99 of the default gateway at concurrency 1, non-streamed, in µs (target ≤ 100).
    pub added_p99_c1_us: Option<f64>,
    /// Gateway (default config) throughput at the high concurrency relative to the
    /// pass-through proxy, non-streamed and streamed (target ≥ 0.70).
    pub high_conc_vs_passthrough_non_stream: Option<f64>,
    pub high_conc_vs_passthrough_stream: Option<f64>,
    /// Latency the gateway adds per chunk at concurrency 1: (added p50 streamed − added p50
    /// non-streamed) / chunks, in µs (target ≤ 5).
    pub added_per_chunk_c1_us: Option<f64>,
    /// The same against the pass-through proxy instead of the direct path: what the gateway
    /// adds per chunk beyond the floor, in µs.
    pub added_per_chunk_vs_passthrough_c1_us: Option<f64>,
    /// Gateway CPU per chunk at the high concurrency: (CPU per streamed call − CPU per
    /// non-streamed call) / chunks, in µs.
    pub cpu_per_chunk_us: Option<f64>,
    /// The wasm provider path relative to the same logic compiled natively, end to end for
    /// one streamed call at concurrency 1: gateway CPU per call divided by that CPU with the
    /// plugin's measured wasm share replaced by its native cost (target ≤ 1.25).
    pub wasm_vs_native_end_to_end: Option<f64>,
    /// CPU per call of the gateway serving a virtual key with budgets (key and team) and
    /// per-key gates, relative to the default gateway serving a static key, non-streamed and
    /// streamed at the high concurrency (issue target ≤ 1.10): the median of
    /// [`KEYED_PAIRS`] back-to-back pairs of runs (below), else the rows' single runs.
    pub keyed_vs_static_cpu_non_stream: Option<f64>,
    pub keyed_vs_static_cpu_stream: Option<f64>,
    /// The ratio of each pair: the two gateways measured one right after the other, in
    /// alternating order, so that a change in the machine's background load between the
    /// rows' runs does not pass for a cost of the keyed path.
    pub keyed_vs_static_cpu_pairs_non_stream: Vec<f64>,
    pub keyed_vs_static_cpu_pairs_stream: Vec<f64>,
}

/// How many back-to-back pairs of runs measure the keyed path's CPU ratio.
pub const KEYED_PAIRS: usize = 5;

/// The median of `xs` (the mean of the middle two for an even count); `None` when empty.
pub(crate) fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => v.get(n / 2).copied(),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Gateway CPU ms per call of one run against `gw`.
async fn cpu_per_call(
    gw: &process::GatewayChild,
    stream: bool,
    conc: usize,
    duration: Duration,
    key: &str,
) -> Option<f64> {
    let before = gw.cpu_seconds();
    let s = load::run_with_key(
        &format!("{}/v1/chat/completions", gw.base_url),
        stream,
        conc,
        duration,
        Some(key),
    )
    .await;
    gw.cpu_seconds()
        .zip(before)
        .filter(|_| s.requests > 0)
        .map(|(b, a)| (b - a) / s.requests as f64 * 1000.0)
}

/// [`KEYED_PAIRS`] pairs of runs of the static-key and the keyed gateway, back to back in
/// alternating order: each pair's keyed / static CPU per call.
async fn keyed_pairs(
    on: &process::GatewayChild,
    keyed: &process::GatewayChild,
    vkey: &str,
    stream: bool,
    conc: usize,
    duration: Duration,
) -> Vec<f64> {
    let mut ratios = Vec::with_capacity(KEYED_PAIRS);
    for i in 0..KEYED_PAIRS {
        let (s, k) = if i % 2 == 0 {
            let s = cpu_per_call(on, stream, conc, duration, STATIC_KEY).await;
            (s, cpu_per_call(keyed, stream, conc, duration, vkey).await)
        } else {
            let k = cpu_per_call(keyed, stream, conc, duration, vkey).await;
            (
                cpu_per_call(on, stream, conc, duration, STATIC_KEY).await,
                k,
            )
        };
        if let (Some(s), Some(k)) = (s, k)
            && s > 0.0
        {
            ratios.push(k / s);
        }
    }
    ratios
}

fn derive(rows: &[Row], chunks: usize, high: usize, micro: Option<&Micro>) -> Derived {
    let find = |mode: &str, conc: usize, path: &str| {
        rows.iter()
            .find(|r| r.mode == mode && r.concurrency == conc && r.path == path)
    };
    let per_chunk = |a: Option<f64>, b: Option<f64>| {
        a.zip(b)
            .filter(|_| chunks > 0)
            .map(|(s, n)| (s - n) / chunks as f64)
    };
    let gw = |mode: &str, conc: usize| find(mode, conc, "gateway");
    let cpu_us = |mode: &str, conc: usize| {
        gw(mode, conc)
            .and_then(|r| r.cpu_s_per_1k)
            .map(|c| c * 1000.0)
    };
    Derived {
        added_p99_c1_us: gw("non-stream", 1).and_then(|r| r.added_p99_us),
        high_conc_vs_passthrough_non_stream: gw("non-stream", high).and_then(|r| r.vs_passthrough),
        high_conc_vs_passthrough_stream: gw("stream", high).and_then(|r| r.vs_passthrough),
        added_per_chunk_c1_us: per_chunk(
            gw("stream", 1).and_then(|r| r.added_p50_us),
            gw("non-stream", 1).and_then(|r| r.added_p50_us),
        ),
        added_per_chunk_vs_passthrough_c1_us: per_chunk(
            gw("stream", 1)
                .zip(find("stream", 1, "passthrough"))
                .map(|(g, p)| g.stats.p50_us - p.stats.p50_us),
            gw("non-stream", 1)
                .zip(find("non-stream", 1, "passthrough"))
                .map(|(g, p)| g.stats.p50_us - p.stats.p50_us),
        ),
        cpu_per_chunk_us: per_chunk(cpu_us("stream", high), cpu_us("non-stream", high)),
        keyed_vs_static_cpu_non_stream: keyed_ratio(
            find("non-stream", high, "gateway-keyed"),
            gw("non-stream", high),
        ),
        keyed_vs_static_cpu_stream: keyed_ratio(
            find("stream", high, "gateway-keyed"),
            gw("stream", high),
        ),
        wasm_vs_native_end_to_end: micro.zip(cpu_us("stream", 1)).and_then(|(m, cpu)| {
            let native = cpu - m.attempt_wasm_ns / 1000.0 + m.attempt_native_ns / 1000.0;
            (native > 0.0).then(|| cpu / native)
        }),
        keyed_vs_static_cpu_pairs_non_stream: Vec::new(),
        keyed_vs_static_cpu_pairs_stream: Vec::new(),
    }
}

/// The derived figures with the keyed pairs' ratios: their medians replace the single runs'.
fn with_pairs(mut d: Derived, [non_stream, stream]: [Vec<f64>; 2]) -> Derived {
    if let Some(m) = median(&non_stream) {
        d.keyed_vs_static_cpu_non_stream = Some(m);
    }
    if let Some(m) = median(&stream) {
        d.keyed_vs_static_cpu_stream = Some(m);
    }
    d.keyed_vs_static_cpu_pairs_non_stream = non_stream;
    d.keyed_vs_static_cpu_pairs_stream = stream;
    d
}

/// CPU per call of `keyed` over `base`.
fn keyed_ratio(keyed: Option<&Row>, base: Option<&Row>) -> Option<f64> {
    let k = keyed?.cpu_s_per_1k?;
    let b = base?.cpu_s_per_1k?;
    (b > 0.0).then(|| k / b)
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs, {model}")
}

/// The client key of the default gateway (a static `PGW_API_KEYS` key).
const STATIC_KEY: &str = "sk-bench-static";
/// The admin key of the gateway with virtual keys.
const ADMIN_KEY: &str = "bench-admin-key";
/// The price of the bench model: every row and every budget is priced.
const PRICES: &str = r#"{"bench-model": {"input": 0.5, "output": 1.5}}"#;

/// The gateway with virtual keys on: the default configuration plus the key store, and a
/// key whose budget and limits are checked on every call (set high enough never to deny).
fn keyed_env(upstream: &str, prices: &std::path::Path) -> Vec<(String, String)> {
    let mut env = gateway_env(upstream, true);
    env.retain(|(k, _)| k != "PGW_API_KEYS");
    env.extend([
        ("PGW_VIRTUAL_KEYS".into(), "true".into()),
        (
            "PGW_KEY_HASH_SECRET".into(),
            "bench-hash-secret-0123456789abcdef0123".into(),
        ),
        ("PGW_ADMIN_KEYS".into(), ADMIN_KEY.into()),
        ("PGW_PRICING_FILE".into(), prices.display().to_string()),
    ]);
    env
}

fn gateway_env(upstream: &str, governance: bool) -> Vec<(String, String)> {
    let mut env = vec![
        ("LLM__OPENAI__1__BASE_URL".into(), format!("{upstream}/v1")),
        ("LLM__OPENAI__1__MODEL".into(), "bench-model".into()),
        ("LLM__OPENAI__1__API_KEY".into(), "sk-bench".into()),
    ];
    if governance {
        // Default configuration: SQLite telemetry, memory limiter with every gate on (set
        // high enough never to deny), breaker, health-aware selector. EST_TOKENS is explicit:
        // its default, TPM / 60 per attempt, would pre-charge a sixtieth of the quota per
        // call in flight and deny the 61st concurrent call until the window moves on.
        env.extend([
            ("LLM__OPENAI__1__MAX_CONCURRENCY".into(), "100000".into()),
            ("LLM__OPENAI__1__RPM".into(), "1000000000".into()),
            ("LLM__OPENAI__1__TPM".into(), "1000000000000".into()),
            ("LLM__OPENAI__1__EST_TOKENS".into(), "64".into()),
            ("LLM__GLOBAL__MAX_CONCURRENCY".into(), "100000".into()),
            ("PGW_API_KEYS".into(), STATIC_KEY.into()),
        ]);
    } else {
        env.push(("PGW_TELEMETRY_BACKEND".into(), "none".into()));
    }
    env
}

/// Run the benchmark and print the table; the report is also written as JSON.
pub async fn run(opts: BenchOptions) -> Result<Report, String> {
    let mut out = std::io::stdout();
    let upstream_addr = upstream::start(opts.chunks)
        .await
        .map_err(|e| e.to_string())?;
    let upstream = format!("http://{upstream_addr}");
    let pass_child = process::GatewayChild::passthrough(&upstream).await?;
    let pass_addr = pass_child
        .base_url
        .trim_start_matches("http://")
        .to_string();
    let prices_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let prices = prices_dir.path().join("prices.json");
    std::fs::write(&prices, PRICES).map_err(|e| e.to_string())?;
    let mut on_env = gateway_env(&upstream, true);
    on_env.push(("PGW_PRICING_FILE".into(), prices.display().to_string()));
    let gw_on = process::GatewayChild::start(&on_env).await?;
    let gw_off = process::GatewayChild::start(&gateway_env(&upstream, false)).await?;
    let gw_keyed = process::GatewayChild::start(&keyed_env(&upstream, &prices)).await?;
    let vkey = load::bench_key(&gw_keyed.base_url, ADMIN_KEY).await?;
    let _ = writeln!(
        out,
        "polygateway bench: {} s per run, {} chunks per stream, concurrency 1 and {}",
        opts.duration.as_secs_f64(),
        opts.chunks,
        opts.concurrency
    );

    let mut rows = Vec::new();
    for (mode, stream) in [("non-stream", false), ("stream", true)] {
        for conc in [1, opts.concurrency] {
            if !opts.wants(stream, conc) {
                continue;
            }
            // Warm every path's connection pool first.
            for (url, key) in [
                (format!("{upstream}/v1/chat/completions"), None),
                (format!("http://{pass_addr}/v1/chat/completions"), None),
                (
                    format!("{}/v1/chat/completions", gw_on.base_url),
                    Some(STATIC_KEY),
                ),
                (format!("{}/v1/chat/completions", gw_off.base_url), None),
                (
                    format!("{}/v1/chat/completions", gw_keyed.base_url),
                    Some(vkey.as_str()),
                ),
            ] {
                let _ =
                    load::run_with_key(&url, stream, conc, Duration::from_millis(300), key).await;
            }
            let direct = load::run(
                &format!("{upstream}/v1/chat/completions"),
                stream,
                conc,
                opts.duration,
            )
            .await;
            let cpu0 = pass_child.cpu_seconds();
            let pass = load::run(
                &format!("http://{pass_addr}/v1/chat/completions"),
                stream,
                conc,
                opts.duration,
            )
            .await;
            let cpu_pass = pass_child
                .cpu_seconds()
                .zip(cpu0)
                .map(|(b, a)| (b - a) / pass.requests.max(1) as f64 * 1000.0);
            let cpu0 = gw_on.cpu_seconds();
            let on = load::run_with_key(
                &format!("{}/v1/chat/completions", gw_on.base_url),
                stream,
                conc,
                opts.duration,
                Some(STATIC_KEY),
            )
            .await;
            let cpu_on = gw_on
                .cpu_seconds()
                .zip(cpu0)
                .map(|(b, a)| (b - a) / on.requests.max(1) as f64 * 1000.0);
            let cpu0 = gw_off.cpu_seconds();
            let off = load::run(
                &format!("{}/v1/chat/completions", gw_off.base_url),
                stream,
                conc,
                opts.duration,
            )
            .await;
            let cpu_off = gw_off
                .cpu_seconds()
                .zip(cpu0)
                .map(|(b, a)| (b - a) / off.requests.max(1) as f64 * 1000.0);
            let cpu0 = gw_keyed.cpu_seconds();
            let keyed = load::run_with_key(
                &format!("{}/v1/chat/completions", gw_keyed.base_url),
                stream,
                conc,
                opts.duration,
                Some(&vkey),
            )
            .await;
            let cpu_keyed = gw_keyed
                .cpu_seconds()
                .zip(cpu0)
                .map(|(b, a)| (b - a) / keyed.requests.max(1) as f64 * 1000.0);
            let row = |path: &'static str, s: &Stats, cpu: Option<f64>| Row {
                mode,
                concurrency: conc,
                path,
                added_p50_us: (path != "direct").then_some(s.p50_us - direct.p50_us),
                added_p99_us: (path != "direct").then_some(s.p99_us - direct.p99_us),
                added_p999_us: (path != "direct").then_some(s.p999_us - direct.p999_us),
                cpu_s_per_1k: cpu,
                vs_passthrough: (path.starts_with("gateway") && pass.rps > 0.0)
                    .then(|| s.rps / pass.rps),
                stats: s.clone(),
            };
            rows.push(row("direct", &direct, None));
            rows.push(row("passthrough", &pass, cpu_pass));
            rows.push(row("gateway", &on, cpu_on));
            rows.push(row("gateway-off", &off, cpu_off));
            rows.push(row("gateway-keyed", &keyed, cpu_keyed));
        }
    }
    // The keyed path's CPU ratio, from back-to-back pairs at the high concurrency.
    let mut pairs = [Vec::new(), Vec::new()];
    for (i, stream) in [false, true].into_iter().enumerate() {
        if opts.wants(stream, opts.concurrency) {
            let each = (opts.duration / 3).max(Duration::from_millis(500));
            pairs[i] = keyed_pairs(&gw_on, &gw_keyed, &vkey, stream, opts.concurrency, each).await;
        }
    }
    let micro = match opts
        .only
        .is_empty()
        .then(|| micro::run(20_000, opts.chunks))
    {
        None => None,
        Some(Ok(m)) => Some(m),
        Some(Err(e)) => {
            let _ = writeln!(out, "plugin microbenchmark failed: {e}");
            None
        }
    };
    let report = Report {
        machine: machine(),
        duration_s: opts.duration.as_secs_f64(),
        chunks: opts.chunks,
        gateway_peak_rss_mib: gw_on.peak_rss_mib(),
        gateway_off_peak_rss_mib: gw_off.peak_rss_mib(),
        derived: with_pairs(
            derive(&rows, opts.chunks, opts.concurrency, micro.as_ref()),
            pairs,
        ),
        rows,
        micro,
    };
    gw_on.stop().await;
    gw_off.stop().await;
    gw_keyed.stop().await;
    pass_child.stop().await;
    print_table(&mut out, &report);
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&opts.out, json).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let _ = writeln!(out, "\nJSON written to {}", opts.out.display());
    Ok(report)
}

fn us(x: f64) -> String {
    format!("{x:.0}")
}

/// A list of ratios as `0.98 1.02 …`, or `–`.
fn pairs(xs: &[f64]) -> String {
    if xs.is_empty() {
        return "–".into();
    }
    xs.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_table(out: &mut impl Write, r: &Report) {
    let _ = writeln!(out, "\nmachine: {}", r.machine);
    let _ = writeln!(
        out,
        "| mode | conc | path | req/s | p50 µs | p99 µs | p99.9 µs | added p50 | added p99 | added p99.9 | TTFB p50 µs | CPU s/1k req | vs pass-through |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &r.rows {
        let s = &row.stats;
        let opt = |v: Option<f64>, f: fn(f64) -> String| v.map(f).unwrap_or_else(|| "–".into());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.mode,
            row.concurrency,
            row.path,
            s.rps,
            us(s.p50_us),
            us(s.p99_us),
            us(s.p999_us),
            opt(row.added_p50_us, us),
            opt(row.added_p99_us, us),
            opt(row.added_p999_us, us),
            opt(s.ttfb_p50_us, us),
            opt(row.cpu_s_per_1k, |x| format!("{x:.3}")),
            opt(row.vs_passthrough, |x| format!("{:.0}%", x * 100.0)),
        );
    }
    let _ = writeln!(
        out,
        "\npeak RSS: gateway {} MiB, gateway-off {} MiB",
        r.gateway_peak_rss_mib
            .map(|x| format!("{x:.1}"))
            .unwrap_or_else(|| "?".into()),
        r.gateway_off_peak_rss_mib
            .map(|x| format!("{x:.1}"))
            .unwrap_or_else(|| "?".into()),
    );
    if let Some(m) = &r.micro {
        let _ = writeln!(
            out,
            "plugin cost (openai provider): build-request wasm {:.2} µs vs native {:.2} µs; one SSE chunk wasm {:.2} µs vs native {:.2} µs",
            m.request_wasm_ns / 1000.0,
            m.request_native_ns / 1000.0,
            m.chunk_wasm_ns / 1000.0,
            m.chunk_native_ns / 1000.0
        );
        let _ = writeln!(
            out,
            "plugin cost (anthropic provider): build-request wasm {:.2} µs vs native {:.2} µs; one SSE event wasm {:.2} µs vs native {:.2} µs ({:.2}× the openai chunk as wasm, median of {} interleaved rounds; target ≤ 1.5×)",
            m.anthropic_request_wasm_ns / 1000.0,
            m.anthropic_request_native_ns / 1000.0,
            m.anthropic_event_wasm_ns / 1000.0,
            m.anthropic_event_native_ns / 1000.0,
            m.anthropic_vs_openai_event,
            micro::INTERLEAVED_ROUNDS
        );
        let _ = writeln!(
            out,
            "plugin cost (gemini provider): build-request wasm {:.2} µs vs native {:.2} µs; one SSE event wasm {:.2} µs vs native {:.2} µs ({:.2}× the openai chunk as wasm, median of {} interleaved rounds; target ≤ 1.5×)",
            m.gemini_request_wasm_ns / 1000.0,
            m.gemini_request_native_ns / 1000.0,
            m.gemini_event_wasm_ns / 1000.0,
            m.gemini_event_native_ns / 1000.0,
            m.gemini_vs_openai_event,
            micro::INTERLEAVED_ROUNDS
        );
        let _ = writeln!(
            out,
            "plugin share of one streamed call ({} events, parsed one by one): wasm {:.1} µs vs native {:.1} µs",
            m.attempt_events,
            m.attempt_wasm_ns / 1000.0,
            m.attempt_native_ns / 1000.0
        );
    }
    let d = &r.derived;
    let f = |v: Option<f64>, unit: &str| {
        v.map(|x| format!("{x:.2}{unit}"))
            .unwrap_or_else(|| "–".into())
    };
    let pct = |v: Option<f64>| {
        v.map(|x| format!("{:.0}%", x * 100.0))
            .unwrap_or_else(|| "–".into())
    };
    let _ = writeln!(
        out,
        "\noverhead targets (gateway, default configuration; README \"Benchmark\"):"
    );
    let _ = writeln!(
        out,
        "  added p99, non-stream, c=1: {} (target ≤ 100 µs)",
        f(d.added_p99_c1_us, " µs")
    );
    let _ = writeln!(
        out,
        "  throughput vs pass-through at high concurrency: non-stream {}, stream {} (target ≥ 70%)",
        pct(d.high_conc_vs_passthrough_non_stream),
        pct(d.high_conc_vs_passthrough_stream)
    );
    let _ = writeln!(
        out,
        "  per-chunk overhead: added latency {} at c=1 ({} beyond the pass-through), CPU {} at high concurrency (target ≤ 5 µs)",
        f(d.added_per_chunk_c1_us, " µs"),
        f(d.added_per_chunk_vs_passthrough_c1_us, " µs"),
        f(d.cpu_per_chunk_us, " µs")
    );
    let _ = writeln!(
        out,
        "  wasm provider path vs native, end to end (streamed call, c=1): {} (target ≤ 1.25×)",
        f(d.wasm_vs_native_end_to_end, "×")
    );
    let _ = writeln!(
        out,
        "  virtual key with budgets and per-key gates vs a static key, CPU per call at high concurrency (median of {KEYED_PAIRS} back-to-back pairs: {} | {}): non-stream {}, stream {} (target ≤ 1.10×)",
        pairs(&d.keyed_vs_static_cpu_pairs_non_stream),
        pairs(&d.keyed_vs_static_cpu_pairs_stream),
        f(d.keyed_vs_static_cpu_non_stream, "×"),
        f(d.keyed_vs_static_cpu_stream, "×")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(only: &[RowFilter]) -> BenchOptions {
        BenchOptions {
            duration: Duration::from_secs(1),
            chunks: 64,
            concurrency: 64,
            out: "bench.json".into(),
            only: only.to_vec(),
        }
    }

    /// Each (stream, concurrency) row in the order the benchmark runs them.
    fn selected(only: &[RowFilter]) -> Vec<(bool, usize)> {
        let o = opts(only);
        [(false, 1), (false, 64), (true, 1), (true, 64)]
            .into_iter()
            .filter(|&(s, c)| o.wants(s, c))
            .collect()
    }

    #[test]
    fn only_selects_rows_by_mode_and_level() {
        use RowFilter::*;
        assert_eq!(
            selected(&[]),
            vec![(false, 1), (false, 64), (true, 1), (true, 64)]
        );
        assert_eq!(selected(&[Stream]), vec![(true, 1), (true, 64)]);
        assert_eq!(selected(&[C1]), vec![(false, 1), (true, 1)]);
        assert_eq!(selected(&[NonStream, High]), vec![(false, 64)]);
        assert_eq!(
            selected(&[NonStream, Stream, High]),
            vec![(false, 64), (true, 64)]
        );
    }

    #[test]
    fn the_keyed_ratio_is_the_median_of_its_pairs() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.3, 0.9, 1.0]), Some(1.0));
        assert_eq!(median(&[1.2, 0.9, f64::NAN, 1.0, 1.1]), Some(1.05));
        let single = Derived {
            keyed_vs_static_cpu_non_stream: Some(1.4),
            keyed_vs_static_cpu_stream: Some(0.8),
            ..Derived::default()
        };
        let d = with_pairs(single.clone(), [vec![1.02, 0.97, 1.05], vec![]]);
        assert_eq!(d.keyed_vs_static_cpu_non_stream, Some(1.02));
        // No pairs (a filtered run): the rows' single runs stay.
        assert_eq!(d.keyed_vs_static_cpu_stream, Some(0.8));
        assert_eq!(
            d.keyed_vs_static_cpu_pairs_non_stream,
            vec![1.02, 0.97, 1.05]
        );
        assert_eq!(
            pairs(&d.keyed_vs_static_cpu_pairs_non_stream),
            "1.02 0.97 1.05"
        );
        assert_eq!(pairs(&[]), "–");
    }
}
