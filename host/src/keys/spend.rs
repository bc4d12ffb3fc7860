//! Spend from the ledger (docs/keys.md#get-adminspend): `SUM(cost)` of the `llm_calls` rows
//! that carry a cost (attempt and cache-hit rows; terminal rows carry none, so an answer is
//! never counted twice), in a `[from, to)` window, for one key or team, grouped by UTC day,
//! model or scope. One constant SQL text per backend and grouping, every value bound.

use serde::Serialize;

use super::KeysError;
use super::store::KeyStore;
use super::time::{ONE_DAY_MS, format_rfc3339, parse_range_bound, range_bound_error};

/// The default spend window: the last 30 days.
pub const DEFAULT_WINDOW_MS: i64 = 30 * ONE_DAY_MS;

/// Whose spend [`spent_since`] sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner<'a> {
    /// The rows whose `key_id` is this key id.
    Key(&'a str),
    /// The rows whose `team_id` is this team id.
    Team(&'a str),
}

/// USD spent by `owner` from `from_ms` (Unix ms, inclusive) on: `SUM(cost)` of its costed
/// `llm_calls` rows (attempts and cache hits). `0.0` when there are none or no ledger table
/// yet. The budgets rebuild their counters from it after a restart.
pub async fn spent_since(
    store: &KeyStore,
    owner: Owner<'_>,
    from_ms: i64,
) -> Result<f64, KeysError> {
    let (key, team) = match owner {
        Owner::Key(k) => (Some(k), None),
        Owner::Team(t) => (None, Some(t)),
    };
    let total: Option<f64> = if let Some(pool) = store.sqlite_pool() {
        if !sqlite_has_ledger(pool).await? {
            return Ok(0.0);
        }
        sqlx::query_scalar(
            "SELECT SUM(cost) FROM llm_calls WHERE cost IS NOT NULL AND created_at >= $1 \
             AND (CAST($2 AS TEXT) IS NULL OR key_id = $2) \
             AND (CAST($3 AS TEXT) IS NULL OR team_id = $3)",
        )
        .bind(from_ms)
        .bind(key)
        .bind(team)
        .fetch_one(pool)
        .await?
    } else if let Some(pool) = store.pg_pool() {
        if !pg_has_ledger(pool).await? {
            return Ok(0.0);
        }
        sqlx::query_scalar(
            "SELECT SUM(cost)::float8 FROM llm_calls WHERE cost IS NOT NULL \
             AND created_at >= to_timestamp(0) + $1::bigint * interval '1 millisecond' \
             AND ($2::text IS NULL OR key_id = $2) AND ($3::text IS NULL OR team_id = $3)",
        )
        .bind(from_ms)
        .bind(key)
        .bind(team)
        .fetch_one(pool)
        .await?
    } else {
        None
    };
    Ok(total.unwrap_or(0.0))
}

async fn sqlite_has_ledger(pool: &sqlx::SqlitePool) -> Result<bool, KeysError> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'llm_calls'",
    )
    .fetch_one(pool)
    .await?;
    Ok(n > 0)
}

async fn pg_has_ledger(pool: &sqlx::PgPool) -> Result<bool, KeysError> {
    Ok(
        sqlx::query_scalar("SELECT to_regclass('llm_calls') IS NOT NULL")
            .fetch_one(pool)
            .await?,
    )
}

/// How spend rows are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// The UTC date of `created_at` (`2026-12-02`).
    Day,
    /// The `model` column (`""` when NULL).
    Model,
    /// The `scope` column.
    Scope,
}

/// A parsed `GET /admin/spend` query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendQuery {
    pub key: Option<String>,
    pub team: Option<String>,
    /// Unix ms, inclusive.
    pub from_ms: i64,
    /// Unix ms, exclusive.
    pub to_ms: i64,
    pub group_by: GroupBy,
}

