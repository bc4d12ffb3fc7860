//! The process section: `ProcessSettings` (every `PGW_*` key), the keys of its own
//! (`PGW_LISTEN`, `PGW_API_KEYS`, `PGW_ADMIN_KEYS`, `PGW_MAX_BODY_BYTES`, `PGW_LOG`,
//! `PGW_LOG_FORMAT`) with their defaults, and the parser that reads them and has the other
//! process-wide sections (telemetry, state backends, upstream limits, plugins, cache,
//! listener) read theirs.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use super::backends::StateBackends;
use super::cache::CacheSettings;
use super::keys::KeysSettings;
use super::limits::UpstreamLimits;
use super::listener::ListenerSettings;
use super::otel::OtelSettings;
use super::problems::Problems;
use super::telemetry::TelemetrySettings;
use super::vars::{Vars, comma_list};

/// `PGW_LISTEN`: loopback only, so a gateway started without thought is not reachable from
/// the network (and then serves without client keys only to local callers).
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 8080));
/// `PGW_MAX_BODY_BYTES`: a long conversation with a few inline images fits; a flood of
/// bodies cannot exhaust memory.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// `PGW_LOG`: start-up, reloads, warnings and failures, no per-call lines.
pub const DEFAULT_LOG_FILTER: &str = "info";

/// The keys this section parses itself.
const KEYS: &[&str] = &[
    "PGW_LISTEN",
    "PGW_API_KEYS",
    "PGW_ADMIN_KEYS",
    "PGW_MAX_BODY_BYTES",
    "PGW_LOG",
    "PGW_LOG_FORMAT",
];

/// Whether `key` is a `PGW_*` key of any process-wide section.
pub(super) fn is_known(key: &str) -> bool {
    [
        KEYS,
        super::telemetry::KEYS,
        super::keys::KEYS,
        super::backends::KEYS,
        super::limits::KEYS,
        super::plugins::KEYS,
        super::cache::KEYS,
        super::listener::KEYS,
    ]
    .iter()
    .any(|keys| keys.contains(&key))
}

/// Process-wide settings (`PGW_*` keys). `Debug` shows how many client and admin keys there
/// are, never the keys.
#[derive(Clone)]
pub struct ProcessSettings {
    /// `PGW_LISTEN`, default `127.0.0.1:8080`.
    pub listen: SocketAddr,
    /// `PGW_API_KEYS`: client keys; empty = only loopback peers are served.
    pub api_keys: Vec<String>,
    /// `PGW_ADMIN_KEYS`.
    pub admin_keys: Vec<String>,
    /// `PGW_MAX_BODY_BYTES`, default 8 MiB.
    pub max_body_bytes: usize,
    /// `PGW_LOG` tracing filter, default `info`.
    pub log_filter: String,
    /// `PGW_LOG_FORMAT`: true for JSON lines.
    pub log_json: bool,
    /// `PGW_TELEMETRY_*` and `PGW_PRICING_FILE`.
    pub telemetry: TelemetrySettings,
    /// `PGW_VIRTUAL_KEYS`, `PGW_KEY_HASH_SECRET`, `PGW_KEYS_REFRESH_MS` (docs/keys.md).
    pub keys: KeysSettings,
    /// Where the limiter and breaker state live (memory or Redis).
    pub backends: StateBackends,
    /// `PGW_PLUGIN_CACHE_DIR`: on-disk cache of compiled components; none = no disk cache.
    pub plugin_cache_dir: Option<PathBuf>,
    /// Where components are compiled. Not read from the environment: in-process unless the
    /// embedder says otherwise; `polygateway serve` compiles in a child process of itself,
    /// so the serving process never holds the compiler's code and heap
    /// ([`crate::plugin::Compiler`]).
    pub plugin_compiler: crate::plugin::Compiler,
    /// `PGW_PLUGIN_TIMEOUT_MS`: budget of one plugin call, default 1000 ms.
    pub plugin_timeout: Duration,
    /// `PGW_PLUGIN_MEMORY_MB`: memory cap of one plugin instance, default 64 MiB.
    pub plugin_memory_bytes: usize,
    /// `PGW_PLUGIN_STREAMS_PER_INSTANCE`: most stream parsers of one provider component per
    /// instance, default [`crate::plugin::DEFAULT_STREAMS_PER_INSTANCE`]; 1 = an instance
    /// per stream.
    pub plugin_streams_per_instance: usize,
    /// `PGW_PLUGIN_PROFILER`: whether guest code is named for a sampling profiler
    /// (`perfmap`: wasmtime writes `/tmp/perf-<pid>.map`, which `perf report` reads), default
    /// none.
    pub plugin_profiler: crate::plugin::Profiler,
    /// `PGW_UPSTREAM_MAX_BODY_BYTES` and `PGW_SSE_MAX_EVENT_BYTES`.
    pub upstream_limits: UpstreamLimits,
    /// `PGW_PLUGIN_MAX_BYTES`: largest component file loaded from disk, default
    /// [`crate::plugin::DEFAULT_PLUGIN_MAX_BYTES`] (64 MiB).
    pub plugin_max_bytes: u64,
    /// `PGW_CACHE_BACKEND` and the bounds of the response cache.
    pub cache: CacheSettings,
    /// The proxy listener's timeouts, connection cap, shutdown grace and CORS origins.
    pub listener: ListenerSettings,
    /// The OpenTelemetry trace exporter (`OTEL_*`, docs/tracing.md); off by default.
    pub otel: OtelSettings,
    /// Keys that are recognised but belong to features configured elsewhere (cache, Redis
    /// backends, pricing); kept verbatim so later layers can read them.
    pub other: BTreeMap<String, String>,
}

