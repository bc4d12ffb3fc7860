//! `polygateway bench`: gateway overhead measured side by side with the direct path, in one
//! run — a fast mock upstream; nginx as a bare reverse proxy (the floor every figure is a
//! ratio to, `nginx.rs`); the pass-through proxy on the gateway's own HTTP stack; the gateway
//! as a child process with the default governance on, with everything off and with virtual
//! keys; a load generator at concurrency 1 and at the high levels; the paced-stream load
//! (512 streams of deltas 20 ms apart, `paced.rs`); and the plugin microbenchmark (wasm
//! versus native). Prints one table and writes it as JSON. Numbers are only meaningful on a
//! quiet machine.

mod load;
pub(crate) mod micro;
mod nginx;
mod paced;
mod process;
mod soak;
mod upstream;

use std::io::Write;
use std::time::Duration;

pub use load::Stats;
pub use micro::Micro;
pub use paced::PacedStats;
pub use soak::{SoakOptions, SoakReport, run as run_soak};

/// Benchmark parameters.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Length of each measured run.
    pub duration: Duration,
    /// SSE chunks per streamed answer.
    pub chunks: usize,
    /// The high concurrency levels (the low one is 1), ascending.
    pub concurrency: Vec<usize>,
    /// Where the JSON report goes.
    pub out: std::path::PathBuf,
    /// Only the rows these select (empty: all).
    pub only: Vec<RowFilter>,
    /// The nginx binary (`None`: Debian's `/usr/sbin/nginx`, else `nginx` on `PATH`).
    pub nginx: Option<std::path::PathBuf>,
    /// Concurrent streams of the paced load.
    pub paced_streams: usize,
    /// Streams each paced client reads back to back.
    pub paced_rounds: usize,
    /// Content deltas per paced stream, and the time between two.
    pub paced_deltas: usize,
    pub pace: Duration,
    /// The executable whose `serve` and `bench-passthrough` are measured (`None`: this one).
    pub server_bin: Option<std::path::PathBuf>,
}

/// A selection of benchmark rows (`--only`): by mode or by concurrency level. Filters of the
/// same kind add up; a mode and a level must both match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RowFilter {
    NonStream,
    Stream,
    /// The paced-stream load (levels do not apply to it).
    Paced,
    /// Concurrency 1.
    C1,
    /// The high concurrency levels.
    High,
}

