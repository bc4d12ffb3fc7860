//! The `polygateway` command line: `serve` (logging set-up, the shutdown signals, the
//! telemetry flush at exit), `mock-upstream`, `demo`, `plugin check`, `telemetry schema-sql`,
//! `keys …` and `teams …` (virtual keys, `keys/cli.rs`).

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use futures_util::StreamExt;

use crate::config::{self, Settings};
use crate::mock::{Script, Step, serve_mock};
use crate::pipeline::{CallEvent, ChatRequest, Gateway};
use crate::plugin::Delta;

/// PolyGateway: an LLM gateway with WebAssembly provider plugins.
#[derive(Debug, Parser)]
#[command(name = "polygateway", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the OpenAI-compatible proxy (configuration from the environment and `.env`).
    Serve,
    /// Run the scriptable mock upstream.
    MockUpstream {
        /// Address to bind (port 0 picks a free port).
        #[arg(long, default_value = "127.0.0.1:9099")]
        listen: SocketAddr,
        /// JSON file: `{"<scenario>": {"steps": [...], "then": {...}}}`.
        #[arg(long)]
        script: Option<PathBuf>,
    },
    /// Start a mock upstream and a gateway with a demo configuration in this process, then
    /// stream one answer through the wasm providers (telemetry to `demo.db`).
    Demo {
        /// The question to ask.
        #[arg(default_value = "Why do LLM gateways need circuit breakers?")]
        prompt: String,
    },
    /// Plugin tools: `plugin check FILE.wasm` runs the conformance kit on a component.
    Plugin {
        #[command(subcommand)]
        command: crate::plugin::cli::PluginCommand,
    },
    /// Measure gateway overhead against the direct path and a bare pass-through proxy
    /// (prints a table, writes JSON). Run on a quiet machine.
    Bench {
        /// Seconds per measured run.
        #[arg(long, default_value_t = 3.0)]
        duration_s: f64,
        /// SSE chunks per streamed answer.
        #[arg(long, default_value_t = crate::bench::DEFAULT_CHUNKS)]
        chunks: usize,
        /// The high concurrency levels (the low one is 1), comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [32, 128])]
        concurrency: Vec<usize>,
        /// The nginx binary measured as the floor (default: /usr/sbin/nginx, else
        /// /usr/bin/nginx; without one the bench runs and gives no ratio to it).
        #[arg(long)]
        nginx: Option<PathBuf>,
        /// Concurrent streams of the paced load.
        #[arg(long, default_value_t = 512)]
        paced_streams: usize,
        /// Paced streams each client reads back to back.
        #[arg(long, default_value_t = 3)]
        paced_rounds: usize,
        /// Content deltas per paced stream.
        #[arg(long, default_value_t = 64)]
        paced_deltas: usize,
        /// Milliseconds between two deltas of a paced stream.
        #[arg(long, default_value_t = 20.0)]
        pace_ms: f64,
        /// Where to write the JSON report.
        #[arg(long, default_value = "bench.json")]
        out: PathBuf,
        /// The executable whose `serve`, `bench-passthrough` and `bench-micro` (the plugin
        /// microbenchmark) are measured (default: this one): two builds of the gateway
        /// compared under one load generator and upstream.
        #[arg(long)]
        server_bin: Option<PathBuf>,
        /// Only these rows (for profiling one load): `non-stream`, `stream`, `c1` or `high`,
        /// comma-separated; a mode and a level combine (`non-stream,high`); `paced` adds the
        /// paced-stream load, which runs only when named or when no filter is given. Default: all.
        #[arg(long, value_delimiter = ',')]
        only: Vec<crate::bench::RowFilter>,
        /// Run the memory soak instead of the table: this many seconds of back-to-back
        /// streamed calls through the gateway (default configuration), RSS sampled meanwhile.
        #[arg(long)]
        soak_s: Option<f64>,
        /// Streamed calls in flight during the soak.
        #[arg(long, default_value_t = 200)]
        soak_concurrency: usize,
        /// Seconds between two RSS samples of the soak.
        #[arg(long, default_value_t = 10.0)]
        soak_sample_s: f64,
    },
    /// Compile one component read from stdin and write wasmtime's artifact to stdout (the
    /// child process `serve` compiles its components in: `plugin/compile.rs`).
    #[command(hide = true, name = crate::plugin::compile::COMPILE_SUBCOMMAND)]
    CompileComponent {
        /// The component's length in bytes: exactly this many arrive on stdin.
        #[arg(long)]
        len: u64,
        /// The parent's `PGW_PLUGIN_CACHE_DIR`.
        #[arg(long)]
        cache_dir: Option<PathBuf>,
    },
    /// The plugin microbenchmark alone, its figures as JSON on stdout (`bench --server-bin`
    /// runs it in the build under test).
    #[command(hide = true)]
    BenchMicro {
        /// Iterations of each measurement.
        #[arg(long, default_value_t = crate::bench::micro::ITERS)]
        iters: u32,
        /// Chunks of the streamed answer the attempt measurement parses.
        #[arg(long, default_value_t = crate::bench::DEFAULT_CHUNKS)]
        chunks: usize,
    },
    /// The benchmark's bare pass-through proxy as its own process (started by `bench`).
    #[command(hide = true)]
    BenchPassthrough {
        /// The upstream's base URL (`http://host:port`).
        #[arg(long)]
        upstream: String,
        /// Address to bind (port 0 picks a free port).
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
    },
    /// Virtual keys in the telemetry database (docs/keys.md#cli): create, list, show,
    /// rotate, revoke.
    Keys {
        #[command(subcommand)]
        command: crate::keys::cli::KeysCommand,
    },
    /// Teams of virtual keys: create, list.
    Teams {
        #[command(subcommand)]
        command: crate::keys::cli::TeamsCommand,
    },
    /// Telemetry helpers.
    Telemetry {
        #[command(subcommand)]
        command: TelemetryCommand,
    },
}

