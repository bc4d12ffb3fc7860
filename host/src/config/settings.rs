//! The validated, typed configuration the gateway runs on. Built from the environment by
//! `config::env`, or directly by an embedding application.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::cache::{CacheSettings, ScopeCacheSettings};

// Defaults of the typed settings, each with the reason for its value. The env parser and
// the `Default` impls use these; a test or an embedding application that sets a value by
// hand can start from them.

/// `PGW_LISTEN`: loopback only, so a gateway started without thought is not reachable from
/// the network (and then serves without client keys only to local callers).
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 8080));
/// `PGW_MAX_BODY_BYTES`: a long conversation with a few inline images fits; a flood of
/// bodies cannot exhaust memory.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// `PGW_LOG`: start-up, reloads, warnings and failures, no per-call lines.
pub const DEFAULT_LOG_FILTER: &str = "info";
/// `PGW_PLUGIN_TIMEOUT_MS`: a plugin call is a pure function over one request or batch and
/// takes micro- to milliseconds; one still running after a second is looping.
pub const DEFAULT_PLUGIN_TIMEOUT: Duration = Duration::from_secs(1);
/// `PGW_PLUGIN_MEMORY_MB`: room for an 8 MiB body parsed several times over, while a pool of
/// warm instances stays small.
pub const DEFAULT_PLUGIN_MEMORY_BYTES: usize = 64 * 1024 * 1024;
/// `{SCOPE}__RETRY__MAX_ATTEMPTS`: a first try, one retry elsewhere, one more; each is a
/// billed upstream call.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// `{SCOPE}__RETRY__BASE_DELAY_S`: long enough for a blip to pass, short next to a model's
/// answer time.
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(500);
/// `{SCOPE}__RETRY__MAX_DELAY_S`: the cap of one back-off sleep; longer waits belong to
/// `Retry-After` and the stall window.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(30);
/// `{SCOPE}__BREAKER__FAIL_THRESHOLD`: a few failures in a row are a dead source, not bad
/// luck.
pub const DEFAULT_FAIL_THRESHOLD: u32 = 5;
/// `{SCOPE}__BREAKER__COOLDOWN_S`: typical length of a provider's short outage.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(30);
/// `{SCOPE}__BREAKER__MAX_COOLDOWN_S` (raised to the cooldown if that is longer): a dead
/// source is still probed every five minutes.
pub const DEFAULT_MAX_COOLDOWN: Duration = Duration::from_secs(300);
/// `{SCOPE}__BREAKER__FAIL_RATE`: well above the error rate of a healthy provider.
pub const DEFAULT_FAIL_RATE: f64 = 0.6;
/// `{SCOPE}__BREAKER__MIN_CALLS`: fewer calls say nothing about a rate.
pub const DEFAULT_MIN_CALLS: u32 = 10;
/// `{SCOPE}__BACKPRESSURE__STALL_WINDOW_S`: how long a rate-limited call may wait without
/// the scope making any progress.
pub const DEFAULT_STALL_WINDOW: Duration = Duration::from_secs(300);
/// The RPM/TPM sliding window: providers state their limits per minute.
pub const DEFAULT_RATE_WINDOW: Duration = Duration::from_secs(60);
/// `{SCOPE}__SELECTOR`: prefers healthy, fast sources and needs no tuning.
pub const DEFAULT_SELECTOR: &str = "health-aware";
/// `TIMEOUT_S`: a long reasoning answer fits; a stuck one ends.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// `TTFT_TIMEOUT_S`: reasoning models may think a minute before their first token.
pub const DEFAULT_TTFT_TIMEOUT: Duration = Duration::from_secs(60);
/// `INTER_TOKEN_TIMEOUT_S`: a stream silent this long has stalled.
pub const DEFAULT_INTER_TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
/// `WEIGHT`: every source counts the same until told otherwise.
pub const DEFAULT_WEIGHT: u32 = 1;

/// Everything the gateway needs to start.
#[derive(Debug, Clone)]
pub struct Settings {
    pub process: ProcessSettings,
    /// Scopes by name (upper case, as in the env keys), each with at least one source.
    pub scopes: Vec<ScopeSettings>,
}

