//! The write path shared by every backend: a bounded queue (full → the row is dropped and
//! counted, never a blocked call), a writer task that drains it in batches (lingering a few
//! milliseconds for a batch to fill), up to the backend's concurrency in flight, and the
//! failure policy (docs/telemetry.md#failure-policy):
//!
//! - **fatal** (the backend can never work in this process): drop everything, status fatal;
//! - **environment** (unreachable, refusing, too many clients, no permission, table gone):
//!   drop the batch, status degraded, retry after a cooldown that doubles from 1 s to 60 s;
//!   the first write that succeeds ends the degradation;
//! - **rows** (this data was refused): the batch is retried row by row and only the refused
//!   rows are dropped; the status stays healthy;
//! - **schema changed** (a column vanished): probe the table again before the next batch.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::row::CallRow;
use super::schema::{self, Column, SchemaBackend};
use super::status::StatusTracker;
use super::{Recorder, TelemetryStatus};

/// Rows the queue holds before new ones are dropped.
const QUEUE: usize = 16_384;
/// Most rows in one insert statement.
const BATCH: usize = 256;
/// How long a batch that is not full waits for more rows before it is written: at low load
/// one insert (one transaction) then carries the rows of several calls instead of one or two.
/// Rows reach the backend at most this much later.
const LINGER: Duration = Duration::from_millis(5);
/// First cooldown after an environment failure; doubled per failure up to `MAX_COOLDOWN`.
const MIN_COOLDOWN: Duration = Duration::from_secs(1);
const MAX_COOLDOWN: Duration = Duration::from_secs(60);

/// How a write failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WriteError {
    /// Can never succeed in this process (configuration).
    #[error("{0}")]
    Fatal(String),
    /// Every row would fail alike until something outside changes.
    #[error("{0}")]
    Environment(String),
    /// This data was refused.
    #[error("{0}")]
    Rows(String),
    /// The table changed under us (a column or the table vanished): probe again.
    #[error("{0}")]
    SchemaChanged(String),
}

/// What `prepare` found: the columns inserts name, and those the table lacks.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub columns: Vec<&'static Column>,
    pub missing: Vec<&'static Column>,
}

/// A batch of rows as a backend receives it, each row still in the box the queue carried it
/// in. Shared (`Arc`) so that the writer keeps the batch while the backend inserts it, and
/// retries it row by row when the backend refuses its data.
///
/// Why boxes and not the rows themselves: a row is ~650 bytes, and a batch of rows by value
/// was a `Vec` of up to 256 of them (~166 KB) allocated for every batch and then copied into
/// an `Arc<[CallRow]>`: two allocations of a size the allocator serves from fresh pages and
/// gives back to the kernel between batches, so every batch paid page faults and `madvise`
/// calls (the default gateway took 0.16–0.17 page faults per call under load, 92 % of them
/// in the writer's batch allocations; `perf record -e page-faults`, `bench/syscalls.py`,
/// docs/benchmark-history.md). A batch of boxes is 8 bytes a row, and on the normal path no
/// row is copied after it was queued (a refused batch's row-by-row retry clones each row, as
/// before).
pub(crate) type Rows = Arc<Vec<Box<CallRow>>>;

