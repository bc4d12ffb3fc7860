//! Admission of one attempt: pick a source among those available, pass its breaker gate, its
//! pacer and the limiter's six gates. When every eligible source is blocked, dispatch on the
//! reason — quota full (`QUOTA_FULL`) or circuit open (`CIRCUIT_OPEN`) — and either fail fast
//! or wait (sleeping to the known opening or the next release). Every wait is bounded by
//! [`CallAdmission::wait_bound`] (what is left of the stall window and of the call deadline):
//! a known opening beyond it ends the call at once with that opening as its retry hint.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::WaitPolicy;
use crate::error::{GatewayError, UnavailableReason};
use crate::governance::breaker::{BreakerError, Entry, ProbeLease};
use crate::governance::limiter::{Denial, Gate, LimiterError, Permit, effective_est_tokens};
use crate::governance::stall::StallBudget;
use crate::governance::stats::InFlightGuard;
use crate::plugin::Candidate;

use super::runtime::ScopeRuntime;

/// `retry_after_s` of a failed-closed admission (the backend's recovery time is unknowable;
/// 0 would stampede it).
const BACKEND_DOWN_RETRY_AFTER_S: f64 = 5.0;
/// Re-check period while waiting on a half-open probe or a concurrency slot.
const RECHECK: Duration = Duration::from_millis(100);

/// Why a source is not usable in this admission round.
#[derive(Debug, Clone, Copy)]
enum Blocked {
    /// Breaker open (ms until the cooldown ends; 0 = a half-open probe is in flight).
    Circuit(u64),
    /// A quota gate is full (ms until it fits; `None` = wait for a release).
    Quota(Option<u64>),
}

/// A half-open probe lease, released without a verdict if the attempt never reports.
pub(crate) struct ProbeGuard<'a> {
    scope: &'a ScopeRuntime,
    source: usize,
    lease: Option<ProbeLease>,
}

impl ProbeGuard<'_> {
    /// The attempt reported its outcome: the lease is settled by that report.
    pub(crate) fn reported(&mut self) {
        self.lease = None;
    }

    /// Whether this attempt is the half-open probe.
    pub(crate) fn is_probe(&self) -> bool {
        self.lease.is_some()
    }
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            let name = self.scope.sources[self.source].settings.name.clone();
            let breaker = self.scope.breaker.clone();
            // The memory breaker answers at once; a remote one finishes in the background.
            let fut = async move {
                if let Err(e) = breaker.release_probe(&name, lease).await {
                    tracing::warn!(source = %name, error = %e, "releasing a probe lease failed");
                }
            };
            if let Ok(h) = tokio::runtime::Handle::try_current() {
                h.spawn(fut);
            }
        }
    }
}

/// An admitted attempt: the source, its breaker entry, its permit and in-flight count.
pub(crate) struct Admitted<'a> {
    pub idx: usize,
    /// The breaker generation that admitted it.
    pub epoch: u64,
    pub probe: ProbeGuard<'a>,
    pub permit: Permit,
    pub _in_flight: InFlightGuard<'a>,
}

/// Ask the selector plugin for a source among the scope's sources, with the host's stats
/// and availability. A selector fault falls back to the first available source.
fn choose(
    scope: &ScopeRuntime,
    candidates: &[usize],
    blocked: &[Option<Blocked>],
    previous: Option<usize>,
    seed: u64,
    now_ms: u64,
) -> usize {
    let offered: Vec<Candidate> = scope
        .sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let stats = &scope.stats[i];
            Candidate {
                index: i,
                name: s.settings.name.to_string(),
                weight: s.settings.weight,
                in_flight: stats.in_flight(),
                success_ewma: stats.success_ewma(),
                latency_ewma_ms: stats.latency_ewma_ms(),
                available: candidates.contains(&i) && blocked[i].is_none(),
                cooldown_remaining_ms: stats.cooldown_remaining_ms(now_ms),
                previous: previous == Some(i),
            }
        })
        .collect();
    match scope.selector.choose(&offered, seed) {
        Ok(Some(i)) => i,
        Ok(None) => usize::MAX,
        Err(e) => {
            tracing::warn!(selector = scope.selector.name(), error = %e, "selector failed; using the first available source");
            usize::MAX
        }
    }
}

/// Per-call admission state.
pub(crate) struct CallAdmission {
    /// Sources out for the rest of this call (dead, unsupported, …).
    pub excluded: Vec<bool>,
    pub stall: StallBudget,
    pub per_source: BTreeMap<String, String>,
    pub last_message: String,
    /// Admission waits of this call not yet counted in `/metrics` (reason, time waited).
    pub waits: Vec<(UnavailableReason, Duration)>,
    /// When the call's deadline passes (`None` = no deadline).
    pub deadline: Option<Instant>,
}

