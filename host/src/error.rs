//! The errors a call can end with (DESIGN §6–§7). `proxy::errors` maps them to HTTP in one
//! place; the embedded API returns them as they are.

use std::collections::BTreeMap;

/// Why a scope could not serve a call (reference §6.1 scope-level reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnavailableReason {
    CircuitOpen,
    RetryExhausted,
    Stalled,
    QuotaExhausted,
    NoSources,
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
            UnavailableReason::NoSources => "no_sources",
            UnavailableReason::GovernanceBackendDown => "governance_backend_down",
        }
    }
}

/// What the structured-output ladder saw when it gave up (reference D14 ⑤): the model's
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
        /// Seconds until a retry is known to make sense; 0 = now (reference §6.1).
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
            GatewayError::Internal(_) => "internal",
        }
    }
}
