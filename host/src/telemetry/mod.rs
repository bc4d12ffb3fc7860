//! Telemetry: one row per attempt and one terminal row per logical call, written off the
//! response path through a bounded queue (full queue → row dropped and counted, never a
//! blocked call). First cut: SQLite through sqlx (reference §7.8).

mod row;
mod sqlite;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use row::{CallRow, RowKind, UsageSource};
pub use sqlite::SqliteRecorder;

/// Where telemetry rows go. Implementations must not block: `record` only enqueues.
pub trait Recorder: Send + Sync + 'static {
    /// Enqueue a row; never waits.
    fn record(&self, row: CallRow);
    /// Status for `/healthz`.
    fn status(&self) -> RecorderStatus;
    /// Wait until every row enqueued before this call was written (or dropped).
    fn flush(&self) -> futures_util::future::BoxFuture<'_, ()>;
}

/// A recorder's health, as shown in `/healthz`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecorderStatus {
    pub backend: &'static str,
    /// Rows written so far.
    pub written: u64,
    /// Rows dropped (queue full or write failed).
    pub dropped: u64,
    /// The last write error, if the backend is currently failing.
    pub degraded: Option<String>,
}

/// Telemetry turned off.
#[derive(Debug, Default)]
pub struct NoopRecorder {
    seen: AtomicU64,
}

impl Recorder for NoopRecorder {
    fn record(&self, _row: CallRow) {
        self.seen.fetch_add(1, Ordering::Relaxed);
    }
    fn flush(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    fn status(&self) -> RecorderStatus {
        RecorderStatus {
            backend: "none",
            written: 0,
            dropped: 0,
            degraded: None,
        }
    }
}

/// A shared recorder.
pub type SharedRecorder = Arc<dyn Recorder>;
