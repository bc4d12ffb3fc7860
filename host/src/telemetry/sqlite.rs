//! The SQLite backend (the default): one file, WAL with `synchronous=NORMAL`, a busy timeout,
//! `INSERT OR IGNORE` on the `call_id` primary key, multi-row inserts with bound parameters.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Sqlite};

use super::row::CallRow;
use super::schema::{self, Column, SchemaBackend, SqlValue};
use super::writer::{Backend, Prepared, WriteError};
use crate::config::SchemaMode;

/// How long a write waits for a lock held by another process.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Telemetry into a SQLite file.
pub(crate) struct SqliteBackend {
    pool: SqlitePool,
    mode: SchemaMode,
}

impl SqliteBackend {
    /// A backend on `path` (created if missing on the first `prepare`).
    pub(crate) fn new(path: &Path, mode: SchemaMode) -> Result<Self, WriteError> {
        let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .map_err(|e| WriteError::Fatal(format!("{}: {e}", path.display())))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // In WAL mode NORMAL syncs at checkpoints instead of at every commit: the file
            // stays consistent on a crash, and a power loss can cost the last few batches of
            // telemetry, never the calls themselves. FULL fsyncs the WAL at every insert,
            // which showed in the gateway's profile at low load (`polygateway bench`).
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .acquire_timeout(BUSY_TIMEOUT * 2)
            .connect_lazy_with(opts);
        Ok(Self { pool, mode })
    }

    async fn columns(&self) -> Result<Vec<String>, WriteError> {
        sqlx::query_scalar::<_, String>("SELECT name FROM pragma_table_info(?)")
            .bind(schema::TABLE)
            .fetch_all(&self.pool)
            .await
            .map_err(classify)
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
        let mut existing = self.columns().await?;
        if existing.is_empty() {
            sqlx::query(&schema::create_table_sql(SchemaBackend::Sqlite))
                .execute(&self.pool)
                .await
                .map_err(classify)?;
            existing = self.columns().await?;
        }
        let missing = schema::missing_columns(&existing);
        if self.mode == SchemaMode::Auto && !missing.is_empty() {
            for c in &missing {
                let sql = schema::add_column_sql(SchemaBackend::Sqlite, c);
                match sqlx::query(&sql).execute(&self.pool).await {
                    Ok(_) => tracing::info!(column = c.name, "telemetry: added column ({sql})"),
                    Err(e) => {
                        tracing::warn!(column = c.name, error = %e, "telemetry: cannot add column ({sql})")
                    }
                }
            }
            existing = self.columns().await?;
        }
        Ok(Prepared {
            columns: schema::present_columns(&existing),
            missing: schema::missing_columns(&existing),
        })
    }

    async fn insert(
        &self,
        columns: &[&'static Column],
        rows: &[CallRow],
    ) -> Result<(), WriteError> {
        let mut qb = QueryBuilder::<Sqlite>::new("INSERT OR IGNORE INTO ");
        qb.push(schema::TABLE).push(" (");
        let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
        qb.push(names.join(", ")).push(") ");
        qb.push_values(rows, |mut b, row| {
            for c in columns {
                match schema::value(row, c.name) {
                    SqlValue::Text(v) | SqlValue::Json(v) => {
                        b.push_bind(v);
                    }
                    SqlValue::Integer(v) => {
                        b.push_bind(v);
                    }
                    SqlValue::Real(v) => {
                        b.push_bind(v);
                    }
                    SqlValue::Bool(v) => {
                        b.push_bind(i64::from(v));
                    }
                    SqlValue::Timestamp(ms) => {
                        b.push_bind(ms);
                    }
                }
            }
        });
        qb.build()
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(classify)
    }
}

/// Environment-level: busy, locked, read-only, I/O, corrupt, full, cannot open, not a
/// database. A vanished table or column: schema changed. Anything else concerns the data.
fn classify(e: sqlx::Error) -> WriteError {
    match &e {
        sqlx::Error::Database(db) => {
            let code = db
                .code()
                .and_then(|c| c.parse::<i32>().ok())
                .map(|c| c & 0xff);
            let msg = db.message();
            match code {
                Some(5 | 6 | 8 | 10 | 11 | 13 | 14 | 26) => WriteError::Environment(e.to_string()),
                Some(1) if msg.contains("no such table") || msg.contains("no column") => {
                    WriteError::SchemaChanged(e.to_string())
                }
                _ => WriteError::Rows(e.to_string()),
            }
        }
        sqlx::Error::Configuration(_) => WriteError::Fatal(e.to_string()),
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => WriteError::Environment(e.to_string()),
        _ => WriteError::Rows(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::RowKind;

    #[tokio::test]
    async fn creates_inserts_idempotently_and_adds_missing_columns_in_auto_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        // An old table of the first cut: no `messages` … `meta`.
        let old = SqliteBackend::new(&path, SchemaMode::Manual).unwrap();
        sqlx::query("CREATE TABLE llm_calls (call_id TEXT PRIMARY KEY, logical_call_id TEXT NOT NULL, event TEXT NOT NULL, scope TEXT NOT NULL, usage_source TEXT NOT NULL, created_at INTEGER NOT NULL)")
            .execute(&old.pool)
            .await
            .unwrap();
        let p = old.prepare().await.unwrap();
        assert_eq!(p.columns.len(), 6);
        assert_eq!(p.missing.len(), schema::COLUMNS.len() - 6);
        let mut row = CallRow::new(RowKind::Attempt, "a1", "l1", "LLM", 7);
        row.tenant_id = Some("acme".into());
        old.insert(&p.columns, &[row.clone(), row.clone()])
            .await
            .unwrap();

        let auto = SqliteBackend::new(&path, SchemaMode::Auto).unwrap();
        let p = auto.prepare().await.unwrap();
        assert!(p.missing.is_empty());
        assert_eq!(p.columns.len(), schema::COLUMNS.len());
        row.call_id = "a2".into();
        auto.insert(&p.columns, &[row.clone()]).await.unwrap();
        auto.insert(&p.columns, &[row]).await.unwrap();
        let tenants: Vec<(String, String)> =
            sqlx::query_as("SELECT call_id, tenant_id FROM llm_calls ORDER BY call_id")
                .fetch_all(&auto.pool)
                .await
                .unwrap();
        assert_eq!(
            tenants,
            vec![("a1".into(), "".into()), ("a2".into(), "acme".into())]
        );
    }
}
