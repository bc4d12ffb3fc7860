//! The one validation of assembled `Settings`: the rules on values (ranges, orderings,
//! cross-field and cross-scope constraints) that every assembly path must pass — the
//! environment parser runs them on what it built, `Gateway::from_settings` and every reload
//! run them on the typed value. Parsing (`env.rs` and the section parsers) only turns text
//! into values. A problem is keyed by its env key (by the Rust field path where the value has no
//! env key) and its message names the Rust field, so a bad value reads the same whichever
//! way it came in.

use std::collections::BTreeMap;
use std::time::Duration;

use super::cache::CacheBackendKind;
use super::problems::{ConfigError, Problems};
use super::process::ProcessSettings;
use super::scope::ScopeSettings;
use super::settings::Settings;
use super::source::{PROTECTED_BODY_KEYS, SourceSettings};
use super::structured::MAX_STRUCTURED_RETRIES;

/// Most MiB `PGW_PLUGIN_MEMORY_MB` may give one plugin instance (a wasm32 memory cannot
/// address more than 4 GiB).
pub const MAX_PLUGIN_MEMORY_MB: usize = 4096;

/// Most connections `PGW_TELEMETRY_PG_POOL_MAX` may open (more only exhausts the server).
pub const MAX_PG_POOL: u32 = 1000;

impl Settings {
    /// Check every value of these settings, however they were assembled. `Err` lists every
    /// problem found ([`ConfigError::Invalid`]): the key is the env key of the bad value
    /// (its Rust field path where it has none, e.g. `scopes[0].governance.rate_window`) and
    /// the message ends with the Rust field path (e.g. `scopes[0].retry.max_attempts`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Problems::new();
        check_process(&self.process, &mut problems);
        let cache_on = self.process.cache.backend != CacheBackendKind::None;
        for (i, scope) in self.scopes.iter().enumerate() {
            if scope.sources.is_empty() {
                problems.add(
                    &format!("{}__<PROVIDER>__<N>__BASE_URL", scope.name),
                    format!(
                        "scope {} has no sources (field `scopes[{i}].sources`)",
                        scope.name
                    ),
                );
            }
            check_scope(i, scope, cache_on, &mut problems);
        }
        check_aliases(&self.scopes, &mut problems);
        problems.into_result()
    }
}

/// `problem (field `path`)`.
fn at(path: &str, problem: impl std::fmt::Display) -> String {
    format!("{problem} (field `{path}`)")
}

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// The rules of the process settings.
pub(super) fn check_process(p: &ProcessSettings, problems: &mut Problems) {
    if p.max_body_bytes == 0 {
        problems.add(
            "PGW_MAX_BODY_BYTES",
            at("process.max_body_bytes", "must be > 0 bytes, got 0"),
        );
    }
    if p.plugin_timeout.is_zero() {
        problems.add(
            "PGW_PLUGIN_TIMEOUT_MS",
            at("process.plugin_timeout", "must be > 0 ms, got 0"),
        );
    }
    let mib = 1024 * 1024;
    if p.plugin_memory_bytes == 0 || p.plugin_memory_bytes > MAX_PLUGIN_MEMORY_MB * mib {
        problems.add(
            "PGW_PLUGIN_MEMORY_MB",
            at(
                "process.plugin_memory_bytes",
                format!(
                    "must be 1..={MAX_PLUGIN_MEMORY_MB} MiB, got {} bytes",
                    p.plugin_memory_bytes
                ),
            ),
        );
    }
    super::otel::check(&p.otel, problems);
    let t = &p.telemetry;
    if t.text_cap == Some(0) {
        problems.add(
            "PGW_TELEMETRY_TEXT_CAP",
            at(
                "process.telemetry.text_cap",
                "must be > 0 characters, got 0 (None keeps whole texts)",
            ),
        );
    }
    if !(1..=MAX_PG_POOL).contains(&t.pg_pool_max) {
        problems.add(
            "PGW_TELEMETRY_PG_POOL_MAX",
            at(
                "process.telemetry.pg_pool_max",
                format!(
                    "must be 1..={MAX_PG_POOL} connections, got {}",
                    t.pg_pool_max
                ),
            ),
        );
    }
    if t.pg_write_timeout.is_zero() {
        problems.add(
            "PGW_TELEMETRY_PG_WRITE_TIMEOUT_S",
            at("process.telemetry.pg_write_timeout", "must be > 0 s, got 0"),
        );
    }
    if p.backends.rate_window.is_some_and(|w| w.is_zero()) {
        problems.add(
            "PGW_RATE_WINDOW_S",
            at("process.backends.rate_window", "must be > 0 s, got 0"),
        );
    }
    let c = &p.cache;
    for (path, zero) in [
        (
            "process.cache.memory_max_entries",
            c.memory_max_entries == 0,
        ),
        ("process.cache.memory_max_bytes", c.memory_max_bytes == 0),
        ("process.cache.op_timeout", c.op_timeout.is_zero()),
    ] {
        if zero {
            problems.add(path, at(path, "must be > 0, got 0"));
        }
    }
}