impl Settings {
    /// The scope a client's `model` value names (an alias, compared exactly).
    pub fn scope_for_alias(&self, alias: &str) -> Option<&ScopeSettings> {
        self.scopes
            .iter()
            .find(|s| s.aliases.iter().any(|a| a == alias))
    }
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
    /// Where the limiter and breaker state live (memory or Redis).
    pub backends: super::backends::StateBackends,
    /// `PGW_PLUGIN_CACHE_DIR`: on-disk cache of compiled components; none = no disk cache.
    pub plugin_cache_dir: Option<PathBuf>,
    /// `PGW_PLUGIN_TIMEOUT_MS`: budget of one plugin call, default 1000 ms.
    pub plugin_timeout: Duration,
    /// `PGW_PLUGIN_MEMORY_MB`: memory cap of one plugin instance, default 64 MiB.
    pub plugin_memory_bytes: usize,
    /// `PGW_UPSTREAM_MAX_BODY_BYTES` and `PGW_SSE_MAX_EVENT_BYTES`.
    pub upstream_limits: super::limits::UpstreamLimits,
    /// `PGW_PLUGIN_MAX_BYTES`: largest component file loaded from disk, default
    /// [`crate::plugin::DEFAULT_PLUGIN_MAX_BYTES`] (64 MiB).
    pub plugin_max_bytes: u64,
    /// `PGW_CACHE_BACKEND` and the bounds of the response cache.
    pub cache: CacheSettings,
    /// The proxy listener's timeouts, connection cap, shutdown grace and CORS origins.
    pub listener: super::listener::ListenerSettings,
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
            .field("backends", &self.backends)
            .field("plugin_cache_dir", &self.plugin_cache_dir)
            .field("plugin_timeout", &self.plugin_timeout)
            .field("plugin_memory_bytes", &self.plugin_memory_bytes)
            .field("upstream_limits", &self.upstream_limits)
            .field("plugin_max_bytes", &self.plugin_max_bytes)
            .field("cache", &self.cache)
            .field("listener", &self.listener)
            .field("other", &self.other.keys().collect::<Vec<_>>())
            .finish()
    }
}

pub use super::telemetry::{SchemaMode, TelemetryBackend, TelemetrySettings};

/// One scope: a logical role with its sources and policies.
#[derive(Debug, Clone)]
pub struct ScopeSettings {
    /// Scope name as in the env keys, e.g. `LLM`.
    pub name: Arc<str>,
    /// Model names clients send to reach this scope (`{SCOPE}__ALIASES`; default the scope
    /// name in lower case).
    pub aliases: Vec<String>,
    /// Sources in order of `N` (then provider name).
    pub sources: Vec<SourceSettings>,
    pub retry: RetrySettings,
    /// `{SCOPE}__CALL_DEADLINE_S`: one hard bound around the whole call.
    pub call_deadline: Option<Duration>,
    /// Admission policies, breaker tuning, global limits, stall window, selector.
    pub governance: GovernanceSettings,
    /// `{SCOPE}__CACHE__TTL_S|NAMESPACE`.
    pub cache: ScopeCacheSettings,
    /// `{SCOPE}__STRUCTURED__STRATEGY|MAX_RETRIES`.
    pub structured: super::structured::ScopeStructuredSettings,
    /// Scope keys recognised but consumed by later layers (breaker, limiter, cache, …).
    pub other: BTreeMap<String, String>,
}

/// What to do when an admission gate says no (docs/limiter.md#wait-policies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Wait (sleeping to the known deadline, clamped to the stall budget).
    Wait,
    /// Fail at once with 503.
    FailFast,
}

/// `{SCOPE}__BREAKER__*`, `{SCOPE}__QUOTA_FULL`, `{SCOPE}__CIRCUIT_OPEN`,
/// `{SCOPE}__BACKPRESSURE__STALL_WINDOW_S`, `{SCOPE}__GLOBAL__*`, `{SCOPE}__SELECTOR`.
#[derive(Debug, Clone, PartialEq)]
pub struct GovernanceSettings {
    /// Consecutive failures that open a source's breaker (default 5).
    pub fail_threshold: u32,
    /// Base open time (default 30 s).
    pub cooldown: Duration,
    /// Cap of the growing open time (default max(300 s, cooldown)).
    pub max_cooldown: Duration,
    /// Failure rate that opens it over the window (default 0.6).
    pub fail_rate: f64,
    /// Fewest calls in the window before the rate counts (default 10).
    pub min_calls: u32,
    /// Quota full: wait (default) or fail fast.
    pub quota_full: WaitPolicy,
    /// Every source's breaker open: fail fast (default) or wait.
    pub circuit_open: WaitPolicy,
    /// Longest non-productive waiting before a call fails with `stalled` (default 300 s).
    pub stall_window: Duration,
    /// `{SCOPE}__GLOBAL__MAX_CONCURRENCY|RPM|TPM` (0 = gate off).
    pub global_max_concurrency: u32,
    pub global_rpm: u32,
    pub global_tpm: u64,
    /// Length of the RPM/TPM sliding window (60 s; tests shrink it through `Settings`).
    pub rate_window: Duration,
    /// `{SCOPE}__SELECTOR`: a first-party selector name or a `.wasm` path (default
    /// `health-aware`).
    pub selector: String,
}

