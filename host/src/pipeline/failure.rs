//! Why an attempt did not produce an answer ([`AttemptFailure`]), the classified upstream
//! failure every retry decision reads ([`UpstreamFailure`]), and the one rule that a 429 is
//! rate limiting, not a failure of the source ([`UpstreamFailure::is_rate_limit`]).

use std::time::Duration;

use crate::plugin::{ErrorClass, PluginError};

use super::sink::SinkClosed;

/// A classified upstream failure of one attempt.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamFailure {
    pub class: ErrorClass,
    pub message: String,
    pub code: Option<String>,
    pub status: Option<u16>,
    pub retry_after: Option<Duration>,
    /// Short per-source reason (`network_error`, `timeout`, `rate_limited`, …).
    pub short: &'static str,
    /// What the log and the telemetry row get instead of `message`, when the client is
    /// told less (a transport error: its kind to the client, the error with the URL, without
    /// userinfo, to the row).
    pub detail: Option<String>,
}

impl UpstreamFailure {
    /// Whether this failure is the upstream's rate limiting: a transient failure with status
    /// 429. The one place that decides the rule (docs/breaker.md#what-counts): a 429 says the
    /// source is busy, not broken, so it never counts toward the breaker
    /// (`bookkeeping::outcome_of` → `Outcome::RateLimited`) nor against
    /// `RETRY__MAX_ATTEMPTS` (`RetryBudget::count`); it spends the stall budget instead
    /// (`retry::budget::back_off`), and it halves the source's adaptive pacer.
    pub(crate) fn is_rate_limit(&self) -> bool {
        self.class == ErrorClass::Transient && self.status == Some(429)
    }
}

/// Why an attempt did not produce an answer.
#[derive(Debug)]
pub(crate) enum AttemptFailure {
    Upstream(UpstreamFailure),
    Plugin(PluginError),
    /// The plugin refused the request as invalid (400, no other source tried).
    BuildInvalid(String),
    /// The plugin cannot serve this request; try another source.
    Unsupported(String),
    /// The client went away.
    SinkClosed,
}

impl From<PluginError> for AttemptFailure {
    fn from(e: PluginError) -> Self {
        AttemptFailure::Plugin(e)
    }
}

impl From<SinkClosed> for AttemptFailure {
    fn from(_: SinkClosed) -> Self {
        AttemptFailure::SinkClosed
    }
}
