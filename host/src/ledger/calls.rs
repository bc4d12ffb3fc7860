//! The call list (terminal and cache-hit rows, newest first, filtered by scope, source,
//! status and key) and one call's rows: its attempts in order and its terminal row.

use serde::Serialize;

use super::{Ledger, LedgerError, Pool};

/// Calls one list returns at most.
pub const MAX_LIMIT: u32 = 500;

/// How a logical call ended (the terminal row's `event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    Success,
    Failure,
    CacheHit,
}

impl CallStatus {
    /// `success`, `failure` or `cache_hit`.
    pub fn parse(s: &str) -> Result<Self, LedgerError> {
        match s {
            "success" => Ok(Self::Success),
            "failure" => Ok(Self::Failure),
            "cache_hit" => Ok(Self::CacheHit),
            other => Err(LedgerError::invalid(
                "status",
                format!("expected success, failure or cache_hit, got `{other}`"),
            )),
        }
    }

    fn event(self) -> &'static str {
        match self {
            Self::Success => "terminal_success",
            Self::Failure => "terminal_failure",
            Self::CacheHit => "cache_hit",
        }
    }
}

/// The filters of a call list; `None` = any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallFilter {
    pub scope: Option<String>,
    pub source: Option<String>,
    pub status: Option<CallStatus>,
    /// A virtual key id.
    pub key: Option<String>,
    /// Only calls that ended before this Unix ms (the next page's cursor).
    pub before_ms: Option<i64>,
    /// At most this many (1..=[`MAX_LIMIT`]).
    pub limit: u32,
}

/// One logical call of the list.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct CallSummary {
    /// The logical call id (`x-pgw-call-id`).
    pub call_id: String,
    /// When the call ended, Unix ms.
    pub ended_at_ms: i64,
    /// `success`, `failure` or `cache_hit`.
    pub status: String,
    pub scope: String,
    /// The answering source, or the last one tried.
    pub source: Option<String>,
    pub model: Option<String>,
    pub error_type: Option<String>,
    pub error: Option<String>,
    pub attempts: Option<i64>,
    /// Milliseconds from the call's start to its end.
    pub total_latency_ms: Option<i64>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    pub key_id: Option<String>,
    pub team_id: Option<String>,
    /// The ingress dialect (`chat_completions`, `messages`, `responses`, …).
    pub ingress: Option<String>,
}

/// One upstream attempt of a call.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct AttemptRow {
    /// 1 for the first attempt (filled from the rows' order).
    #[sqlx(default)]
    pub attempt: i64,
    /// The attempt id.
    pub attempt_id: String,
    pub at_ms: i64,
    pub source: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub model_reported: Option<String>,
    /// `None` when the attempt answered.
    pub error_type: Option<String>,
    pub error: Option<String>,
    pub latency_ms: Option<i64>,
    pub ttft_ms: Option<f64>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    pub reasoning_tokens: Option<i64>,
    pub usage_source: String,
    pub cost: Option<f64>,
}

/// One call: its terminal row and its attempts in the order they ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallDetail {
    pub call: CallSummary,
    pub attempts: Vec<AttemptRow>,
    /// The attempts' cost summed; `None` when none carries one.
    pub cost: Option<f64>,
}

// The columns of a call summary, from a terminal or cache-hit row, per backend (macros so
// that every query is one `concat!`ed constant).
macro_rules! summary_sqlite {
    () => {
        "SELECT logical_call_id AS call_id, created_at AS ended_at_ms, \
         CASE event WHEN 'terminal_success' THEN 'success' WHEN 'terminal_failure' THEN 'failure' \
         ELSE 'cache_hit' END AS status, scope, source_name AS source, model, error_type, error, \
         attempts, total_latency_ms, prompt_tokens, completion_tokens, key_id, team_id, ingress \
         FROM llm_calls WHERE event IN ('terminal_success', 'terminal_failure', 'cache_hit')"
    };
}
macro_rules! summary_pg {
    () => {
        "SELECT logical_call_id AS call_id, \
         (EXTRACT(EPOCH FROM created_at) * 1000)::bigint AS ended_at_ms, \
         CASE event WHEN 'terminal_success' THEN 'success' WHEN 'terminal_failure' THEN 'failure' \
         ELSE 'cache_hit' END AS status, scope, source_name AS source, model, error_type, error, \
         attempts, total_latency_ms, prompt_tokens, completion_tokens, key_id, team_id, ingress \
         FROM llm_calls WHERE event IN ('terminal_success', 'terminal_failure', 'cache_hit')"
    };
}

