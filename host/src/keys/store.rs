//! The key store (docs/keys.md#storage): `pgw_teams` and `pgw_keys` in the telemetry
//! database, one sqlx code path for SQLite and Postgres (the same DDL and the same SQL with
//! bound `$n` parameters; a Postgres DSN chooses its schema with `?options[search_path]=`),
//! the versioned migration recorded in `pgw_schema_migrations`, and every read and write
//! the registry and the admin operations need. Every write sets `updated_at_ms` from the
//! injected clock, strictly above the row's previous value, so a refresh orders versions.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde_json::{Map, Value};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use super::KeysError;
use super::model::{BudgetSpec, KeyLimits, KeyState, Team, VirtualKey};
use super::secret::{Hasher, decode_hash};
use crate::config::{ProcessSettings, TelemetryBackend};
use crate::governance::SharedClock;

/// The `component` of this store's rows in `pgw_schema_migrations`.
const COMPONENT: &str = "keys";

/// The migrations, in order: version, and its statements (each idempotent). Never edit a
/// released one; append a new version.
const MIGRATIONS: &[(i64, &[&str])] = &[(
    1,
    &[
        "CREATE TABLE IF NOT EXISTS pgw_teams (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            limits TEXT NOT NULL,
            budgets TEXT NOT NULL,
            metadata TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            updated_at_ms BIGINT NOT NULL
        )",
        "CREATE TABLE IF NOT EXISTS pgw_keys (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            team_id TEXT,
            scopes TEXT,
            limits TEXT NOT NULL,
            budgets TEXT NOT NULL,
            expires_at_ms BIGINT,
            metadata TEXT NOT NULL,
            state TEXT NOT NULL,
            secret_hash TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            updated_at_ms BIGINT NOT NULL
        )",
        "CREATE INDEX IF NOT EXISTS pgw_keys_updated_at ON pgw_keys (updated_at_ms)",
        "CREATE INDEX IF NOT EXISTS pgw_keys_team ON pgw_keys (team_id)",
        "CREATE INDEX IF NOT EXISTS pgw_teams_updated_at ON pgw_teams (updated_at_ms)",
    ],
)];

const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS pgw_schema_migrations (
    component TEXT NOT NULL,
    version BIGINT NOT NULL,
    applied_at_ms BIGINT NOT NULL,
    PRIMARY KEY (component, version)
)";

/// A Postgres advisory lock id ("pgw_keys" as ASCII), held by the migrating transaction so
/// replicas starting together migrate one at a time.
const PG_MIGRATION_LOCK: i64 = 0x7067_775f_6b65_7973;

/// How long a SQLite write waits for the file's lock (the telemetry writer shares it).
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections of the store's pool: admin writes and one refresh at a time.
const POOL_MAX: u32 = 4;
/// How long an operation waits for a connection before it is a store failure.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// Tries of an optimistic read-modify-write before giving up (another writer kept winning).
const UPDATE_TRIES: usize = 5;

/// The columns of `pgw_keys`, in the order [`KeyRow`] reads them.
macro_rules! key_columns {
    () => {
        "id, name, team_id, scopes, limits, budgets, expires_at_ms, metadata, state, \
         secret_hash, created_at_ms, updated_at_ms"
    };
}
/// The columns of `pgw_teams`, in the order [`TeamRow`] reads them.
macro_rules! team_columns {
    () => {
        "id, name, limits, budgets, metadata, created_at_ms, updated_at_ms"
    };
}