impl SpendQuery {
    /// From the query parameters. `from`/`to` are RFC 3339 or `YYYY-MM-DD` (a `to` date
    /// includes that whole day); `to` defaults to `now_ms`, `from` to 30 days before `to`;
    /// `group_by` to `day`. Errors name the parameter.
    pub fn parse(
        key: Option<String>,
        team: Option<String>,
        from: Option<&str>,
        to: Option<&str>,
        group_by: Option<&str>,
        now_ms: i64,
    ) -> Result<Self, KeysError> {
        let instant = |param: &str, s: &str, end: bool| {
            parse_range_bound(s, end).ok_or_else(|| KeysError::invalid(param, range_bound_error(s)))
        };
        let to_ms = match to {
            Some(s) => instant("to", s, true)?,
            None => now_ms,
        };
        let from_ms = match from {
            Some(s) => instant("from", s, false)?,
            None => to_ms.saturating_sub(DEFAULT_WINDOW_MS),
        };
        if to_ms < from_ms {
            return Err(KeysError::invalid("to", "must not be before from"));
        }
        let group_by = match group_by {
            None | Some("day") => GroupBy::Day,
            Some("model") => GroupBy::Model,
            Some("scope") => GroupBy::Scope,
            Some(other) => {
                return Err(KeysError::invalid(
                    "group_by",
                    format!("expected day|model|scope, got `{other}`"),
                ));
            }
        };
        Ok(Self {
            key,
            team,
            from_ms,
            to_ms,
            group_by,
        })
    }
}

/// One group's spend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendRow {
    /// The day (`YYYY-MM-DD`), model or scope.
    pub group: String,
    /// USD.
    pub cost_usd: f64,
    /// Distinct logical calls among the costed rows.
    pub calls: u64,
    /// Summed over the costed rows.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// The answer of `GET /admin/spend`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendReport {
    pub data: Vec<SpendRow>,
    /// USD, the sum of the groups.
    pub total_usd: f64,
    /// RFC 3339, inclusive.
    pub from: String,
    /// RFC 3339, exclusive.
    pub to: String,
}

/// The spend SQL for SQLite (`created_at` is Unix ms) grouped by `$group`.
macro_rules! sqlite_sql {
    ($group:literal) => {
        concat!(
            "SELECT ",
            $group,
            " AS grp, SUM(cost), COUNT(DISTINCT logical_call_id), ",
            "COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0) ",
            "FROM llm_calls WHERE cost IS NOT NULL AND created_at >= $1 AND created_at < $2 ",
            "AND (CAST($3 AS TEXT) IS NULL OR key_id = $3) ",
            "AND (CAST($4 AS TEXT) IS NULL OR team_id = $4) ",
            "GROUP BY grp ORDER BY grp"
        )
    };
}

/// The spend SQL for Postgres (`created_at` is `timestamptz`) grouped by `$group`.
macro_rules! pg_sql {
    ($group:literal) => {
        concat!(
            "SELECT ",
            $group,
            " AS grp, SUM(cost)::float8, COUNT(DISTINCT logical_call_id), ",
            "COALESCE(SUM(prompt_tokens), 0)::bigint, COALESCE(SUM(completion_tokens), 0)::bigint ",
            "FROM llm_calls WHERE cost IS NOT NULL ",
            "AND created_at >= to_timestamp(0) + $1::bigint * interval '1 millisecond' ",
            "AND created_at < to_timestamp(0) + $2::bigint * interval '1 millisecond' ",
            "AND ($3::text IS NULL OR key_id = $3) AND ($4::text IS NULL OR team_id = $4) ",
            "GROUP BY grp ORDER BY grp"
        )
    };
}

