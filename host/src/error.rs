//! The errors a call can end with. `proxy::errors` maps them to HTTP in one place; the
//! embedded API returns them as they are.

use std::collections::BTreeMap;

/// Why a scope could not serve a call. Three of them mean the call gave up because of rate
/// limiting ([`UnavailableReason::is_rate_limit`]); the proxy answers those with 429.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnavailableReason {
    /// Every eligible source's breaker is open and `CIRCUIT_OPEN=fail_fast`, or the call
    /// waited for a cooldown (`CIRCUIT_OPEN=wait`) until its stall window or deadline left no
    /// room for the rest.
    CircuitOpen,
    /// `RETRY__MAX_ATTEMPTS` counted attempts failed, or a non-429 failure's retry hint is
    /// longer than the call has left of its stall window and deadline.
    RetryExhausted,
    /// The call spent its stall window waiting on rate limits (429 back-offs, quota waits)
    /// while the scope produced no answer.
    Stalled,
    /// Every eligible source is over a quota gate and `QUOTA_FULL=fail_fast`, or the next
    /// opening is further away than the call has left of its stall window and deadline.
    QuotaExhausted,
    /// An upstream answered 429 with a retry hint longer than the call has left of its stall
    /// window and deadline: the call ends at once instead of sleeping into a certain failure.
    RateLimited,
    /// Every source is excluded for this call (dead, unsupported) or none can serve it.
    NoSources,
    /// The shared state store did not answer; admission fails closed.
    GovernanceBackendDown,
}

impl UnavailableReason {
    /// The wire name (`reason` in the error body).
    pub fn as_str(self) -> &'static str {
        match self {
            UnavailableReason::CircuitOpen => "circuit_open",
            UnavailableReason::RetryExhausted => "retry_exhausted",
            UnavailableReason::Stalled => "stalled",
            UnavailableReason::QuotaExhausted => "quota_exhausted",
            UnavailableReason::RateLimited => "rate_limited",
            UnavailableReason::NoSources => "no_sources",
            UnavailableReason::GovernanceBackendDown => "governance_backend_down",
        }
    }

    /// Whether the call gave up because of rate limiting (an upstream's 429s or the scope's
    /// own quotas), as opposed to sources failing or being unreachable.
    pub fn is_rate_limit(self) -> bool {
        match self {
            UnavailableReason::Stalled
            | UnavailableReason::QuotaExhausted
            | UnavailableReason::RateLimited => true,
            UnavailableReason::CircuitOpen
            | UnavailableReason::RetryExhausted
            | UnavailableReason::NoSources
            | UnavailableReason::GovernanceBackendDown => false,
        }
    }
}

/// What the structured-output ladder saw when it gave up: the model's
/// last answer as it came, why repair failed (if it did) or the first ways the repaired JSON
/// broke the schema (if it did not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructuredFailure {
    /// The strategy that ran (its `describe` name, e.g. `json-repair`).
    pub strategy: String,
    /// The last answer's text, unrepaired.
    pub raw_text: String,
    /// Why the strategy could not turn it into JSON; `None` when it could.
    pub repair_error: Option<String>,
    /// The first validation errors of the repaired JSON (each `"<JSON pointer>: <message>"`,
    /// at most three, each at most 200 characters); empty when repair failed.
    pub validation_errors: Vec<String>,
    /// Re-asks made before giving up (`{SCOPE}__STRUCTURED__MAX_RETRIES` of them).
    pub reasks: u32,
}