impl CallAdmission {
    /// The state of a new loop run in `scope` of a call that must end by `deadline`:
    /// nothing excluded, the scope's stall budget.
    pub(crate) fn new(scope: &ScopeRuntime, deadline: Option<Instant>) -> Self {
        Self {
            excluded: vec![false; scope.sources.len()],
            stall: StallBudget::new(scope.settings.governance.stall_window),
            per_source: BTreeMap::new(),
            last_message: String::from("no attempt was made"),
            waits: Vec::new(),
            deadline,
        }
    }

    /// The longest this call may still wait or back off: what is left of its stall window
    /// (given the scope's last answer `progress_age` ago) and of its deadline, whichever is
    /// less.
    pub(crate) fn wait_bound(&self, progress_age: Option<Duration>) -> Duration {
        let stall = self.stall.left(progress_age);
        match self.deadline {
            Some(d) => stall.min(d.saturating_duration_since(Instant::now())),
            None => stall,
        }
    }
}

/// The call deadline of a call that started at `started` with the timeout `deadline`.
pub(crate) fn deadline_at(started: Instant, deadline: Option<Duration>) -> Option<Instant> {
    deadline.and_then(|d| started.checked_add(d))
}

fn backend_down(scope: &ScopeRuntime, what: &str, message: String) -> GatewayError {
    GatewayError::ScopeUnavailable {
        scope: scope.settings.name.to_string(),
        reason: UnavailableReason::GovernanceBackendDown,
        retry_after_s: BACKEND_DOWN_RETRY_AFTER_S,
        per_source_reasons: BTreeMap::new(),
        message: format!("{what}: {message}"),
    }
}

