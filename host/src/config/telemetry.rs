//! The telemetry section: typed telemetry and pricing settings (`PGW_TELEMETRY_*`,
//! `PGW_PRICING_FILE`; see docs/telemetry.md), their keys, defaults and parsing; every
//! problem names its key.

use std::path::PathBuf;
use std::time::Duration;

use super::problems::Problems;
use super::vars::Vars;

/// The process keys this section parses.
pub(super) const KEYS: &[&str] = &[
    "PGW_TELEMETRY_BACKEND",
    "PGW_TELEMETRY_SQLITE_PATH",
    "PGW_TELEMETRY_PG_DSN",
    "PGW_TELEMETRY_SCHEMA_MODE",
    "PGW_TELEMETRY_TEXT_CAP",
    "PGW_TELEMETRY_PG_POOL_MAX",
    "PGW_TELEMETRY_PG_WRITE_TIMEOUT_S",
    "PGW_PRICING_FILE",
];

/// `PGW_TELEMETRY_SQLITE_PATH`: beside the process, where a first run finds it.
pub const DEFAULT_SQLITE_PATH: &str = "polygateway.db";
/// `PGW_TELEMETRY_PG_POOL_MAX`: batched multi-row inserts keep up with thousands of rows a
/// second on a few connections.
pub const DEFAULT_PG_POOL_MAX: u32 = 4;
/// `PGW_TELEMETRY_PG_WRITE_TIMEOUT_S`: a write (connection included) slower than this is an
/// outage; rows queue and are dropped and counted past the queue's bound.
pub const DEFAULT_PG_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where telemetry rows go. `Debug` shows a Postgres DSN without its userinfo (password).
#[derive(Clone, PartialEq, Eq)]
pub enum TelemetryBackend {
    /// No telemetry.
    None,
    /// SQLite file (`PGW_TELEMETRY_SQLITE_PATH`, default `polygateway.db`).
    Sqlite { path: PathBuf },
    /// Postgres (`PGW_TELEMETRY_PG_DSN`; a schema is chosen with
    /// `?options[search_path]=<schema>`).
    Postgres { dsn: String },
}

impl std::fmt::Debug for TelemetryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Sqlite { path } => f.debug_struct("Sqlite").field("path", path).finish(),
            Self::Postgres { dsn } => f
                .debug_struct("Postgres")
                .field("dsn", &crate::transport::strip_userinfo(dsn))
                .finish(),
        }
    }
}

/// Whether the host may add missing columns to an existing table
/// (docs/telemetry.md#schema-ownership).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaMode {
    /// Create the table if missing and add missing columns (`ALTER TABLE … ADD COLUMN`).
    Auto,
    /// Create the table if missing, never alter it: insert only the columns that exist and
    /// warn once naming the missing ones with the SQL to add them.
    Manual,
}

impl SchemaMode {
    /// The configured value (`auto` | `manual`).
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaMode::Auto => "auto",
            SchemaMode::Manual => "manual",
        }
    }
}

/// Telemetry and cost settings.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetrySettings {
    /// `PGW_TELEMETRY_BACKEND` (default sqlite).
    pub backend: TelemetryBackend,
    /// `PGW_TELEMETRY_SCHEMA_MODE`; unset → sqlite `auto`, postgres `manual`.
    pub schema_mode: SchemaMode,
    /// `PGW_TELEMETRY_TEXT_CAP`: most characters kept of each stored text part (message
    /// contents, text parts, response, thinking); `None` = no truncation.
    pub text_cap: Option<usize>,
    /// `PGW_TELEMETRY_PG_POOL_MAX`: most Postgres connections (default 4; none are opened
    /// before the first write).
    pub pg_pool_max: u32,
    /// `PGW_TELEMETRY_PG_WRITE_TIMEOUT_S`: bound of one Postgres write, connection
    /// included (default 5 s).
    pub pg_write_timeout: Duration,
    /// `PGW_PRICING_FILE`: JSON price table (model → USD per million tokens); `None` = every
    /// cost is NULL.
    pub pricing_file: Option<PathBuf>,
}

impl TelemetrySettings {
    /// Settings for `backend` with every other key at its default.
    pub fn new(backend: TelemetryBackend) -> Self {
        let schema_mode = match backend {
            TelemetryBackend::Postgres { .. } => SchemaMode::Manual,
            _ => SchemaMode::Auto,
        };
        Self {
            backend,
            schema_mode,
            text_cap: None,
            pg_pool_max: DEFAULT_PG_POOL_MAX,
            pg_write_timeout: DEFAULT_PG_WRITE_TIMEOUT,
            pricing_file: None,
        }
    }
}