#[derive(Debug, Subcommand)]
enum TelemetryCommand {
    /// Print the exact `CREATE TABLE IF NOT EXISTS llm_calls` statement the host runs.
    SchemaSql {
        /// Which backend's DDL.
        #[arg(long, value_enum)]
        backend: SchemaBackendArg,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SchemaBackendArg {
    Sqlite,
    Postgres,
}

/// Run the CLI; the exit code reports success.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    if let Command::CompileComponent { len, cache_dir } = &cli.command {
        // No runtime: the child compiles one component and exits.
        return crate::plugin::compile::serve_child(*len, cache_dir.clone());
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the runtime: {e}")),
    };
    rt.block_on(async move {
        match cli.command {
            Command::Serve => serve().await,
            Command::MockUpstream { listen, script } => mock(listen, script).await,
            Command::Demo { prompt } => demo(prompt).await,
            Command::Plugin { command } => crate::plugin::cli::run(command),
            Command::Bench {
                chunks,
                out,
                soak_s: Some(soak_s),
                soak_concurrency,
                soak_sample_s,
                ..
            } => soak(soak_s, soak_concurrency, soak_sample_s, chunks, out).await,
            Command::Bench {
                duration_s,
                chunks,
                concurrency,
                out,
                only,
                nginx,
                paced_streams,
                paced_rounds,
                paced_deltas,
                pace_ms,
                server_bin,
                soak_s: None,
                ..
            } => {
                let paced = PacedArgs {
                    streams: paced_streams,
                    rounds: paced_rounds,
                    deltas: paced_deltas,
                    pace_ms,
                };
                let runs = BenchRuns {
                    out,
                    only,
                    nginx,
                    server_bin,
                };
                bench(duration_s, chunks, concurrency, runs, paced).await
            }
            Command::BenchPassthrough { upstream, listen } => {
                bench_passthrough(upstream, listen).await
            }
            Command::BenchMicro { iters, chunks } => bench_micro(iters, chunks),
            Command::Telemetry {
                command: TelemetryCommand::SchemaSql { backend },
            } => schema_sql(backend),
            Command::Keys { command } => {
                crate::keys::cli::run(crate::keys::cli::Command::Keys(command)).await
            }
            Command::Teams { command } => {
                crate::keys::cli::run(crate::keys::cli::Command::Teams(command)).await
            }
            Command::CompileComponent { .. } => ExitCode::FAILURE, // handled above
        }
    })
}