/// Where a scope's problems are reported: its env keys and its Rust field paths.
struct ScopeAt<'a> {
    /// The scope's name.
    name: &'a str,
    /// Its index in `Settings::scopes`.
    i: usize,
}

impl ScopeAt<'_> {
    /// The env key `{SCOPE}__{sub}`.
    fn key(&self, sub: &str) -> String {
        format!("{}__{sub}", self.name)
    }

    /// The Rust field path `scopes[i].{f}`.
    fn field(&self, f: &str) -> String {
        format!("scopes[{}].{f}", self.i)
    }
}

/// The rules of scope `i` and its sources (not that it has any: a scope the environment
/// names always has source keys, whose own problems are reported by the parser).
pub(super) fn check_scope(i: usize, s: &ScopeSettings, cache_on: bool, problems: &mut Problems) {
    let p = ScopeAt { name: &s.name, i };
    check_retry(&p, s, problems);
    check_governance(&p, s, problems);
    check_cache_and_structured(&p, s, cache_on, problems);
    check_sources(i, s, problems);
}

/// Aliases, the retry policy and the call deadline.
fn check_retry(p: &ScopeAt<'_>, s: &ScopeSettings, problems: &mut Problems) {
    if s.aliases.is_empty() || s.aliases.iter().any(|a| a.trim().is_empty()) {
        problems.add(
            &p.key("ALIASES"),
            at(
                &p.field("aliases"),
                "must list at least one alias, none empty",
            ),
        );
    }
    let r = &s.retry;
    if r.max_attempts == 0 {
        problems.add(
            &p.key("RETRY__MAX_ATTEMPTS"),
            at(&p.field("retry.max_attempts"), "must be ≥ 1, got 0"),
        );
    }
    if r.max_delay.is_zero() {
        problems.add(
            &p.key("RETRY__MAX_DELAY_S"),
            at(&p.field("retry.max_delay"), "must be > 0 s, got 0"),
        );
    } else if r.base_delay > r.max_delay {
        problems.add(
            &p.key("RETRY__BASE_DELAY_S"),
            at(
                &p.field("retry.base_delay"),
                format!(
                    "base delay {} exceeds max delay {}",
                    secs(r.base_delay),
                    secs(r.max_delay)
                ),
            ),
        );
    }
    if s.call_deadline.is_some_and(|d| d.is_zero()) {
        problems.add(
            &p.key("CALL_DEADLINE_S"),
            at(
                &p.field("call_deadline"),
                "must be > 0 s, got 0 (None = no deadline)",
            ),
        );
    }
}

/// `{SCOPE}__BREAKER__*`, `{SCOPE}__BACKPRESSURE__*` and the rate window.
fn check_governance(p: &ScopeAt<'_>, s: &ScopeSettings, problems: &mut Problems) {
    let g = &s.governance;
    if g.fail_threshold == 0 {
        problems.add(
            &p.key("BREAKER__FAIL_THRESHOLD"),
            at(&p.field("governance.fail_threshold"), "must be ≥ 1, got 0"),
        );
    }
    if g.cooldown.is_zero() {
        problems.add(
            &p.key("BREAKER__COOLDOWN_S"),
            at(&p.field("governance.cooldown"), "must be > 0 s, got 0"),
        );
    }
    if g.max_cooldown < g.cooldown {
        problems.add(
            &p.key("BREAKER__MAX_COOLDOWN_S"),
            at(
                &p.field("governance.max_cooldown"),
                format!(
                    "must be ≥ BREAKER__COOLDOWN_S ({}), got {}",
                    secs(g.cooldown),
                    secs(g.max_cooldown)
                ),
            ),
        );
    }
    if !(g.fail_rate > 0.0 && g.fail_rate <= 1.0) {
        problems.add(
            &p.key("BREAKER__FAIL_RATE"),
            at(
                &p.field("governance.fail_rate"),
                format!("must be in (0, 1], got {}", g.fail_rate),
            ),
        );
    }
    if g.min_calls == 0 {
        problems.add(
            &p.key("BREAKER__MIN_CALLS"),
            at(&p.field("governance.min_calls"), "must be ≥ 1, got 0"),
        );
    }
    if g.stall_window.is_zero() {
        problems.add(
            &p.key("BACKPRESSURE__STALL_WINDOW_S"),
            at(&p.field("governance.stall_window"), "must be > 0 s, got 0"),
        );
    }
    if g.rate_window.is_zero() {
        let path = p.field("governance.rate_window");
        problems.add(&path, at(&path, "must be > 0 s, got 0"));
    }
}