const GET_KEY: &str = concat!("SELECT ", key_columns!(), " FROM pgw_keys WHERE id = $1");
const LIST_KEYS: &str = concat!(
    "SELECT ",
    key_columns!(),
    " FROM pgw_keys WHERE (CAST($1 AS TEXT) IS NULL OR team_id = $1) \
     AND (CAST($2 AS TEXT) IS NULL OR state = $2) ORDER BY created_at_ms, id"
);
const CHANGED_KEYS: &str = concat!(
    "SELECT ",
    key_columns!(),
    " FROM pgw_keys WHERE updated_at_ms > $1"
);
const GET_TEAM: &str = concat!("SELECT ", team_columns!(), " FROM pgw_teams WHERE id = $1");
const LIST_TEAMS: &str = concat!(
    "SELECT ",
    team_columns!(),
    " FROM pgw_teams ORDER BY created_at_ms, id"
);
const CHANGED_TEAMS: &str = concat!(
    "SELECT ",
    team_columns!(),
    " FROM pgw_teams WHERE updated_at_ms > $1"
);

/// Where the store lives: the telemetry database.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// The SQLite file of `PGW_TELEMETRY_SQLITE_PATH`.
    Sqlite(PathBuf),
    /// `PGW_TELEMETRY_PG_DSN`.
    Postgres(String),
}

impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            Self::Postgres(dsn) => f
                .debug_tuple("Postgres")
                .field(&crate::transport::strip_userinfo(dsn))
                .finish(),
        }
    }
}

impl StoreLocation {
    /// The telemetry database of these settings; `Disabled` when keys are off, and a
    /// problem naming `PGW_VIRTUAL_KEYS` when telemetry is `none`.
    pub fn from_settings(p: &ProcessSettings) -> Result<Self, KeysError> {
        if !p.keys.enabled {
            return Err(KeysError::Disabled);
        }
        match &p.telemetry.backend {
            TelemetryBackend::Sqlite { path } => Ok(Self::Sqlite(path.clone())),
            TelemetryBackend::Postgres { dsn } => Ok(Self::Postgres(dsn.clone())),
            TelemetryBackend::None => Err(KeysError::invalid(
                "PGW_VIRTUAL_KEYS",
                "needs PGW_TELEMETRY_BACKEND=sqlite or postgres: keys live in the telemetry \
                 database",
            )),
        }
    }
}

#[derive(Clone, Debug)]
enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// The same code for either pool: `$pool` is bound to the pool of the backend in use.
macro_rules! on_db {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            Db::Sqlite($pool) => $body,
            Db::Postgres($pool) => $body,
        }
    };
}

/// A key as stored: the key and its secret's hash (which only the registry reads). `Debug`
/// omits the hash.
#[derive(Clone, PartialEq)]
pub struct StoredKey {
    key: VirtualKey,
    hash: [u8; 32],
}

impl StoredKey {
    /// The key.
    pub fn key(&self) -> &VirtualKey {
        &self.key
    }

    pub(crate) fn into_parts(self) -> (VirtualKey, [u8; 32]) {
        (self.key, self.hash)
    }

    pub(crate) fn new(key: VirtualKey, hash: [u8; 32]) -> Self {
        Self { key, hash }
    }
}

impl std::fmt::Debug for StoredKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredKey")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

#[derive(sqlx::FromRow)]
struct KeyRow {
    id: String,
    name: String,
    team_id: Option<String>,
    scopes: Option<String>,
    limits: String,
    budgets: String,
    expires_at_ms: Option<i64>,
    metadata: String,
    state: String,
    secret_hash: String,
    created_at_ms: i64,
    updated_at_ms: i64,
}

#[derive(sqlx::FromRow)]
struct TeamRow {
    id: String,
    name: String,
    limits: String,
    budgets: String,
    metadata: String,
    created_at_ms: i64,
    updated_at_ms: i64,
}

fn corrupt(table: &str, id: &str, column: &str, e: impl std::fmt::Display) -> KeysError {
    KeysError::Store(format!(
        "{table} row `{id}`: column {column} does not parse: {e}"
    ))
}

fn json<T: serde::de::DeserializeOwned>(
    table: &str,
    id: &str,
    column: &str,
    text: &str,
) -> Result<T, KeysError> {
    serde_json::from_str(text).map_err(|e| corrupt(table, id, column, e))
}

fn to_json(v: &impl serde::Serialize) -> Result<String, KeysError> {
    serde_json::to_string(v).map_err(|e| KeysError::Store(format!("cannot encode JSON: {e}")))
}

