//! The Postgres backend: a lazy pool (no connection before the first write, at most
//! `PGW_TELEMETRY_PG_POOL_MAX`), every write bounded by `PGW_TELEMETRY_PG_WRITE_TIMEOUT_S`,
//! catalog probes through `to_regclass` and `pg_attribute`, multi-row inserts with bound
//! parameters and `ON CONFLICT DO NOTHING` without a conflict target (valid on a plain table
//! and on one partitioned by `created_at`, whose unique keys must include the partition key).

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, QueryBuilder};

use super::schema::{self, Column, SchemaBackend, SqlValue};
use super::writer::{Backend, Prepared, Rows, WriteError};
use crate::config::SchemaMode;

/// Check that `dsn` parses as a Postgres connection string (the only fatal telemetry
/// failure); the error names what is wrong, never the password.
pub fn check_pg_dsn(dsn: &str) -> Result<(), String> {
    parse_dsn(dsn).map(|_| ())
}

fn parse_dsn(dsn: &str) -> Result<PgConnectOptions, String> {
    if !(dsn.starts_with("postgres://") || dsn.starts_with("postgresql://")) {
        return Err("expected a postgres:// or postgresql:// URL".into());
    }
    PgConnectOptions::from_str(dsn).map_err(|e| e.to_string())
}

/// Telemetry into Postgres.
pub(crate) struct PostgresBackend {
    pool: PgPool,
    pool_max: u32,
    mode: SchemaMode,
    write_timeout: Duration,
}

impl PostgresBackend {
    /// A backend on `dsn`; connects nothing. Fails only when the DSN does not parse.
    pub(crate) fn new(
        dsn: &str,
        pool_max: u32,
        write_timeout: Duration,
        mode: SchemaMode,
    ) -> Result<Self, WriteError> {
        let opts = parse_dsn(dsn)
            .map_err(|e| WriteError::Fatal(format!("PGW_TELEMETRY_PG_DSN does not parse: {e}")))?;
        let pool = PgPoolOptions::new()
            .min_connections(0)
            .max_connections(pool_max.max(1))
            .acquire_timeout(write_timeout)
            .connect_lazy_with(opts);
        Ok(Self {
            pool,
            pool_max: pool_max.max(1),
            mode,
            write_timeout,
        })
    }

    /// Run `f` under the write budget; running out of it is an environment failure.
    async fn bounded<T>(
        &self,
        what: &str,
        f: impl std::future::Future<Output = Result<T, WriteError>>,
    ) -> Result<T, WriteError> {
        match tokio::time::timeout(self.write_timeout, f).await {
            Ok(r) => r,
            Err(_) => Err(WriteError::Environment(format!(
                "{what} timed out after {:?} (PGW_TELEMETRY_PG_WRITE_TIMEOUT_S)",
                self.write_timeout
            ))),
        }
    }

    async fn probe(
        &self,
        conn: &mut sqlx::PgConnection,
    ) -> Result<Option<Vec<String>>, WriteError> {
        let exists: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
            .bind(schema::TABLE)
            .fetch_one(&mut *conn)
            .await
            .map_err(classify)?;
        if exists.is_none() {
            return Ok(None);
        }
        let cols: Vec<String> = sqlx::query_scalar(
            "SELECT attname::text FROM pg_attribute \
             WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped \
             ORDER BY attnum",
        )
        .bind(schema::TABLE)
        .fetch_all(&mut *conn)
        .await
        .map_err(classify)?;
        Ok(Some(cols))
    }

    async fn prepare_inner(&self) -> Result<Prepared, WriteError> {
        let mut conn = self.pool.acquire().await.map_err(classify)?;
        let mut existing = match self.probe(&mut conn).await? {
            Some(c) => c,
            None => {
                // Probed first: CREATE needs schema privileges even when the table exists.
                sqlx::query(&schema::create_table_sql(SchemaBackend::Postgres))
                    .execute(&mut *conn)
                    .await
                    .map_err(classify)?;
                self.probe(&mut conn).await?.unwrap_or_default()
            }
        };
        let missing = schema::missing_columns(&existing);
        if self.mode == SchemaMode::Auto && !missing.is_empty() {
            for c in &missing {
                let sql = schema::add_column_sql(SchemaBackend::Postgres, c);
                match sqlx::query(&sql).execute(&mut *conn).await {
                    Ok(_) => tracing::info!(column = c.name, "telemetry: added column ({sql})"),
                    Err(e) => {
                        tracing::warn!(column = c.name, error = %e, "telemetry: cannot add column ({sql})")
                    }
                }
            }
            existing = self.probe(&mut conn).await?.unwrap_or_default();
        }
        if existing.is_empty() {
            return Err(WriteError::Environment(format!(
                "table {} is missing and could not be created",
                schema::TABLE
            )));
        }
        Ok(Prepared {
            columns: schema::present_columns(&existing),
            missing: schema::missing_columns(&existing),
        })
    }
}