/// The cache TTL (required when a cache is on) and the structured-output re-asks.
fn check_cache_and_structured(
    p: &ScopeAt<'_>,
    s: &ScopeSettings,
    cache_on: bool,
    problems: &mut Problems,
) {
    match s.cache.ttl {
        Some(t) if t.is_zero() => problems.add(
            &p.key("CACHE__TTL_S"),
            at(&p.field("cache.ttl"), "must be > 0 s, got 0"),
        ),
        None if cache_on => problems.add(
            &p.key("CACHE__TTL_S"),
            at(
                &p.field("cache.ttl"),
                "required when PGW_CACHE_BACKEND is memory or redis (entries must expire)",
            ),
        ),
        _ => {}
    }
    if s.structured.max_retries > MAX_STRUCTURED_RETRIES {
        problems.add(
            &p.key("STRUCTURED__MAX_RETRIES"),
            at(
                &p.field("structured.max_retries"),
                format!(
                    "must be 0..={MAX_STRUCTURED_RETRIES}, got {}",
                    s.structured.max_retries
                ),
            ),
        );
    }
}

/// Unique source names, then each source's rules.
fn check_sources(i: usize, s: &ScopeSettings, problems: &mut Problems) {
    let name = &s.name;
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (j, src) in s.sources.iter().enumerate() {
        if let Some(first) = names.insert(src.name.as_ref(), j) {
            let path = format!("scopes[{i}].sources[{j}].name");
            problems.add(
                &path,
                at(
                    &path,
                    format!(
                        "source name `{}` is also the name of scopes[{i}].sources[{first}]",
                        src.name
                    ),
                ),
            );
        }
        check_source(name, &format!("scopes[{i}].sources[{j}]"), src, problems);
    }
}

/// The rules of one source (`field` is its Rust path).
fn check_source(scope: &str, field: &str, s: &SourceSettings, problems: &mut Problems) {
    let key = |f: &str| {
        format!(
            "{scope}__{}__{}__{f}",
            s.provider.to_ascii_uppercase(),
            s.index
        )
    };
    let path = |f: &str| format!("{field}.{f}");
    if !(s.base_url.starts_with("http://") || s.base_url.starts_with("https://")) {
        problems.add(
            &key("BASE_URL"),
            at(
                &path("base_url"),
                format!("expected an http:// or https:// URL, got `{}`", s.base_url),
            ),
        );
    }
    if s.model.trim().is_empty() {
        problems.add(&key("MODEL"), at(&path("model"), "must not be empty"));
    }
    for p in PROTECTED_BODY_KEYS {
        if s.extra_body.contains_key(p) {
            problems.add(
                &key("EXTRA_BODY"),
                at(
                    &path("extra_body"),
                    format!("must not set the protected key `{p}`"),
                ),
            );
        }
    }
    let t = &s.timeouts;
    if !(!t.inter_token.is_zero() && t.inter_token < t.ttft && t.ttft < t.total) {
        problems.add(
            &key("INTER_TOKEN_TIMEOUT_S"),
            at(
                &path("timeouts"),
                format!(
                    "watchdog limits must satisfy 0 < INTER_TOKEN_TIMEOUT_S ({}) < TTFT_TIMEOUT_S ({}) < TIMEOUT_S ({})",
                    secs(t.inter_token),
                    secs(t.ttft),
                    secs(t.total)
                ),
            ),
        );
    }
    if s.weight == 0 {
        problems.add(&key("WEIGHT"), at(&path("weight"), "must be ≥ 1, got 0"));
    }
}