impl KeyRow {
    fn into_stored(self) -> Result<StoredKey, KeysError> {
        let t = "pgw_keys";
        let id = self.id.as_str();
        let scopes: Option<Vec<String>> = match &self.scopes {
            Some(s) => Some(json(t, id, "scopes", s)?),
            None => None,
        };
        let limits: KeyLimits = json(t, id, "limits", &self.limits)?;
        let budgets: Vec<BudgetSpec> = json(t, id, "budgets", &self.budgets)?;
        let metadata: Map<String, Value> = json(t, id, "metadata", &self.metadata)?;
        let state = KeyState::parse(&self.state)
            .ok_or_else(|| corrupt(t, id, "state", format!("`{}`", self.state)))?;
        let hash =
            decode_hash(&self.secret_hash).ok_or_else(|| corrupt(t, id, "secret_hash", "hex"))?;
        Ok(StoredKey {
            key: VirtualKey {
                id: self.id,
                name: self.name,
                team_id: self.team_id,
                scopes,
                limits,
                budgets,
                expires_at_ms: self.expires_at_ms,
                metadata,
                state,
                created_at_ms: self.created_at_ms,
                updated_at_ms: self.updated_at_ms,
            },
            hash,
        })
    }
}

impl TeamRow {
    fn into_team(self) -> Result<Team, KeysError> {
        let t = "pgw_teams";
        let id = self.id.as_str();
        let limits = json(t, id, "limits", &self.limits)?;
        let budgets = json(t, id, "budgets", &self.budgets)?;
        let metadata = json(t, id, "metadata", &self.metadata)?;
        Ok(Team {
            id: self.id,
            name: self.name,
            limits,
            budgets,
            metadata,
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
        })
    }
}

/// The JSON columns of a key, encoded.
struct KeyColumns {
    scopes: Option<String>,
    limits: String,
    budgets: String,
    metadata: String,
}

impl KeyColumns {
    fn of(k: &VirtualKey) -> Result<Self, KeysError> {
        Ok(Self {
            scopes: match &k.scopes {
                Some(s) => Some(to_json(s)?),
                None => None,
            },
            limits: to_json(&k.limits)?,
            budgets: to_json(&k.budgets)?,
            metadata: to_json(&k.metadata)?,
        })
    }
}

/// Keys and teams in the telemetry database. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct KeyStore {
    db: Db,
    hasher: Hasher,
    clock: SharedClock,
}

impl std::fmt::Debug for KeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.db {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        };
        f.debug_struct("KeyStore")
            .field("backend", &backend)
            .finish_non_exhaustive()
    }
}

impl KeyStore {
    /// Open the store of these settings (`PGW_VIRTUAL_KEYS` on) and run its migrations.
    pub async fn open_from_settings(
        p: &ProcessSettings,
        clock: SharedClock,
    ) -> Result<Self, KeysError> {
        let location = StoreLocation::from_settings(p)?;
        let secret = p.keys.hash_secret.as_ref().ok_or_else(|| {
            KeysError::invalid("PGW_KEY_HASH_SECRET", "required when PGW_VIRTUAL_KEYS=true")
        })?;
        Self::open(&location, Hasher::new(secret), clock).await
    }

    /// Open the store at `location` (a SQLite file is created if missing) and run its
    /// migrations.
    pub async fn open(
        location: &StoreLocation,
        hasher: Hasher,
        clock: SharedClock,
    ) -> Result<Self, KeysError> {
        let db = match location {
            StoreLocation::Sqlite(path) => {
                let opts = SqliteConnectOptions::new()
                    .filename(path)
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .busy_timeout(SQLITE_BUSY_TIMEOUT);
                let pool = SqlitePoolOptions::new()
                    .max_connections(POOL_MAX)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_with(opts)
                    .await
                    .map_err(|e| {
                        KeysError::Store(format!("cannot open {}: {e}", path.display()))
                    })?;
                Db::Sqlite(pool)
            }
            StoreLocation::Postgres(dsn) => {
                let opts = PgConnectOptions::from_str(dsn).map_err(|e| {
                    KeysError::Store(format!("PGW_TELEMETRY_PG_DSN does not parse: {e}"))
                })?;
                let pool = PgPoolOptions::new()
                    .max_connections(POOL_MAX)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_with(opts)
                    .await?;
                Db::Postgres(pool)
            }
        };
        let store = Self { db, hasher, clock };
        store.migrate().await?;
        Ok(store)
    }