fn sql(postgres: bool, group: GroupBy) -> &'static str {
    match (postgres, group) {
        (false, GroupBy::Day) => {
            sqlite_sql!("strftime('%Y-%m-%d', created_at / 1000, 'unixepoch')")
        }
        (false, GroupBy::Model) => sqlite_sql!("COALESCE(model, '')"),
        (false, GroupBy::Scope) => sqlite_sql!("scope"),
        (true, GroupBy::Day) => pg_sql!("to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"),
        (true, GroupBy::Model) => pg_sql!("COALESCE(model, '')"),
        (true, GroupBy::Scope) => pg_sql!("scope"),
    }
}

type Group = (String, f64, i64, i64, i64);

/// The spend of `q` from the ledger in the store's database (no table yet = no spend).
pub async fn spend(store: &KeyStore, q: &SpendQuery) -> Result<SpendReport, KeysError> {
    let sql = sql(store.is_postgres(), q.group_by);
    let rows: Vec<Group> = if let Some(pool) = store.sqlite_pool() {
        if !sqlite_has_ledger(pool).await? {
            Vec::new()
        } else {
            sqlx::query_as(sql)
                .bind(q.from_ms)
                .bind(q.to_ms)
                .bind(q.key.as_deref())
                .bind(q.team.as_deref())
                .fetch_all(pool)
                .await?
        }
    } else if let Some(pool) = store.pg_pool() {
        if !pg_has_ledger(pool).await? {
            Vec::new()
        } else {
            sqlx::query_as(sql)
                .bind(q.from_ms)
                .bind(q.to_ms)
                .bind(q.key.as_deref())
                .bind(q.team.as_deref())
                .fetch_all(pool)
                .await?
        }
    } else {
        Vec::new()
    };
    let data: Vec<SpendRow> = rows
        .into_iter()
        .map(|(group, cost, calls, p, c)| SpendRow {
            group,
            cost_usd: cost,
            calls: u64::try_from(calls).unwrap_or(0),
            prompt_tokens: u64::try_from(p).unwrap_or(0),
            completion_tokens: u64::try_from(c).unwrap_or(0),
        })
        .collect();
    Ok(SpendReport {
        total_usd: data.iter().map(|r| r.cost_usd).sum(),
        data,
        from: format_rfc3339(q.from_ms),
        to: format_rfc3339(q.to_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_parameters_parse_and_name_their_errors() {
        let now = 1_796_169_600_000 + 5_000;
        let q = SpendQuery::parse(None, None, None, None, None, now).unwrap();
        assert_eq!(
            (q.from_ms, q.to_ms, q.group_by),
            (now - 30 * 86_400_000, now, GroupBy::Day)
        );
        let q = SpendQuery::parse(
            Some("key_x".into()),
            None,
            Some("2026-12-01"),
            Some("2026-12-02"),
            Some("model"),
            now,
        )
        .unwrap();
        assert_eq!(q.from_ms, 1_796_083_200_000);
        assert_eq!(q.to_ms, 1_796_256_000_000);
        assert_eq!(q.group_by, GroupBy::Model);
        let q = SpendQuery::parse(
            None,
            None,
            Some("2026-12-02T00:00:00Z"),
            None,
            Some("scope"),
            now,
        )
        .unwrap();
        assert_eq!(q.from_ms, 1_796_169_600_000);
        let param = |r: Result<SpendQuery, KeysError>| r.unwrap_err().param().map(String::from);
        assert_eq!(
            param(SpendQuery::parse(
                None,
                None,
                Some("yesterday"),
                None,
                None,
                now
            )),
            Some("from".into())
        );
        assert_eq!(
            param(SpendQuery::parse(
                None,
                None,
                None,
                Some("2026-13-01"),
                None,
                now
            )),
            Some("to".into())
        );
        assert_eq!(
            param(SpendQuery::parse(None, None, None, None, Some("hour"), now)),
            Some("group_by".into())
        );
        assert_eq!(
            param(SpendQuery::parse(
                None,
                None,
                Some("2026-12-03"),
                Some("2026-12-01"),
                None,
                now
            )),
            Some("to".into())
        );
    }
}
