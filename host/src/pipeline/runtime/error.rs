//! Why a gateway (or a reload's new configuration) could not start: [`StartError`].

use crate::plugin::PluginError;

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error("telemetry: {0}")]
    Telemetry(String),
    #[error("{0}")]
    Transport(String),
    #[error("{key}: {message}")]
    Source { key: String, message: String },
    #[error("response cache: {0}")]
    Cache(#[from] crate::cache::CacheError),
    /// The virtual-key store could not be opened or migrated (`PGW_VIRTUAL_KEYS`).
    #[error("virtual keys: {0}")]
    Keys(String),
}