    /// Apply every migration not yet recorded, each in one transaction.
    async fn migrate(&self) -> Result<(), KeysError> {
        for (version, statements) in MIGRATIONS {
            let now = self.clock.unix_ms();
            match &self.db {
                Db::Sqlite(pool) => {
                    let mut tx = pool.begin().await?;
                    sqlx::query(MIGRATIONS_TABLE).execute(&mut *tx).await?;
                    let done: Option<i64> = sqlx::query_scalar(
                        "SELECT version FROM pgw_schema_migrations \
                         WHERE component = $1 AND version = $2",
                    )
                    .bind(COMPONENT)
                    .bind(version)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if done.is_none() {
                        for s in *statements {
                            sqlx::query(s).execute(&mut *tx).await?;
                        }
                        sqlx::query(
                            "INSERT INTO pgw_schema_migrations (component, version, \
                             applied_at_ms) VALUES ($1, $2, $3)",
                        )
                        .bind(COMPONENT)
                        .bind(version)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                    }
                    tx.commit().await?;
                }
                Db::Postgres(pool) => {
                    let mut tx = pool.begin().await?;
                    sqlx::query("SELECT pg_advisory_xact_lock($1)")
                        .bind(PG_MIGRATION_LOCK)
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query(MIGRATIONS_TABLE).execute(&mut *tx).await?;
                    let done: Option<i64> = sqlx::query_scalar(
                        "SELECT version FROM pgw_schema_migrations \
                         WHERE component = $1 AND version = $2",
                    )
                    .bind(COMPONENT)
                    .bind(version)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if done.is_none() {
                        for s in *statements {
                            sqlx::query(s).execute(&mut *tx).await?;
                        }
                        sqlx::query(
                            "INSERT INTO pgw_schema_migrations (component, version, \
                             applied_at_ms) VALUES ($1, $2, $3)",
                        )
                        .bind(COMPONENT)
                        .bind(version)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                    }
                    tx.commit().await?;
                }
            }
        }
        Ok(())
    }

    /// The hasher tokens are checked with.
    pub fn hasher(&self) -> &Hasher {
        &self.hasher
    }

    /// The clock every write is stamped with.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// The time a write of a row last written at `prev_ms` is stamped with: now, and
    /// strictly after `prev_ms`.
    pub(crate) fn stamp(&self, prev_ms: i64) -> i64 {
        self.clock.unix_ms().max(prev_ms + 1)
    }

