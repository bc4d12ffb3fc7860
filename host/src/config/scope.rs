//! The scope section: `ScopeSettings` and its retry policy `RetrySettings`, the keys of their
//! own (`{SCOPE}__ALIASES`, `{SCOPE}__RETRY__*`, `{SCOPE}__CALL_DEADLINE_S`) with their
//! defaults, which scope keys exist at all, and the parser that assembles a scope from its
//! sources and its sections (governance, cache, structured output).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::cache::ScopeCacheSettings;
use super::governance::GovernanceSettings;
use super::problems::Problems;
use super::source::SourceSettings;
use super::structured::ScopeStructuredSettings;
use super::vars::{Vars, comma_list, seconds};

/// `{SCOPE}__RETRY__MAX_ATTEMPTS`: a first try, one retry elsewhere, one more; each is a
/// billed upstream call.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// `{SCOPE}__RETRY__BASE_DELAY_S`: long enough for a blip to pass, short next to a model's
/// answer time.
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(500);
/// `{SCOPE}__RETRY__MAX_DELAY_S`: the cap of one back-off sleep; longer waits belong to
/// `Retry-After` and the stall window.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(30);

/// Scope keys of this section: the part after `{SCOPE}__`.
const KEYS: &[&str] = &[
    "ALIASES",
    "RETRY__MAX_ATTEMPTS",
    "RETRY__BASE_DELAY_S",
    "RETRY__MAX_DELAY_S",
    "CALL_DEADLINE_S",
];

/// The first segments of this section's scope keys.
const GROUPS: &[&str] = &["ALIASES", "RETRY", "CALL_DEADLINE_S"];

/// Whether `sub` (the part after `{SCOPE}__`) is a scope key of any section.
pub(super) fn is_key(sub: &str) -> bool {
    [
        KEYS,
        super::governance::KEYS,
        super::cache::SCOPE_KEYS,
        super::structured::KEYS,
    ]
    .iter()
    .any(|keys| keys.contains(&sub))
}

/// Whether `first` is the first segment of scope keys, used to recognise a scope key whose
/// scope has no sources (a likely typo) or a misspelt one, without claiming unrelated
/// variables that merely contain `__`.
pub(super) fn is_group(first: &str) -> bool {
    [
        GROUPS,
        super::governance::GROUPS,
        super::cache::SCOPE_GROUPS,
        super::structured::GROUPS,
    ]
    .iter()
    .any(|groups| groups.contains(&first))
}

/// One scope: a logical role with its sources and policies.
#[derive(Debug, Clone)]
pub struct ScopeSettings {
    /// Scope name as in the env keys, e.g. `LLM`.
    pub name: Arc<str>,
    /// Model names clients send to reach this scope (`{SCOPE}__ALIASES`; default the scope
    /// name in lower case).
    pub aliases: Vec<String>,
    /// Sources in order of `N` (then provider name).
    pub sources: Vec<SourceSettings>,
    /// `{SCOPE}__RETRY__*`.
    pub retry: RetrySettings,
    /// `{SCOPE}__CALL_DEADLINE_S`: one hard bound around the whole call.
    pub call_deadline: Option<Duration>,
    /// Admission policies, breaker tuning, global limits, stall window, selector.
    pub governance: GovernanceSettings,
    /// `{SCOPE}__CACHE__TTL_S|NAMESPACE`.
    pub cache: ScopeCacheSettings,
    /// `{SCOPE}__STRUCTURED__STRATEGY|MAX_RETRIES`.
    pub structured: ScopeStructuredSettings,
    /// Scope keys recognised but consumed by later layers (breaker, limiter, cache, …).
    pub other: BTreeMap<String, String>,
}

/// `{SCOPE}__RETRY__*` (docs/retry.md#back-off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrySettings {
    /// Most attempts for one logical call, across sources (default 3).
    pub max_attempts: u32,
    /// Base of the exponential back-off (default 0.5 s).
    pub base_delay: Duration,
    /// Cap of one back-off sleep (default 30 s).
    pub max_delay: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            base_delay: DEFAULT_BASE_DELAY,
            max_delay: DEFAULT_MAX_DELAY,
        }
    }
}

/// Scope `name` from its keys (named by the part after `{SCOPE}__`) and its parsed
/// `sources`.
pub(super) fn parse(
    name: &str,
    vars: &Vars,
    sources: Vec<SourceSettings>,
    problems: &mut Problems,
) -> ScopeSettings {
    let aliases = parse_aliases(name, vars, problems);
    let retry = parse_retry(vars, problems);
    let call_deadline = vars
        .raw("CALL_DEADLINE_S")
        .and_then(|(key, v)| seconds(key, v, problems));
    let governance = super::governance::parse(vars, problems);
    let cache = super::cache::parse_scope(vars, problems);
    let structured = super::structured::parse(vars, problems);
    let other = vars
        .iter()
        .filter(|(sub, _, _)| sub.starts_with("CACHE__"))
        .map(|(sub, _, v)| (sub.to_string(), v.to_string()))
        .collect();
    ScopeSettings {
        name: Arc::from(name),
        aliases,
        sources,
        retry,
        call_deadline,
        governance,
        cache,
        structured,
        other,
    }
}

/// `ALIASES`, default the scope name in lower case.
fn parse_aliases(name: &str, vars: &Vars, problems: &mut Problems) -> Vec<String> {
    let Some((key, v)) = vars.raw("ALIASES") else {
        return vec![name.to_ascii_lowercase()];
    };
    let list = comma_list(v);
    if list.is_empty() {
        problems.add(key, "must list at least one alias");
    }
    list
}

/// `RETRY__*`; a bad value is a problem naming its key and leaves the default.
fn parse_retry(vars: &Vars, problems: &mut Problems) -> RetrySettings {
    let mut retry = RetrySettings::default();
    if let Some((key, v)) = vars.raw("RETRY__MAX_ATTEMPTS") {
        match v.trim().parse::<u32>() {
            Ok(n) => retry.max_attempts = n,
            _ => problems.add(key, format!("expected an integer ≥ 1, got `{v}`")),
        }
    }
    if let Some((key, v)) = vars.raw("RETRY__BASE_DELAY_S")
        && let Some(d) = seconds(key, v, problems)
    {
        retry.base_delay = d;
    }
    if let Some((key, v)) = vars.raw("RETRY__MAX_DELAY_S")
        && let Some(d) = seconds(key, v, problems)
    {
        retry.max_delay = d;
    }
    retry
}
