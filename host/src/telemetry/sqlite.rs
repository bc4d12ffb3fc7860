//! SQLite recorder: WAL, busy timeout, idempotent insert on `call_id`; a background task
//! drains a bounded queue in batches inside one transaction.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use tokio::sync::mpsc;

use super::{CallRow, Recorder, RecorderStatus};

const QUEUE: usize = 16_384;
const BATCH: usize = 256;

/// The DDL the host runs (create-if-missing).
pub const SQLITE_DDL: &str = "CREATE TABLE IF NOT EXISTS llm_calls (
    call_id TEXT PRIMARY KEY,
    logical_call_id TEXT NOT NULL,
    parent_call_id TEXT,
    session_id TEXT,
    event TEXT NOT NULL,
    scope TEXT NOT NULL,
    source_name TEXT,
    provider TEXT,
    model TEXT,
    model_reported TEXT,
    error_type TEXT,
    error TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    cached_prompt_tokens INTEGER,
    reasoning_tokens INTEGER,
    usage_source TEXT NOT NULL,
    latency_ms INTEGER NOT NULL,
    ttft_ms REAL,
    max_inter_token_ms REAL,
    attempts INTEGER,
    created_at INTEGER NOT NULL
)";

enum Msg {
    Row(Box<CallRow>),
    Flush(tokio::sync::oneshot::Sender<()>),
}

struct Counters {
    written: AtomicU64,
    dropped: AtomicU64,
    degraded: Mutex<Option<String>>,
}

/// Telemetry into a SQLite file.
pub struct SqliteRecorder {
    tx: mpsc::Sender<Msg>,
    counters: Arc<Counters>,
}

impl SqliteRecorder {
    /// Open (creating if missing) the database and the table, and start the writer task.
    pub async fn open(path: &Path) -> Result<Self, sqlx::Error> {
        let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(opts)
            .await?;
        sqlx::query(SQLITE_DDL).execute(&pool).await?;
        let (tx, rx) = mpsc::channel(QUEUE);
        let counters = Arc::new(Counters {
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            degraded: Mutex::new(None),
        });
        tokio::spawn(writer(pool, rx, counters.clone()));
        Ok(Self { tx, counters })
    }
}

impl Recorder for SqliteRecorder {
    fn record(&self, row: CallRow) {
        if self.tx.try_send(Msg::Row(Box::new(row))).is_err() {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn flush(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            if self.tx.send(Msg::Flush(tx)).await.is_ok() {
                let _ = rx.await;
            }
        })
    }

    fn status(&self) -> RecorderStatus {
        RecorderStatus {
            backend: "sqlite",
            written: self.counters.written.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            degraded: self
                .counters
                .degraded
                .lock()
                .map(|g| g.clone())
                .unwrap_or(None),
        }
    }
}

async fn writer(pool: SqlitePool, mut rx: mpsc::Receiver<Msg>, counters: Arc<Counters>) {
    let mut batch: Vec<CallRow> = Vec::with_capacity(BATCH);
    let mut flushes = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Row(r) => batch.push(*r),
                Msg::Flush(done) => {
                    flushes.push(done);
                    break;
                }
            }
            if batch.len() < BATCH {
                next = rx.try_recv().ok();
            }
        }
        if batch.is_empty() {
            for f in flushes.drain(..) {
                let _ = f.send(());
            }
            continue;
        }
        let n = batch.len() as u64;
        match insert_batch(&pool, &batch).await {
            Ok(()) => {
                counters.written.fetch_add(n, Ordering::Relaxed);
                if let Ok(mut g) = counters.degraded.lock()
                    && g.take().is_some()
                {
                    tracing::info!("telemetry writes recovered");
                }
            }
            Err(e) => {
                counters.dropped.fetch_add(n, Ordering::Relaxed);
                if let Ok(mut g) = counters.degraded.lock() {
                    if g.is_none() {
                        tracing::warn!(error = %e, "telemetry writes failing; rows dropped");
                    }
                    *g = Some(e.to_string());
                }
            }
        }
        batch.clear();
        for f in flushes.drain(..) {
            let _ = f.send(());
        }
    }
}

fn opt_i64(v: Option<u64>) -> Option<i64> {
    v.map(|x| i64::try_from(x).unwrap_or(i64::MAX))
}

async fn insert_batch(pool: &SqlitePool, rows: &[CallRow]) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    for r in rows {
        sqlx::query(
            "INSERT OR IGNORE INTO llm_calls (call_id, logical_call_id, parent_call_id, session_id,
             event, scope, source_name, provider, model, model_reported, error_type, error,
             prompt_tokens, completion_tokens, cached_prompt_tokens, reasoning_tokens,
             usage_source, latency_ms, ttft_ms, max_inter_token_ms, attempts, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&r.call_id)
        .bind(&r.logical_call_id)
        .bind(&r.parent_call_id)
        .bind(&r.session_id)
        .bind(r.kind.as_str())
        .bind(&r.scope)
        .bind(&r.source_name)
        .bind(&r.provider)
        .bind(&r.model)
        .bind(&r.model_reported)
        .bind(&r.error_type)
        .bind(&r.error)
        .bind(opt_i64(r.prompt_tokens))
        .bind(opt_i64(r.completion_tokens))
        .bind(opt_i64(r.cached_prompt_tokens))
        .bind(opt_i64(r.reasoning_tokens))
        .bind(r.usage_source.as_str())
        .bind(i64::try_from(r.latency_ms).unwrap_or(i64::MAX))
        .bind(r.ttft_ms)
        .bind(r.max_inter_token_ms)
        .bind(r.attempts.map(i64::from))
        .bind(r.created_at_ms)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}