    /// Whether the store is Postgres (the spend query's SQL differs by backend).
    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self.db, Db::Postgres(_))
    }

    pub(crate) fn sqlite_pool(&self) -> Option<&SqlitePool> {
        match &self.db {
            Db::Sqlite(p) => Some(p),
            Db::Postgres(_) => None,
        }
    }

    pub(crate) fn pg_pool(&self) -> Option<&PgPool> {
        match &self.db {
            Db::Postgres(p) => Some(p),
            Db::Sqlite(_) => None,
        }
    }

    /// Close the pool (the CLI, before it exits).
    pub async fn close(&self) {
        on_db!(&self.db, pool => pool.close().await)
    }

    // ---- keys ----

    /// Insert a new key with its secret's hash (hex).
    pub(crate) async fn insert_key(&self, k: &VirtualKey, hash_hex: &str) -> Result<(), KeysError> {
        let c = KeyColumns::of(k)?;
        let sql = "INSERT INTO pgw_keys (id, name, team_id, scopes, limits, budgets, \
                   expires_at_ms, metadata, state, secret_hash, created_at_ms, updated_at_ms) \
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
        on_db!(&self.db, pool => sqlx::query(sql)
            .bind(&k.id)
            .bind(&k.name)
            .bind(&k.team_id)
            .bind(&c.scopes)
            .bind(&c.limits)
            .bind(&c.budgets)
            .bind(k.expires_at_ms)
            .bind(&c.metadata)
            .bind(k.state.as_str())
            .bind(hash_hex)
            .bind(k.created_at_ms)
            .bind(k.updated_at_ms)
            .execute(pool)
            .await
            .map(|_| ()))?;
        Ok(())
    }

    /// A key with its hash.
    pub(crate) async fn get_stored_key(&self, id: &str) -> Result<Option<StoredKey>, KeysError> {
        let row: Option<KeyRow> = on_db!(&self.db, pool => sqlx::query_as(GET_KEY)
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        row.map(KeyRow::into_stored).transpose()
    }

    /// A key.
    pub async fn get_key(&self, id: &str) -> Result<Option<VirtualKey>, KeysError> {
        Ok(self.get_stored_key(id).await?.map(|s| s.key))
    }

    /// Keys, oldest first, optionally only those of `team` and in `state`.
    pub async fn list_keys(
        &self,
        team: Option<&str>,
        state: Option<KeyState>,
    ) -> Result<Vec<VirtualKey>, KeysError> {
        let state = state.map(KeyState::as_str);
        let rows: Vec<KeyRow> = on_db!(&self.db, pool => sqlx::query_as(LIST_KEYS)
            .bind(team)
            .bind(state)
            .fetch_all(pool)
            .await)?;
        rows.into_iter()
            .map(|r| r.into_stored().map(|s| s.key))
            .collect()
    }

    /// Read-modify-write key `id`: `change` edits the key (and may return a new hash, hex);
    /// the write is stamped and only lands if nobody wrote the row in between (else it is
    /// retried on the new version). Returns the key as written.
    pub(crate) async fn update_key<F>(
        &self,
        id: &str,
        mut change: F,
    ) -> Result<StoredKey, KeysError>
    where
        F: FnMut(&mut VirtualKey) -> Result<Option<String>, KeysError>,
    {
        for _ in 0..UPDATE_TRIES {
            let Some(stored) = self.get_stored_key(id).await? else {
                return Err(KeysError::NotFound {
                    what: "key",
                    id: id.to_string(),
                });
            };
            let prev = stored.key.updated_at_ms;
            let mut k = stored.key;
            let new_hash = change(&mut k)?;
            k.updated_at_ms = self.stamp(prev);
            let c = KeyColumns::of(&k)?;
            let hash_hex = new_hash.unwrap_or_else(|| hex::encode(stored.hash));
            let hash = decode_hash(&hash_hex)
                .ok_or_else(|| KeysError::Store("a new hash is not 64 hex characters".into()))?;
            let sql = "UPDATE pgw_keys SET name = $1, team_id = $2, scopes = $3, limits = $4, \
                       budgets = $5, expires_at_ms = $6, metadata = $7, state = $8, \
                       secret_hash = $9, updated_at_ms = $10 \
                       WHERE id = $11 AND updated_at_ms = $12";
            let n = on_db!(&self.db, pool => sqlx::query(sql)
                .bind(&k.name)
                .bind(&k.team_id)
                .bind(&c.scopes)
                .bind(&c.limits)
                .bind(&c.budgets)
                .bind(k.expires_at_ms)
                .bind(&c.metadata)
                .bind(k.state.as_str())
                .bind(&hash_hex)
                .bind(k.updated_at_ms)
                .bind(id)
                .bind(prev)
                .execute(pool)
                .await
                .map(|r| r.rows_affected()))?;
            if n == 1 {
                return Ok(StoredKey { key: k, hash });
            }
        }
        Err(KeysError::Store(format!(
            "key `{id}` kept changing under {UPDATE_TRIES} tries to update it"
        )))
    }

    // ---- teams ----

    /// Insert a new team; `Conflict` when its id is taken.
    pub(crate) async fn insert_team(&self, t: &Team) -> Result<(), KeysError> {
        let sql = "INSERT INTO pgw_teams (id, name, limits, budgets, metadata, created_at_ms, \
                   updated_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING";
        let (limits, budgets, metadata) = (
            to_json(&t.limits)?,
            to_json(&t.budgets)?,
            to_json(&t.metadata)?,
        );
        let n = on_db!(&self.db, pool => sqlx::query(sql)
            .bind(&t.id)
            .bind(&t.name)
            .bind(&limits)
            .bind(&budgets)
            .bind(&metadata)
            .bind(t.created_at_ms)
            .bind(t.updated_at_ms)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        if n == 0 {
            return Err(KeysError::Conflict {
                what: "team",
                id: t.id.clone(),
            });
        }
        Ok(())
    }

    /// A team.
    pub async fn get_team(&self, id: &str) -> Result<Option<Team>, KeysError> {
        let row: Option<TeamRow> = on_db!(&self.db, pool => sqlx::query_as(GET_TEAM)
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        row.map(TeamRow::into_team).transpose()
    }

    /// Every team, oldest first.
    pub async fn list_teams(&self) -> Result<Vec<Team>, KeysError> {
        let rows: Vec<TeamRow> = on_db!(&self.db, pool => sqlx::query_as(LIST_TEAMS)
            .fetch_all(pool)
            .await)?;
        rows.into_iter().map(TeamRow::into_team).collect()
    }

    /// Read-modify-write team `id` (like [`Self::update_key`]).
    pub(crate) async fn update_team<F>(&self, id: &str, mut change: F) -> Result<Team, KeysError>
    where
        F: FnMut(&mut Team) -> Result<(), KeysError>,
    {
        for _ in 0..UPDATE_TRIES {
            let Some(mut t) = self.get_team(id).await? else {
                return Err(KeysError::NotFound {
                    what: "team",
                    id: id.to_string(),
                });
            };
            let prev = t.updated_at_ms;
            change(&mut t)?;
            t.updated_at_ms = self.stamp(prev);
            let (limits, budgets, metadata) = (
                to_json(&t.limits)?,
                to_json(&t.budgets)?,
                to_json(&t.metadata)?,
            );
            let sql = "UPDATE pgw_teams SET name = $1, limits = $2, budgets = $3, metadata = $4, \
                       updated_at_ms = $5 WHERE id = $6 AND updated_at_ms = $7";
            let n = on_db!(&self.db, pool => sqlx::query(sql)
                .bind(&t.name)
                .bind(&limits)
                .bind(&budgets)
                .bind(&metadata)
                .bind(t.updated_at_ms)
                .bind(id)
                .bind(prev)
                .execute(pool)
                .await
                .map(|r| r.rows_affected()))?;
            if n == 1 {
                return Ok(t);
            }
        }
        Err(KeysError::Store(format!(
            "team `{id}` kept changing under {UPDATE_TRIES} tries to update it"
        )))
    }

    // ---- the registry's reads ----

    /// Keys (with hashes) and teams written after `since_ms` (every row for `i64::MIN`).
    pub(crate) async fn changed_since(
        &self,
        since_ms: i64,
    ) -> Result<(Vec<StoredKey>, Vec<Team>), KeysError> {
        let (keys, teams): (Vec<KeyRow>, Vec<TeamRow>) = on_db!(&self.db, pool => {
            let k = sqlx::query_as(CHANGED_KEYS).bind(since_ms).fetch_all(pool).await?;
            let t = sqlx::query_as(CHANGED_TEAMS).bind(since_ms).fetch_all(pool).await?;
            (k, t)
        });
        Ok((
            keys.into_iter()
                .map(KeyRow::into_stored)
                .collect::<Result<_, _>>()?,
            teams
                .into_iter()
                .map(TeamRow::into_team)
                .collect::<Result<_, _>>()?,
        ))
    }
}
