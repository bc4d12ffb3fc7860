//! The single source of the `llm_calls` schema (docs/telemetry.md#schema-ownership): the
//! column list, the
//! DDL of both backends (what `polygateway telemetry schema-sql` prints is what the host
//! runs), the `ALTER TABLE … ADD COLUMN` statements, and the value of each column for a row.
//!
//! Expand/contract promises: columns are only ever appended (after `created_at` for those
//! added after the first cut), never dropped or renamed; every added column is nullable or
//! has a constant default; inserts always name their columns; the host never reads the
//! table back; the Postgres insert's conflict clause names no constraint.

use super::row::CallRow;

/// The table name. Postgres resolves it through the connection's `search_path`
/// (`?options[search_path]=<schema>` in the DSN chooses the schema).
pub const TABLE: &str = "llm_calls";

/// A telemetry backend whose DDL can be printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaBackend {
    Sqlite,
    Postgres,
}

/// What a column holds, which decides how its value is bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Text,
    Integer,
    Real,
    Bool,
    /// JSON text (`jsonb` in Postgres, `TEXT` in SQLite).
    Json,
    /// Unix milliseconds (`INTEGER` in SQLite, `timestamptz` in Postgres).
    Timestamp,
}

/// One column: its name, what it holds and its declaration in each backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub ty: ColumnType,
    /// Type and constraints in SQLite (the text after the name).
    pub sqlite: &'static str,
    /// Type and constraints in Postgres.
    pub postgres: &'static str,
}

const fn col(
    name: &'static str,
    ty: ColumnType,
    sqlite: &'static str,
    postgres: &'static str,
) -> Column {
    Column {
        name,
        ty,
        sqlite,
        postgres,
    }
}

use ColumnType as T;

/// Every column, in table order.
pub const COLUMNS: &[Column] = &[
    col("call_id", T::Text, "TEXT PRIMARY KEY", "TEXT NOT NULL"),
    col("logical_call_id", T::Text, "TEXT NOT NULL", "TEXT NOT NULL"),
    col("parent_call_id", T::Text, "TEXT", "TEXT"),
    col("session_id", T::Text, "TEXT", "TEXT"),
    col("event", T::Text, "TEXT NOT NULL", "TEXT NOT NULL"),
    col("scope", T::Text, "TEXT NOT NULL", "TEXT NOT NULL"),
    col("source_name", T::Text, "TEXT", "TEXT"),
    col("provider", T::Text, "TEXT", "TEXT"),
    col("model", T::Text, "TEXT", "TEXT"),
    col("model_reported", T::Text, "TEXT", "TEXT"),
    col("error_type", T::Text, "TEXT", "TEXT"),
    col("error", T::Text, "TEXT", "TEXT"),
    col("prompt_tokens", T::Integer, "INTEGER", "BIGINT"),
    col("completion_tokens", T::Integer, "INTEGER", "BIGINT"),
    col("cached_prompt_tokens", T::Integer, "INTEGER", "BIGINT"),
    col("reasoning_tokens", T::Integer, "INTEGER", "BIGINT"),
    col("usage_source", T::Text, "TEXT NOT NULL", "TEXT NOT NULL"),
    col("latency_ms", T::Integer, "INTEGER", "BIGINT"),
    col("ttft_ms", T::Real, "REAL", "DOUBLE PRECISION"),
    col("max_inter_token_ms", T::Real, "REAL", "DOUBLE PRECISION"),
    col("attempts", T::Integer, "INTEGER", "BIGINT"),
    col(
        "created_at",
        T::Timestamp,
        "INTEGER NOT NULL",
        "TIMESTAMPTZ NOT NULL",
    ),
    // Added after the first cut: nullable or with a constant default.
    col("messages", T::Json, "TEXT", "JSONB"),
    col("response", T::Text, "TEXT", "TEXT"),
    col("thinking", T::Text, "TEXT", "TEXT"),
    col("total_latency_ms", T::Integer, "INTEGER", "BIGINT"),
    col(
        "cache_hit",
        T::Bool,
        "INTEGER NOT NULL DEFAULT 0",
        "BOOLEAN NOT NULL DEFAULT false",
    ),
    col("cost", T::Real, "REAL", "DOUBLE PRECISION"),
    col("sampling", T::Json, "TEXT", "JSONB"),
    col(
        "tenant_id",
        T::Text,
        "TEXT NOT NULL DEFAULT ''",
        "TEXT NOT NULL DEFAULT ''",
    ),
    col(
        "meta",
        T::Json,
        "TEXT NOT NULL DEFAULT '{}'",
        "JSONB NOT NULL DEFAULT '{}'",
    ),
    col("cache_write_tokens", T::Integer, "INTEGER", "BIGINT"),
    col("ingress", T::Text, "TEXT", "TEXT"),
    col("key_id", T::Text, "TEXT", "TEXT"),
    col("team_id", T::Text, "TEXT", "TEXT"),
];

