//! The SQLite backend (the default): one file, WAL with `synchronous=NORMAL`, a busy timeout,
//! `INSERT OR IGNORE` on the `call_id` primary key. One connection lives on a thread of its
//! own (`pgw-sqlite`, rusqlite, at a lower priority on Linux): a batch is one transaction of a
//! cached single-row statement, so binding and writing rows never runs on the async runtime's
//! worker threads (where the multi-row statement built per batch cost the gateway ~13 µs per
//! call and the calls' tail latency at concurrency 1; `polygateway bench`). Dropping the
//! backend (the process exiting) checkpoints the WAL into the database file and closes the
//! connection, so SQLite removes `-wal` and `-shm` and the `.db` file alone holds every row.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::{Connection, ToSql};
use tokio::sync::oneshot;

use super::row::CallRow;
use super::schema::{self, Column, SchemaBackend, SqlValue};
use super::writer::{Backend, Prepared, Rows, WriteError};
use crate::config::SchemaMode;

/// How long a write waits for a lock held by another process.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long dropping the backend waits for the thread to checkpoint and close: a write in
/// progress may first wait out one busy timeout.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2 * BUSY_TIMEOUT.as_secs());
/// The writer thread's nice value (Linux): when CPU is short, the calls it records run first.
#[cfg(target_os = "linux")]
const WRITER_NICE: i32 = 10;

/// Work for the connection's thread; each answers on its oneshot.
enum Job {
    Prepare(oneshot::Sender<Result<Prepared, WriteError>>),
    Insert {
        columns: Vec<&'static Column>,
        rows: Rows,
        done: oneshot::Sender<Result<(), WriteError>>,
    },
    /// Checkpoint, close the connection, answer, and end the thread.
    Close(mpsc::Sender<()>),
    #[cfg(test)]
    Execute(String, oneshot::Sender<Result<(), WriteError>>),
}

/// Telemetry into a SQLite file.
pub(crate) struct SqliteBackend {
    jobs: mpsc::Sender<Job>,
}

impl SqliteBackend {
    /// A backend on `path` (created if missing on the first `prepare`). Starts the
    /// connection's thread; the file is opened by the first job.
    pub(crate) fn new(path: &Path, mode: SchemaMode) -> Result<Self, WriteError> {
        let (jobs, rx) = mpsc::channel();
        let mut conn = Conn {
            path: path.to_path_buf(),
            mode,
            db: None,
            insert_sql: None,
        };
        std::thread::Builder::new()
            .name("pgw-sqlite".into())
            .spawn(move || {
                #[cfg(target_os = "linux")]
                if let Err(e) = rustix::process::setpriority_process(
                    Some(rustix::thread::gettid()),
                    WRITER_NICE,
                ) {
                    tracing::debug!(error = %e, "cannot lower the SQLite thread's priority");
                }
                // Ends at `Job::Close`, or when every sender is gone.
                while let Ok(job) = rx.recv() {
                    let last = matches!(job, Job::Close(_));
                    conn.run(job);
                    if last {
                        return;
                    }
                }
            })
            .map_err(|e| WriteError::Fatal(format!("cannot start the SQLite thread: {e}")))?;
        Ok(Self { jobs })
    }

    async fn ask<T>(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<T, WriteError>>) -> Job,
    ) -> Result<T, WriteError> {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(job(tx))
            .map_err(|_| WriteError::Fatal("the SQLite thread is gone".into()))?;
        rx.await
            .map_err(|_| WriteError::Fatal("the SQLite thread is gone".into()))?
    }

    /// Run one statement (tests shape old tables with it).
    #[cfg(test)]
    async fn execute(&self, sql: &str) -> Result<(), WriteError> {
        self.ask(|tx| Job::Execute(sql.to_string(), tx)).await
    }
}

impl Drop for SqliteBackend {
    /// Checkpoint and close the file (bounded by [`CLOSE_TIMEOUT`]): without it the process
    /// exits with the connection open, and `-wal`/`-shm` stay beside the database.
    fn drop(&mut self) {
        let (done, closed) = mpsc::channel();
        if self.jobs.send(Job::Close(done)).is_ok() && closed.recv_timeout(CLOSE_TIMEOUT).is_err() {
            tracing::warn!(
                "telemetry: the SQLite file was not closed in time; its -wal file may remain"
            );
        }
    }
}

impl Backend for SqliteBackend {
    fn schema_backend(&self) -> SchemaBackend {
        SchemaBackend::Sqlite
    }

    fn concurrency(&self) -> usize {
        1
    }

    async fn prepare(&self) -> Result<Prepared, WriteError> {
        self.ask(Job::Prepare).await
    }

