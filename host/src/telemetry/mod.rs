//! Telemetry and cost (docs/telemetry.md): one row per attempt and one terminal (or
//! cache-hit) row per logical call, priced from `PGW_PRICING_FILE`, counted into
//! `/metrics`, and written off the response path through a bounded queue into SQLite or
//! Postgres (full queue → row dropped and counted, never a blocked call).
//!
//! [`Telemetry::record`] is the single exit of every row: cost, metrics and the queue are
//! applied there and nowhere else.
//!
//! **Architecture invariant:** a telemetry failure never fails, delays or blocks a call; it
//! shows in [`TelemetryStatus`] (`/healthz`), in `/metrics` and in one log line when it
//! starts and one when it ends.

pub mod live;
mod metrics;
pub mod otel;
mod postgres;
mod pricing;
mod row;
pub mod schema;
mod sqlite;
mod status;
mod text;
mod writer;

use std::sync::Arc;

use serde_json::Value;

use crate::config::{TelemetryBackend, TelemetrySettings};

pub use metrics::{CONTENT_TYPE as METRICS_CONTENT_TYPE, Metrics};
pub use postgres::check_pg_dsn;
pub use pricing::{BilledTokens, Price, Pricing, PricingError};
pub use row::{CallRow, RowKind, UsageSource};
pub use schema::{SchemaBackend, create_table_sql};
pub use status::TelemetryStatus;
pub use text::{cap_text, stored_messages};

use status::StatusTracker;
use writer::{Backend, QueueRecorder};

/// Where telemetry rows go. Implementations must not block: `record` only enqueues.
pub trait Recorder: Send + Sync + 'static {
    /// Enqueue a row; never waits.
    fn record(&self, row: CallRow);
    /// Status for `/healthz`.
    fn status(&self) -> TelemetryStatus;
    /// Wait until every row enqueued before this call was written (or dropped).
    fn flush(&self) -> futures_util::future::BoxFuture<'_, ()>;
}

/// A shared recorder.
pub type SharedRecorder = Arc<dyn Recorder>;

/// Telemetry turned off (`PGW_TELEMETRY_BACKEND=none`).
#[derive(Debug, Default)]
pub struct NoopRecorder;

impl Recorder for NoopRecorder {
    fn record(&self, _row: CallRow) {}
    fn flush(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    fn status(&self) -> TelemetryStatus {
        TelemetryStatus {
            backend: "none",
            degraded: false,
            fatal: false,
            reason: None,
            degraded_for_s: None,
            retry_after_s: None,
            dropped_rows: 0,
            written_rows: 0,
            missing_columns: Vec::new(),
        }
    }
}

/// A backend that can never work in this process: every row is dropped and counted.
struct DisabledRecorder(Arc<StatusTracker>);

impl Recorder for DisabledRecorder {
    fn record(&self, _row: CallRow) {
        self.0.dropped(1);
    }
    fn flush(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    fn status(&self) -> TelemetryStatus {
        self.0.snapshot()
    }
}

/// Why telemetry could not start (only for problems a person must fix before start-up: a
/// bad price table, an unusable SQLite path).
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(transparent)]
    Pricing(#[from] PricingError),
    #[error("PGW_TELEMETRY_SQLITE_PATH: {path}: {message}")]
    Sqlite { path: String, message: String },
}

/// The telemetry of one gateway: recorder, prices, text cap and metrics.
pub struct Telemetry {
    recorder: SharedRecorder,
    pricing: Option<Pricing>,
    text_cap: Option<usize>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Start the recorder of `settings`. SQLite is opened (and its table prepared) now;
    /// Postgres connects on the first write, so the gateway starts while it is down. An
    /// unparseable Postgres DSN gives a recorder whose status is fatal.
    pub async fn start(settings: &TelemetrySettings) -> Result<Self, TelemetryError> {
        let metrics = Arc::new(Metrics::new());
        let pricing = settings
            .pricing_file
            .as_deref()
            .map(Pricing::load)
            .transpose()?;
        let tracker = |name: &'static str| {
            Arc::new(StatusTracker::new(
                name,
                metrics.telemetry_dropped(),
                metrics.telemetry_written(),
            ))
        };
        let recorder: SharedRecorder = match &settings.backend {
            TelemetryBackend::None => Arc::new(NoopRecorder),
            TelemetryBackend::Sqlite { path } => {
                let err = |e: writer::WriteError| TelemetryError::Sqlite {
                    path: path.display().to_string(),
                    message: e.to_string(),
                };
                let backend =
                    sqlite::SqliteBackend::new(path, settings.schema_mode).map_err(err)?;
                let prepared = backend.prepare().await.map_err(err)?;
                Arc::new(QueueRecorder::start(
                    backend,
                    tracker("sqlite"),
                    Some(prepared),
                    None,
                ))
            }
            TelemetryBackend::Postgres { dsn } => {
                let status = tracker("postgres");
                match postgres::PostgresBackend::new(
                    dsn,
                    settings.pg_pool_max,
                    settings.pg_write_timeout,
                    settings.schema_mode,
                ) {
                    Ok(backend) => Arc::new(QueueRecorder::start(backend, status, None, None)),
                    Err(e) => {
                        status.degraded(e.to_string(), true, None);
                        Arc::new(DisabledRecorder(status))
                    }
                }
            }
        };
        Ok(Self {
            recorder,
            pricing,
            text_cap: settings.text_cap,
            metrics,
        })
    }