impl BenchOptions {
    /// Whether the rows of `stream` at concurrency `conc` are measured.
    fn wants(&self, stream: bool, conc: usize) -> bool {
        let modes = [RowFilter::NonStream, RowFilter::Stream, RowFilter::Paced];
        let levels = [RowFilter::C1, RowFilter::High];
        let pick = |kinds: &[RowFilter], this: RowFilter| {
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
        pick(&modes, mode) && pick(&levels, level)
    }

    /// Whether the paced-stream load runs: with no filter, or when `paced` is named. A level
    /// alone (`--only c1`) selects rows of the table, not the paced load's 512 streams.
    fn wants_paced(&self) -> bool {
        self.only.is_empty() || self.only.contains(&RowFilter::Paced)
    }

    /// The highest concurrency level (the one the keyed pairs and CPU figures use).
    fn top(&self) -> usize {
        self.concurrency.iter().copied().max().unwrap_or(1)
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
    /// CPU seconds of the serving process (gateway, pass-through or nginx) per 1,000
    /// requests.
    pub cpu_s_per_1k: Option<f64>,
    /// The part of `cpu_s_per_1k` spent in the kernel (system time: system calls, the
    /// TCP stack, scheduling, page faults); the rest is user space.
    pub cpu_system_s_per_1k: Option<f64>,
    /// Context switches of the serving process's threads per request.
    pub context_switches_per_request: Option<f64>,
    /// Throughput relative to the pass-through proxy.
    pub vs_passthrough: Option<f64>,
    /// Throughput, and CPU per request, relative to nginx in the same run.
    pub vs_nginx: Option<f64>,
    pub cpu_vs_nginx: Option<f64>,
    /// The serving process's pid (none for the direct path), and when its measured load ran:
    /// `[start, end]` in seconds of the system's `CLOCK_MONOTONIC` (Linux; none elsewhere).
    /// A system-wide `perf record -k CLOCK_MONOTONIC` taken around `bench` is split into the
    /// rows by these two (`profile_rows.py`).
    pub pid: Option<u32>,
    pub window_monotonic_s: Option<[f64; 2]>,
}

/// One target under the paced-stream load.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PacedRow {
    pub path: &'static str,
    pub stats: PacedStats,
    /// TTFT p50 minus the direct path's, in µs.
    pub added_ttft_p50_us: Option<f64>,
    /// Peak RSS of the serving process during this load alone, in MiB.
    pub peak_rss_mib: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub machine: String,
    pub duration_s: f64,
    pub chunks: usize,
    /// The nginx binary measured (`None`: none was found, and no ratio to it is given).
    pub nginx: Option<String>,
    /// The executable whose `serve` (the gateway's rows) and `bench-passthrough` (the floor's)
    /// were measured: this one unless `--server-bin` named another build.
    pub server_bin: String,
    pub rows: Vec<Row>,
    /// Concurrent streams, rounds, deltas per stream and their pace (ms) of the paced load.
    pub paced_streams: usize,
    pub paced_rounds: usize,
    pub paced_deltas: usize,
    pub pace_ms: f64,
    pub paced: Vec<PacedRow>,
    pub gateway_peak_rss_mib: Option<f64>,
    pub gateway_off_peak_rss_mib: Option<f64>,
    pub micro: Option<Micro>,
    pub derived: Derived,
}

/// Figures computed from the rows and the microbenchmark: the gateway against the direct path
/// and the pass-through floor, the wasm provider against native, a virtual key against a
/// static one, and the targets against nginx (README, "Benchmark"). The first targets, set
/// against the floor on the gateway's own stack (≤ 100 µs added p99 at c=1, ≥ 70 % of its
/// throughput, ≤ 5 µs a chunk), were superseded by the ratios to nginx ([`NginxTargets`]):
/// that floor is itself slow at the tail, so ratios to it flattered the gateway.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Derived {
    /// Added p99 of the default gateway at concurrency 1, non-streamed, in µs.
    pub added_p99_c1_us: Option<f64>,
    /// Gateway (default config) throughput at the high concurrency relative to the
    /// pass-through proxy, non-streamed and streamed.
    pub high_conc_vs_passthrough_non_stream: Option<f64>,
    pub high_conc_vs_passthrough_stream: Option<f64>,
    /// Latency the gateway adds per chunk at concurrency 1: (added p50 streamed − added p50
    /// non-streamed) / chunks, in µs.
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
    /// The targets against nginx in the same run (README, "Benchmark").
    pub nginx: NginxTargets,
}

/// The default gateway against nginx, each with its target.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct NginxTargets {
    /// Added p99 at concurrency 1, non-streamed, in µs, of the gateway and of nginx; the
    /// target is gateway ≤ 2 × nginx + 100 µs.
    pub added_p99_c1_us: Option<f64>,
    pub nginx_added_p99_c1_us: Option<f64>,
    /// Non-streamed and streamed throughput as a share of nginx's at each high level
    /// (`[concurrency, ratio]`; target ≥ 0.60 non-streamed).
    pub throughput_non_stream: Vec<(usize, f64)>,
    pub throughput_stream: Vec<(usize, f64)>,
    /// CPU per non-streamed request at the top level over nginx's (target ≤ 2.5).
    pub cpu_per_request: Option<f64>,
    /// User-space CPU per non-streamed request at the top level over nginx's: with
    /// `cpu_system_per_request`, which side of the system-call line the distance is on.
    pub cpu_user_per_request: Option<f64>,
    /// Kernel (system) CPU per non-streamed request at the top level over nginx's.
    pub cpu_system_per_request: Option<f64>,
    /// CPU per streamed chunk at the top level ((streamed − non-streamed) / chunks) over
    /// nginx's (target ≤ 2).
    pub cpu_per_chunk: Option<f64>,
    /// Paced streams: added TTFT p50 over nginx's (target ≤ 2), max-gap p99 minus nginx's
    /// in ms (target ≤ 5), stalled streams (target 0), peak RSS in MiB (target ≤ 80).
    pub paced_added_ttft: Option<f64>,
    pub paced_max_gap_p99_minus_nginx_ms: Option<f64>,
    pub paced_stalled: Option<usize>,
    pub paced_peak_rss_mib: Option<f64>,
}