/// A telemetry store. Both methods are bounded in time by the backend.
pub(crate) trait Backend: Send + Sync + 'static {
    /// `sqlite` or `postgres`.
    fn schema_backend(&self) -> SchemaBackend;
    /// Most inserts in flight at once.
    fn concurrency(&self) -> usize;
    /// Probe the catalog, create the table if missing, add missing columns (auto mode).
    fn prepare(&self) -> impl Future<Output = Result<Prepared, WriteError>> + Send;
    /// Insert `rows` naming `columns`, ignoring rows whose key already exists: all of them
    /// or none.
    fn insert(
        &self,
        columns: &[&'static Column],
        rows: Rows,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;
}

enum Msg {
    Row(Box<CallRow>),
    Flush(oneshot::Sender<()>),
}

/// A recorder writing through a queue into a [`Backend`].
pub(crate) struct QueueRecorder {
    tx: mpsc::Sender<Msg>,
    status: Arc<StatusTracker>,
}

impl QueueRecorder {
    /// Start the writer task. `prepared` is the result of an eager `prepare` (SQLite);
    /// `fatal` marks a backend that can never work (rows are dropped, status fatal).
    pub(crate) fn start<B: Backend>(
        backend: B,
        status: Arc<StatusTracker>,
        prepared: Option<Prepared>,
        fatal: Option<String>,
    ) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let mut w = Writer {
            backend: Arc::new(backend),
            status: status.clone(),
            prepared: None,
            cooldown_until: None,
            cooldown: MIN_COOLDOWN,
            fatal: false,
            warned_missing: Vec::new(),
            inflight: JoinSet::new(),
        };
        if let Some(p) = prepared {
            w.set_prepared(p);
        }
        if let Some(reason) = fatal {
            w.fatal = true;
            status.degraded(reason, true, None);
        }
        tokio::spawn(w.run(rx));
        Self { tx, status }
    }
}

impl Recorder for QueueRecorder {
    fn record(&self, row: CallRow) {
        if self.tx.try_send(Msg::Row(Box::new(row))).is_err() {
            self.status.dropped(1);
        }
    }

    fn status(&self) -> TelemetryStatus {
        self.status.snapshot()
    }

    fn flush(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            if self.tx.send(Msg::Flush(tx)).await.is_ok() {
                let _ = rx.await;
            }
        })
    }
}

/// What one insert task achieved.
struct Outcome {
    written: u64,
    dropped: u64,
    /// A failure that concerns every row (environment, fatal, schema changed).
    failure: Option<WriteError>,
}

struct Writer<B: Backend> {
    backend: Arc<B>,
    status: Arc<StatusTracker>,
    prepared: Option<Arc<Prepared>>,
    cooldown_until: Option<Instant>,
    cooldown: Duration,
    fatal: bool,
    warned_missing: Vec<&'static str>,
    inflight: JoinSet<Outcome>,
}

