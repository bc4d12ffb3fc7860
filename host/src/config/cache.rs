//! The cache section: typed response-cache settings (`PGW_CACHE_BACKEND`,
//! `{SCOPE}__CACHE__TTL_S|NAMESPACE`; docs/cache.md#ttl), their keys, defaults and parsing;
//! every problem names its key. The Redis server and key prefix (`PGW_REDIS_URL`,
//! `PGW_REDIS_PREFIX`) are those of the state backends (`config/backends.rs`).

use std::time::Duration;

use super::problems::Problems;
use super::vars::Vars;

/// The process key of this section.
pub(super) const KEYS: &[&str] = &["PGW_CACHE_BACKEND"];

/// Scope keys of this section: the part after `{SCOPE}__`.
pub(super) const SCOPE_KEYS: &[&str] = &["CACHE__TTL_S", "CACHE__NAMESPACE"];

/// The first segment of this section's scope keys.
pub(super) const SCOPE_GROUPS: &[&str] = &["CACHE"];

/// Most entries the memory cache keeps: plenty for one process's repeated prompts.
pub const DEFAULT_CACHE_MEMORY_MAX_ENTRIES: usize = 10_000;
/// Most bytes the memory cache keeps: a bounded share of the process's memory.
pub const DEFAULT_CACHE_MEMORY_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Bound of one cache read or write: a cache slower than this costs more than a miss.
pub const DEFAULT_CACHE_OP_TIMEOUT: Duration = Duration::from_millis(250);

/// Where the response cache lives (`PGW_CACHE_BACKEND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheBackendKind {
    /// No response cache (the default: caching is opt-in per deployment).
    #[default]
    None,
    /// In-process, bounded by `memory_max_entries` and `memory_max_bytes`.
    Memory,
    /// Shared through Redis (`PGW_REDIS_URL`).
    Redis,
}

impl CacheBackendKind {
    /// The configured value (`none`, `memory`, `redis`).
    pub fn as_str(self) -> &'static str {
        match self {
            CacheBackendKind::None => "none",
            CacheBackendKind::Memory => "memory",
            CacheBackendKind::Redis => "redis",
        }
    }
}

/// The response cache of the process.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheSettings {
    /// `PGW_CACHE_BACKEND` (default `none`). Keys are `{PGW_REDIS_PREFIX}cache:<sha256>`,
    /// in the memory backend too.
    pub backend: CacheBackendKind,
    /// Most entries the memory backend keeps (default 10 000; no env key).
    pub memory_max_entries: usize,
    /// Most bytes — keys plus stored answers — the memory backend keeps (default 64 MiB; no
    /// env key).
    pub memory_max_bytes: usize,
    /// Bound of one cache read or write; past it a read misses and a write is dropped
    /// (default 250 ms; no env key).
    pub op_timeout: Duration,
}

impl Default for CacheSettings {
    fn default() -> Self {
        Self {
            backend: CacheBackendKind::None,
            memory_max_entries: DEFAULT_CACHE_MEMORY_MAX_ENTRIES,
            memory_max_bytes: DEFAULT_CACHE_MEMORY_MAX_BYTES,
            op_timeout: DEFAULT_CACHE_OP_TIMEOUT,
        }
    }
}

/// `{SCOPE}__CACHE__*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeCacheSettings {
    /// `{SCOPE}__CACHE__TTL_S`: lifetime of a stored answer; required (> 0) when the process
    /// has a cache backend.
    pub ttl: Option<Duration>,
    /// `{SCOPE}__CACHE__NAMESPACE`: the default namespace of the scope's keys (default the
    /// scope name); a call's `x-pgw-cache-namespace` overrides it.
    pub namespace: Option<String>,
}

/// Parse the process keys: `PGW_CACHE_BACKEND`; that `redis` needs `PGW_REDIS_URL`.
pub(super) fn parse_process(vars: &Vars, problems: &mut Problems) -> CacheSettings {
    let backend = match vars.get("PGW_CACHE_BACKEND") {
        None | Some("none") => CacheBackendKind::None,
        Some("memory") => CacheBackendKind::Memory,
        Some("redis") => CacheBackendKind::Redis,
        Some(v) => {
            problems.add(
                "PGW_CACHE_BACKEND",
                format!("expected one of memory|redis|none, got `{v}`"),
            );
            CacheBackendKind::None
        }
    };
    if backend == CacheBackendKind::Redis && vars.get("PGW_REDIS_URL").is_none() {
        problems.add("PGW_CACHE_BACKEND", "`redis` needs PGW_REDIS_URL");
    }
    CacheSettings {
        backend,
        ..CacheSettings::default()
    }
}