/// How one call ended in failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// The client's request is malformed; `param` names the field or header.
    #[error("{message}")]
    InvalidRequest {
        param: Option<String>,
        message: String,
    },
    /// The `model` names no scope alias.
    #[error("model `{model}` does not exist (known: {known})")]
    ModelNotFound { model: String, known: String },
    /// The upstream refused the request (its 400-class answer); its message is kept.
    #[error("upstream {source_name} rejected the request (HTTP {status}): {message}")]
    UpstreamRejected {
        source_name: String,
        status: u16,
        message: String,
        code: Option<String>,
    },
    /// A healthy service returned content that cannot be used.
    #[error("result invalid from {source_name}: {message}")]
    ResultInvalid {
        source_name: String,
        message: String,
        /// Set when the structured-output ladder gave up: what it saw (HTTP 422 body).
        structured: Option<Box<StructuredFailure>>,
    },
    /// A plugin trapped or ran out of its budget.
    #[error("{message}")]
    PluginFault { plugin: String, message: String },
    /// No source could serve the call.
    #[error("scope {scope} unavailable ({}): {message}", reason.as_str())]
    ScopeUnavailable {
        scope: String,
        reason: UnavailableReason,
        /// Seconds until a retry is known to make sense; 0 = now or unknown. On the wire it
        /// is also the `Retry-After` header, rounded up to whole seconds.
        retry_after_s: f64,
        /// Source name → short reason (`network_error`, `timeout`, `rate_limited`,
        /// `source_dead`, `server_error`, …).
        per_source_reasons: BTreeMap<String, String>,
        message: String,
    },
    /// The call's deadline passed.
    #[error("call deadline of {deadline_s} s exceeded")]
    DeadlineExceeded { deadline_s: f64 },
    /// A stream already delivered to the client broke; it ends with this in-band error and
    /// is never presented as complete.
    #[error("stream from {source_name} interrupted after output was sent: {message}")]
    StreamInterrupted {
        source_name: String,
        message: String,
    },
    /// The call's virtual key may not use this model: the alias is not among its scopes
    /// (docs/keys.md). HTTP 403 `permission_error`, `param: "model"`.
    #[error("API key {key_id} may not use model `{model}`")]
    ModelNotAllowed { key_id: String, model: String },
    /// A virtual key's or its team's own RPM, TPM or concurrency limit is full
    /// (docs/keys.md#limits). HTTP 429 `rate_limit_exceeded`, code `key_rate_limited`, with
    /// `Retry-After`.
    #[error("{owner} rate limit reached ({gate}); retry after {retry_after_s} s")]
    KeyRateLimited {
        /// `key <id>` or `team <id>`.
        owner: String,
        /// `rpm`, `tpm` or `max_concurrency`.
        gate: &'static str,
        /// Seconds until the window has room (a concurrency slot: 1, a guess).
        retry_after_s: f64,
    },
    /// A spend budget of the call's key or team cannot take this call's reservation (its
    /// most it can cost) before the period resets (docs/budgets.md). HTTP 429
    /// `budget_exceeded`, `x-should-retry: false`, `Retry-After` the seconds to the reset.
    #[error(
        "{owner} {period} budget exceeded: {total_usd:.6} of {limit_usd:.6} USD spent or reserved, and this call may cost up to {needed_usd:.6} USD{}",
        match resets_at { Some(t) => format!("; it resets at {t}"), None => String::new() }
    )]
    BudgetExceeded {
        /// `key <id>` or `team <id>`.
        owner: String,
        /// `daily`, `weekly`, `monthly` or `total`.
        period: &'static str,
        limit_usd: f64,
        /// Spent plus reserved by calls in flight, this period.
        total_usd: f64,
        /// This call's reservation.
        needed_usd: f64,
        /// When the period resets, RFC 3339 UTC (`None` for a total budget).
        resets_at: Option<String>,
        /// Seconds until then (`None` for a total budget).
        retry_after_s: Option<f64>,
    },
    /// The gateway itself failed (a bug or an exhausted resource), not the upstream.
    #[error("internal error: {0}")]
    Internal(String),
}

impl GatewayError {
    /// Shorthand for a 400 naming the field.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        GatewayError::InvalidRequest {
            param: Some(param.into()),
            message: message.into(),
        }
    }

    /// The telemetry `error_type` of this error.
    pub fn kind(&self) -> &'static str {
        match self {
            GatewayError::InvalidRequest { .. } => "invalid_request",
            GatewayError::ModelNotFound { .. } => "model_not_found",
            GatewayError::UpstreamRejected { .. } => "request_rejected",
            GatewayError::ResultInvalid { .. } => "result_invalid",
            GatewayError::PluginFault { .. } => "plugin_fault",
            GatewayError::ScopeUnavailable { .. } => "scope_unavailable",
            GatewayError::DeadlineExceeded { .. } => "deadline_exceeded",
            GatewayError::StreamInterrupted { .. } => "stream_interrupted",
            GatewayError::ModelNotAllowed { .. } => "model_not_allowed",
            GatewayError::KeyRateLimited { .. } => "key_rate_limited",
            GatewayError::BudgetExceeded { .. } => "budget_exceeded",
            GatewayError::Internal(_) => "internal",
        }
    }

    /// Seconds a client should wait before trying again, when the error knows (the
    /// `Retry-After` header of every dialect): an unavailable scope's hint, a key's rate
    /// window, a budget's reset.
    pub fn retry_after_s(&self) -> Option<f64> {
        match self {
            GatewayError::ScopeUnavailable { retry_after_s, .. }
            | GatewayError::KeyRateLimited { retry_after_s, .. } => Some(*retry_after_s),
            GatewayError::BudgetExceeded { retry_after_s, .. } => *retry_after_s,
            _ => None,
        }
    }
}
