//! The retry budget of one loop run and the back-off between attempts: attempts counted
//! against `RETRY__MAX_ATTEMPTS` (a 429 is not: it spends the stall budget), the jittered
//! exponential back-off bounded by what is left of the stall window and of the call deadline
//! (docs/retry.md#back-off, docs/limiter.md#stall-budget), and the scope-level errors of a
//! run that gives up: `retry_exhausted`, `stalled`, `rate_limited`.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{GatewayError, UnavailableReason};
use crate::governance::backoff_delay;
use crate::plugin::ErrorClass;

use super::super::admission::CallAdmission;
use super::super::failure::UpstreamFailure;
use super::super::runtime::ScopeRuntime;

/// The retry budget of one loop run (chat or lean): attempts counted against
/// `RETRY__MAX_ATTEMPTS` (429s are not: they spend the stall budget instead), back-offs
/// taken, and the last failure's retry hint.
pub(crate) struct RetryBudget {
    max_attempts: u32,
    counted: u32,
    backoffs: u32,
    last_retry_after: Option<Duration>,
}

impl RetryBudget {
    pub(super) fn new(scope: &ScopeRuntime) -> Self {
        Self {
            max_attempts: scope.settings.retry.max_attempts,
            counted: 0,
            backoffs: 0,
            last_retry_after: None,
        }
    }

    /// Whether no counted attempt is left.
    pub(crate) fn exhausted(&self) -> bool {
        self.counted >= self.max_attempts
    }

    /// The 503 `retry_exhausted` of a run whose budget is spent.
    pub(crate) fn exhausted_error(
        &self,
        scope: &ScopeRuntime,
        call: &mut CallAdmission,
    ) -> GatewayError {
        GatewayError::ScopeUnavailable {
            scope: scope.settings.name.to_string(),
            reason: UnavailableReason::RetryExhausted,
            retry_after_s: self
                .last_retry_after
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            per_source_reasons: std::mem::take(&mut call.per_source),
            message: format!(
                "{} attempts failed; last error: {}",
                self.counted, call.last_message
            ),
        }
    }

    /// Count a classified failure (a 429 is not counted).
    pub(crate) fn count(&mut self, up: &UpstreamFailure) {
        if !up.is_rate_limit() {
            self.counted += 1;
        }
    }

    /// After a retryable failure on source `idx`: a dead source is out for the rest of the
    /// call (switch at once, no back-off); a transient one backs off, unless no attempt is
    /// left (the top of the loop then reports `retry_exhausted`). Returns the time slept.
    pub(crate) async fn recover(
        &mut self,
        scope: &ScopeRuntime,
        call: &mut CallAdmission,
        idx: usize,
        up: &UpstreamFailure,
        attempt_latency: Duration,
    ) -> Result<Duration, GatewayError> {
        match up.class {
            ErrorClass::SourceDead => {
                call.excluded[idx] = true;
                let name = &scope.sources[idx].settings.name;
                tracing::warn!(source = %name, scope = %scope.settings.name, "source dead: {}", up.message);
                Ok(Duration::ZERO)
            }
            ErrorClass::Transient => {
                self.last_retry_after = up.retry_after;
                if self.exhausted() {
                    return Ok(Duration::ZERO);
                }
                let slept = back_off(scope, call, up, self.backoffs, attempt_latency).await?;
                self.backoffs += 1;
                Ok(slept)
            }
            // Final classes end the call before recovery (`bookkeeping::final_error`).
            ErrorClass::RequestRejected | ErrorClass::ResultInvalid => Ok(Duration::ZERO),
        }
    }
}