/// The list query of each backend; a `NULL` parameter matches any value.
const LIST_SQLITE: &str = concat!(
    summary_sqlite!(),
    " AND ($1 IS NULL OR scope = $1) AND ($2 IS NULL OR source_name = $2) \
     AND ($3 IS NULL OR event = $3) AND ($4 IS NULL OR key_id = $4) \
     AND ($5 IS NULL OR created_at < $5) ORDER BY created_at DESC, call_id DESC LIMIT $6"
);
const LIST_PG: &str = concat!(
    summary_pg!(),
    " AND ($1::text IS NULL OR scope = $1) AND ($2::text IS NULL OR source_name = $2) \
     AND ($3::text IS NULL OR event = $3) AND ($4::text IS NULL OR key_id = $4) \
     AND ($5::bigint IS NULL OR created_at < to_timestamp(0) + $5::bigint * interval '1 millisecond') \
     ORDER BY created_at DESC, call_id DESC LIMIT $6"
);
const ONE_SQLITE: &str = concat!(summary_sqlite!(), " AND logical_call_id = $1");
const ONE_PG: &str = concat!(summary_pg!(), " AND logical_call_id = $1");

const ATTEMPTS_SQLITE: &str = "SELECT call_id AS attempt_id, created_at AS at_ms, \
    source_name AS source, provider, model, model_reported, error_type, error, latency_ms, \
    ttft_ms, prompt_tokens, completion_tokens, reasoning_tokens, usage_source, cost \
    FROM llm_calls WHERE logical_call_id = $1 AND event = 'attempt' \
    ORDER BY created_at, call_id";
const ATTEMPTS_PG: &str = "SELECT call_id AS attempt_id, \
    (EXTRACT(EPOCH FROM created_at) * 1000)::bigint AS at_ms, \
    source_name AS source, provider, model, model_reported, error_type, error, latency_ms, \
    ttft_ms, prompt_tokens, completion_tokens, reasoning_tokens, usage_source, cost \
    FROM llm_calls WHERE logical_call_id = $1 AND event = 'attempt' \
    ORDER BY created_at, call_id";

impl Ledger {
    /// The calls matching `f`, newest first. Empty while the ledger has no table.
    ///
    /// Errors: [`LedgerError::Off`] without a telemetry backend, `Database` when it fails.
    pub async fn calls(&self, f: &CallFilter) -> Result<Vec<CallSummary>, LedgerError> {
        let Some(pool) = self.table().await? else {
            return Ok(Vec::new());
        };
        let limit = i64::from(f.limit.clamp(1, MAX_LIMIT));
        let status = f.status.map(CallStatus::event);
        let rows = match pool {
            Pool::Sqlite(p) => {
                sqlx::query_as::<_, CallSummary>(LIST_SQLITE)
                    .bind(f.scope.as_deref())
                    .bind(f.source.as_deref())
                    .bind(status)
                    .bind(f.key.as_deref())
                    .bind(f.before_ms)
                    .bind(limit)
                    .fetch_all(p)
                    .await?
            }
            Pool::Postgres(p) => {
                sqlx::query_as::<_, CallSummary>(LIST_PG)
                    .bind(f.scope.as_deref())
                    .bind(f.source.as_deref())
                    .bind(status)
                    .bind(f.key.as_deref())
                    .bind(f.before_ms)
                    .bind(limit)
                    .fetch_all(p)
                    .await?
            }
        };
        Ok(rows)
    }

    /// One logical call with its attempts; `None` when no terminal row has that id.
    pub async fn call(&self, call_id: &str) -> Result<Option<CallDetail>, LedgerError> {
        let Some(pool) = self.table().await? else {
            return Ok(None);
        };
        let (call, mut attempts) = match pool {
            Pool::Sqlite(p) => (
                sqlx::query_as::<_, CallSummary>(ONE_SQLITE)
                    .bind(call_id)
                    .fetch_optional(p)
                    .await?,
                sqlx::query_as::<_, AttemptRow>(ATTEMPTS_SQLITE)
                    .bind(call_id)
                    .fetch_all(p)
                    .await?,
            ),
            Pool::Postgres(p) => (
                sqlx::query_as::<_, CallSummary>(ONE_PG)
                    .bind(call_id)
                    .fetch_optional(p)
                    .await?,
                sqlx::query_as::<_, AttemptRow>(ATTEMPTS_PG)
                    .bind(call_id)
                    .fetch_all(p)
                    .await?,
            ),
        };
        let Some(call) = call else { return Ok(None) };
        for (i, a) in attempts.iter_mut().enumerate() {
            a.attempt = i as i64 + 1;
        }
        let costs: Vec<f64> = attempts.iter().filter_map(|a| a.cost).collect();
        let cost = (!costs.is_empty()).then(|| costs.iter().sum());
        Ok(Some(CallDetail {
            call,
            attempts,
            cost,
        }))
    }
}