/// Parse the telemetry keys (named by the whole key).
pub(super) fn parse(vars: &Vars, problems: &mut Problems) -> TelemetrySettings {
    let mut t = TelemetrySettings::new(parse_backend(vars, problems));
    match vars.get("PGW_TELEMETRY_SCHEMA_MODE") {
        None => {}
        Some("auto") => t.schema_mode = SchemaMode::Auto,
        Some("manual") => t.schema_mode = SchemaMode::Manual,
        Some(v) => problems.add(
            "PGW_TELEMETRY_SCHEMA_MODE",
            format!("expected auto|manual, got `{v}`"),
        ),
    }
    if let Some(v) = vars.get("PGW_TELEMETRY_TEXT_CAP") {
        match v.parse::<usize>() {
            Ok(n) => t.text_cap = Some(n),
            _ => problems.add(
                "PGW_TELEMETRY_TEXT_CAP",
                format!("expected a positive integer (characters), got `{v}`"),
            ),
        }
    }
    if let Some(v) = vars.get("PGW_TELEMETRY_PG_POOL_MAX") {
        match v.parse::<u32>() {
            Ok(n) => t.pg_pool_max = n,
            _ => problems.add(
                "PGW_TELEMETRY_PG_POOL_MAX",
                format!("expected an integer in 1..=1000 (connections), got `{v}`"),
            ),
        }
    }
    if let Some(v) = vars.get("PGW_TELEMETRY_PG_WRITE_TIMEOUT_S") {
        match v.parse::<f64>() {
            Ok(x) if (0.0..1e6).contains(&x) => {
                t.pg_write_timeout = Duration::from_secs_f64(x);
            }
            _ => problems.add(
                "PGW_TELEMETRY_PG_WRITE_TIMEOUT_S",
                format!("expected a finite number of seconds ≥ 0, got `{v}`"),
            ),
        }
    }
    t.pricing_file = vars.get("PGW_PRICING_FILE").map(PathBuf::from);
    t
}

/// `PGW_TELEMETRY_BACKEND` (default sqlite) with its path or DSN.
fn parse_backend(vars: &Vars, problems: &mut Problems) -> TelemetryBackend {
    match vars.get("PGW_TELEMETRY_BACKEND") {
        None | Some("sqlite") => TelemetryBackend::Sqlite {
            path: PathBuf::from(
                vars.get("PGW_TELEMETRY_SQLITE_PATH")
                    .unwrap_or(DEFAULT_SQLITE_PATH),
            ),
        },
        Some("none") => TelemetryBackend::None,
        Some("postgres") => match vars.get("PGW_TELEMETRY_PG_DSN") {
            Some(dsn) => {
                if let Err(e) = crate::telemetry::check_pg_dsn(dsn) {
                    problems.add("PGW_TELEMETRY_PG_DSN", format!("not a Postgres DSN: {e}"));
                }
                TelemetryBackend::Postgres {
                    dsn: dsn.to_string(),
                }
            }
            None => {
                problems.add(
                    "PGW_TELEMETRY_PG_DSN",
                    "required when PGW_TELEMETRY_BACKEND=postgres",
                );
                TelemetryBackend::None
            }
        },
        Some(v) => {
            problems.add(
                "PGW_TELEMETRY_BACKEND",
                format!("expected sqlite|postgres|none, got `{v}`"),
            );
            TelemetryBackend::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_vars(list: &[(&str, &str)]) -> (TelemetrySettings, Vec<String>) {
        let mut p = Problems::new();
        let t = parse(&Vars::from_pairs("", list), &mut p);
        (t, p.into_list().into_iter().map(|p| p.key).collect())
    }

    #[test]
    fn schema_mode_defaults_by_backend() {
        let (t, p) = parse_vars(&[]);
        assert!(p.is_empty());
        assert_eq!(t.schema_mode, SchemaMode::Auto);
        let (t, _) = parse_vars(&[
            ("PGW_TELEMETRY_BACKEND", "postgres"),
            ("PGW_TELEMETRY_PG_DSN", "postgres://u@127.0.0.1/db"),
        ]);
        assert_eq!(t.schema_mode, SchemaMode::Manual);
        assert_eq!(t.pg_pool_max, 4);
        assert_eq!(t.pg_write_timeout, Duration::from_secs(5));
        let (t, _) = parse_vars(&[
            ("PGW_TELEMETRY_BACKEND", "postgres"),
            ("PGW_TELEMETRY_PG_DSN", "postgres://u@127.0.0.1/db"),
            ("PGW_TELEMETRY_SCHEMA_MODE", "auto"),
        ]);
        assert_eq!(t.schema_mode, SchemaMode::Auto);
    }

    #[test]
    fn bad_values_name_their_key() {
        let (_, p) = parse_vars(&[
            ("PGW_TELEMETRY_BACKEND", "postgres"),
            ("PGW_TELEMETRY_PG_DSN", "mysql://nope"),
            ("PGW_TELEMETRY_SCHEMA_MODE", "sometimes"),
            ("PGW_TELEMETRY_TEXT_CAP", "none"),
            ("PGW_TELEMETRY_PG_POOL_MAX", "zero"),
            ("PGW_TELEMETRY_PG_WRITE_TIMEOUT_S", "-1"),
        ]);
        assert_eq!(
            p,
            vec![
                "PGW_TELEMETRY_PG_DSN",
                "PGW_TELEMETRY_SCHEMA_MODE",
                "PGW_TELEMETRY_TEXT_CAP",
                "PGW_TELEMETRY_PG_POOL_MAX",
                "PGW_TELEMETRY_PG_WRITE_TIMEOUT_S",
            ]
        );
        let (_, p) = parse_vars(&[("PGW_TELEMETRY_BACKEND", "postgres")]);
        assert_eq!(p, vec!["PGW_TELEMETRY_PG_DSN"]);
    }
}