/// Parse `{SCOPE}__CACHE__TTL_S` and `{SCOPE}__CACHE__NAMESPACE` (named by the part after
/// `{SCOPE}__`). That a TTL is required (> 0) when the process has a backend is a rule of
/// `validate.rs`.
pub(super) fn parse_scope(vars: &Vars, problems: &mut Problems) -> ScopeCacheSettings {
    let mut s = ScopeCacheSettings::default();
    if let Some((key, v)) = vars.raw("CACHE__TTL_S") {
        match v.trim().parse::<f64>() {
            Ok(x) if (0.0..1e9).contains(&x) => s.ttl = Some(Duration::from_secs_f64(x)),
            _ => problems.add(
                key,
                format!("expected a finite number of seconds > 0, got `{v}`"),
            ),
        }
    }
    if let Some((key, v)) = vars.raw("CACHE__NAMESPACE") {
        let v = v.trim();
        if v.is_empty() || v.len() > 256 {
            problems.add(key, "expected 1–256 characters");
        } else {
            s.namespace = Some(v.to_string());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::{ConfigError, settings_from_vars};
    use super::*;

    fn vars(extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut v = vec![
            ("LLM__OPENAI__1__BASE_URL", "http://a"),
            ("LLM__OPENAI__1__MODEL", "m"),
        ];
        v.extend_from_slice(extra);
        v.into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn problem_keys(extra: &[(&str, &str)]) -> Vec<String> {
        match settings_from_vars(vars(extra)) {
            Err(ConfigError::Invalid(p)) => p.into_iter().map(|p| p.key).collect(),
            other => vec![format!("no problems: {other:?}")],
        }
    }

    #[test]
    fn off_by_default_and_typed_when_on() {
        let s = settings_from_vars(vars(&[])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.process.cache.backend, CacheBackendKind::None);
        assert_eq!(s.scopes[0].cache, ScopeCacheSettings::default());

        let s = settings_from_vars(vars(&[
            ("PGW_CACHE_BACKEND", "redis"),
            ("PGW_REDIS_URL", "redis://127.0.0.1:6379/0"),
            ("PGW_REDIS_PREFIX", "t1:"),
            ("LLM__CACHE__TTL_S", "2.5"),
            ("LLM__CACHE__NAMESPACE", "acme"),
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.process.cache.backend, CacheBackendKind::Redis);
        assert_eq!(s.process.backends.redis_prefix, "t1:");
        assert_eq!(s.scopes[0].cache.ttl, Some(Duration::from_millis(2500)));
        assert_eq!(s.scopes[0].cache.namespace.as_deref(), Some("acme"));
    }

    #[test]
    fn a_cache_needs_a_ttl_per_scope_and_redis_a_url() {
        assert_eq!(
            problem_keys(&[("PGW_CACHE_BACKEND", "memory")]),
            vec!["LLM__CACHE__TTL_S"]
        );
        assert_eq!(
            problem_keys(&[("PGW_CACHE_BACKEND", "redis"), ("LLM__CACHE__TTL_S", "60")]),
            vec!["PGW_CACHE_BACKEND"]
        );
        for bad in ["0", "-1", "soon", "NaN"] {
            assert_eq!(
                problem_keys(&[("PGW_CACHE_BACKEND", "memory"), ("LLM__CACHE__TTL_S", bad)]),
                vec!["LLM__CACHE__TTL_S"],
                "{bad}"
            );
        }
        assert_eq!(
            problem_keys(&[("PGW_CACHE_BACKEND", "disk")]),
            vec!["PGW_CACHE_BACKEND"]
        );
        // Without a backend the TTL may be absent, but a bad one is still refused.
        assert_eq!(
            problem_keys(&[("LLM__CACHE__TTL_S", "0")]),
            vec!["LLM__CACHE__TTL_S"]
        );
    }
}