impl<B: Backend> Writer<B> {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let mut batch: Vec<Box<CallRow>> = Vec::with_capacity(BATCH);
        loop {
            let msg = tokio::select! {
                Some(done) = self.inflight.join_next(), if !self.inflight.is_empty() => {
                    self.settle(done);
                    continue;
                }
                msg = rx.recv() => msg,
            };
            let Some(msg) = msg else { break };
            let mut flush = None;
            let mut next = Some(msg);
            let linger_until = Instant::now() + LINGER;
            let mut lingered = false;
            loop {
                while let Some(m) = next.take() {
                    match m {
                        Msg::Row(r) => batch.push(r),
                        Msg::Flush(done) => {
                            flush = Some(done);
                            break;
                        }
                    }
                    if batch.len() < BATCH {
                        next = rx.try_recv().ok();
                    }
                }
                if flush.is_some() || batch.is_empty() || batch.len() >= BATCH || lingered {
                    break;
                }
                // Give the rows of calls finishing right now a moment to join this batch.
                // Sleeping instead of waiting on the queue keeps the writer from waking (a
                // thread hand-over) once per row: the queue is drained once, after the linger.
                tokio::time::sleep_until(linger_until).await;
                lingered = true;
                next = rx.try_recv().ok();
            }
            if !batch.is_empty() {
                self.dispatch(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))
                    .await;
            }
            if let Some(done) = flush {
                while let Some(r) = self.inflight.join_next().await {
                    self.settle(r);
                }
                let _ = done.send(());
            }
        }
        while let Some(r) = self.inflight.join_next().await {
            self.settle(r);
        }
    }

    #[expect(
        clippy::vec_box,
        reason = "rows stay in the boxes the queue carried them in (see `Rows`)"
    )]
    async fn dispatch(&mut self, rows: Vec<Box<CallRow>>) {
        let n = rows.len() as u64;
        if self.fatal {
            self.status.dropped(n);
            return;
        }
        if self.cooldown_until.is_some_and(|t| Instant::now() < t) {
            self.status.dropped(n);
            return;
        }
        let prepared = match &self.prepared {
            Some(p) => p.clone(),
            None => match self.backend.prepare().await {
                Ok(p) => self.set_prepared(p),
                Err(e) => {
                    self.status.dropped(n);
                    self.fail(e);
                    return;
                }
            },
        };
        while self.inflight.len() >= self.backend.concurrency().max(1) {
            match self.inflight.join_next().await {
                Some(r) => self.settle(r),
                None => break,
            }
        }
        let backend = self.backend.clone();
        self.inflight
            .spawn(async move { insert(&*backend, &prepared.columns, rows).await });
    }

    fn set_prepared(&mut self, p: Prepared) -> Arc<Prepared> {
        let missing: Vec<&'static str> = p.missing.iter().map(|c| c.name).collect();
        if !missing.is_empty() && missing != self.warned_missing {
            tracing::warn!(
                missing_columns = %missing.join(", "),
                "telemetry table {} lacks columns {}; rows are written without them (PGW_TELEMETRY_SCHEMA_MODE=manual never alters the table). To add them: {}",
                schema::TABLE,
                missing.join(", "),
                schema::add_columns_advice(self.backend.schema_backend(), &p.missing)
            );
        }
        self.status
            .set_missing_columns(missing.iter().map(|s| s.to_string()).collect());
        self.warned_missing = missing;
        let p = Arc::new(p);
        self.prepared = Some(p.clone());
        p
    }

    fn settle(&mut self, done: Result<Outcome, tokio::task::JoinError>) {
        let o = match done {
            Ok(o) => o,
            Err(e) => {
                tracing::error!(error = %e, "telemetry insert task failed");
                return;
            }
        };
        if o.dropped > 0 {
            self.status.dropped(o.dropped);
        }
        if o.written > 0 {
            self.cooldown = MIN_COOLDOWN;
            self.cooldown_until = None;
            self.status.written(o.written);
        }
        if let Some(e) = o.failure {
            self.fail(e);
        }
    }

    fn fail(&mut self, e: WriteError) {
        match e {
            WriteError::Fatal(reason) => {
                self.fatal = true;
                self.status.degraded(reason, true, None);
            }
            WriteError::Environment(reason) => {
                let wait = self.cooldown;
                self.cooldown_until = Some(Instant::now() + wait);
                self.cooldown = (wait * 2).min(MAX_COOLDOWN);
                self.prepared = None;
                self.status.degraded(reason, false, Some(wait));
            }
            WriteError::SchemaChanged(reason) => {
                tracing::warn!(%reason, "telemetry table changed; probing it again");
                self.prepared = None;
            }
            WriteError::Rows(reason) => {
                tracing::warn!(%reason, "telemetry rows refused by the backend; dropped");
            }
        }
    }
}