/// After a transient failure: sleep the jittered exponential back-off (the larger of it and
/// the failure's retry hint), bounded before it starts by [`CallAdmission::wait_bound`] —
/// what is left of the stall window and of the call deadline. A hint beyond that bound ends
/// the call at once with that hint (429 `rate_limited` after a 429, else 503
/// `retry_exhausted`): sleeping would only end in a stall or the deadline. A 429's attempt
/// and sleep are charged to the stall budget (non-productive time), and the call gives up
/// with 429 `stalled` once the budget is spent and the scope made no progress. Returns the
/// time slept. Shared by the chat loop and the lean loop.
pub(crate) async fn back_off(
    scope: &ScopeRuntime,
    call: &mut CallAdmission,
    up: &UpstreamFailure,
    backoffs: u32,
    attempt_latency: Duration,
) -> Result<Duration, GatewayError> {
    let retry = scope.settings.retry;
    let rate_limited = up.is_rate_limit();
    if rate_limited {
        call.stall.charge(attempt_latency);
        if call.stall.stalled(progress_age(scope)) {
            return Err(stalled(scope, call, up));
        }
    }
    let planned = backoff_delay(
        retry.base_delay,
        retry.max_delay,
        backoffs,
        scope.entropy.unit(),
        up.retry_after,
    );
    let bound = call.wait_bound(progress_age(scope));
    let beyond = up.retry_after.filter(|&hint| hint > bound);
    if beyond.is_some() || (bound.is_zero() && !planned.is_zero()) {
        return Err(no_time_to_wait(scope, call, beyond, bound, rate_limited));
    }
    let delay = planned.min(bound);
    tracing::debug!(
        ?delay,
        ?planned,
        "transient failure, backing off: {}",
        up.message
    );
    let started = Instant::now();
    tokio::time::sleep(delay).await;
    let slept = started.elapsed();
    if rate_limited {
        call.stall.charge(slept);
        if call.stall.stalled(progress_age(scope)) {
            return Err(stalled(scope, call, up));
        }
    }
    Ok(slept)
}

/// Time since the scope's last answer (`None`: it never answered).
fn progress_age(scope: &ScopeRuntime) -> Option<Duration> {
    scope
        .progress
        .age_ms(scope.clock.now_ms())
        .map(Duration::from_millis)
}

/// The 429 `stalled` of a call whose 429s spent its stall window.
fn stalled(scope: &ScopeRuntime, call: &mut CallAdmission, up: &UpstreamFailure) -> GatewayError {
    GatewayError::ScopeUnavailable {
        scope: scope.settings.name.to_string(),
        reason: UnavailableReason::Stalled,
        retry_after_s: up.retry_after.map(|d| d.as_secs_f64()).unwrap_or(0.0),
        per_source_reasons: std::mem::take(&mut call.per_source),
        message: format!(
            "rate limited without progress for the stall window of {:?}; last error: {}",
            scope.settings.governance.stall_window, call.last_message
        ),
    }
}

/// The error of a failure whose retry hint (`beyond`) is longer than the call may still wait,
/// or that leaves no time at all for a back-off.
fn no_time_to_wait(
    scope: &ScopeRuntime,
    call: &mut CallAdmission,
    beyond: Option<Duration>,
    bound: Duration,
    rate_limited: bool,
) -> GatewayError {
    tracing::info!(
        scope = %scope.settings.name,
        hint_s = beyond.map(|h| h.as_secs_f64()),
        left_s = bound.as_secs_f64(),
        "no time left to back off within the stall window and deadline: giving up at once"
    );
    let why = match beyond {
        Some(hint) => format!(
            "the upstream asked to wait {:.3} s, longer than the call may still wait within its stall window and deadline",
            hint.as_secs_f64()
        ),
        None => "no time is left for a back-off within the stall window and deadline".to_string(),
    };
    GatewayError::ScopeUnavailable {
        scope: scope.settings.name.to_string(),
        reason: if rate_limited {
            UnavailableReason::RateLimited
        } else {
            UnavailableReason::RetryExhausted
        },
        retry_after_s: beyond.map_or(0.0, |hint| hint.as_secs_f64()),
        per_source_reasons: std::mem::take(&mut call.per_source),
        message: format!("{why}; last error: {}", call.last_message),
    }
}
