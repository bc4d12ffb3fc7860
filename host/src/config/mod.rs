//! Configuration: the typed `Settings` value and its parsing from the environment and `.env`
//! (DESIGN §5). Parsing collects every problem in one run; each message names the exact key.

mod backends;
mod cache;
mod env;
mod listener;
mod settings;
mod structured;
mod telemetry;

pub use backends::{StateBackend, StateBackends};
pub use cache::{CacheBackendKind, CacheSettings, ScopeCacheSettings};
pub use env::{ConfigError, ConfigProblem, load_dotenv, settings_from_env, settings_from_vars};
pub use listener::{CorsOrigins, ListenerSettings};
pub use settings::PROTECTED_BODY_KEYS;
pub use settings::{
    FirstParty, GovernanceSettings, MissingDone, PluginRef, ProcessSettings, RetrySettings,
    SchemaMode, ScopeSettings, Settings, SourceSettings, TelemetryBackend, TelemetrySettings,
    TimeoutSettings, WaitPolicy,
};
pub use structured::{MAX_STRUCTURED_RETRIES, ScopeStructuredSettings};
