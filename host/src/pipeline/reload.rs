//! What a reload reports: why one was refused ([`ReloadError`], with every key at fault),
//! what a successful one loaded ([`ReloadReport`]), and which changed process settings wait
//! for a restart. The swap itself is `Gateway::reload_with`; the new configuration is built
//! like the first one (`runtime::Inner::build`).

use crate::config::{ConfigError, Settings};

use super::runtime::{Inner, StartError};

/// Why a reload was refused. The previous configuration keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The gateway was started from explicit settings and has no source to re-read.
    #[error(
        "no settings source: this gateway was started from explicit settings (see Gateway::set_settings_source)"
    )]
    NoSource,
    /// The new settings do not validate.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The new settings validate but cannot be started (a plugin that does not load, …).
    #[error(transparent)]
    Start(#[from] StartError),
}

impl ReloadError {
    /// Every `(key, problem)` at fault for a configuration or plugin problem (empty for
    /// other failures).
    pub fn problems(&self) -> Vec<(String, String)> {
        match self {
            ReloadError::NoSource => Vec::new(),
            ReloadError::Config(ConfigError::Invalid(problems)) => problems
                .iter()
                .map(|p| (p.key.clone(), p.message.clone()))
                .collect(),
            ReloadError::Config(ConfigError::DotEnv { path, message }) => {
                vec![(path.clone(), message.clone())]
            }
            ReloadError::Start(StartError::Source { key, message }) => {
                vec![(key.clone(), message.clone())]
            }
            ReloadError::Start(StartError::Config(e)) => {
                ReloadError::Config(ConfigError::Invalid(match e {
                    ConfigError::Invalid(p) => p.clone(),
                    ConfigError::DotEnv { .. } => Vec::new(),
                }))
                .problems()
            }
            ReloadError::Start(_) => Vec::new(),
        }
    }
}

/// What a successful reload loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// The scopes now served.
    pub scopes: Vec<String>,
    /// The provider and selector components now loaded, by origin (`builtin:<name>` or a
    /// path), each once.
    pub plugins: Vec<String>,
    /// Process settings that changed but only take effect on a restart (`PGW_LISTEN`,
    /// client and admin keys, body limit, logging, telemetry).
    pub restart_required: Vec<&'static str>,
}

impl ReloadReport {
    /// The report of a reload that built `new`.
    pub(crate) fn of(new: &Inner, restart_required: Vec<&'static str>) -> Self {
        Self {
            scopes: new
                .scopes
                .iter()
                .map(|s| s.settings.name.to_string())
                .collect(),
            plugins: new.plugin_origins(),
            restart_required,
        }
    }
}

/// The process settings that differ between `started` and `new` but only take effect on a
/// restart (the listener, the HTTP server's keys and limits, logging and telemetry are set
/// up once), by env key.
pub(crate) fn restart_required(started: &Settings, new: &Settings) -> Vec<&'static str> {
    let (a, b) = (&started.process, &new.process);
    let mut keys = Vec::new();
    for (key, changed) in [
        ("PGW_LISTEN", a.listen != b.listen),
        ("PGW_API_KEYS", a.api_keys != b.api_keys),
        ("PGW_ADMIN_KEYS", a.admin_keys != b.admin_keys),
        ("PGW_MAX_BODY_BYTES", a.max_body_bytes != b.max_body_bytes),
        ("PGW_LOG", a.log_filter != b.log_filter),
        ("PGW_LOG_FORMAT", a.log_json != b.log_json),
        ("PGW_TELEMETRY_*", a.telemetry != b.telemetry),
        ("OTEL_*", a.otel != b.otel),
        (
            "PGW_HEADER_READ_TIMEOUT_S, PGW_BODY_READ_TIMEOUT_S, PGW_IDLE_TIMEOUT_S, PGW_MAX_CONNECTIONS, PGW_SHUTDOWN_GRACE_S, PGW_CORS_ORIGINS",
            a.listener != b.listener,
        ),
    ] {
        if changed {
            keys.push(key);
        }
    }
    keys
}
