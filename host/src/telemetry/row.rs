//! The telemetry row (first cut of reference §7.8's schema). `None` is stored as NULL and
//! means "unknown", never zero.

/// How trustworthy the token counts are (reference plan-est-tokens-decoupling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UsageSource {
    /// The upstream reported usage for a complete answer.
    Measured,
    /// Usage was reported but the answer was salvaged from a stream without `[DONE]`.
    Estimated,
    /// No usage is known.
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

/// What a row describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// One upstream attempt.
    Attempt,
    /// The end of a logical call that succeeded.
    TerminalSuccess,
    /// The end of a logical call that failed.
    TerminalFailure,
}

impl RowKind {
    /// The stored value of `event`.
    pub fn as_str(self) -> &'static str {
        match self {
            RowKind::Attempt => "attempt",
            RowKind::TerminalSuccess => "terminal_success",
            RowKind::TerminalFailure => "terminal_failure",
        }
    }
}

/// One row of `llm_calls`.
#[derive(Debug, Clone)]
pub struct CallRow {
    /// Unique id of this row: the attempt id, or the logical call id for terminal rows.
    pub call_id: String,
    /// The logical call this row belongs to.
    pub logical_call_id: String,
    pub parent_call_id: Option<String>,
    pub session_id: Option<String>,
    pub kind: RowKind,
    pub scope: String,
    pub source_name: Option<String>,
    pub provider: Option<String>,
    /// The configured upstream model.
    pub model: Option<String>,
    /// The model the upstream reported.
    pub model_reported: Option<String>,
    /// `error_type` (e.g. `transient`, `source_dead`, `scope_unavailable`); none on success.
    pub error_type: Option<String>,
    pub error: Option<String>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub cached_prompt_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub usage_source: UsageSource,
    /// Milliseconds of this attempt (attempt rows) or of the whole call (terminal rows).
    pub latency_ms: u64,
    pub ttft_ms: Option<f64>,
    pub max_inter_token_ms: Option<f64>,
    /// Attempts made by the logical call (terminal rows).
    pub attempts: Option<u32>,
    /// Unix time in milliseconds.
    pub created_at_ms: i64,
}