impl Backend for PostgresBackend {
    fn schema_backend(&self) -> SchemaBackend {
        SchemaBackend::Postgres
    }

    fn concurrency(&self) -> usize {
        self.pool_max as usize
    }

    async fn prepare(&self) -> Result<Prepared, WriteError> {
        self.bounded("preparing the telemetry table", self.prepare_inner())
            .await
    }

    async fn insert(&self, columns: &[&'static Column], rows: Rows) -> Result<(), WriteError> {
        let rows = &rows[..];
        let mut qb = QueryBuilder::<Postgres>::new("INSERT INTO ");
        qb.push(schema::TABLE).push(" (");
        let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
        qb.push(names.join(", ")).push(") ");
        let extract: Vec<schema::Extract> = names.iter().map(|n| schema::extractor(n)).collect();
        qb.push_values(rows, |mut b, row| {
            for f in &extract {
                match f(row) {
                    SqlValue::Text(v) => {
                        b.push_bind(v);
                    }
                    SqlValue::Json(v) => {
                        b.push_bind(v);
                        b.push_unseparated("::jsonb");
                    }
                    SqlValue::Integer(v) => {
                        b.push_bind(v);
                    }
                    SqlValue::Real(v) => {
                        b.push_bind(v);
                    }
                    SqlValue::Bool(v) => {
                        b.push_bind(v);
                    }
                    SqlValue::Timestamp(ms) => {
                        // Exact: whole milliseconds added to the epoch.
                        b.push("TIMESTAMPTZ 'epoch' + INTERVAL '1 millisecond' * ");
                        b.push_bind_unseparated(ms);
                    }
                }
            }
        });
        qb.push(" ON CONFLICT DO NOTHING");
        let pool = &self.pool;
        self.bounded("a telemetry write", async move {
            qb.build().execute(pool).await.map(|_| ()).map_err(classify)
        })
        .await
    }
}

/// By SQLSTATE (stable across driver versions): connection (08), resources such as too
/// many clients (53), operator intervention (57), authorization (28), unknown database
/// (3D), no privilege (42501) and a missing table (42P01) are environment-level; a missing
/// column (42703) means the table changed; other database errors concern the data.
/// Transport failures are environment-level; a malformed configuration is fatal.
fn classify(e: sqlx::Error) -> WriteError {
    match &e {
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.to_string()).unwrap_or_default();
            let class = code.get(..2).unwrap_or_default();
            if matches!(class, "08" | "53" | "57" | "28" | "3D")
                || matches!(code.as_str(), "42501" | "42P01")
            {
                WriteError::Environment(e.to_string())
            } else if code == "42703" {
                WriteError::SchemaChanged(e.to_string())
            } else {
                WriteError::Rows(e.to_string())
            }
        }
        sqlx::Error::Configuration(_) => WriteError::Fatal(e.to_string()),
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => WriteError::Environment(e.to_string()),
        _ => WriteError::Rows(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_malformed_dsn_is_refused() {
        assert!(check_pg_dsn("postgres://u@127.0.0.1:1/db?options[search_path]=x").is_ok());
        assert!(check_pg_dsn("mysql://u@h/db").is_err());
        assert!(check_pg_dsn("postgres://u@h:notaport/db").is_err());
    }

    #[tokio::test]
    async fn a_down_server_is_an_environment_failure_within_the_budget() {
        // Port 1 on loopback refuses connections.
        let b = PostgresBackend::new(
            "postgres://postgres@127.0.0.1:1/test",
            2,
            Duration::from_millis(300),
            SchemaMode::Manual,
        )
        .unwrap();
        assert!(matches!(b.prepare().await, Err(WriteError::Environment(_))));
    }
}