impl Column {
    /// The declaration in `backend`.
    pub fn decl(&self, backend: SchemaBackend) -> &'static str {
        match backend {
            SchemaBackend::Sqlite => self.sqlite,
            SchemaBackend::Postgres => self.postgres,
        }
    }
}

/// The `CREATE TABLE IF NOT EXISTS` statement the host runs when the table is missing, and
/// what `polygateway telemetry schema-sql` prints. The Postgres primary key includes
/// `created_at` so that the same definition, with `PARTITION BY RANGE (created_at)` added,
/// makes a valid partitioned table; `created_at` is set when the row is built, so a row
/// sent twice still has one key.
pub fn create_table_sql(backend: SchemaBackend) -> String {
    let mut lines: Vec<String> = COLUMNS
        .iter()
        .map(|c| format!("    {} {}", c.name, c.decl(backend)))
        .collect();
    if backend == SchemaBackend::Postgres {
        lines.push("    PRIMARY KEY (call_id, created_at)".to_string());
    }
    format!(
        "CREATE TABLE IF NOT EXISTS {TABLE} (\n{}\n)",
        lines.join(",\n")
    )
}

/// `ALTER TABLE … ADD COLUMN` for a missing column, as the host runs it in `auto` mode
/// (after probing, so without `IF NOT EXISTS`, which takes the table lock even when the
/// column exists).
pub fn add_column_sql(backend: SchemaBackend, c: &Column) -> String {
    format!(
        "ALTER TABLE {TABLE} ADD COLUMN {} {}",
        c.name,
        add_decl(backend, c)
    )
}

/// The statements printed for a person to add missing columns (re-runnable in Postgres).
pub fn add_columns_advice(backend: SchemaBackend, missing: &[&Column]) -> String {
    missing
        .iter()
        .map(|c| match backend {
            SchemaBackend::Postgres => format!(
                "ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS {} {};",
                c.name,
                add_decl(backend, c)
            ),
            SchemaBackend::Sqlite => format!("{};", add_column_sql(backend, c)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A column's declaration for `ADD COLUMN`: SQLite cannot add a primary key, so `call_id`
/// is added as plain text there.
fn add_decl(backend: SchemaBackend, c: &Column) -> &'static str {
    match (backend, c.name) {
        (SchemaBackend::Sqlite, "call_id") => "TEXT",
        _ => c.decl(backend),
    }
}

/// The columns of `COLUMNS` that `existing` (names from the catalog) lacks.
pub fn missing_columns(existing: &[String]) -> Vec<&'static Column> {
    COLUMNS
        .iter()
        .filter(|c| !existing.iter().any(|e| e.eq_ignore_ascii_case(c.name)))
        .collect()
}

/// The columns of `COLUMNS` that `existing` has, in table order (what an insert names).
pub fn present_columns(existing: &[String]) -> Vec<&'static Column> {
    COLUMNS
        .iter()
        .filter(|c| existing.iter().any(|e| e.eq_ignore_ascii_case(c.name)))
        .collect()
}

/// The value of one column for a row, before backend-specific binding.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue<'a> {
    Text(Option<&'a str>),
    Integer(Option<i64>),
    Real(Option<f64>),
    Bool(bool),
    Json(Option<&'a str>),
    /// Unix milliseconds.
    Timestamp(i64),
}

fn int(v: Option<u64>) -> Option<i64> {
    v.map(|x| i64::try_from(x).unwrap_or(i64::MAX))
}

/// How a column's value is read from a row: [`extractor`] of the column's name.
pub type Extract = for<'a> fn(&'a CallRow) -> SqlValue<'a>;

/// The value of column `name` for `row`. Absent caller dimensions are stored as their
/// sentinels (`''`, `{}`) so that row-level security comparisons never meet NULL.
pub fn value<'a>(row: &'a CallRow, name: &str) -> SqlValue<'a> {
    extractor(name)(row)
}

