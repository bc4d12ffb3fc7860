//! Configuration: the typed `Settings` value, its parsing from the environment and `.env`,
//! and its one validation (`Settings::validate`, run by the parser, `Gateway::from_settings`
//! and every reload). Every problem is collected in one run; each names the exact key.
//!
//! One file per section — process, scope and retry, governance, source, cache, telemetry,
//! structured output, plugins, and the process-wide state backends, upstream limits and
//! listener, OpenTelemetry traces (`OTEL_*`) — each holding its types, its keys, its `DEFAULT_*` constants and its parser
//! `parse(&Vars, &mut Problems)`. `env.rs` sorts the variables into sections and assembles
//! `Settings`; `problems.rs` holds the problem list and `ConfigError`; `vars.rs` the lookup
//! the parsers read through.

mod backends;
mod cache;
mod dotenv;
mod env;
mod governance;
mod keys;
mod limits;
mod listener;
mod otel;
mod plugins;
mod problems;
mod process;
mod scope;
mod settings;
mod source;
mod structured;
mod telemetry;
mod validate;
mod vars;

/// A map keyed by names from the configuration (sources, scopes, upstream origins) and looked
/// up on every call. Its keys never come from a client, so it hashes with foldhash (a fast
/// hash with a per-process seed, hashbrown's own) instead of std's SipHash, whose
/// flooding resistance such keys do not need: SipHash took ~1.4k instructions per call over
/// the breaker's and the limiter's source indexes, the upstream pool's origins and the metric
/// series (`bench/instructions.py`, docs/benchmark-history.md).
pub type ConfigKeyed<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

pub use backends::{DEFAULT_REDIS_PREFIX, StateBackend, StateBackends};
pub use cache::{
    CacheBackendKind, CacheSettings, DEFAULT_CACHE_MEMORY_MAX_BYTES,
    DEFAULT_CACHE_MEMORY_MAX_ENTRIES, DEFAULT_CACHE_OP_TIMEOUT, ScopeCacheSettings,
};
pub use dotenv::{SettingsSource, env_settings_source, load_dotenv, parse_dotenv};
pub use env::{settings_from_env, settings_from_vars};
pub use governance::{
    DEFAULT_COOLDOWN, DEFAULT_FAIL_RATE, DEFAULT_FAIL_THRESHOLD, DEFAULT_MAX_COOLDOWN,
    DEFAULT_MIN_CALLS, DEFAULT_RATE_WINDOW, DEFAULT_SELECTOR, DEFAULT_STALL_WINDOW,
    GovernanceSettings, WaitPolicy,
};
pub use keys::{
    DEFAULT_KEYS_REFRESH, KEYS_REFRESH_MS_RANGE, KeyHashSecret, KeysSettings,
    MIN_KEY_HASH_SECRET_CHARS,
};
pub use limits::{DEFAULT_SSE_MAX_EVENT_BYTES, DEFAULT_UPSTREAM_MAX_BODY_BYTES, UpstreamLimits};
pub use listener::{CorsOrigins, ListenerSettings};
pub use otel::{
    DEFAULT_OTEL_EXPORT_TIMEOUT, DEFAULT_OTEL_MAX_EXPORT_BATCH_SIZE, DEFAULT_OTEL_MAX_QUEUE_SIZE,
    DEFAULT_OTEL_SCHEDULE_DELAY, DEFAULT_OTEL_SERVICE_NAME, OtelSampler, OtelSettings,
};
pub use plugins::{
    DEFAULT_PLUGIN_MEMORY_BYTES, DEFAULT_PLUGIN_TIMEOUT, FirstParty, FirstPartySelector, PluginRef,
    SelectorRef,
};
pub use problems::{ConfigError, ConfigProblem};
pub use process::{DEFAULT_LISTEN, DEFAULT_LOG_FILTER, DEFAULT_MAX_BODY_BYTES, ProcessSettings};
pub use scope::{
    DEFAULT_BASE_DELAY, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_DELAY, RetrySettings, ScopeSettings,
};
pub use settings::Settings;
pub use source::{
    DEFAULT_INTER_TOKEN_TIMEOUT, DEFAULT_TIMEOUT, DEFAULT_TTFT_TIMEOUT, DEFAULT_WEIGHT,
    MissingDone, PROTECTED_BODY_KEYS, SourceSettings, TimeoutSettings,
};
pub use structured::{
    DEFAULT_STRUCTURED_RETRIES, DEFAULT_STRUCTURED_STRATEGY, MAX_STRUCTURED_RETRIES,
    ScopeStructuredSettings,
};
pub use telemetry::{
    DEFAULT_PG_POOL_MAX, DEFAULT_PG_WRITE_TIMEOUT, DEFAULT_SQLITE_PATH, SchemaMode,
    TelemetryBackend, TelemetrySettings,
};
pub use validate::{MAX_PG_POOL, MAX_PLUGIN_MEMORY_MB};