    async fn insert(&self, columns: &[&'static Column], rows: Rows) -> Result<(), WriteError> {
        let columns = columns.to_vec();
        self.ask(|done| Job::Insert {
            columns,
            rows,
            done,
        })
        .await
    }
}

/// The connection's thread: the file, opened on first use (and again after a failure).
struct Conn {
    path: PathBuf,
    mode: SchemaMode,
    db: Option<Connection>,
    /// The insert statement for the columns it was built for: the same columns come with
    /// every batch until the table changes.
    insert_sql: Option<InsertSql>,
}

/// The single-row insert of a set of columns.
struct InsertSql {
    /// The columns' names, in order.
    names: Vec<&'static str>,
    /// How each column's value is read from a row, in the same order.
    extract: Vec<schema::Extract>,
    /// The statement's text (the statement cache's key).
    sql: String,
}

impl Conn {
    fn run(&mut self, job: Job) {
        match job {
            Job::Prepare(done) => {
                let _ = done.send(self.with_db(prepare));
            }
            Job::Insert {
                columns,
                rows,
                done,
            } => {
                // Taken out while the connection is borrowed, and put back.
                let stmt = self.take_insert_sql(&columns);
                let out = self.with_db(|db, _| insert(db, &stmt, &rows));
                self.insert_sql = Some(stmt);
                let _ = done.send(out);
            }
            Job::Close(done) => {
                self.close();
                let _ = done.send(());
            }
            #[cfg(test)]
            Job::Execute(sql, done) => {
                let _ = done.send(self.with_db(|db, _| db.execute_batch(&sql).map_err(classify)));
            }
        }
    }

    /// The insert statement for `columns`, taken out of the `insert_sql` field (the caller
    /// puts it back); built when the columns differ from the last batch's.
    fn take_insert_sql(&mut self, columns: &[&'static Column]) -> InsertSql {
        if let Some(stmt) = self.insert_sql.take()
            && stmt.names.len() == columns.len()
            && stmt.names.iter().zip(columns).all(|(n, c)| *n == c.name)
        {
            return stmt;
        }
        let names: Vec<&'static str> = columns.iter().map(|c| c.name).collect();
        // Positional `?` marks, bound in column order.
        let sql = format!(
            "INSERT OR IGNORE INTO {} ({}) VALUES ({})",
            schema::TABLE,
            names.join(", "),
            vec!["?"; names.len()].join(", ")
        );
        InsertSql {
            extract: names.iter().map(|n| schema::extractor(n)).collect(),
            names,
            sql,
        }
    }

    /// Move every row in the WAL into the database file and truncate it, then close the
    /// connection; SQLite deletes `-wal` and `-shm` when the last connection closes.
    fn close(&mut self) {
        let Some(db) = self.db.take() else {
            return;
        };
        if let Err(e) = db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
            tracing::warn!(path = %self.path.display(), error = %e, "telemetry: SQLite checkpoint failed");
        }
        if let Err((_, e)) = db.close() {
            tracing::warn!(path = %self.path.display(), error = %e, "telemetry: cannot close the SQLite file");
        }
    }

    /// Run `f` on the open connection; an environment failure closes it, so the next job
    /// opens the file again.
    fn with_db<T>(
        &mut self,
        f: impl FnOnce(&mut Connection, SchemaMode) -> Result<T, WriteError>,
    ) -> Result<T, WriteError> {
        if self.db.is_none() {
            self.db = Some(open(&self.path)?);
        }
        let Some(db) = self.db.as_mut() else {
            return Err(WriteError::Environment("no connection".into()));
        };
        let out = f(db, self.mode);
        if matches!(out, Err(WriteError::Environment(_))) {
            self.db = None;
        }
        out
    }
}

fn open(path: &Path) -> Result<Connection, WriteError> {
    let db = Connection::open(path)
        .map_err(|e| WriteError::Environment(format!("cannot open {}: {}", path.display(), e)))?;
    db.busy_timeout(BUSY_TIMEOUT).map_err(classify)?;
    // In WAL mode NORMAL syncs at checkpoints instead of at every commit: the file stays
    // consistent on a crash, and a power loss can cost the last few batches of telemetry,
    // never the calls themselves. FULL fsyncs the WAL at every insert, which showed in the
    // gateway's profile at low load (`polygateway bench`).
    db.pragma_update(None, "journal_mode", "WAL")
        .map_err(classify)?;
    db.pragma_update(None, "synchronous", "NORMAL")
        .map_err(classify)?;
    Ok(db)
}

fn columns(db: &Connection) -> Result<Vec<String>, WriteError> {
    let mut stmt = db
        .prepare("SELECT name FROM pragma_table_info(?1)")
        .map_err(classify)?;
    let names = stmt
        .query_map([schema::TABLE], |r| r.get::<_, String>(0))
        .map_err(classify)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(classify)?;
    Ok(names)
}

/// Probe the table, create it if missing, add missing columns in auto mode.
fn prepare(db: &mut Connection, mode: SchemaMode) -> Result<Prepared, WriteError> {
    let mut existing = columns(db)?;
    if existing.is_empty() {
        db.execute_batch(&schema::create_table_sql(SchemaBackend::Sqlite))
            .map_err(classify)?;
        existing = columns(db)?;
    }
    let missing = schema::missing_columns(&existing);
    if mode == SchemaMode::Auto && !missing.is_empty() {
        for c in &missing {
            let sql = schema::add_column_sql(SchemaBackend::Sqlite, c);
            match db.execute_batch(&sql) {
                Ok(()) => tracing::info!(column = c.name, "telemetry: added column ({sql})"),
                Err(e) => {
                    tracing::warn!(column = c.name, error = %e, "telemetry: cannot add column ({sql})")
                }
            }
        }
        existing = columns(db)?;
    }
    Ok(Prepared {
        columns: schema::present_columns(&existing),
        missing: schema::missing_columns(&existing),
    })
}

/// One row's value of one column as SQLite stores it: what is bound, and what tells whether
/// a parameter already holds it.
#[derive(Clone, Copy, Debug)]
enum Stored<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a str),
}

