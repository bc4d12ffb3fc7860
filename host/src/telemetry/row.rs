//! The telemetry row (docs/telemetry.md#rows): one per attempt, one terminal row per logical call
//! (or one cache-hit row). `None` is stored as NULL and means "unknown", never zero.

use std::sync::Arc;

/// How trustworthy the token counts are (docs/telemetry.md#usage-source).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UsageSource {
    /// The upstream reported usage for a complete answer.
    Measured,
    /// Usage was reported but the answer was salvaged from a stream without `[DONE]`.
    Estimated,
    /// No usage is known (no usage report, a failed attempt, a failed call).
    Unavailable,
}

impl UsageSource {
    /// The stored value.
    pub fn as_str(self) -> &'static str {
        match self {
            UsageSource::Measured => "measured",
            UsageSource::Estimated => "estimated",
            UsageSource::Unavailable => "unavailable",
        }
    }
}

/// What a row describes (the `event` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// One upstream attempt.
    Attempt,
    /// The end of a logical call that succeeded through the upstream.
    TerminalSuccess,
    /// The end of a logical call that failed.
    TerminalFailure,
    /// The end of a logical call answered from the response cache (no upstream attempt).
    CacheHit,
}

impl RowKind {
    /// The stored value of `event`.
    pub fn as_str(self) -> &'static str {
        match self {
            RowKind::Attempt => "attempt",
            RowKind::TerminalSuccess => "terminal_success",
            RowKind::TerminalFailure => "terminal_failure",
            RowKind::CacheHit => "cache_hit",
        }
    }
}

/// One row of `llm_calls`. Build it with [`CallRow::new`] and set what is known.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRow {
    /// Unique id of this row: the attempt id, or the logical call id for terminal and
    /// cache-hit rows.
    pub call_id: String,
    /// The logical call this row belongs to (`x-pgw-call-id`).
    pub logical_call_id: String,
    /// `x-pgw-parent-call-id`.
    pub parent_call_id: Option<String>,
    /// `x-pgw-session-id`.
    pub session_id: Option<String>,
    /// The `event` column.
    pub kind: RowKind,
    /// Scope name (e.g. `LLM`).
    pub scope: String,
    /// Source that served the attempt (terminal rows: the answering or last-tried source).
    pub source_name: Option<String>,
    /// Provider of that source.
    pub provider: Option<String>,
    /// The configured upstream model of that source (the pricing key).
    pub model: Option<String>,
    /// The model the upstream reported.
    pub model_reported: Option<String>,
    /// `error_type` (e.g. `transient`, `source_dead`, `scope_unavailable`); none on success.
    pub error_type: Option<String>,
    /// The error message; none on success.
    pub error: Option<String>,
    /// Prompt tokens (the upstream's last usage report).
    pub prompt_tokens: Option<u64>,
    /// Completion tokens, reasoning tokens included.
    pub completion_tokens: Option<u64>,
    /// Prompt tokens served from the provider's prompt cache; `None` = not reported.
    pub cached_prompt_tokens: Option<u64>,
    /// Prompt tokens written to the provider's prompt cache (`cache_write_tokens`).
    pub cache_write_tokens: Option<u64>,
    /// Reasoning tokens (part of `completion_tokens`); `None` = not reported.
    pub reasoning_tokens: Option<u64>,
    /// How trustworthy the token counts are.
    pub usage_source: UsageSource,
    /// Milliseconds of upstream work this row describes: the attempt (attempt rows), the
    /// answering attempt (terminal success), the last attempt (terminal failure; `None`
    /// when none ran); `None` on cache hits.
    pub latency_ms: Option<u64>,
    /// Milliseconds from the attempt's request to its first token.
    pub ttft_ms: Option<f64>,
    /// Longest gap between two tokens of the attempt, in milliseconds.
    pub max_inter_token_ms: Option<f64>,
    /// Attempts made by the logical call (terminal and cache-hit rows).
    pub attempts: Option<u32>,
    /// Milliseconds from the logical call's start to its end (terminal and cache-hit rows).
    pub total_latency_ms: Option<u64>,
    /// Answered from PolyGateway's own response cache (not the provider's prompt cache).
    pub cache_hit: bool,
    /// The request messages as JSON, binary parts replaced by their digest, text parts
    /// capped by `PGW_TELEMETRY_TEXT_CAP`; shared by every row of a call.
    pub messages: Option<Arc<str>>,
    /// Answer text (capped).
    pub response: Option<String>,
    /// Reasoning text (capped).
    pub thinking: Option<String>,
    /// Cost in the pricing file's currency (per-million prices × tokens); set by the
    /// telemetry helper, on the row that produced the answer only.
    pub cost: Option<f64>,
    /// Sampling parameters as JSON: the call's overlay (without `response_format`), merged
    /// over the source's `EXTRA_BODY` on attempt rows; `None` when empty.
    pub sampling: Option<String>,
    /// `x-pgw-tenant-id`; stored as `''` when absent (docs/telemetry.md#caller-dimensions).
    pub tenant_id: Option<String>,
    /// `x-pgw-meta` as JSON; stored as `{}` when absent.
    pub meta: Option<String>,
    /// The client dialect of a chat call (`chat_completions`, `messages`, `responses`,
    /// `embedded`); `None` for embeddings and OCR calls.
    pub ingress: Option<&'static str>,
    /// The virtual key that made the call (docs/keys.md); `None` for a static
    /// `PGW_API_KEYS` key, an embedded call or no auth.
    pub key_id: Option<Arc<str>>,
    /// The team of that key, when it has one.
    pub team_id: Option<Arc<str>>,
    /// Unix time in milliseconds.
    pub created_at_ms: i64,
}

impl CallRow {
    /// A row of `kind` with ids and scope set and everything else unknown.
    pub fn new(
        kind: RowKind,
        call_id: impl Into<String>,
        logical_call_id: impl Into<String>,
        scope: impl Into<String>,
        created_at_ms: i64,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            logical_call_id: logical_call_id.into(),
            parent_call_id: None,
            session_id: None,
            kind,
            scope: scope.into(),
            source_name: None,
            provider: None,
            model: None,
            model_reported: None,
            error_type: None,
            error: None,
            prompt_tokens: None,
            completion_tokens: None,
            cached_prompt_tokens: None,
            cache_write_tokens: None,
            reasoning_tokens: None,
            usage_source: UsageSource::Unavailable,
            latency_ms: None,
            ttft_ms: None,
            max_inter_token_ms: None,
            attempts: None,
            total_latency_ms: None,
            cache_hit: false,
            messages: None,
            response: None,
            thinking: None,
            cost: None,
            sampling: None,
            tenant_id: None,
            meta: None,
            ingress: None,
            key_id: None,
            team_id: None,
            created_at_ms,
        }
    }
}