impl Default for GovernanceSettings {
    fn default() -> Self {
        Self {
            fail_threshold: DEFAULT_FAIL_THRESHOLD,
            cooldown: DEFAULT_COOLDOWN,
            max_cooldown: DEFAULT_MAX_COOLDOWN,
            fail_rate: DEFAULT_FAIL_RATE,
            min_calls: DEFAULT_MIN_CALLS,
            quota_full: WaitPolicy::Wait,
            circuit_open: WaitPolicy::FailFast,
            stall_window: DEFAULT_STALL_WINDOW,
            global_max_concurrency: 0,
            global_rpm: 0,
            global_tpm: 0,
            rate_window: DEFAULT_RATE_WINDOW,
            selector: DEFAULT_SELECTOR.into(),
        }
    }
}

/// `{SCOPE}__RETRY__*` (docs/retry.md#back-off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrySettings {
    /// Most attempts for one logical call, across sources (default 3).
    pub max_attempts: u32,
    /// Base of the exponential back-off (default 0.5 s).
    pub base_delay: Duration,
    /// Cap of one back-off sleep (default 30 s).
    pub max_delay: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            base_delay: DEFAULT_BASE_DELAY,
            max_delay: DEFAULT_MAX_DELAY,
        }
    }
}

/// The per-source liveness watchdog (docs/streaming.md#watchdog): 0 < inter-token < TTFT <
/// total.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeoutSettings {
    /// `TIMEOUT_S`: the whole attempt, default 120 s.
    pub total: Duration,
    /// `TTFT_TIMEOUT_S`: request sent → first token (content or reasoning), default 60 s.
    pub ttft: Duration,
    /// `INTER_TOKEN_TIMEOUT_S`: longest silence between tokens, default 30 s.
    pub inter_token: Duration,
}

impl Default for TimeoutSettings {
    fn default() -> Self {
        Self {
            total: DEFAULT_TIMEOUT,
            ttft: DEFAULT_TTFT_TIMEOUT,
            inter_token: DEFAULT_INTER_TOKEN_TIMEOUT,
        }
    }
}

/// What to do when a stream ends without `[DONE]` (docs/streaming.md#missing-done).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingDone {
    /// Treat it as a broken stream (transient failure). The default.
    Retry,
    /// Keep what arrived; usage that did arrive is marked `estimated`.
    Salvage,
}

/// The first-party provider components embedded in the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstParty {
    OpenAi,
    DeepSeek,
    Qwen,
    /// MonkeyOCR (`/ocr/text`, `/parse`): OCR only.
    MonkeyOcr,
}

impl FirstParty {
    /// All first-party providers.
    pub const ALL: [FirstParty; 4] = [
        FirstParty::OpenAi,
        FirstParty::DeepSeek,
        FirstParty::Qwen,
        FirstParty::MonkeyOcr,
    ];

    /// The name used in `PLUGIN` and as the `PROVIDER` segment (lower case).
    pub fn name(self) -> &'static str {
        match self {
            FirstParty::OpenAi => "openai",
            FirstParty::DeepSeek => "deepseek",
            FirstParty::Qwen => "qwen",
            FirstParty::MonkeyOcr => "monkeyocr",
        }
    }

    /// Look a first-party provider up by name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }
}

/// Which provider component a source uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginRef {
    FirstParty(FirstParty),
    /// A component file loaded at start-up.
    File(PathBuf),
}

/// One upstream account: base URL + key + model.
#[derive(Clone)]
pub struct SourceSettings {
    /// Unique within the scope: `{provider}-{n}` in lower case, e.g. `deepseek-1`.
    pub name: Arc<str>,
    /// The `PROVIDER` segment, lower case.
    pub provider: Arc<str>,
    /// The `N` segment.
    pub index: u32,
    pub base_url: String,
    pub model: String,
    /// Never logged (see the `Debug` impl), never passed to a plugin.
    pub api_key: Option<String>,
    pub plugin: PluginRef,
    /// `PLUGIN_SHA256`: expected lower-case hex digest of the component file.
    pub plugin_sha256: Option<String>,
    pub enable_thinking: Option<bool>,
    /// `EXTRA_BODY` as a JSON object (protected keys refused at parse time).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    pub timeouts: TimeoutSettings,
    pub missing_done: MissingDone,
    /// `WEIGHT` for selectors (default 1).
    pub weight: u32,
    /// `MAX_CONCURRENCY`, `RPM`, `TPM`, `EST_TOKENS` (0 = gate off).
    pub max_concurrency: u32,
    pub rpm: u32,
    pub tpm: u64,
    pub est_tokens: u64,
    /// `MAX_BATCH` for embeddings (0 = unlimited).
    pub max_batch: u32,
    /// `TRUST_ENV`: use the process's proxy settings (default false).
    pub trust_env: bool,
}

impl std::fmt::Debug for SourceSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceSettings")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("plugin", &self.plugin)
            .finish_non_exhaustive()
    }
}

/// Keys of a request body that neither `EXTRA_BODY` nor a client's sampling overlay may set.
pub const PROTECTED_BODY_KEYS: [&str; 4] = ["model", "messages", "stream", "stream_options"];
