//! Spend and tokens over a time range, grouped by key, team, scope, source or model: the
//! sums of the rows that carry usage and cost (attempt and cache-hit rows; a terminal row
//! repeats its answering attempt's usage, so it is never counted).

use serde::Serialize;

use super::{Ledger, LedgerError, Pool};
use crate::keys::{ONE_DAY_MS, parse_range_bound, range_bound_error};

/// What spend lines are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpendGroup {
    Key,
    Team,
    Scope,
    Source,
    Model,
}

impl SpendGroup {
    /// `key`, `team`, `scope`, `source` or `model`.
    pub fn parse(s: &str) -> Result<Self, LedgerError> {
        Ok(match s {
            "key" => Self::Key,
            "team" => Self::Team,
            "scope" => Self::Scope,
            "source" => Self::Source,
            "model" => Self::Model,
            other => {
                return Err(LedgerError::invalid(
                    "group_by",
                    format!("expected key, team, scope, source or model, got `{other}`"),
                ));
            }
        })
    }
}

/// `[from_ms, to_ms)` in Unix ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpendRange {
    pub from_ms: i64,
    pub to_ms: i64,
}

impl SpendRange {
    /// From `from`/`to` query values: RFC 3339 or `YYYY-MM-DD` (a `to` date includes that
    /// day). `to` defaults to `now_ms`, `from` to 24 hours before `to`. Errors name the
    /// parameter.
    pub fn parse(from: Option<&str>, to: Option<&str>, now_ms: i64) -> Result<Self, LedgerError> {
        let instant = |param: &'static str, s: &str, end: bool| {
            parse_range_bound(s, end)
                .ok_or_else(|| LedgerError::invalid(param, range_bound_error(s)))
        };
        let to_ms = match to {
            Some(s) => instant("to", s, true)?,
            None => now_ms,
        };
        let from_ms = match from {
            Some(s) => instant("from", s, false)?,
            None => to_ms.saturating_sub(ONE_DAY_MS),
        };
        if to_ms < from_ms {
            return Err(LedgerError::invalid("to", "must not be before `from`"));
        }
        Ok(Self { from_ms, to_ms })
    }
}

/// One group's sums.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct SpendLine {
    /// The key id, team id, scope, source or model; `""` for rows without one (a static
    /// key's calls have no key id).
    pub group: String,
    /// `None` when no row of the group carries a cost (no pricing for its model).
    pub cost: Option<f64>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// Logical calls with at least one counted row.
    pub calls: i64,
}

macro_rules! spend_sql {
    ($col:literal, sqlite) => {
        concat!(
            "SELECT COALESCE(",
            $col,
            ", '') AS \"group\", SUM(cost) AS cost, \
             CAST(COALESCE(SUM(prompt_tokens), 0) AS INTEGER) AS prompt_tokens, \
             CAST(COALESCE(SUM(completion_tokens), 0) AS INTEGER) AS completion_tokens, \
             COUNT(DISTINCT logical_call_id) AS calls FROM llm_calls \
             WHERE event IN ('attempt', 'cache_hit') AND created_at >= $1 AND created_at < $2 \
             GROUP BY 1 ORDER BY SUM(cost) IS NULL, SUM(cost) DESC, 1 LIMIT 200"
        )
    };
    ($col:literal, pg) => {
        concat!(
            "SELECT COALESCE(",
            $col,
            ", '') AS \"group\", SUM(cost)::float8 AS cost, \
             COALESCE(SUM(prompt_tokens), 0)::bigint AS prompt_tokens, \
             COALESCE(SUM(completion_tokens), 0)::bigint AS completion_tokens, \
             COUNT(DISTINCT logical_call_id) AS calls FROM llm_calls \
             WHERE event IN ('attempt', 'cache_hit') \
             AND created_at >= to_timestamp(0) + $1::bigint * interval '1 millisecond' \
             AND created_at < to_timestamp(0) + $2::bigint * interval '1 millisecond' \
             GROUP BY 1 ORDER BY SUM(cost) IS NULL, SUM(cost) DESC, 1 LIMIT 200"
        )
    };
}

fn sql(group: SpendGroup, postgres: bool) -> &'static str {
    match (group, postgres) {
        (SpendGroup::Key, false) => spend_sql!("key_id", sqlite),
        (SpendGroup::Team, false) => spend_sql!("team_id", sqlite),
        (SpendGroup::Scope, false) => spend_sql!("scope", sqlite),
        (SpendGroup::Source, false) => spend_sql!("source_name", sqlite),
        (SpendGroup::Model, false) => spend_sql!("model", sqlite),
        (SpendGroup::Key, true) => spend_sql!("key_id", pg),
        (SpendGroup::Team, true) => spend_sql!("team_id", pg),
        (SpendGroup::Scope, true) => spend_sql!("scope", pg),
        (SpendGroup::Source, true) => spend_sql!("source_name", pg),
        (SpendGroup::Model, true) => spend_sql!("model", pg),
    }
}

impl Ledger {
    /// Spend lines in `range` grouped by `group`, the largest cost first (at most 200).
    ///
    /// Errors: [`LedgerError::Off`] without a telemetry backend, `Database` when it fails.
    pub async fn spend(
        &self,
        group: SpendGroup,
        range: SpendRange,
    ) -> Result<Vec<SpendLine>, LedgerError> {
        let Some(pool) = self.table().await? else {
            return Ok(Vec::new());
        };
        Ok(match pool {
            Pool::Sqlite(p) => {
                sqlx::query_as::<_, SpendLine>(sql(group, false))
                    .bind(range.from_ms)
                    .bind(range.to_ms)
                    .fetch_all(p)
                    .await?
            }
            Pool::Postgres(p) => {
                sqlx::query_as::<_, SpendLine>(sql(group, true))
                    .bind(range.from_ms)
                    .bind(range.to_ms)
                    .fetch_all(p)
                    .await?
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_groups_parse_and_name_their_errors() {
        let day = SpendRange::parse(Some("2026-12-01"), Some("2026-12-01"), 0).unwrap();
        assert_eq!(day.to_ms - day.from_ms, ONE_DAY_MS);
        let default = SpendRange::parse(None, None, 10 * ONE_DAY_MS).unwrap();
        assert_eq!(
            (default.from_ms, default.to_ms),
            (9 * ONE_DAY_MS, 10 * ONE_DAY_MS)
        );
        let e = SpendRange::parse(Some("yesterday"), None, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "from: expected an RFC 3339 timestamp or a YYYY-MM-DD date, got `yesterday`"
        );
        let e = SpendRange::parse(Some("2026-12-02"), Some("2026-11-30"), 0).unwrap_err();
        assert_eq!(e.to_string(), "to: must not be before `from`");
        assert_eq!(SpendGroup::parse("team").unwrap(), SpendGroup::Team);
        assert_eq!(
            SpendGroup::parse("user").unwrap_err().to_string(),
            "group_by: expected key, team, scope, source or model, got `user`"
        );
    }
}