/// Insert a batch; when the backend refuses the data, retry row by row so that only the
/// refused rows are lost.
#[expect(
    clippy::vec_box,
    reason = "rows stay in the boxes the queue carried them in (see `Rows`)"
)]
async fn insert<B: Backend>(
    b: &B,
    columns: &[&'static Column],
    rows: Vec<Box<CallRow>>,
) -> Outcome {
    let n = rows.len() as u64;
    let rows: Rows = Arc::new(rows);
    let first = match b.insert(columns, rows.clone()).await {
        Ok(()) => {
            return Outcome {
                written: n,
                dropped: 0,
                failure: None,
            };
        }
        Err(e) => e,
    };
    if !matches!(first, WriteError::Rows(_)) || rows.len() == 1 {
        return Outcome {
            written: 0,
            dropped: n,
            failure: Some(first),
        };
    }
    let mut out = Outcome {
        written: 0,
        dropped: 0,
        failure: None,
    };
    let mut refused: Option<String> = None;
    for (i, row) in rows.iter().enumerate() {
        match b.insert(columns, Arc::new(vec![row.clone()])).await {
            Ok(()) => out.written += 1,
            Err(WriteError::Rows(m)) => {
                out.dropped += 1;
                refused = Some(m);
            }
            Err(e) => {
                out.dropped += (rows.len() - i) as u64;
                out.failure = Some(e);
                break;
            }
        }
    }
    if out.failure.is_none()
        && let Some(m) = refused
    {
        out.failure = Some(WriteError::Rows(format!(
            "{} of {} rows refused; last: {m}",
            out.dropped,
            rows.len()
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::RowKind;
    use prometheus_client::metrics::counter::Counter;
    use std::sync::Mutex;

    /// A backend whose behaviour the test switches: up, down, or refusing rows whose
    /// `call_id` starts with `bad`.
    #[derive(Default)]
    struct Fake {
        down: Mutex<bool>,
        rows: Mutex<Vec<String>>,
        prepares: Mutex<u32>,
    }

    impl Backend for Arc<Fake> {
        fn schema_backend(&self) -> SchemaBackend {
            SchemaBackend::Sqlite
        }
        fn concurrency(&self) -> usize {
            2
        }
        async fn prepare(&self) -> Result<Prepared, WriteError> {
            *self.prepares.lock().unwrap() += 1;
            if *self.down.lock().unwrap() {
                return Err(WriteError::Environment("refused".into()));
            }
            Ok(Prepared {
                columns: schema::COLUMNS.iter().collect(),
                missing: vec![],
            })
        }
        async fn insert(&self, _: &[&'static Column], rows: Rows) -> Result<(), WriteError> {
            if *self.down.lock().unwrap() {
                return Err(WriteError::Environment("refused".into()));
            }
            if rows.iter().any(|r| r.call_id.starts_with("bad")) {
                return Err(WriteError::Rows("bad row".into()));
            }
            self.rows
                .lock()
                .unwrap()
                .extend(rows.iter().map(|r| r.call_id.clone()));
            Ok(())
        }
    }

    fn row(id: &str) -> CallRow {
        CallRow::new(RowKind::Attempt, id, "l", "LLM", 0)
    }

    #[tokio::test(start_paused = true)]
    async fn refused_rows_are_dropped_alone_and_outages_degrade_then_recover() {
        let fake = Arc::new(Fake::default());
        let status = Arc::new(StatusTracker::new(
            "fake",
            Counter::default(),
            Counter::default(),
        ));
        let rec = QueueRecorder::start(fake.clone(), status, None, None);
        rec.record(row("a"));
        rec.record(row("bad-1"));
        rec.record(row("b"));
        rec.flush().await;
        assert_eq!(*fake.rows.lock().unwrap(), vec!["a", "b"]);
        let s = rec.status();
        assert_eq!((s.written_rows, s.dropped_rows, s.degraded), (2, 1, false));

        *fake.down.lock().unwrap() = true;
        rec.record(row("c"));
        rec.flush().await;
        let s = rec.status();
        assert!(s.degraded && !s.fatal);
        assert_eq!(s.dropped_rows, 2);
        // Inside the cooldown rows are dropped without touching the backend.
        let prepares = *fake.prepares.lock().unwrap();
        rec.record(row("d"));
        rec.flush().await;
        assert_eq!(*fake.prepares.lock().unwrap(), prepares);
        assert_eq!(rec.status().dropped_rows, 3);

        *fake.down.lock().unwrap() = false;
        tokio::time::sleep(MIN_COOLDOWN + Duration::from_millis(50)).await;
        rec.record(row("e"));
        rec.flush().await;
        let s = rec.status();
        assert!(!s.degraded);
        assert_eq!(*fake.rows.lock().unwrap(), vec!["a", "b", "e"]);
    }

    #[tokio::test]
    async fn a_fatal_backend_drops_everything() {
        let fake = Arc::new(Fake::default());
        let status = Arc::new(StatusTracker::new(
            "fake",
            Counter::default(),
            Counter::default(),
        ));
        let rec = QueueRecorder::start(fake.clone(), status, None, Some("bad DSN".into()));
        rec.record(row("a"));
        rec.flush().await;
        let s = rec.status();
        assert!(s.fatal && s.degraded);
        assert_eq!(s.dropped_rows, 1);
        assert!(fake.rows.lock().unwrap().is_empty());
    }
}