fn bench_micro(iters: u32, chunks: usize) -> ExitCode {
    if iters == 0 || chunks == 0 {
        return fail("--iters and --chunks must be at least 1");
    }
    let micro = match crate::bench::micro::run(iters, chunks) {
        Ok(m) => m,
        Err(e) => return fail(&format!("plugin microbenchmark failed: {e}")),
    };
    let json = match serde_json::to_string(&micro) {
        Ok(j) => j,
        Err(e) => return fail(&e.to_string()),
    };
    match writeln!(std::io::stdout(), "{json}") {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

fn schema_sql(backend: SchemaBackendArg) -> ExitCode {
    use crate::telemetry::{SchemaBackend, create_table_sql};
    let backend = match backend {
        SchemaBackendArg::Sqlite => SchemaBackend::Sqlite,
        SchemaBackendArg::Postgres => SchemaBackend::Postgres,
    };
    match writeln!(std::io::stdout(), "{};", create_table_sql(backend)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "polygateway: {message}");
    ExitCode::FAILURE
}

/// Logs to stderr, with ANSI colours only when stderr is a terminal (a file, a pipe or a
/// log collector gets plain text).
fn init_tracing(filter: &str, json: bool) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

async fn serve() -> ExitCode {
    // Captured before `.env` is read, so a reload re-reads `.env` under the real environment.
    let reload_source = crate::proxy::env_settings_source();
    if let Err(e) = config::load_dotenv() {
        return fail(&e.to_string());
    }
    let mut settings = match config::settings_from_env() {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    init_tracing(&settings.process.log_filter, settings.process.log_json);
    // Components compile in a child process of this executable, at start-up and on every
    // reload, so the serving process never holds the compiler (plugin/compile.rs).
    let compiler = match std::env::current_exe() {
        Ok(program) => crate::plugin::Compiler::Subprocess { program },
        Err(e) => {
            tracing::warn!(error = %e, "cannot locate this executable: components compile in-process");
            crate::plugin::Compiler::InProcess
        }
    };
    settings.process.plugin_compiler = compiler.clone();
    let gateway = match Gateway::from_settings(settings).await {
        Ok(g) => g,
        Err(e) => return fail(&e.to_string()),
    };
    let reload_source: config::SettingsSource = Arc::new(move || {
        let mut settings = reload_source()?;
        settings.process.plugin_compiler = compiler.clone();
        Ok(settings)
    });
    gateway.set_settings_source(reload_source);
    crate::proxy::spawn_sighup_reload(gateway.clone());
    let (listener, addr) = match crate::proxy::bind(&gateway).await {
        Ok(x) => x,
        Err(e) => return fail(&e.to_string()),
    };
    let _ = writeln!(std::io::stdout(), "polygateway listening on http://{addr}");
    let _ = std::io::stdout().flush();
    tracing::info!(%addr, "serving");
    let shutdown = async {
        shutdown_signal().await;
        tracing::info!("shutdown signal received: no new connections");
    };
    let served = crate::proxy::serve(gateway.clone(), listener, shutdown).await;
    // Every connection is closed, so every call has recorded its rows (a call cut at the
    // end of the grace period its `cancelled` row). The SQLite file is checkpointed and
    // closed when the runtime drops the telemetry writer, after this function returns.
    gateway.flush_telemetry().await;
    tracing::info!("stopped");
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

/// The paced load's options of `bench`.
struct PacedArgs {
    streams: usize,
    rounds: usize,
    deltas: usize,
    pace_ms: f64,
}

/// Which rows `bench` runs, against which servers, and where the report goes.
struct BenchRuns {
    out: PathBuf,
    only: Vec<crate::bench::RowFilter>,
    nginx: Option<PathBuf>,
    server_bin: Option<PathBuf>,
}

async fn bench(
    duration_s: f64,
    chunks: usize,
    mut concurrency: Vec<usize>,
    runs: BenchRuns,
    paced: PacedArgs,
) -> ExitCode {
    let BenchRuns {
        out,
        only,
        nginx,
        server_bin,
    } = runs;
    if !(duration_s.is_finite() && duration_s > 0.0) {
        return fail("--duration-s must be > 0");
    }
    if concurrency.is_empty() || concurrency.contains(&0) {
        return fail("--concurrency takes levels ≥ 1, comma-separated (e.g. 32,128)");
    }
    if paced.streams == 0 || paced.rounds == 0 || paced.deltas == 0 {
        return fail("--paced-streams, --paced-rounds and --paced-deltas must be ≥ 1");
    }
    if !(paced.pace_ms.is_finite() && (0.0..=10_000.0).contains(&paced.pace_ms)) {
        return fail("--pace-ms must be between 0 and 10000");
    }
    // Absolute, since the servers run in temporary directories of their own.
    let server_bin = match server_bin {
        None => None,
        Some(given) => match std::path::absolute(&given) {
            Ok(abs) if abs.is_file() => Some(abs),
            Ok(_) => {
                return fail(&format!(
                    "--server-bin {}: no such executable file",
                    given.display()
                ));
            }
            Err(e) => return fail(&format!("--server-bin {}: {e}", given.display())),
        },
    };
    concurrency.sort_unstable();
    concurrency.dedup();
    let opts = crate::bench::BenchOptions {
        duration: std::time::Duration::from_secs_f64(duration_s),
        chunks,
        concurrency,
        out,
        only,
        nginx,
        paced_streams: paced.streams,
        paced_rounds: paced.rounds,
        paced_deltas: paced.deltas,
        pace: std::time::Duration::from_secs_f64(paced.pace_ms / 1000.0),
        server_bin,
    };
    match crate::bench::run(opts).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

async fn bench_passthrough(upstream: String, listen: SocketAddr) -> ExitCode {
    let addr =
        match crate::proxy::floor::start(listen, upstream, crate::bench::MAX_CONNECTIONS).await {
            Ok(a) => a,
            Err(e) => {
                return fail(&format!(
                    "cannot start the pass-through floor on {listen}: {e}"
                ));
            }
        };
    let _ = writeln!(std::io::stdout(), "polygateway listening on http://{addr}");
    shutdown_signal().await;
    ExitCode::SUCCESS
}

async fn soak(
    soak_s: f64,
    concurrency: usize,
    sample_s: f64,
    chunks: usize,
    out: PathBuf,
) -> ExitCode {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !positive(soak_s) || !positive(sample_s) || concurrency == 0 {
        return fail("--soak-s and --soak-sample-s must be > 0 and --soak-concurrency ≥ 1");
    }
    let opts = crate::bench::SoakOptions {
        duration: std::time::Duration::from_secs_f64(soak_s),
        concurrency,
        sample_every: std::time::Duration::from_secs_f64(sample_s),
        chunks,
        out,
    };
    match crate::bench::run_soak(opts).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

async fn mock(listen: SocketAddr, script: Option<PathBuf>) -> ExitCode {
    init_tracing("info", false);
    let scripts: HashMap<String, Script> = match script {
        None => HashMap::new(),
        Some(path) => match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(s) => s,
            Err(e) => return fail(&format!("{}: {e}", path.display())),
        },
    };
    match serve_mock(listen, scripts).await {
        Ok(m) => {
            let _ = writeln!(
                std::io::stdout(),
                "mock upstream listening on http://{}",
                m.addr
            );
            let _ = std::io::stdout().flush();
            shutdown_signal().await;
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot bind {listen}: {e}")),
    }
}

/// The demo configuration: a DeepSeek-style reasoner that fails once with 503, and a Qwen
/// fallback, both on the local mock upstream.
fn demo_settings(mock_base: &str, db: &str) -> Result<Settings, config::ConfigError> {
    let vars = [
        (
            "LLM__DEEPSEEK__1__BASE_URL",
            format!("{mock_base}/sc/demo-deepseek/v1"),
        ),
        ("LLM__DEEPSEEK__1__MODEL", "deepseek-reasoner".into()),
        ("LLM__DEEPSEEK__1__API_KEY", "sk-demo".into()),
        ("LLM__DEEPSEEK__1__ENABLE_THINKING", "true".into()),
        (
            "LLM__QWEN__2__BASE_URL",
            format!("{mock_base}/sc/demo-qwen/v1"),
        ),
        ("LLM__QWEN__2__MODEL", "qwen-plus".into()),
        ("LLM__QWEN__2__API_KEY", "sk-demo".into()),
        ("LLM__RETRY__BASE_DELAY_S", "0.2".into()),
        ("LLM__SELECTOR", "round-robin".into()),
        ("PGW_TELEMETRY_SQLITE_PATH", db.into()),
    ];
    config::settings_from_vars(vars.into_iter().map(|(k, v)| (k.to_string(), v)))
}

async fn demo(prompt: String) -> ExitCode {
    init_tracing("warn", false);
    let mut scripts = HashMap::new();
    let answer = Step {
        reasoning: Some("The user asks about breakers. A failing upstream should be skipped quickly, then probed.".into()),
        content: "A circuit breaker stops a gateway from hammering a failing source: after repeated failures it opens, sends traffic elsewhere, and lets one probe through to test recovery.".into(),
        inter_chunk_delay_ms: 15,
        ..Step::default()
    };
    scripts.insert(
        "demo-deepseek".to_string(),
        Script {
            steps: vec![Step {
                status: 503,
                ..Step::default()
            }],
            then: Some(answer.clone()),
        },
    );
    scripts.insert(
        "demo-qwen".to_string(),
        Script {
            steps: vec![],
            then: Some(answer),
        },
    );
    let mock = match serve_mock(SocketAddr::from(([127, 0, 0, 1], 0)), scripts).await {
        Ok(m) => m,
        Err(e) => return fail(&format!("cannot start the mock upstream: {e}")),
    };
    let settings = match demo_settings(&format!("http://{}", mock.addr), "demo.db") {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    let gateway = match Gateway::from_settings(settings).await {
        Ok(g) => g,
        Err(e) => return fail(&e.to_string()),
    };
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "mock upstream on http://{}; source deepseek-1 answers 503 once, then streams.\n",
        mock.addr
    );
    let _ = writeln!(out, "> {prompt}\n");
    let mut events = gateway.chat_stream(ChatRequest::user("llm", prompt));
    let mut in_reasoning = false;
    while let Some(ev) = events.next().await {
        match ev {
            CallEvent::Start(s) => {
                let _ = writeln!(
                    out,
                    "[source {} after {} attempt(s)]",
                    s.source_name, s.attempts
                );
            }
            CallEvent::Delta(Delta::Reasoning(r)) => {
                if !in_reasoning {
                    let _ = write!(out, "(thinking) ");
                    in_reasoning = true;
                }
                let _ = write!(out, "{r}");
            }
            CallEvent::Delta(Delta::Content(c)) => {
                if in_reasoning {
                    let _ = write!(out, "\n\n");
                    in_reasoning = false;
                }
                let _ = write!(out, "{c}");
            }
            CallEvent::Delta(_) => {}
            CallEvent::End(r) => {
                let _ = writeln!(
                    out,
                    "\n\n[call {} · source {} · {} attempt(s) · usage {} · ttft {:.1} ms · {} ms · telemetry in demo.db]",
                    r.call_id,
                    r.source_name,
                    r.attempts,
                    match r.usage {
                        Some(u) => format!("{}+{} tokens", u.prompt_tokens, u.completion_tokens),
                        None => "unavailable".into(),
                    },
                    r.ttft_ms.unwrap_or(0.0),
                    r.latency_ms
                );
            }
            CallEvent::Failed(e) => return fail(&e.to_string()),
        }
        let _ = out.flush();
    }
    gateway.flush_telemetry().await;
    ExitCode::SUCCESS
}
