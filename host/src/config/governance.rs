//! The governance section of a scope: `GovernanceSettings` and `WaitPolicy`, the keys
//! (`{SCOPE}__BREAKER__*`, `{SCOPE}__QUOTA_FULL`, `{SCOPE}__CIRCUIT_OPEN`,
//! `{SCOPE}__BACKPRESSURE__STALL_WINDOW_S`, `{SCOPE}__GLOBAL__*`, `{SCOPE}__SELECTOR`), their
//! defaults and their parser. Where the state lives is `backends.rs`.

use std::time::Duration;

use super::plugins::{FirstPartySelector, SelectorRef};
use super::problems::Problems;
use super::vars::{Vars, seconds};

/// `{SCOPE}__BREAKER__FAIL_THRESHOLD`: a few failures in a row are a dead source, not bad
/// luck.
pub const DEFAULT_FAIL_THRESHOLD: u32 = 5;
/// `{SCOPE}__BREAKER__COOLDOWN_S`: typical length of a provider's short outage.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(30);
/// `{SCOPE}__BREAKER__MAX_COOLDOWN_S` (raised to the cooldown if that is longer): a dead
/// source is still probed every five minutes.
pub const DEFAULT_MAX_COOLDOWN: Duration = Duration::from_secs(300);
/// `{SCOPE}__BREAKER__FAIL_RATE`: well above the error rate of a healthy provider.
pub const DEFAULT_FAIL_RATE: f64 = 0.6;
/// `{SCOPE}__BREAKER__MIN_CALLS`: fewer calls say nothing about a rate.
pub const DEFAULT_MIN_CALLS: u32 = 10;
/// `{SCOPE}__BACKPRESSURE__STALL_WINDOW_S`: how long a rate-limited call may wait without
/// the scope making any progress.
pub const DEFAULT_STALL_WINDOW: Duration = Duration::from_secs(300);
/// The RPM/TPM sliding window: providers state their limits per minute.
pub const DEFAULT_RATE_WINDOW: Duration = Duration::from_secs(60);
/// `{SCOPE}__SELECTOR`: prefers healthy, fast sources and needs no tuning.
pub const DEFAULT_SELECTOR: SelectorRef = SelectorRef::FirstParty(FirstPartySelector::HealthAware);

/// Scope keys of this section: the part after `{SCOPE}__`.
pub(super) const KEYS: &[&str] = &[
    "SELECTOR",
    "BREAKER__FAIL_THRESHOLD",
    "BREAKER__COOLDOWN_S",
    "BREAKER__MAX_COOLDOWN_S",
    "BREAKER__FAIL_RATE",
    "BREAKER__MIN_CALLS",
    "BACKPRESSURE__STALL_WINDOW_S",
    "GLOBAL__MAX_CONCURRENCY",
    "GLOBAL__RPM",
    "GLOBAL__TPM",
    "QUOTA_FULL",
    "CIRCUIT_OPEN",
];

/// The first segments of this section's scope keys.
pub(super) const GROUPS: &[&str] = &[
    "SELECTOR",
    "BREAKER",
    "BACKPRESSURE",
    "GLOBAL",
    "QUOTA_FULL",
    "CIRCUIT_OPEN",
];

/// What to do when an admission gate says no (docs/limiter.md#wait-policies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Wait (sleeping to the known deadline, clamped to the stall budget).
    Wait,
    /// Fail at once with 503.
    FailFast,
}

/// `{SCOPE}__BREAKER__*`, `{SCOPE}__QUOTA_FULL`, `{SCOPE}__CIRCUIT_OPEN`,
/// `{SCOPE}__BACKPRESSURE__STALL_WINDOW_S`, `{SCOPE}__GLOBAL__*`, `{SCOPE}__SELECTOR`.
#[derive(Debug, Clone, PartialEq)]
pub struct GovernanceSettings {
    /// Consecutive failures that open a source's breaker (default 5).
    pub fail_threshold: u32,
    /// Base open time (default 30 s).
    pub cooldown: Duration,
    /// Cap of the growing open time (default max(300 s, cooldown)).
    pub max_cooldown: Duration,
    /// Failure rate that opens it over the window (default 0.6).
    pub fail_rate: f64,
    /// Fewest calls in the window before the rate counts (default 10).
    pub min_calls: u32,
    /// Quota full: wait (default) or fail fast.
    pub quota_full: WaitPolicy,
    /// Every source's breaker open: fail fast (default) or wait.
    pub circuit_open: WaitPolicy,
    /// Longest non-productive waiting before a call fails with `stalled` (default 300 s).
    pub stall_window: Duration,
    /// `{SCOPE}__GLOBAL__MAX_CONCURRENCY|RPM|TPM` (0 = gate off).
    pub global_max_concurrency: u32,
    /// `{SCOPE}__GLOBAL__RPM` (0 = gate off).
    pub global_rpm: u32,
    /// `{SCOPE}__GLOBAL__TPM` (0 = gate off).
    pub global_tpm: u64,
    /// Length of the RPM/TPM sliding window (60 s; tests shrink it through `Settings`).
    pub rate_window: Duration,
    /// `{SCOPE}__SELECTOR`: a first-party selector or a `.wasm` path (default
    /// `health-aware`).
    pub selector: SelectorRef,
}