/// Aliases are unique across scopes.
pub(super) fn check_aliases(scopes: &[ScopeSettings], problems: &mut Problems) {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for (i, s) in scopes.iter().enumerate() {
        for a in &s.aliases {
            if let Some(prev) = seen.insert(a.as_str(), &s.name) {
                problems.add(
                    &format!("{}__ALIASES", s.name),
                    at(
                        &format!("scopes[{i}].aliases"),
                        format!("alias `{a}` is also used by scope {prev}"),
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::settings_from_vars;

    fn base() -> Vec<(String, String)> {
        [
            ("LLM__OPENAI__1__BASE_URL", "http://a"),
            ("LLM__OPENAI__1__MODEL", "m"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn problems_of(r: Result<(), ConfigError>) -> Vec<(String, String)> {
        match r {
            Err(ConfigError::Invalid(p)) => p.into_iter().map(|p| (p.key, p.message)).collect(),
            other => vec![("<none>".into(), format!("{other:?}"))],
        }
    }

    fn env_problems(extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut vars = base();
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        problems_of(settings_from_vars(vars).map(|_| ()))
    }

    fn typed_problems(edit: impl FnOnce(&mut Settings)) -> Vec<(String, String)> {
        let mut s = settings_from_vars(base()).unwrap_or_else(|e| panic!("{e}"));
        assert!(s.validate().is_ok());
        edit(&mut s);
        problems_of(s.validate())
    }

    /// Each bad value, set through the environment and set by hand on typed settings, gives
    /// the same one problem: the env key and a message naming the Rust field.
    #[test]
    fn each_bad_value_reads_the_same_through_env_and_typed_settings() {
        type Edit = fn(&mut Settings);
        let cases: [(&str, &str, Edit, &str, &str); 6] = [
            (
                "LLM__CALL_DEADLINE_S",
                "0",
                |s| s.scopes[0].call_deadline = Some(Duration::ZERO),
                "LLM__CALL_DEADLINE_S",
                "must be > 0 s, got 0 (None = no deadline) (field `scopes[0].call_deadline`)",
            ),
            (
                "LLM__RETRY__MAX_ATTEMPTS",
                "0",
                |s| s.scopes[0].retry.max_attempts = 0,
                "LLM__RETRY__MAX_ATTEMPTS",
                "must be ≥ 1, got 0 (field `scopes[0].retry.max_attempts`)",
            ),
            (
                "LLM__OPENAI__1__TTFT_TIMEOUT_S",
                "500",
                |s| s.scopes[0].sources[0].timeouts.ttft = Duration::from_secs(500),
                "LLM__OPENAI__1__INTER_TOKEN_TIMEOUT_S",
                "watchdog limits must satisfy 0 < INTER_TOKEN_TIMEOUT_S (30s) < TTFT_TIMEOUT_S (500s) < TIMEOUT_S (120s) (field `scopes[0].sources[0].timeouts`)",
            ),
            (
                "PGW_TELEMETRY_TEXT_CAP",
                "0",
                |s| s.process.telemetry.text_cap = Some(0),
                "PGW_TELEMETRY_TEXT_CAP",
                "must be > 0 characters, got 0 (None keeps whole texts) (field `process.telemetry.text_cap`)",
            ),
            (
                "LLM__BREAKER__FAIL_RATE",
                "1.5",
                |s| s.scopes[0].governance.fail_rate = 1.5,
                "LLM__BREAKER__FAIL_RATE",
                "must be in (0, 1], got 1.5 (field `scopes[0].governance.fail_rate`)",
            ),
            (
                "LLM__BREAKER__FAIL_RATE",
                "0",
                |s| s.scopes[0].governance.fail_rate = 0.0,
                "LLM__BREAKER__FAIL_RATE",
                "must be in (0, 1], got 0 (field `scopes[0].governance.fail_rate`)",
            ),
        ];
        for (env_key, env_value, edit, key, message) in cases {
            let want = vec![(key.to_string(), message.to_string())];
            assert_eq!(env_problems(&[(env_key, env_value)]), want, "env {env_key}");
            assert_eq!(typed_problems(edit), want, "typed {env_key}");
        }
    }

    #[test]
    fn typed_only_rules_name_the_rust_field() {
        assert_eq!(
            typed_problems(|s| s.scopes[0].governance.fail_rate = f64::NAN),
            vec![(
                "LLM__BREAKER__FAIL_RATE".into(),
                "must be in (0, 1], got NaN (field `scopes[0].governance.fail_rate`)".into()
            )]
        );
        assert_eq!(
            typed_problems(|s| s.scopes[0].governance.rate_window = Duration::ZERO),
            vec![(
                "scopes[0].governance.rate_window".into(),
                "must be > 0 s, got 0 (field `scopes[0].governance.rate_window`)".into()
            )]
        );
        assert_eq!(
            typed_problems(|s| s.scopes[0].sources.clear()),
            vec![(
                "LLM__<PROVIDER>__<N>__BASE_URL".into(),
                "scope LLM has no sources (field `scopes[0].sources`)".into()
            )]
        );
        let two = typed_problems(|s| {
            let copy = s.scopes[0].sources[0].clone();
            s.scopes[0].sources.push(copy);
        });
        assert_eq!(two.len(), 1);
        assert_eq!(two[0].0, "scopes[0].sources[1].name");
    }
}