/// SSE content chunks of the benchmark upstream's streamed answer unless `--chunks` says
/// otherwise: the default of `bench` (its streamed rows and the soak) and of `bench-micro`
/// (the attempt it parses), so the two measure the same answer.
pub const DEFAULT_CHUNKS: usize = 64;

/// How many back-to-back pairs of runs measure the keyed path's CPU ratio.
pub const KEYED_PAIRS: usize = 5;

/// Client connections every server under test accepts at once: nginx's `worker_connections`,
/// the gateway's `PGW_MAX_CONNECTIONS` and the floor's cap. The default 512 would make the
/// 513th connection of the paced load wait in the accept queue, and the TTFT would measure the
/// cap, not the server.
pub const MAX_CONNECTIONS: u32 = 8192;

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
        nginx: NginxTargets::default(),
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

/// The gateway's environment under test. `bench/instructions.py` (instruction counts under
/// callgrind) and `bench/syscalls.py` (kernel events per call) start `serve` with the same
/// variables as `governance: true` (and `syscalls.py`'s `off` mode as `false`); keep them alike.
fn gateway_env(upstream: &str, governance: bool) -> Vec<(String, String)> {
    let mut env = vec![
        ("LLM__OPENAI__1__BASE_URL".into(), format!("{upstream}/v1")),
        ("LLM__OPENAI__1__MODEL".into(), "bench-model".into()),
        ("LLM__OPENAI__1__API_KEY".into(), "sk-bench".into()),
        // 512 paced streams plus a connection the load generator opens while another is
        // going back to its pool: see `MAX_CONNECTIONS`.
        ("PGW_MAX_CONNECTIONS".into(), MAX_CONNECTIONS.to_string()),
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

/// One server the load is sent to.
struct Target {
    path: &'static str,
    /// `…/v1/chat/completions`.
    url: String,
    key: Option<String>,
    /// The serving process (none for the direct path: the upstream is in this process).
    proc: Option<process::ProcStats>,
}

/// What one measured load cost the serving process.
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    /// CPU seconds (user + system) per 1,000 requests.
    cpu_s_per_1k: Option<f64>,
    /// Of it, system seconds per 1,000 requests.
    system_s_per_1k: Option<f64>,
    /// Context switches of its threads per request.
    context_switches_per_request: Option<f64>,
    /// The serving process, and when the load ran, in `CLOCK_MONOTONIC` seconds (see
    /// [`Row::window_monotonic_s`]).
    pid: Option<u32>,
    window_monotonic_s: Option<[f64; 2]>,
}

/// One measured load against `t`: its stats and what it cost the serving process.
async fn measure(t: &Target, stream: bool, conc: usize, duration: Duration) -> (Stats, Cost) {
    let cpu0 = t.proc.and_then(|p| p.cpu_times());
    let cs0 = t.proc.and_then(|p| p.context_switches());
    let start = process::monotonic_s();
    let s = load::run_with_key(&t.url, stream, conc, duration, t.key.as_deref()).await;
    let end = process::monotonic_s();
    let n = s.requests.max(1) as f64;
    let cpu = t.proc.and_then(|p| p.cpu_times()).zip(cpu0);
    let cs = t
        .proc
        .and_then(|p| p.context_switches())
        .zip(cs0)
        .map(|(b, a)| process::switches_between(&a, &b) as f64 / n);
    let per_1k = |x: f64| x / n * 1000.0;
    let cost = Cost {
        cpu_s_per_1k: cpu.map(|(b, a)| per_1k(b.user_s + b.system_s - a.user_s - a.system_s)),
        system_s_per_1k: cpu.map(|(b, a)| per_1k(b.system_s - a.system_s)),
        context_switches_per_request: cs,
        pid: t.proc.map(|p| p.0),
        window_monotonic_s: start.zip(end).map(|(a, b)| [a, b]),
    };
    (s, cost)
}

/// Run the benchmark and print the table; the report is also written as JSON.
pub async fn run(opts: BenchOptions) -> Result<Report, String> {
    let mut out = std::io::stdout();
    let pacing = upstream::Pacing {
        deltas: opts.paced_deltas,
        pace: opts.pace,
    };
    let upstream_addr = upstream::start(opts.chunks, pacing)
        .await
        .map_err(|e| e.to_string())?;
    let upstream = format!("http://{upstream_addr}");
    let nginx_bin = nginx::find(opts.nginx.as_deref());
    let nginx = match &nginx_bin {
        Some(bin) => Some(nginx::NginxChild::start(bin, upstream_addr).await?),
        None => {
            let _ = writeln!(
                out,
                "nginx not found (install Debian's nginx or pass --nginx): no ratios to the floor"
            );
            None
        }
    };
    let server_bin = match &opts.server_bin {
        Some(bin) => bin.clone(),
        None => std::env::current_exe().map_err(|e| e.to_string())?,
    };
    let pass_child = process::GatewayChild::passthrough(&server_bin, &upstream).await?;
    let prices_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let prices = prices_dir.path().join("prices.json");
    std::fs::write(&prices, PRICES).map_err(|e| e.to_string())?;
    let mut on_env = gateway_env(&upstream, true);
    on_env.push(("PGW_PRICING_FILE".into(), prices.display().to_string()));
    let gw_on = process::GatewayChild::start(&server_bin, &on_env).await?;
    let gw_off = process::GatewayChild::start(&server_bin, &gateway_env(&upstream, false)).await?;
    let gw_keyed =
        process::GatewayChild::start(&server_bin, &keyed_env(&upstream, &prices)).await?;
    let vkey = load::bench_key(&gw_keyed.base_url, ADMIN_KEY).await?;
    let chat = |base: &str| format!("{base}/v1/chat/completions");
    let mut targets = vec![Target {
        path: "direct",
        url: chat(&upstream),
        key: None,
        proc: None,
    }];
    if let Some(n) = &nginx {
        targets.push(Target {
            path: "nginx",
            url: chat(&n.base_url),
            key: None,
            proc: Some(n.proc()),
        });
    }
    targets.extend([
        Target {
            path: "passthrough",
            url: chat(&pass_child.base_url),
            key: None,
            proc: Some(pass_child.proc()),
        },
        Target {
            path: "gateway",
            url: chat(&gw_on.base_url),
            key: Some(STATIC_KEY.into()),
            proc: Some(gw_on.proc()),
        },
        Target {
            path: "gateway-off",
            url: chat(&gw_off.base_url),
            key: None,
            proc: Some(gw_off.proc()),
        },
        Target {
            path: "gateway-keyed",
            url: chat(&gw_keyed.base_url),
            key: Some(vkey.clone()),
            proc: Some(gw_keyed.proc()),
        },
    ]);
    let levels: Vec<String> = opts.concurrency.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(
        out,
        "polygateway bench: {} s per run, {} chunks per stream, concurrency 1 and {}; paced: {} streams × {} of {} deltas {} ms apart",
        opts.duration.as_secs_f64(),
        opts.chunks,
        levels.join(", "),
        opts.paced_streams,
        opts.paced_rounds,
        opts.paced_deltas,
        opts.pace.as_secs_f64() * 1000.0
    );

    let mut rows = Vec::new();
    let all_levels: Vec<usize> = std::iter::once(1)
        .chain(opts.concurrency.iter().copied())
        .collect();
    for (mode, stream) in [("non-stream", false), ("stream", true)] {
        for &conc in &all_levels {
            if !opts.wants(stream, conc) {
                continue;
            }
            // Warm every path's connection pool first.
            for t in &targets {
                let _ = load::run_with_key(
                    &t.url,
                    stream,
                    conc,
                    Duration::from_millis(300),
                    t.key.as_deref(),
                )
                .await;
            }
            let mut measured = Vec::with_capacity(targets.len());
            for t in &targets {
                measured.push((t.path, measure(t, stream, conc, opts.duration).await));
            }
            let stats_of = |path: &str| {
                measured
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, m)| m.clone())
            };
            let (direct, _) = stats_of("direct").unwrap_or_default();
            let pass = stats_of("passthrough").map(|m| m.0);
            let floor = stats_of("nginx");
            for (path, (s, cost)) in &measured {
                let path = *path;
                rows.push(Row {
                    mode,
                    concurrency: conc,
                    path,
                    added_p50_us: (path != "direct").then_some(s.p50_us - direct.p50_us),
                    added_p99_us: (path != "direct").then_some(s.p99_us - direct.p99_us),
                    added_p999_us: (path != "direct").then_some(s.p999_us - direct.p999_us),
                    cpu_s_per_1k: cost.cpu_s_per_1k,
                    cpu_system_s_per_1k: cost.system_s_per_1k,
                    context_switches_per_request: cost.context_switches_per_request,
                    vs_passthrough: pass
                        .as_ref()
                        .filter(|p| path.starts_with("gateway") && p.rps > 0.0)
                        .map(|p| s.rps / p.rps),
                    vs_nginx: floor
                        .as_ref()
                        .filter(|n| path != "direct" && path != "nginx" && n.0.rps > 0.0)
                        .map(|n| s.rps / n.0.rps),
                    cpu_vs_nginx: floor
                        .as_ref()
                        .and_then(|n| n.1.cpu_s_per_1k)
                        .zip(cost.cpu_s_per_1k)
                        .filter(|(n, _)| path != "nginx" && *n > 0.0)
                        .map(|(n, c)| c / n),
                    pid: cost.pid,
                    window_monotonic_s: cost.window_monotonic_s,
                    stats: s.clone(),
                });
            }
        }
    }
    // The paced streams: each target alone, its peak RSS over this load only.
    let mut paced_rows = Vec::new();
    if opts.wants_paced() {
        let mut direct_ttft = None;
        for t in &targets {
            let reset = t.proc.map(|p| p.reset_peak()).unwrap_or(false);
            let stats = paced::run(
                &t.url,
                t.key.as_deref(),
                opts.paced_streams,
                opts.paced_rounds,
            )
            .await;
            if t.path == "direct" {
                direct_ttft = Some(stats.ttft_p50_us);
            }
            paced_rows.push(PacedRow {
                path: t.path,
                added_ttft_p50_us: direct_ttft
                    .filter(|_| t.path != "direct")
                    .map(|d| stats.ttft_p50_us - d),
                peak_rss_mib: t.proc.filter(|_| reset).and_then(|p| p.peak_rss_mib()),
                stats,
            });
        }
    }
    // The keyed path's CPU ratio, from back-to-back pairs at the top level.
    let top = opts.top();
    let mut pairs = [Vec::new(), Vec::new()];
    for (i, stream) in [false, true].into_iter().enumerate() {
        if opts.wants(stream, top) && top > 1 {
            let each = (opts.duration / 3).max(Duration::from_millis(500));
            pairs[i] = keyed_pairs(&gw_on, &gw_keyed, &vkey, stream, top, each).await;
        }
    }
    // With `--server-bin` the microbenchmark runs in that build too: the wasm target compares
    // the build under test's guest calls and native code with its own calls' CPU.
    let micro = if opts.only.is_empty() {
        let measured = match &opts.server_bin {
            Some(_) => process::micro(&server_bin, micro::ITERS, opts.chunks).await,
            None => micro::run(micro::ITERS, opts.chunks),
        };
        match measured {
            Ok(m) => Some(m),
            Err(e) => {
                let _ = writeln!(out, "plugin microbenchmark failed: {e}");
                None
            }
        }
    } else {
        None
    };
    let mut derived = with_pairs(derive(&rows, opts.chunks, top, micro.as_ref()), pairs);
    derived.nginx = nginx_targets(&rows, &paced_rows, opts.chunks, &opts.concurrency);
    let report = Report {
        machine: machine(),
        duration_s: opts.duration.as_secs_f64(),
        chunks: opts.chunks,
        nginx: nginx_bin.map(|b| b.display().to_string()),
        server_bin: server_bin.display().to_string(),
        gateway_peak_rss_mib: gw_on.peak_rss_mib(),
        gateway_off_peak_rss_mib: gw_off.peak_rss_mib(),
        derived,
        rows,
        paced_streams: opts.paced_streams,
        paced_rounds: opts.paced_rounds,
        paced_deltas: opts.paced_deltas,
        pace_ms: opts.pace.as_secs_f64() * 1000.0,
        paced: paced_rows,
        micro,
    };
    gw_on.stop().await;
    gw_off.stop().await;
    gw_keyed.stop().await;
    pass_child.stop().await;
    if let Some(n) = nginx {
        n.stop().await;
    }
    print_table(&mut out, &report);
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&opts.out, json).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let _ = writeln!(out, "\nJSON written to {}", opts.out.display());
    Ok(report)
}

