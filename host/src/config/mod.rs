//! Configuration: the typed `Settings` value, its parsing from the environment and `.env`,
//! and its one validation (`Settings::validate`, run by the parser, `Gateway::from_settings`
//! and every reload). Every problem is collected in one run; each names the exact key.

mod backends;
mod cache;
mod dotenv;
mod env;
mod limits;
mod listener;
mod settings;
mod structured;
mod telemetry;
mod validate;

pub use backends::{StateBackend, StateBackends};
pub use cache::{
    CacheBackendKind, CacheSettings, DEFAULT_CACHE_MEMORY_MAX_BYTES,
    DEFAULT_CACHE_MEMORY_MAX_ENTRIES, DEFAULT_CACHE_OP_TIMEOUT, ScopeCacheSettings,
};
pub use dotenv::{SettingsSource, env_settings_source, load_dotenv, parse_dotenv};
pub use env::{ConfigError, ConfigProblem, settings_from_env, settings_from_vars};
pub use limits::{DEFAULT_SSE_MAX_EVENT_BYTES, DEFAULT_UPSTREAM_MAX_BODY_BYTES, UpstreamLimits};
pub use listener::{CorsOrigins, ListenerSettings};
pub use settings::{
    DEFAULT_BASE_DELAY, DEFAULT_COOLDOWN, DEFAULT_FAIL_RATE, DEFAULT_FAIL_THRESHOLD,
    DEFAULT_INTER_TOKEN_TIMEOUT, DEFAULT_LISTEN, DEFAULT_LOG_FILTER, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_COOLDOWN, DEFAULT_MAX_DELAY, DEFAULT_MIN_CALLS,
    DEFAULT_PLUGIN_MEMORY_BYTES, DEFAULT_PLUGIN_TIMEOUT, DEFAULT_RATE_WINDOW, DEFAULT_SELECTOR,
    DEFAULT_STALL_WINDOW, DEFAULT_TIMEOUT, DEFAULT_TTFT_TIMEOUT, DEFAULT_WEIGHT,
    PROTECTED_BODY_KEYS,
};
pub use settings::{
    FirstParty, GovernanceSettings, MissingDone, PluginRef, ProcessSettings, RetrySettings,
    SchemaMode, ScopeSettings, Settings, SourceSettings, TelemetryBackend, TelemetrySettings,
    TimeoutSettings, WaitPolicy,
};
pub use structured::{MAX_STRUCTURED_RETRIES, ScopeStructuredSettings};
pub use telemetry::{DEFAULT_PG_POOL_MAX, DEFAULT_PG_WRITE_TIMEOUT, DEFAULT_SQLITE_PATH};
pub use validate::{MAX_PG_POOL, MAX_PLUGIN_MEMORY_MB};