    /// Telemetry with no backend (rows are counted in metrics only).
    pub fn disabled() -> Self {
        Self {
            recorder: Arc::new(NoopRecorder),
            pricing: None,
            text_cap: None,
            metrics: Arc::new(Metrics::new()),
        }
    }

    /// Record a row: set its cost, count it, enqueue it. Never blocks. Returns the cost it
    /// set (USD; `None` when the row carries none, see `cost_of`).
    pub fn record(&self, mut row: CallRow) -> Option<f64> {
        row.cost = self.cost_of(&row);
        let cost = row.cost;
        self.metrics.observe_row(&row);
        self.recorder.record(row);
        cost
    }

    /// The cost of a row. Only the row that produced an answer carries one: an attempt row
    /// with usage (priced from the table; NULL for an unknown model or unavailable usage), a
    /// cache-hit row (0: no upstream call was made). Terminal rows repeat the answer's
    /// tokens but carry no cost, so that summing `cost` never counts an answer twice;
    /// failed attempts report no usage and are not billed.
    fn cost_of(&self, row: &CallRow) -> Option<f64> {
        match row.kind {
            RowKind::CacheHit => Some(0.0),
            RowKind::TerminalSuccess | RowKind::TerminalFailure => None,
            RowKind::Attempt => {
                if row.error_type.is_some() && row.prompt_tokens.is_none() {
                    return None;
                }
                let pricing = self.pricing.as_ref()?;
                let model = row.model.as_deref()?;
                let tokens = match (row.usage_source, row.prompt_tokens, row.completion_tokens) {
                    (UsageSource::Measured | UsageSource::Estimated, Some(p), Some(c)) => {
                        Some(BilledTokens {
                            prompt: p,
                            completion: c,
                            cached_prompt: row.cached_prompt_tokens,
                            cache_write: row.cache_write_tokens,
                        })
                    }
                    _ => None,
                };
                pricing.cost(model, tokens)
            }
        }
    }

    /// The stored form of a call's messages (digested binary parts, capped text).
    pub fn stored_messages(&self, messages: &[Value]) -> Arc<str> {
        Arc::from(text::stored_messages(messages, self.text_cap))
    }

    /// The stored form of an answer or reasoning text (capped).
    pub fn stored_text(&self, s: &str) -> String {
        text::cap_text(s, self.text_cap)
    }

    /// The price table (`PGW_PRICING_FILE`), when one is configured (the budgets of virtual
    /// keys price reservations and settlements with it).
    pub fn pricing(&self) -> Option<&Pricing> {
        self.pricing.as_ref()
    }

    /// The metrics registry (the cache layer reports hits and misses here).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The recorder's status.
    pub fn status(&self) -> TelemetryStatus {
        self.recorder.status()
    }

    /// Wait until every row recorded so far is written or dropped.
    pub async fn flush(&self) {
        self.recorder.flush().await;
    }
}