/// The default gateway's figures against nginx's, from the rows and the paced load.
fn nginx_targets(
    rows: &[Row],
    paced: &[PacedRow],
    chunks: usize,
    levels: &[usize],
) -> NginxTargets {
    let find = |mode: &str, conc: usize, path: &str| {
        rows.iter()
            .find(|r| r.mode == mode && r.concurrency == conc && r.path == path)
    };
    let top = levels.iter().copied().max().unwrap_or(1);
    let ratio_at = |mode: &str| -> Vec<(usize, f64)> {
        levels
            .iter()
            .filter_map(|&c| Some((c, find(mode, c, "gateway")?.vs_nginx?)))
            .collect()
    };
    let cpu_us = |mode: &str, path: &str| {
        find(mode, top, path)
            .and_then(|r| r.cpu_s_per_1k)
            .map(|c| c * 1000.0)
    };
    let system_us = |path: &str| {
        find("non-stream", top, path)
            .and_then(|r| r.cpu_system_s_per_1k)
            .map(|c| c * 1000.0)
    };
    let user_us = |path: &str| {
        cpu_us("non-stream", path)
            .zip(system_us(path))
            .map(|(c, s)| c - s)
    };
    let over =
        |g: Option<f64>, n: Option<f64>| g.zip(n).filter(|(_, n)| *n > 0.0).map(|(g, n)| g / n);
    let per_chunk = |path: &str| {
        cpu_us("stream", path)
            .zip(cpu_us("non-stream", path))
            .filter(|_| chunks > 0)
            .map(|(s, n)| (s - n) / chunks as f64)
    };
    let paced_of = |path: &str| paced.iter().find(|r| r.path == path);
    let (gw, ngx) = (paced_of("gateway"), paced_of("nginx"));
    NginxTargets {
        added_p99_c1_us: find("non-stream", 1, "gateway").and_then(|r| r.added_p99_us),
        nginx_added_p99_c1_us: find("non-stream", 1, "nginx").and_then(|r| r.added_p99_us),
        throughput_non_stream: ratio_at("non-stream"),
        throughput_stream: ratio_at("stream"),
        cpu_per_request: over(
            cpu_us("non-stream", "gateway"),
            cpu_us("non-stream", "nginx"),
        ),
        cpu_user_per_request: over(user_us("gateway"), user_us("nginx")),
        cpu_system_per_request: over(system_us("gateway"), system_us("nginx")),
        cpu_per_chunk: per_chunk("gateway")
            .zip(per_chunk("nginx"))
            .filter(|(_, n)| *n > 0.0)
            .map(|(g, n)| g / n),
        paced_added_ttft: gw
            .and_then(|g| g.added_ttft_p50_us)
            .zip(ngx.and_then(|n| n.added_ttft_p50_us))
            .filter(|(_, n)| *n > 0.0)
            .map(|(g, n)| g / n),
        paced_max_gap_p99_minus_nginx_ms: gw
            .zip(ngx)
            .map(|(g, n)| (g.stats.max_gap_p99_us - n.stats.max_gap_p99_us) / 1000.0),
        paced_stalled: gw.map(|g| g.stats.stalled),
        paced_peak_rss_mib: gw.and_then(|g| g.peak_rss_mib),
    }
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
        "servers (the floor and the gateways): {}",
        r.server_bin
    );
    let _ = writeln!(
        out,
        "| mode | conc | path | req/s | p50 µs | p99 µs | p99.9 µs | added p50 | added p99 | added p99.9 | TTFB p50 µs | CPU µs/req | ctx sw/req | vs pass-through | vs nginx | CPU vs nginx |"
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for row in &r.rows {
        let s = &row.stats;
        let opt = |v: Option<f64>, f: fn(f64) -> String| v.map(f).unwrap_or_else(|| "–".into());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
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
            opt(row.cpu_s_per_1k, |x| format!("{:.1}", x * 1000.0)),
            opt(row.context_switches_per_request, |x| format!("{x:.2}")),
            opt(row.vs_passthrough, |x| format!("{:.0}%", x * 100.0)),
            opt(row.vs_nginx, |x| format!("{:.0}%", x * 100.0)),
            opt(row.cpu_vs_nginx, |x| format!("{x:.2}×")),
        );
    }
    if !r.paced.is_empty() {
        let _ = writeln!(
            out,
            "\npaced streams: {} concurrent × {} rounds, {} deltas {} ms apart; stalled = a gap over {} ms",
            r.paced_streams,
            r.paced_rounds,
            r.paced_deltas,
            r.pace_ms,
            paced::STALL.as_millis()
        );
        let _ = writeln!(
            out,
            "| path | streams | errors | TTFT p50 µs | TTFT p99 µs | added TTFT p50 | max gap p50 ms | max gap p99 ms | stalled | peak RSS MiB |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
        for p in &r.paced {
            let s = &p.stats;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} |",
                p.path,
                s.streams,
                s.errors,
                us(s.ttft_p50_us),
                us(s.ttft_p99_us),
                p.added_ttft_p50_us.map(us).unwrap_or_else(|| "–".into()),
                s.max_gap_p50_us / 1000.0,
                s.max_gap_p99_us / 1000.0,
                s.stalled,
                p.peak_rss_mib
                    .map(|x| format!("{x:.1}"))
                    .unwrap_or_else(|| "–".into()),
            );
        }
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
        "\nthe gateway (default configuration) against the direct path, the floor, native plugin code and a static key:"
    );
    let _ = writeln!(
        out,
        "  added p99, non-stream, c=1: {}",
        f(d.added_p99_c1_us, " µs")
    );
    let _ = writeln!(
        out,
        "  throughput vs pass-through at high concurrency: non-stream {}, stream {}",
        pct(d.high_conc_vs_passthrough_non_stream),
        pct(d.high_conc_vs_passthrough_stream)
    );
    let _ = writeln!(
        out,
        "  per-chunk overhead: added latency {} at c=1 ({} beyond the pass-through), CPU {} at high concurrency",
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
    let n = &d.nginx;
    let levels = |xs: &[(usize, f64)]| {
        if xs.is_empty() {
            return "–".to_string();
        }
        xs.iter()
            .map(|(c, x)| format!("c={c} {:.0}%", x * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "\ntargets against nginx (same run; README \"Benchmark\"):"
    );
    let _ = writeln!(
        out,
        "  added p99, non-stream, c=1: gateway {} vs nginx {} (target ≤ 2 × nginx + 100 µs = {})",
        f(n.added_p99_c1_us, " µs"),
        f(n.nginx_added_p99_c1_us, " µs"),
        f(
            n.nginx_added_p99_c1_us.map(|x| 2.0 * x.max(0.0) + 100.0),
            " µs"
        )
    );
    let _ = writeln!(
        out,
        "  throughput as a share of nginx's: non-stream {}; stream {} (target ≥ 60% non-stream)",
        levels(&n.throughput_non_stream),
        levels(&n.throughput_stream)
    );
    let _ = writeln!(
        out,
        "  CPU per non-streamed request {} nginx's (target ≤ 2.5×); per streamed chunk {} (target ≤ 2×)",
        f(n.cpu_per_request, "×"),
        f(n.cpu_per_chunk, "×")
    );
    let _ = writeln!(
        out,
        "  of the CPU per non-streamed request: user space {} nginx's, kernel {} nginx's",
        f(n.cpu_user_per_request, "×"),
        f(n.cpu_system_per_request, "×")
    );
    let _ = writeln!(
        out,
        "  paced streams: added TTFT p50 {} nginx's (target ≤ 2×), max-gap p99 {} beyond nginx's (target ≤ 5 ms), stalled {} (target 0), peak RSS {} (target ≤ 80 MiB)",
        f(n.paced_added_ttft, "×"),
        f(n.paced_max_gap_p99_minus_nginx_ms, " ms"),
        n.paced_stalled
            .map(|x| x.to_string())
            .unwrap_or_else(|| "–".into()),
        f(n.paced_peak_rss_mib, " MiB")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(only: &[RowFilter]) -> BenchOptions {
        BenchOptions {
            duration: Duration::from_secs(1),
            chunks: 64,
            concurrency: vec![64],
            out: "bench.json".into(),
            only: only.to_vec(),
            nginx: None,
            paced_streams: 512,
            paced_rounds: 3,
            server_bin: None,
            paced_deltas: 64,
            pace: Duration::from_millis(20),
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

    /// A measured load records when it ran on `CLOCK_MONOTONIC`, bracketed by readings of
    /// the same clock taken around it, and as long as the load (what `profile_rows.py`
    /// splits a system-wide profile by); a row without a serving process has no CPU figures.
    #[tokio::test]
    async fn a_measured_load_records_its_window_on_the_monotonic_clock() {
        let pacing = upstream::Pacing {
            deltas: 4,
            pace: Duration::from_millis(1),
        };
        let addr = upstream::start(4, pacing).await.unwrap();
        let mut t = Target {
            path: "direct",
            url: format!("http://{addr}/v1/chat/completions"),
            key: None,
            proc: Some(process::ProcStats(std::process::id())),
        };
        let before = process::monotonic_s().unwrap();
        let (stats, cost) = measure(&t, false, 1, Duration::from_millis(300)).await;
        let after = process::monotonic_s().unwrap();
        let [start, end] = cost.window_monotonic_s.unwrap();
        assert!(stats.requests > 0);
        assert!(
            before <= start && start < end && end <= after,
            "{before} {start} {end} {after}"
        );
        assert!((0.3..2.0).contains(&(end - start)), "{}", end - start);
        assert!(cost.cpu_s_per_1k.is_some());

        t.proc = None;
        let (_, cost) = measure(&t, false, 1, Duration::from_millis(50)).await;
        assert!(cost.window_monotonic_s.is_some());
        assert_eq!(cost.cpu_s_per_1k, None);
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
        // The paced load runs with no filter, or when it is named.
        assert!(opts(&[]).wants_paced());
        assert!(!opts(&[C1]).wants_paced());
        assert!(!opts(&[High]).wants_paced());
        assert!(!opts(&[NonStream, High]).wants_paced());
        assert!(!opts(&[Stream]).wants_paced());
        assert!(opts(&[Stream, Paced]).wants_paced());
        assert!(opts(&[Paced]).wants_paced() && selected(&[Paced]).is_empty());
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

    /// A non-streamed row at concurrency 64 with its CPU and system time per 1,000 requests.
    fn cpu_row(path: &'static str, cpu_s_per_1k: f64, system_s_per_1k: f64) -> Row {
        Row {
            mode: "non-stream",
            concurrency: 64,
            path,
            stats: Stats::default(),
            added_p50_us: None,
            added_p99_us: None,
            added_p999_us: None,
            cpu_s_per_1k: Some(cpu_s_per_1k),
            cpu_system_s_per_1k: Some(system_s_per_1k),
            context_switches_per_request: None,
            vs_passthrough: None,
            pid: None,
            window_monotonic_s: None,
            vs_nginx: None,
            cpu_vs_nginx: None,
        }
    }

    /// CPU per request against nginx's, whole and split at the system-call line: the user
    /// part is the whole less the system part, each over nginx's own.
    #[test]
    fn the_cpu_ratio_splits_into_user_and_kernel() {
        let rows = [
            cpu_row("nginx", 0.012, 0.009),
            cpu_row("gateway", 0.066, 0.018),
        ];
        let n = nginx_targets(&rows, &[], 64, &[64]);
        let close = |x: Option<f64>, want: f64| x.is_some_and(|x| (x - want).abs() < 1e-9);
        assert!(close(n.cpu_per_request, 5.5), "{:?}", n.cpu_per_request);
        assert!(
            close(n.cpu_user_per_request, 16.0),
            "{:?}",
            n.cpu_user_per_request
        );
        assert!(
            close(n.cpu_system_per_request, 2.0),
            "{:?}",
            n.cpu_system_per_request
        );
        // Without nginx's system time there is no split.
        let mut bare = rows.clone();
        bare[0].cpu_system_s_per_1k = None;
        let n = nginx_targets(&bare, &[], 64, &[64]);
        assert!(close(n.cpu_per_request, 5.5));
        assert_eq!(
            (n.cpu_user_per_request, n.cpu_system_per_request),
            (None, None)
        );
    }
}