impl std::fmt::Debug for ProcessSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys = |n: usize| format!("<{n} redacted>");
        f.debug_struct("ProcessSettings")
            .field("listen", &self.listen)
            .field("api_keys", &keys(self.api_keys.len()))
            .field("admin_keys", &keys(self.admin_keys.len()))
            .field("max_body_bytes", &self.max_body_bytes)
            .field("log_filter", &self.log_filter)
            .field("log_json", &self.log_json)
            .field("telemetry", &self.telemetry)
            .field("keys", &self.keys)
            .field("backends", &self.backends)
            .field("plugin_cache_dir", &self.plugin_cache_dir)
            .field("plugin_compiler", &self.plugin_compiler)
            .field("plugin_timeout", &self.plugin_timeout)
            .field("plugin_memory_bytes", &self.plugin_memory_bytes)
            .field(
                "plugin_streams_per_instance",
                &self.plugin_streams_per_instance,
            )
            .field("plugin_profiler", &self.plugin_profiler)
            .field("upstream_limits", &self.upstream_limits)
            .field("plugin_max_bytes", &self.plugin_max_bytes)
            .field("cache", &self.cache)
            .field("listener", &self.listener)
            .field("otel", &self.otel)
            .field("other", &self.other.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The process settings from the `PGW_*` keys (named by the whole key); `None` when any of
/// them has a problem (each is in `problems`).
pub(super) fn parse(vars: &Vars, problems: &mut Problems) -> Option<ProcessSettings> {
    let before = problems.len();
    let listen = parse_listen(vars, problems);
    let api_keys = vars.get("PGW_API_KEYS").map(comma_list).unwrap_or_default();
    let admin_keys = vars
        .get("PGW_ADMIN_KEYS")
        .map(comma_list)
        .unwrap_or_default();
    let max_body_bytes = parse_max_body_bytes(vars, problems);
    let log_json = parse_log_json(vars, problems);
    let telemetry = super::telemetry::parse(vars, problems);
    let keys = super::keys::parse(vars, problems, &telemetry.backend);
    let backends = super::backends::parse(vars, problems);
    let upstream_limits = super::limits::parse(vars, problems);
    let plugins = super::plugins::parse(vars, problems);
    let listener = super::listener::parse(vars, problems);
    let cache = super::cache::parse_process(vars, problems);
    let otel = super::otel::parse(vars, problems);
    if problems.len() != before {
        return None;
    }
    Some(ProcessSettings {
        listen,
        api_keys,
        admin_keys,
        max_body_bytes,
        log_filter: vars
            .get("PGW_LOG")
            .unwrap_or(DEFAULT_LOG_FILTER)
            .to_string(),
        log_json,
        telemetry,
        keys,
        backends,
        plugin_cache_dir: plugins.cache_dir,
        plugin_compiler: crate::plugin::Compiler::InProcess,
        plugin_timeout: plugins.timeout,
        plugin_memory_bytes: plugins.memory_bytes,
        plugin_streams_per_instance: plugins.streams_per_instance,
        plugin_profiler: plugins.profiler,
        upstream_limits,
        plugin_max_bytes: plugins.max_bytes,
        cache,
        listener,
        otel,
        other: other_keys(vars),
    })
}

fn parse_listen(vars: &Vars, problems: &mut Problems) -> SocketAddr {
    let Some(v) = vars.get("PGW_LISTEN") else {
        return DEFAULT_LISTEN;
    };
    match v.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => {
            problems.add("PGW_LISTEN", format!("expected host:port, got `{v}`"));
            DEFAULT_LISTEN
        }
    }
}

fn parse_max_body_bytes(vars: &Vars, problems: &mut Problems) -> usize {
    let Some(v) = vars.get("PGW_MAX_BODY_BYTES") else {
        return DEFAULT_MAX_BODY_BYTES;
    };
    match v.parse::<usize>() {
        Ok(n) => n,
        _ => {
            problems.add(
                "PGW_MAX_BODY_BYTES",
                format!("expected a positive integer, got `{v}`"),
            );
            0
        }
    }
}

fn parse_log_json(vars: &Vars, problems: &mut Problems) -> bool {
    match vars.get("PGW_LOG_FORMAT") {
        None | Some("text") => false,
        Some("json") => true,
        Some(v) => {
            problems.add("PGW_LOG_FORMAT", format!("expected text|json, got `{v}`"));
            false
        }
    }
}

/// The keys kept verbatim for later layers: all but those consumed above (and the `OTEL_*`
/// ones, whose headers may carry a collector's credential).
fn other_keys(vars: &Vars) -> BTreeMap<String, String> {
    vars.iter()
        .filter(|(name, _, _)| {
            !name.starts_with("OTEL_")
                && !matches!(
                    *name,
                    "PGW_LISTEN"
                        | "PGW_API_KEYS"
                        | "PGW_ADMIN_KEYS"
                        | "PGW_MAX_BODY_BYTES"
                        | "PGW_LOG_FORMAT"
                        | "PGW_KEY_HASH_SECRET"
                )
        })
        .map(|(_, key, value)| (key.to_string(), value.to_string()))
        .collect()
}