/// Admit one attempt. `previous`: the source of the call's previous attempt; `eligible`
/// further restricts the sources (e.g. to those that can continue a stream).
pub(crate) async fn admit<'a>(
    scope: &'a ScopeRuntime,
    call: &mut CallAdmission,
    previous: Option<usize>,
    seed: u64,
    eligible: &(dyn Fn(usize) -> bool + Sync),
) -> Result<Admitted<'a>, GatewayError> {
    let n = scope.sources.len();
    let gov = &scope.settings.governance;
    let released = scope.limiter.released();
    loop {
        // Registered before the gates are asked, so a release during the round is not missed.
        let notified = released.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let now = scope.clock.now_ms();
        let candidates: Vec<usize> = (0..n)
            .filter(|&i| !call.excluded[i] && eligible(i))
            .collect();
        if candidates.is_empty() {
            return Err(GatewayError::ScopeUnavailable {
                scope: scope.settings.name.to_string(),
                reason: UnavailableReason::NoSources,
                retry_after_s: 0.0,
                per_source_reasons: call.per_source.clone(),
                message: format!(
                    "no source can serve this call; last error: {}",
                    call.last_message
                ),
            });
        }
        let mut blocked: Vec<Option<Blocked>> = vec![None; n];
        for &i in &candidates {
            let memo = scope.stats[i].cooldown_remaining_ms(now);
            if memo > 0 {
                // Known open from an earlier answer: skipped without asking the store.
                blocked[i] = Some(Blocked::Circuit(memo));
                call.per_source.insert(
                    scope.sources[i].settings.name.to_string(),
                    "cooldown".into(),
                );
            }
        }
        // One round: try sources until one is admitted or all are blocked.
        loop {
            let available: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| blocked[i].is_none())
                .collect();
            if available.is_empty() {
                break;
            }
            // With one source available the selector's answer cannot change the pick (an
            // unavailable or missing answer falls back to the first available): no plugin
            // call for it.
            let idx = match available.as_slice() {
                [only] => *only,
                _ => {
                    let idx = choose(scope, &candidates, &blocked, previous, seed, now);
                    if available.contains(&idx) {
                        idx
                    } else {
                        available[0]
                    }
                }
            };
            let source = &scope.sources[idx];
            let name = &source.settings.name;
            let entry = scope
                .breaker
                .try_enter(name)
                .await
                .map_err(|e: BreakerError| backend_down(scope, "circuit breaker", e.to_string()))?;
            let (epoch, lease) = match entry {
                Entry::Allowed { epoch } => {
                    scope.stats[idx].clear_cooldown();
                    (epoch, None)
                }
                Entry::Probe(lease) => (lease.epoch, Some(lease)),
                Entry::Rejected { retry_after_ms } => {
                    if retry_after_ms > 0 {
                        scope.stats[idx].cool_until(now + retry_after_ms);
                    }
                    call.per_source
                        .insert(name.to_string(), "circuit_open".into());
                    blocked[idx] = Some(Blocked::Circuit(retry_after_ms));
                    continue;
                }
            };
            let probe = ProbeGuard {
                scope,
                source: idx,
                lease,
            };
            if !scope.pacers[idx].admit(scope.stats[idx].in_flight()) {
                call.per_source
                    .insert(name.to_string(), "rate_limited".into());
                blocked[idx] = Some(Blocked::Quota(None));
                continue; // the probe guard gives the lease back
            }
            let est = effective_est_tokens(source.settings.est_tokens, source.settings.tpm);
            match Permit::try_acquire(&scope.limiter, name, est).await {
                Err(e @ (LimiterError::BackendDown(_) | LimiterError::UnknownSource(_))) => {
                    return Err(backend_down(scope, "rate limiter", e.to_string()));
                }
                Ok(Err(Denial {
                    gate,
                    retry_after_ms,
                })) => {
                    call.per_source
                        .insert(name.to_string(), "quota_exhausted".into());
                    if matches!(
                        gate,
                        Gate::GlobalConcurrency | Gate::GlobalRpm | Gate::GlobalTpm
                    ) {
                        // A scope-wide gate blocks every source alike.
                        for &i in &candidates {
                            blocked[i] = Some(Blocked::Quota(retry_after_ms));
                        }
                    } else {
                        blocked[idx] = Some(Blocked::Quota(retry_after_ms));
                    }
                    continue;
                }
                Ok(Ok(permit)) => {
                    return Ok(Admitted {
                        idx,
                        epoch,
                        probe,
                        permit,
                        _in_flight: scope.stats[idx].enter(),
                    });
                }
            }
        }
        // Every eligible source is blocked: dispatch on the reason.
        let quota: Vec<Option<u64>> = candidates
            .iter()
            .filter_map(|&i| match blocked[i] {
                Some(Blocked::Quota(r)) => Some(r),
                _ => None,
            })
            .collect();
        let (reason, policy, wait_ms) = if quota.is_empty() {
            let soonest = candidates
                .iter()
                .filter_map(|&i| match blocked[i] {
                    Some(Blocked::Circuit(ms)) => Some(ms),
                    _ => None,
                })
                .min()
                .unwrap_or(0);
            (
                UnavailableReason::CircuitOpen,
                gov.circuit_open,
                Some(soonest),
            )
        } else {
            let soonest = quota.iter().flatten().min().copied();
            let any_release = quota.iter().any(Option::is_none);
            let wait = if any_release { None } else { soonest };
            (UnavailableReason::QuotaExhausted, gov.quota_full, wait)
        };
        let age = scope.progress.age_ms(now).map(Duration::from_millis);
        let retry_after_s = wait_ms.unwrap_or(0) as f64 / 1000.0;
        if policy == WaitPolicy::FailFast {
            return Err(GatewayError::ScopeUnavailable {
                scope: scope.settings.name.to_string(),
                reason,
                retry_after_s,
                per_source_reasons: call.per_source.clone(),
                message: format!("every source is blocked ({})", reason.as_str()),
            });
        }
        let bound = call.wait_bound(age);
        if call.stall.stalled(age) || bound.is_zero() {
            // Rate limits that outlasted the window are a stall; a breaker that stayed open
            // is still an open circuit (not the client's rate).
            let gave_up = if reason == UnavailableReason::QuotaExhausted {
                UnavailableReason::Stalled
            } else {
                reason
            };
            return Err(GatewayError::ScopeUnavailable {
                scope: scope.settings.name.to_string(),
                reason: gave_up,
                retry_after_s,
                per_source_reasons: call.per_source.clone(),
                message: format!(
                    "no progress for the stall window of {:?} ({})",
                    gov.stall_window,
                    reason.as_str()
                ),
            });
        }
        if let Some(ms) = wait_ms.filter(|&ms| Duration::from_millis(ms) > bound) {
            // The known opening is past what the call may wait: waiting for it would end in
            // a stall or the deadline anyway, so end now with the opening as the hint.
            return Err(GatewayError::ScopeUnavailable {
                scope: scope.settings.name.to_string(),
                reason,
                retry_after_s,
                per_source_reasons: call.per_source.clone(),
                message: format!(
                    "every source is blocked ({}) for {:.3} s, longer than the call may still wait within its stall window and deadline",
                    reason.as_str(),
                    Duration::from_millis(ms).as_secs_f64(),
                ),
            });
        }
        // Wait: to the known deadline, or for a release; never a tight poll.
        let planned = match wait_ms {
            Some(0) | None => RECHECK,
            Some(ms) => Duration::from_millis(ms),
        };
        let sleep = planned.min(bound).max(Duration::from_millis(10));
        let started = Instant::now();
        if reason == UnavailableReason::QuotaExhausted && wait_ms.is_none() {
            let _ = tokio::time::timeout(sleep, notified).await;
        } else {
            tokio::time::sleep(sleep).await;
        }
        call.stall.charge(started.elapsed());
        call.waits.push((reason, started.elapsed()));
    }
}
