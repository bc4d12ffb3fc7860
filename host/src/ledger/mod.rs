//! The read side of the `llm_calls` ledger (docs/dashboard.md#calls): the dashboard's call
//! list, one call's attempts, and spend grouped by key, team, scope or model. The telemetry
//! writer owns the table (`telemetry/schema.rs`); this module only reads it, through its own
//! small pool opened on first use (a read-only SQLite connection, or Postgres), so a slow
//! dashboard query never holds a connection the writer needs.
//!
//! Every SQL text is a constant per backend (the grouping column is chosen from an enum,
//! never from the request); every value is bound. A ledger with no table yet (no row
//! written) reads as empty.

mod calls;
mod spend;

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use tokio::sync::OnceCell;

use crate::config::TelemetryBackend;

pub use calls::{AttemptRow, CallDetail, CallFilter, CallStatus, CallSummary, MAX_LIMIT};
pub use spend::{SpendGroup, SpendLine, SpendRange};

/// Connections of the read pool: the dashboard polls; two is plenty.
const POOL_MAX: u32 = 2;
/// How long a query waits for a connection before it fails.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// Why the ledger could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// `PGW_TELEMETRY_BACKEND=none`: there is no ledger to read.
    #[error("telemetry is off (PGW_TELEMETRY_BACKEND=none): there is no call ledger to read")]
    Off,
    /// The database cannot be opened or queried.
    #[error("the call ledger cannot be read: {0}")]
    Database(String),
    /// A query parameter is malformed.
    #[error("{param}: {message}")]
    Invalid {
        param: &'static str,
        message: String,
    },
}

impl From<sqlx::Error> for LedgerError {
    fn from(e: sqlx::Error) -> Self {
        // sqlx's messages name the database error, never the DSN's password.
        LedgerError::Database(e.to_string())
    }
}

impl LedgerError {
    pub(crate) fn invalid(param: &'static str, message: impl Into<String>) -> Self {
        LedgerError::Invalid {
            param,
            message: message.into(),
        }
    }
}

enum Location {
    Off,
    Sqlite(PathBuf),
    Postgres(String),
}

enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A reader of the ledger of one telemetry backend. Cheap to share; opens on first query.
pub struct Ledger {
    location: Location,
    pool: OnceCell<Pool>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.location {
            Location::Off => "none",
            Location::Sqlite(_) => "sqlite",
            Location::Postgres(_) => "postgres",
        };
        f.debug_struct("Ledger")
            .field("backend", &backend)
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// The reader of `backend`'s ledger (nothing is opened yet).
    pub fn new(backend: &TelemetryBackend) -> Self {
        let location = match backend {
            TelemetryBackend::None => Location::Off,
            TelemetryBackend::Sqlite { path } => Location::Sqlite(path.clone()),
            TelemetryBackend::Postgres { dsn } => Location::Postgres(dsn.clone()),
        };
        Self {
            location,
            pool: OnceCell::new(),
        }
    }

    /// The pool, opened on first use; `None` when the SQLite file does not exist yet (no
    /// row was ever written). A failed open is retried on the next query.
    async fn pool(&self) -> Result<Option<&Pool>, LedgerError> {
        if let Some(p) = self.pool.get() {
            return Ok(Some(p));
        }
        let pool = match &self.location {
            Location::Off => return Err(LedgerError::Off),
            Location::Sqlite(path) => {
                if !path.exists() {
                    return Ok(None);
                }
                let opts = SqliteConnectOptions::new()
                    .filename(path)
                    .read_only(true)
                    .busy_timeout(ACQUIRE_TIMEOUT);
                Pool::Sqlite(
                    SqlitePoolOptions::new()
                        .max_connections(POOL_MAX)
                        .acquire_timeout(ACQUIRE_TIMEOUT)
                        .connect_with(opts)
                        .await?,
                )
            }
            Location::Postgres(dsn) => {
                let opts = PgConnectOptions::from_str(dsn).map_err(|e| {
                    LedgerError::Database(format!("PGW_TELEMETRY_PG_DSN does not parse: {e}"))
                })?;
                Pool::Postgres(
                    PgPoolOptions::new()
                        .max_connections(POOL_MAX)
                        .acquire_timeout(ACQUIRE_TIMEOUT)
                        .connect_with(opts)
                        .await?,
                )
            }
        };
        // Another query may have opened one meanwhile: keep the first.
        let _ = self.pool.set(pool);
        Ok(self.pool.get())
    }

    /// The pool when the table exists; `None` while no row has been written.
    async fn table(&self) -> Result<Option<&Pool>, LedgerError> {
        let Some(pool) = self.pool().await? else {
            return Ok(None);
        };
        let exists: bool = match pool {
            Pool::Sqlite(p) => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'llm_calls'",
            )
            .fetch_one(p)
            .await?
                > 0,
            Pool::Postgres(p) => {
                sqlx::query_scalar("SELECT to_regclass('llm_calls') IS NOT NULL")
                    .fetch_one(p)
                    .await?
            }
        };
        Ok(exists.then_some(pool))
    }
}
