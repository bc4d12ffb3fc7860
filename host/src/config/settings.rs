//! `Settings`, the whole validated configuration the gateway runs on: the process section
//! and the scopes. Built from the environment by `config::env`, or directly by an embedding
//! application (then checked by `Settings::validate`, in `validate.rs`).

use super::process::ProcessSettings;
use super::scope::ScopeSettings;

/// Everything the gateway needs to start.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The `PGW_*` keys.
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
