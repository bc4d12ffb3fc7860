//! Virtual keys and teams (docs/keys.md): the model (`model.rs`), token secrets and their
//! HMAC (`secret.rs`), the store in the telemetry database with its versioned migration
//! (`store.rs`, one sqlx store for SQLite and Postgres), the in-process view every call
//! authenticates against (`registry.rs`), the admin operations the HTTP API and the CLI share
//! (`ops.rs`), the spend query over the ledger (`spend.rs`) and the `keys`/`teams` CLI
//! (`cli.rs`).
//!
//! **Invariant:** a token's secret exists only in the one response that creates or rotates
//! it; the store keeps `HMAC-SHA256(PGW_KEY_HASH_SECRET, secret)`, and no `Debug`,
//! `Serialize`, log line or error carries either.

pub mod cli;
mod model;
mod ops;
mod registry;
mod secret;
mod spend;
mod store;
mod time;

#[cfg(test)]
mod tests;

pub use model::{
    BudgetPeriod, BudgetSpec, KeyLimits, KeyState, Principal, Team, VirtualKey, validate_budgets,
};
pub use ops::{
    CreateKey, CreateTeam, Created, KeyAdmin, KeyFilter, KeyPatch, TeamPatch, parse_budget_arg,
};
pub use registry::{Authn, KeyRegistry};
pub use secret::{Hasher, SecretToken, TOKEN_PREFIX};
pub use spend::{
    DEFAULT_WINDOW_MS, GroupBy, Owner, SpendQuery, SpendReport, SpendRow, spent_since,
};
pub use store::{KeyStore, StoreLocation, StoredKey};
pub use time::{
    ONE_DAY_MS, format_rfc3339, parse_date, parse_range_bound, parse_rfc3339, range_bound_error,
};

/// Why a key operation failed. Each maps to one HTTP status in `proxy/admin_keys.rs`; no
/// variant ever carries a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    /// Bad input: `param` is the JSON path (or query parameter) at fault. HTTP 400.
    #[error("{param} {message}")]
    Invalid { param: String, message: String },
    /// No such key or team. HTTP 404.
    #[error("no {what} with id `{id}`")]
    NotFound { what: &'static str, id: String },
    /// A team id that is taken. HTTP 409.
    #[error("{what} `{id}` already exists")]
    Conflict { what: &'static str, id: String },
    /// `PGW_VIRTUAL_KEYS` is off. HTTP 404 on the admin API.
    #[error("virtual keys are off: set PGW_VIRTUAL_KEYS=true")]
    Disabled,
    /// The database failed or holds a row this version cannot read. HTTP 503.
    #[error("key store: {0}")]
    Store(String),
    /// The OS random generator failed. HTTP 500.
    #[error("cannot draw random bytes from the OS: {0}")]
    Entropy(String),
}

impl KeysError {
    /// Bad input at `param`.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            param: param.into(),
            message: message.into(),
        }
    }

    /// The JSON path or query parameter at fault, for a 400.
    pub fn param(&self) -> Option<&str> {
        match self {
            Self::Invalid { param, .. } => Some(param),
            Self::Conflict { .. } => Some("id"),
            Self::NotFound { .. } | Self::Disabled | Self::Store(_) | Self::Entropy(_) => None,
        }
    }
}

impl From<sqlx::Error> for KeysError {
    fn from(e: sqlx::Error) -> Self {
        Self::Store(e.to_string())
    }
}