impl<'a> From<SqlValue<'a>> for Stored<'a> {
    fn from(v: SqlValue<'a>) -> Self {
        match v {
            SqlValue::Text(v) | SqlValue::Json(v) => v.map_or(Stored::Null, Stored::Text),
            SqlValue::Integer(v) => v.map_or(Stored::Null, Stored::Integer),
            SqlValue::Real(v) => v.map_or(Stored::Null, Stored::Real),
            SqlValue::Bool(b) => Stored::Integer(i64::from(b)),
            SqlValue::Timestamp(ms) => Stored::Integer(ms),
        }
    }
}

impl Stored<'_> {
    /// Whether a parameter holding `bound` already holds `self`: equal integers, reals of
    /// the same bits, equal texts (the same slice first: a call's rows share its stored
    /// messages, so the longest text is usually found equal without reading it).
    fn same(self, bound: Stored<'_>) -> bool {
        match (self, bound) {
            (Stored::Null, Stored::Null) => true,
            (Stored::Integer(a), Stored::Integer(b)) => a == b,
            (Stored::Real(a), Stored::Real(b)) => a.to_bits() == b.to_bits(),
            (Stored::Text(a), Stored::Text(b)) => std::ptr::eq(a, b) || a == b,
            _ => false,
        }
    }
}

impl ToSql for Stored<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match *self {
            Stored::Null => ValueRef::Null,
            Stored::Integer(i) => ValueRef::Integer(i),
            Stored::Real(f) => ValueRef::Real(f),
            Stored::Text(s) => ValueRef::Text(s.as_bytes()),
        }))
    }
}

/// Insert `rows` in one transaction (all or none, like one multi-row statement), one cached
/// single-row `INSERT OR IGNORE` (`stmt`) per row. `BEGIN` and `COMMIT` are cached
/// statements too: rusqlite's `transaction()` parses both texts again for every batch, and
/// at low load a batch is one call's two rows.
///
/// A statement's parameters keep their values from one execution to the next (SQLite's
/// `sqlite3_reset` leaves the bindings alone), so a row binds only the parameters whose value
/// differs from what they hold, starting from all NULL. Binding was a third of the writer's
/// work: 70 parameters a call, each text copied into SQLite, where a call's two rows share
/// most values (ids, scope, source, model, messages, answer) and ~14 columns a row are NULL;
/// rows of other calls share the configuration's values.
fn insert(db: &mut Connection, stmt: &InsertSql, rows: &[Box<CallRow>]) -> Result<(), WriteError> {
    let run = |db: &Connection| -> rusqlite::Result<()> {
        db.prepare_cached("BEGIN")?.execute([])?;
        let mut insert = db.prepare_cached(&stmt.sql)?;
        insert.clear_bindings();
        let mut bound = vec![Stored::Null; stmt.extract.len()];
        for row in rows {
            for (i, (extract, held)) in stmt.extract.iter().zip(&mut bound).enumerate() {
                let value = Stored::from(extract(row));
                if !value.same(*held) {
                    insert.raw_bind_parameter(i + 1, value)?;
                    *held = value;
                }
            }
            insert.raw_execute()?;
        }
        db.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    };
    let written = run(db);
    // A batch that failed after `BEGIN` (a refused row, a failed commit) leaves nothing
    // behind: roll the transaction back so the next batch starts clean.
    if written.is_err()
        && !db.is_autocommit()
        && let Err(e) = db.execute_batch("ROLLBACK")
    {
        tracing::warn!(error = %e, "telemetry: SQLite rollback failed");
    }
    written.map_err(classify)
}