/// How the value of column `name` is read from a row ([`value`]), looked up once for a
/// batch's columns instead of matching the name again for every row (a comparison of
/// strings per column per row, ~1k instructions a row for 35 columns; `instructions.py`).
/// A name that is not a column of this schema (the catalog probe never yields one) reads
/// NULL.
pub fn extractor(name: &str) -> Extract {
    match name {
        "call_id" => |row| SqlValue::Text(Some(&row.call_id)),
        "logical_call_id" => |row| SqlValue::Text(Some(&row.logical_call_id)),
        "parent_call_id" => |row| SqlValue::Text(row.parent_call_id.as_deref()),
        "session_id" => |row| SqlValue::Text(row.session_id.as_deref()),
        "event" => |row| SqlValue::Text(Some(row.kind.as_str())),
        "scope" => |row| SqlValue::Text(Some(&row.scope)),
        "source_name" => |row| SqlValue::Text(row.source_name.as_deref()),
        "provider" => |row| SqlValue::Text(row.provider.as_deref()),
        "model" => |row| SqlValue::Text(row.model.as_deref()),
        "model_reported" => |row| SqlValue::Text(row.model_reported.as_deref()),
        "error_type" => |row| SqlValue::Text(row.error_type.as_deref()),
        "error" => |row| SqlValue::Text(row.error.as_deref()),
        "prompt_tokens" => |row| SqlValue::Integer(int(row.prompt_tokens)),
        "completion_tokens" => |row| SqlValue::Integer(int(row.completion_tokens)),
        "cached_prompt_tokens" => |row| SqlValue::Integer(int(row.cached_prompt_tokens)),
        "cache_write_tokens" => |row| SqlValue::Integer(int(row.cache_write_tokens)),
        "ingress" => |row| SqlValue::Text(row.ingress),
        "key_id" => |row| SqlValue::Text(row.key_id.as_deref()),
        "team_id" => |row| SqlValue::Text(row.team_id.as_deref()),
        "reasoning_tokens" => |row| SqlValue::Integer(int(row.reasoning_tokens)),
        "usage_source" => |row| SqlValue::Text(Some(row.usage_source.as_str())),
        "latency_ms" => |row| SqlValue::Integer(int(row.latency_ms)),
        "ttft_ms" => |row| SqlValue::Real(row.ttft_ms),
        "max_inter_token_ms" => |row| SqlValue::Real(row.max_inter_token_ms),
        "attempts" => |row| SqlValue::Integer(row.attempts.map(i64::from)),
        "created_at" => |row| SqlValue::Timestamp(row.created_at_ms),
        "messages" => |row| SqlValue::Json(row.messages.as_deref()),
        "response" => |row| SqlValue::Text(row.response.as_deref()),
        "thinking" => |row| SqlValue::Text(row.thinking.as_deref()),
        "total_latency_ms" => |row| SqlValue::Integer(int(row.total_latency_ms)),
        "cache_hit" => |row| SqlValue::Bool(row.cache_hit),
        "cost" => |row| SqlValue::Real(row.cost),
        "sampling" => |row| SqlValue::Json(row.sampling.as_deref()),
        "tenant_id" => |row| SqlValue::Text(Some(row.tenant_id.as_deref().unwrap_or(""))),
        "meta" => |row| SqlValue::Json(Some(row.meta.as_deref().unwrap_or("{}"))),
        _ => |_| SqlValue::Text(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::RowKind;

    #[test]
    fn every_column_has_a_value_and_a_unique_name() {
        let row = CallRow::new(RowKind::Attempt, "a", "l", "LLM", 1);
        let mut names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COLUMNS.len());
        // Only the fallback arm yields Text(None) for a NOT NULL column: none may.
        for c in COLUMNS {
            let v = value(&row, c.name);
            if c.sqlite.contains("NOT NULL") || c.sqlite.contains("PRIMARY KEY") {
                assert_ne!(v, SqlValue::Text(None), "{}", c.name);
            }
        }
    }

    #[test]
    fn ddl_lists_the_columns_in_order() {
        let pg = create_table_sql(SchemaBackend::Postgres);
        assert!(
            pg.starts_with("CREATE TABLE IF NOT EXISTS llm_calls (\n    call_id TEXT NOT NULL,")
        );
        assert!(pg.ends_with("    PRIMARY KEY (call_id, created_at)\n)"));
        let lite = create_table_sql(SchemaBackend::Sqlite);
        assert!(lite.contains("    created_at INTEGER NOT NULL,\n    messages TEXT,"));
        assert_eq!(
            add_column_sql(SchemaBackend::Postgres, &COLUMNS[COLUMNS.len() - 1]),
            "ALTER TABLE llm_calls ADD COLUMN team_id TEXT"
        );
    }

    #[test]
    fn missing_and_present_columns() {
        let existing: Vec<String> = COLUMNS
            .iter()
            .filter(|c| c.name != "thinking" && c.name != "sampling")
            .map(|c| c.name.to_uppercase())
            .collect();
        let missing: Vec<&str> = missing_columns(&existing).iter().map(|c| c.name).collect();
        assert_eq!(missing, vec!["thinking", "sampling"]);
        assert_eq!(present_columns(&existing).len(), COLUMNS.len() - 2);
        let advice = add_columns_advice(SchemaBackend::Postgres, &missing_columns(&existing));
        assert_eq!(
            advice,
            "ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS thinking TEXT; ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS sampling JSONB;"
        );
    }
}
