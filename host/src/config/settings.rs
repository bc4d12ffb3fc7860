//! The validated, typed configuration the gateway runs on. Built from the environment by
//! `config::env`, or directly by an embedding application.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::cache::{CacheSettings, ScopeCacheSettings};

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

/// Process-wide settings (`PGW_*` keys).
#[derive(Debug, Clone)]
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
    /// `PGW_PLUGIN_MAX_BYTES`: largest component file loaded from disk, default
    /// [`crate::plugin::DEFAULT_PLUGIN_MAX_BYTES`] (64 MiB).
    pub plugin_max_bytes: u64,
    /// `PGW_CACHE_BACKEND` and the bounds of the response cache.
    pub cache: CacheSettings,
    /// Keys that are recognised but belong to features configured elsewhere (cache, Redis
    /// backends, pricing); kept verbatim so later layers can read them.
    pub other: BTreeMap<String, String>,
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

/// What to do when an admission gate says no (reference §7.3, §7.4 issue-14).
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
            fail_threshold: 5,
            cooldown: Duration::from_secs(30),
            max_cooldown: Duration::from_secs(300),
            fail_rate: 0.6,
            min_calls: 10,
            quota_full: WaitPolicy::Wait,
            circuit_open: WaitPolicy::FailFast,
            stall_window: Duration::from_secs(300),
            global_max_concurrency: 0,
            global_rpm: 0,
            global_tpm: 0,
            rate_window: Duration::from_secs(60),
            selector: "health-aware".into(),
        }
    }
}

/// `{SCOPE}__RETRY__*` (reference §7.2).
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
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// The per-source liveness watchdog (reference §7.6): 0 < inter-token < TTFT < total.
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
            total: Duration::from_secs(120),
            ttft: Duration::from_secs(60),
            inter_token: Duration::from_secs(30),
        }
    }
}

/// What to do when a stream ends without `[DONE]` (reference §7.1).
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