/// Environment-level: busy, locked, read-only, I/O, corrupt, full, cannot open, not a
/// database. A vanished table or column: schema changed. Anything else concerns the data.
fn classify(e: rusqlite::Error) -> WriteError {
    match &e {
        rusqlite::Error::SqliteFailure(f, msg) => {
            let msg = msg.as_deref().unwrap_or_default();
            match f.extended_code & 0xff {
                5 | 6 | 8 | 10 | 11 | 13 | 14 | 26 => WriteError::Environment(e.to_string()),
                1 if msg.contains("no such table") || msg.contains("no column") => {
                    WriteError::SchemaChanged(e.to_string())
                }
                _ => WriteError::Rows(e.to_string()),
            }
        }
        _ => WriteError::Rows(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::RowKind;
    use std::sync::Arc;

    fn all(rows: &[CallRow]) -> Rows {
        Arc::new(rows.iter().cloned().map(Box::new).collect())
    }

    #[tokio::test]
    async fn creates_inserts_idempotently_and_adds_missing_columns_in_auto_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        // An old table of the first cut: no `messages` … `meta`.
        let old = SqliteBackend::new(&path, SchemaMode::Manual).unwrap();
        old.execute("CREATE TABLE llm_calls (call_id TEXT PRIMARY KEY, logical_call_id TEXT NOT NULL, event TEXT NOT NULL, scope TEXT NOT NULL, usage_source TEXT NOT NULL, created_at INTEGER NOT NULL)")
            .await
            .unwrap();
        let p = old.prepare().await.unwrap();
        assert_eq!(p.columns.len(), 6);
        assert_eq!(p.missing.len(), schema::COLUMNS.len() - 6);
        let mut row = CallRow::new(RowKind::Attempt, "a1", "l1", "LLM", 7);
        row.tenant_id = Some("acme".into());
        old.insert(&p.columns, all(&[row.clone(), row.clone()]))
            .await
            .unwrap();

        let auto = SqliteBackend::new(&path, SchemaMode::Auto).unwrap();
        let p = auto.prepare().await.unwrap();
        assert!(p.missing.is_empty());
        assert_eq!(p.columns.len(), schema::COLUMNS.len());
        row.call_id = "a2".into();
        auto.insert(&p.columns, all(&[row.clone()])).await.unwrap();
        auto.insert(&p.columns, all(&[row])).await.unwrap();
        let db = Connection::open(&path).unwrap();
        let mut stmt = db
            .prepare("SELECT call_id, tenant_id FROM llm_calls ORDER BY call_id")
            .unwrap();
        let tenants: Vec<(String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            tenants,
            vec![("a1".into(), "".into()), ("a2".into(), "acme".into())]
        );
    }

    /// Dropping the backend leaves the database file alone: the WAL is checkpointed into it
    /// and removed with the shared-memory file, and a new connection reads every row.
    #[tokio::test]
    async fn drop_checkpoints_and_removes_the_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let b = SqliteBackend::new(&path, SchemaMode::Auto).unwrap();
        let p = b.prepare().await.unwrap();
        let rows: Vec<CallRow> = (0..50)
            .map(|i| CallRow::new(RowKind::Attempt, format!("a{i}"), "l1", "LLM", 7))
            .collect();
        b.insert(&p.columns, all(&rows)).await.unwrap();
        assert!(dir.path().join("t.db-wal").exists());
        drop(b);
        assert!(!dir.path().join("t.db-wal").exists());
        assert!(!dir.path().join("t.db-shm").exists());
        let n: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT count(*) FROM llm_calls", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 50);
    }

    /// A row binds only the parameters whose value changed since the previous row, yet every
    /// stored row holds exactly its own values: a value that turns NULL, changes, comes back,
    /// is equal in another allocation or shared with the previous row; and a second batch
    /// starts again from NULL.
    #[tokio::test]
    async fn every_row_stores_its_own_values_when_only_changed_parameters_are_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let b = SqliteBackend::new(&path, SchemaMode::Auto).unwrap();
        let p = b.prepare().await.unwrap();
        let shared: Arc<str> = Arc::from(r#"[{"role":"user","content":"hi"}]"#);
        let mut first = CallRow::new(RowKind::Attempt, "c1", "l1", "LLM", 7);
        first.session_id = Some("s-1".into());
        first.prompt_tokens = Some(3);
        first.ttft_ms = Some(1.5);
        first.messages = Some(shared.clone());
        first.response = Some("x".into());
        let mut second = CallRow::new(RowKind::TerminalSuccess, "l1", "l1", "LLM", 8);
        second.prompt_tokens = Some(3);
        second.ttft_ms = Some(2.25);
        second.messages = Some(shared);
        second.response = Some(String::from("x"));
        second.cache_hit = true;
        second.cost = Some(0.5);
        second.attempts = Some(1);
        let mut third = CallRow::new(RowKind::Attempt, "c2", "l2", "LLM", 9);
        third.session_id = Some("s-1".into());
        third.messages = Some(Arc::from("[]"));
        third.error = Some("refused".into());
        let fourth = CallRow::new(RowKind::Attempt, "c3", "l3", "LLM", 10);
        let batches = [vec![first, second, third], vec![fourth.clone()]];
        for batch in &batches {
            b.insert(&p.columns, all(batch)).await.unwrap();
        }
        drop(b);

        let db = Connection::open(&path).unwrap();
        let names: Vec<&str> = p.columns.iter().map(|c| c.name).collect();
        let mut read = db
            .prepare(&format!(
                "SELECT {} FROM llm_calls WHERE call_id = ?1",
                names.join(", ")
            ))
            .unwrap();
        for row in batches.iter().flatten() {
            let stored: Vec<rusqlite::types::Value> = read
                .query_row([&row.call_id], |r| {
                    (0..names.len()).map(|i| r.get(i)).collect()
                })
                .unwrap();
            for (name, got) in names.iter().zip(stored) {
                let want = match Stored::from(schema::value(row, name)) {
                    Stored::Null => rusqlite::types::Value::Null,
                    Stored::Integer(i) => rusqlite::types::Value::Integer(i),
                    Stored::Real(f) => rusqlite::types::Value::Real(f),
                    Stored::Text(t) => rusqlite::types::Value::Text(t.to_string()),
                };
                assert_eq!(got, want, "{} {name}", row.call_id);
            }
        }
        // The values above reached the table, not only the expectations: spot checks.
        let spot: (Option<String>, Option<f64>, i64) = db
            .query_row(
                "SELECT session_id, ttft_ms, cache_hit FROM llm_calls WHERE call_id = 'l1'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(spot, (None, Some(2.25), 1));
        let back: (Option<String>, Option<i64>, Option<String>) = db
            .query_row(
                "SELECT session_id, prompt_tokens, messages FROM llm_calls WHERE call_id = 'c2'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(back, (Some("s-1".into()), None, Some("[]".into())));
    }

    /// A batch with a refused row writes nothing (one transaction), and says why; a vanished
    /// table is a schema change.
    #[tokio::test]
    async fn a_refused_batch_writes_nothing_and_a_dropped_table_is_a_schema_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let b = SqliteBackend::new(&path, SchemaMode::Manual).unwrap();
        // `OR IGNORE` skips constraint violations; a trigger's ABORT still refuses a row.
        b.execute("CREATE TABLE llm_calls (call_id TEXT PRIMARY KEY, logical_call_id TEXT NOT NULL, event TEXT NOT NULL, scope TEXT NOT NULL, usage_source TEXT NOT NULL, created_at INTEGER NOT NULL); CREATE TRIGGER refuse BEFORE INSERT ON llm_calls WHEN NEW.logical_call_id = 'refused' BEGIN SELECT RAISE(ABORT, 'refused row'); END")
            .await
            .unwrap();
        let p = b.prepare().await.unwrap();
        let good = CallRow::new(RowKind::Attempt, "g1", "l1", "LLM", 7);
        let bad = CallRow::new(RowKind::Attempt, "b1", "refused", "LLM", 7);
        let err = b
            .insert(&p.columns, all(&[good.clone(), bad]))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, WriteError::Rows(m) if m.contains("refused row")),
            "{err:?}"
        );
        let count = |path: &Path| -> i64 {
            Connection::open(path)
                .unwrap()
                .query_row("SELECT count(*) FROM llm_calls", [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(count(&path), 0);
        b.insert(&p.columns, all(std::slice::from_ref(&good)))
            .await
            .unwrap();
        assert_eq!(count(&path), 1);
        b.execute("DROP TABLE llm_calls").await.unwrap();
        let err = b.insert(&p.columns, all(&[good])).await.unwrap_err();
        assert!(matches!(err, WriteError::SchemaChanged(_)), "{err:?}");
    }
}