impl Default for GovernanceSettings {
    fn default() -> Self {
        Self {
            fail_threshold: DEFAULT_FAIL_THRESHOLD,
            cooldown: DEFAULT_COOLDOWN,
            max_cooldown: DEFAULT_MAX_COOLDOWN,
            fail_rate: DEFAULT_FAIL_RATE,
            min_calls: DEFAULT_MIN_CALLS,
            quota_full: WaitPolicy::Wait,
            circuit_open: WaitPolicy::FailFast,
            stall_window: DEFAULT_STALL_WINDOW,
            global_max_concurrency: 0,
            global_rpm: 0,
            global_tpm: 0,
            rate_window: DEFAULT_RATE_WINDOW,
            selector: DEFAULT_SELECTOR,
        }
    }
}

/// The scope's governance keys (named by the part after `{SCOPE}__`); a bad value is a
/// problem naming its key and leaves the default.
pub(super) fn parse(vars: &Vars, problems: &mut Problems) -> GovernanceSettings {
    let mut g = GovernanceSettings::default();
    parse_breaker(vars, &mut g, problems);
    if let Some(d) = secs(vars, "BACKPRESSURE__STALL_WINDOW_S", problems) {
        g.stall_window = d;
    }
    if let Some(p) = wait_policy(vars, "QUOTA_FULL", problems) {
        g.quota_full = p;
    }
    if let Some(p) = wait_policy(vars, "CIRCUIT_OPEN", problems) {
        g.circuit_open = p;
    }
    if let Some(n) = int(vars, "GLOBAL__MAX_CONCURRENCY", problems) {
        g.global_max_concurrency = small(n);
    }
    if let Some(n) = int(vars, "GLOBAL__RPM", problems) {
        g.global_rpm = small(n);
    }
    if let Some(n) = int(vars, "GLOBAL__TPM", problems) {
        g.global_tpm = n;
    }
    if let Some(s) = selector(vars, problems) {
        g.selector = s;
    }
    g
}

/// `BREAKER__*`.
fn parse_breaker(vars: &Vars, g: &mut GovernanceSettings, problems: &mut Problems) {
    if let Some(n) = int(vars, "BREAKER__FAIL_THRESHOLD", problems) {
        g.fail_threshold = small(n);
    }
    if let Some(d) = secs(vars, "BREAKER__COOLDOWN_S", problems) {
        g.cooldown = d;
    }
    g.max_cooldown = secs(vars, "BREAKER__MAX_COOLDOWN_S", problems)
        .unwrap_or_else(|| g.max_cooldown.max(g.cooldown));
    if let Some((key, v)) = vars.raw("BREAKER__FAIL_RATE") {
        match v.trim().parse::<f64>() {
            Ok(x) if x.is_finite() => g.fail_rate = x,
            _ => problems.add(key, format!("expected a number in (0, 1], got `{v}`")),
        }
    }
    if let Some(n) = int(vars, "BREAKER__MIN_CALLS", problems) {
        g.min_calls = small(n);
    }
}

/// A non-negative integer (whether 0 is allowed is a rule of `validate.rs`).
fn int(vars: &Vars, name: &str, problems: &mut Problems) -> Option<u64> {
    let (key, v) = vars.raw(name)?;
    match v.trim().parse::<u64>() {
        Ok(n) => Some(n),
        _ => {
            problems.add(key, format!("expected an integer ≥ 0, got `{v}`"));
            None
        }
    }
}

fn secs(vars: &Vars, name: &str, problems: &mut Problems) -> Option<Duration> {
    let (key, v) = vars.raw(name)?;
    seconds(key, v, problems)
}

/// A count as `u32`, saturating.
fn small(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn wait_policy(vars: &Vars, name: &str, problems: &mut Problems) -> Option<WaitPolicy> {
    let (key, v) = vars.raw(name)?;
    match v.trim() {
        "wait" => Some(WaitPolicy::Wait),
        "fail_fast" => Some(WaitPolicy::FailFast),
        _ => {
            problems.add(key, format!("expected wait|fail_fast, got `{v}`"));
            None
        }
    }
}

/// `SELECTOR`: a first-party selector name (exactly) or a `.wasm` path.
fn selector(vars: &Vars, problems: &mut Problems) -> Option<SelectorRef> {
    let (key, v) = vars.raw("SELECTOR")?;
    let v = v.trim();
    let selector = SelectorRef::from_config(v);
    if selector.is_none() {
        let names = FirstPartySelector::ALL.map(FirstPartySelector::name);
        problems.add(
            key,
            format!("expected {} or a .wasm path, got `{v}`", names.join("|")),
        );
    }
    selector
}
