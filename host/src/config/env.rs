//! Parsing of `PGW_*` and `{SCOPE}__…` keys (docs/configuration.md#validated-at-start-up)
//! into `Settings`. Every problem is
//! collected, so one start-up reports all of them, each naming its key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::settings::*;

/// One bad key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The env key (or file) at fault.
    pub key: String,
    pub message: String,
}

/// Start-up refused: every problem found, each naming its key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration:\n{}", format_problems(.0))]
    Invalid(Vec<ConfigProblem>),
    #[error("cannot read {path}: {message}")]
    DotEnv { path: String, message: String },
}

fn format_problems(problems: &[ConfigProblem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {}: {}", p.key, p.message))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Settings from the process environment (call `load_dotenv` first to include `.env`).
pub fn settings_from_env() -> Result<Settings, ConfigError> {
    settings_from_vars(std::env::vars())
}

const PROCESS_KEYS: &[&str] = &[
    "PGW_LISTEN",
    "PGW_API_KEYS",
    "PGW_ADMIN_KEYS",
    "PGW_MAX_BODY_BYTES",
    "PGW_LOG",
    "PGW_LOG_FORMAT",
    "PGW_CACHE_BACKEND",
    "PGW_REDIS_URL",
    "PGW_REDIS_PREFIX",
    "PGW_RATE_WINDOW_S",
    "PGW_LIMITER_BACKEND",
    "PGW_BREAKER_BACKEND",
    "PGW_TELEMETRY_BACKEND",
    "PGW_TELEMETRY_SQLITE_PATH",
    "PGW_TELEMETRY_PG_DSN",
    "PGW_TELEMETRY_SCHEMA_MODE",
    "PGW_TELEMETRY_TEXT_CAP",
    "PGW_TELEMETRY_PG_POOL_MAX",
    "PGW_TELEMETRY_PG_WRITE_TIMEOUT_S",
    "PGW_PRICING_FILE",
    "PGW_PLUGIN_CACHE_DIR",
    "PGW_PLUGIN_TIMEOUT_MS",
    "PGW_PLUGIN_MEMORY_MB",
    "PGW_UPSTREAM_MAX_BODY_BYTES",
    "PGW_SSE_MAX_EVENT_BYTES",
    "PGW_PLUGIN_MAX_BYTES",
];

const SOURCE_FIELDS: &[&str] = &[
    "BASE_URL",
    "MODEL",
    "API_KEY",
    "PLUGIN",
    "PLUGIN_SHA256",
    "ENABLE_THINKING",
    "EXTRA_BODY",
    "MAX_CONCURRENCY",
    "RPM",
    "TPM",
    "EST_TOKENS",
    "TIMEOUT_S",
    "TTFT_TIMEOUT_S",
    "INTER_TOKEN_TIMEOUT_S",
    "MISSING_DONE",
    "WEIGHT",
    "MAX_BATCH",
    "TRUST_ENV",
];

/// Scope keys: the part after `{SCOPE}__`.
const SCOPE_KEYS: &[&str] = &[
    "ALIASES",
    "SELECTOR",
    "RETRY__MAX_ATTEMPTS",
    "RETRY__BASE_DELAY_S",
    "RETRY__MAX_DELAY_S",
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
    "CALL_DEADLINE_S",
    "CACHE__TTL_S",
    "CACHE__NAMESPACE",
    "STRUCTURED__STRATEGY",
    "STRUCTURED__MAX_RETRIES",
];

/// The first segment of scope-level keys, used to recognise a scope key whose scope has no
/// sources (a likely typo) without claiming unrelated variables that merely contain `__`.
const SCOPE_GROUPS: &[&str] = &[
    "ALIASES",
    "SELECTOR",
    "RETRY",
    "BREAKER",
    "BACKPRESSURE",
    "GLOBAL",
    "QUOTA_FULL",
    "CIRCUIT_OPEN",
    "CALL_DEADLINE_S",
    "CACHE",
    "STRUCTURED",
];

pub(super) struct Problems(pub(super) Vec<ConfigProblem>);

impl Problems {
    pub(super) fn add(&mut self, key: &str, message: impl Into<String>) {
        self.0.push(ConfigProblem {
            key: key.to_string(),
            message: message.into(),
        });
    }

    /// `Ok` when there is no problem, else every problem sorted by key.
    pub(super) fn into_result(self) -> Result<(), ConfigError> {
        if self.0.is_empty() {
            return Ok(());
        }
        let mut list = self.0;
        list.sort_by(|a, b| a.key.cmp(&b.key));
        Err(ConfigError::Invalid(list))
    }
}

fn is_scope_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !s.contains("__")
}

/// Settings from an explicit list of variables (the environment, or a test's map).
pub fn settings_from_vars(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Settings, ConfigError> {
    let mut problems = Problems(Vec::new());
    let mut process: BTreeMap<String, String> = BTreeMap::new();
    // scope -> (provider, n) -> field -> (key, value)
    type SourceFields = BTreeMap<String, (String, String)>;
    let mut sources: BTreeMap<String, BTreeMap<(u32, String), SourceFields>> = BTreeMap::new();
    let mut scope_keys: BTreeMap<String, BTreeMap<String, (String, String)>> = BTreeMap::new();

    for (key, value) in vars {
        if let Some(rest) = key.strip_prefix("PGW_") {
            let _ = rest;
            if PROCESS_KEYS.contains(&key.as_str()) || super::listener::KEYS.contains(&key.as_str())
            {
                process.insert(key, value);
            } else {
                problems.add(&key, "unknown PGW_ key");
            }
            continue;
        }
        let parts: Vec<&str> = key.split("__").collect();
        if parts.len() < 2 || !is_scope_name(parts[0]) {
            continue;
        }
        let scope = parts[0].to_string();
        // {SCOPE}__{PROVIDER}__{N}__{FIELD}
        if parts.len() == 4 && parts[2].chars().all(|c| c.is_ascii_digit()) && !parts[2].is_empty()
        {
            let provider = parts[1];
            if !is_scope_name(provider) {
                problems.add(
                    &key,
                    "PROVIDER segment must be upper-case letters, digits, _",
                );
                continue;
            }
            let n: u32 = match parts[2].parse() {
                Ok(n) => n,
                Err(_) => {
                    problems.add(&key, "N segment is not a number");
                    continue;
                }
            };
            let field = parts[3];
            if !SOURCE_FIELDS.contains(&field) {
                problems.add(
                    &key,
                    format!(
                        "unknown source field `{field}` (known: {})",
                        SOURCE_FIELDS.join(", ")
                    ),
                );
                continue;
            }
            sources
                .entry(scope)
                .or_default()
                .entry((n, provider.to_ascii_lowercase()))
                .or_default()
                .insert(field.to_string(), (key.clone(), value));
            continue;
        }
        let sub = parts[1..].join("__");
        if SCOPE_KEYS.contains(&sub.as_str()) {
            scope_keys
                .entry(scope)
                .or_default()
                .insert(sub, (key.clone(), value));
        } else if SCOPE_GROUPS.contains(&parts[1]) {
            problems.add(&key, format!("unknown scope key `{sub}`"));
        }
    }

    let cache_on = matches!(
        process.get("PGW_CACHE_BACKEND").map(|v| v.trim()),
        Some("memory" | "redis")
    );
    let process = parse_process(&process, &mut problems);

    for (scope, keys) in &scope_keys {
        if !sources.contains_key(scope)
            && let Some((key, _)) = keys.values().next()
        {
            problems.add(
                    key,
                    format!("scope {scope} has settings but no sources ({scope}__<PROVIDER>__<N>__BASE_URL …)"),
                );
        }
    }

    let mut scopes = Vec::new();
    for (scope_name, scope_sources) in &sources {
        let empty = BTreeMap::new();
        let keys = scope_keys.get(scope_name).unwrap_or(&empty);
        let scope_arc: Arc<str> = Arc::from(scope_name.as_str());
        let mut parsed_sources = Vec::new();
        for ((n, provider), fields) in scope_sources {
            if let Some(s) = parse_source(scope_name, *n, provider, fields, &mut problems) {
                parsed_sources.push(s);
            }
        }
        let aliases = match keys.get("ALIASES") {
            Some((key, v)) => {
                let list: Vec<String> = v
                    .split(',')
                    .map(|a| a.trim().to_string())
                    .filter(|a| !a.is_empty())
                    .collect();
                if list.is_empty() {
                    problems.add(key, "must list at least one alias");
                }
                list
            }
            None => vec![scope_name.to_ascii_lowercase()],
        };
        let mut retry = RetrySettings::default();
        if let Some((key, v)) = keys.get("RETRY__MAX_ATTEMPTS") {
            match v.trim().parse::<u32>() {
                Ok(n) => retry.max_attempts = n,
                _ => problems.add(key, format!("expected an integer ≥ 1, got `{v}`")),
            }
        }
        if let Some((key, v)) = keys.get("RETRY__BASE_DELAY_S")
            && let Some(d) = parse_seconds(key, v, &mut problems)
        {
            retry.base_delay = d;
        }
        if let Some((key, v)) = keys.get("RETRY__MAX_DELAY_S")
            && let Some(d) = parse_seconds(key, v, &mut problems)
        {
            retry.max_delay = d;
        }
        let call_deadline = keys
            .get("CALL_DEADLINE_S")
            .and_then(|(key, v)| parse_seconds(key, v, &mut problems));
        let governance = parse_governance(keys, &mut problems);
        let cache = super::cache::parse_scope(&|sub| keys.get(sub).cloned(), &mut |k, m| {
            problems.add(k, m)
        });
        let structured =
            super::structured::parse_scope(&|sub| keys.get(sub).cloned(), &mut |k, m| {
                problems.add(k, m)
            });
        let other = keys
            .iter()
            .filter(|(k, _)| k.starts_with("CACHE__"))
            .map(|(k, (_, v))| (k.clone(), v.clone()))
            .collect();
        scopes.push(ScopeSettings {
            name: scope_arc,
            aliases,
            sources: parsed_sources,
            retry,
            call_deadline,
            governance,
            cache,
            structured,
            other,
        });
    }

    // The rules on values, as for typed settings (`validate.rs`), on whatever was built;
    // a key the parser already found fault with is not reported twice.
    let mut rules = Problems(Vec::new());
    if let Some(p) = &process {
        super::validate::check_process(p, &mut rules);
    }
    for (i, scope) in scopes.iter().enumerate() {
        super::validate::check_scope(i, scope, cache_on, &mut rules);
    }
    super::validate::check_aliases(&scopes, &mut rules);
    for p in rules.0 {
        if !problems.0.iter().any(|q| q.key == p.key) {
            problems.0.push(p);
        }
    }

    match (problems.0.is_empty(), process) {
        (true, Some(process)) => Ok(Settings { process, scopes }),
        _ => {
            let mut list = problems.0;
            list.sort_by(|a, b| a.key.cmp(&b.key));
            Err(ConfigError::Invalid(list))
        }
    }
}

fn parse_governance(
    keys: &BTreeMap<String, (String, String)>,
    problems: &mut Problems,
) -> GovernanceSettings {
    let mut g = GovernanceSettings::default();
    let int = |sub: &str, min: u64, problems: &mut Problems| -> Option<u64> {
        let (key, v) = keys.get(sub)?;
        match v.trim().parse::<u64>() {
            Ok(n) if n >= min => Some(n),
            _ => {
                problems.add(key, format!("expected an integer ≥ {min}, got `{v}`"));
                None
            }
        }
    };
    let secs = |sub: &str, problems: &mut Problems| -> Option<Duration> {
        let (key, v) = keys.get(sub)?;
        parse_seconds(key, v, problems)
    };
    let small = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    if let Some(n) = int("BREAKER__FAIL_THRESHOLD", 0, problems) {
        g.fail_threshold = small(n);
    }
    if let Some(d) = secs("BREAKER__COOLDOWN_S", problems) {
        g.cooldown = d;
    }
    g.max_cooldown =
        secs("BREAKER__MAX_COOLDOWN_S", problems).unwrap_or_else(|| g.max_cooldown.max(g.cooldown));
    if let Some((key, v)) = keys.get("BREAKER__FAIL_RATE") {
        match v.trim().parse::<f64>() {
            Ok(x) if x.is_finite() => g.fail_rate = x,
            _ => problems.add(key, format!("expected a number in (0, 1], got `{v}`")),
        }
    }
    if let Some(n) = int("BREAKER__MIN_CALLS", 0, problems) {
        g.min_calls = small(n);
    }
    if let Some(d) = secs("BACKPRESSURE__STALL_WINDOW_S", problems) {
        g.stall_window = d;
    }
    for (sub, target) in [("QUOTA_FULL", 0), ("CIRCUIT_OPEN", 1)] {
        if let Some((key, v)) = keys.get(sub) {
            let p = match v.trim() {
                "wait" => WaitPolicy::Wait,
                "fail_fast" => WaitPolicy::FailFast,
                _ => {
                    problems.add(key, format!("expected wait|fail_fast, got `{v}`"));
                    continue;
                }
            };
            if target == 0 {
                g.quota_full = p;
            } else {
                g.circuit_open = p;
            }
        }
    }
    if let Some(n) = int("GLOBAL__MAX_CONCURRENCY", 0, problems) {
        g.global_max_concurrency = small(n);
    }
    if let Some(n) = int("GLOBAL__RPM", 0, problems) {
        g.global_rpm = small(n);
    }
    if let Some(n) = int("GLOBAL__TPM", 0, problems) {
        g.global_tpm = n;
    }
    if let Some((key, v)) = keys.get("SELECTOR") {
        let v = v.trim();
        if ["health-aware", "round-robin", "least-inflight"].contains(&v) || v.ends_with(".wasm") {
            g.selector = v.to_string();
        } else {
            problems.add(
                key,
                format!(
                    "expected health-aware|round-robin|least-inflight or a .wasm path, got `{v}`"
                ),
            );
        }
    }
    g
}

fn parse_process(
    map: &BTreeMap<String, String>,
    problems: &mut Problems,
) -> Option<ProcessSettings> {
    let before = problems.0.len();
    let get = |k: &str| map.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let listen = match get("PGW_LISTEN") {
        Some(v) => match v.parse::<SocketAddr>() {
            Ok(a) => a,
            Err(_) => {
                problems.add("PGW_LISTEN", format!("expected host:port, got `{v}`"));
                DEFAULT_LISTEN
            }
        },
        None => DEFAULT_LISTEN,
    };
    let keys = |k: &str| -> Vec<String> {
        get(k)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    };
    let api_keys = keys("PGW_API_KEYS");
    let admin_keys = keys("PGW_ADMIN_KEYS");
    let max_body_bytes = match get("PGW_MAX_BODY_BYTES") {
        Some(v) => match v.parse::<usize>() {
            Ok(n) => n,
            _ => {
                problems.add(
                    "PGW_MAX_BODY_BYTES",
                    format!("expected a positive integer, got `{v}`"),
                );
                0
            }
        },
        None => DEFAULT_MAX_BODY_BYTES,
    };
    let log_json = match get("PGW_LOG_FORMAT") {
        None | Some("text") => false,
        Some("json") => true,
        Some(v) => {
            problems.add("PGW_LOG_FORMAT", format!("expected text|json, got `{v}`"));
            false
        }
    };
    let telemetry = super::telemetry::parse(&|k| get(k).map(str::to_string), problems);
    let backends = super::backends::parse(&|k| get(k).map(str::to_string), problems);
    let upstream_limits = super::limits::parse(&|k| get(k).map(str::to_string), problems);
    for (key, allowed) in [("PGW_CACHE_BACKEND", &["memory", "redis", "none"][..])] {
        if let Some(v) = get(key)
            && !allowed.contains(&v)
        {
            problems.add(
                key,
                format!("expected one of {}, got `{v}`", allowed.join("|")),
            );
        }
    }
    let plugin_timeout = match get("PGW_PLUGIN_TIMEOUT_MS") {
        Some(v) => match v.parse::<u64>() {
            Ok(n) => Duration::from_millis(n),
            _ => {
                problems.add(
                    "PGW_PLUGIN_TIMEOUT_MS",
                    format!("expected a positive integer (ms), got `{v}`"),
                );
                DEFAULT_PLUGIN_TIMEOUT
            }
        },
        None => DEFAULT_PLUGIN_TIMEOUT,
    };
    let plugin_memory_bytes = match get("PGW_PLUGIN_MEMORY_MB") {
        Some(v) => match v
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_mul(1024 * 1024))
        {
            Some(bytes) => bytes,
            _ => {
                problems.add(
                    "PGW_PLUGIN_MEMORY_MB",
                    format!("expected an integer in 1..=4096 (MiB), got `{v}`"),
                );
                0
            }
        },
        None => DEFAULT_PLUGIN_MEMORY_BYTES,
    };
    let listener = super::listener::parse(&|k| get(k).map(str::to_string), problems);
    let plugin_max_bytes = match get("PGW_PLUGIN_MAX_BYTES") {
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n > 0 => n,
            _ => {
                problems.add(
                    "PGW_PLUGIN_MAX_BYTES",
                    format!("expected a positive integer (bytes), got `{v}`"),
                );
                0
            }
        },
        None => crate::plugin::DEFAULT_PLUGIN_MAX_BYTES,
    };
    let cache = super::cache::parse_process(&|k| get(k).map(str::to_string), &mut |k, m| {
        problems.add(k, m)
    });
    let other = map
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "PGW_LISTEN"
                    | "PGW_API_KEYS"
                    | "PGW_ADMIN_KEYS"
                    | "PGW_MAX_BODY_BYTES"
                    | "PGW_LOG_FORMAT"
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if problems.0.len() != before {
        return None;
    }
    Some(ProcessSettings {
        listen,
        api_keys,
        admin_keys,
        max_body_bytes,
        log_filter: get("PGW_LOG").unwrap_or(DEFAULT_LOG_FILTER).to_string(),
        log_json,
        telemetry,
        backends,
        plugin_cache_dir: get("PGW_PLUGIN_CACHE_DIR").map(PathBuf::from),
        plugin_timeout,
        plugin_memory_bytes,
        upstream_limits,
        plugin_max_bytes,
        cache,
        listener,
        other,
    })
}

/// A finite, non-negative number of seconds below 10^7 (whether 0 is allowed is a rule of
/// `validate.rs`).
fn parse_seconds(key: &str, v: &str, problems: &mut Problems) -> Option<Duration> {
    match v.trim().parse::<f64>() {
        Ok(x) if (0.0..1e7).contains(&x) => Some(Duration::from_secs_f64(x)),
        _ => {
            problems.add(
                key,
                format!("expected a finite number of seconds ≥ 0, got `{v}`"),
            );
            None
        }
    }
}

fn parse_u64(key: &str, v: &str, problems: &mut Problems) -> Option<u64> {
    match v.trim().parse::<u64>() {
        Ok(n) => Some(n),
        Err(_) => {
            problems.add(key, format!("expected a non-negative integer, got `{v}`"));
            None
        }
    }
}

fn parse_bool(key: &str, v: &str, problems: &mut Problems) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => {
            problems.add(key, format!("expected true|false, got `{v}`"));
            None
        }
    }
}

fn parse_source(
    scope: &str,
    n: u32,
    provider: &str,
    fields: &BTreeMap<String, (String, String)>,
    problems: &mut Problems,
) -> Option<SourceSettings> {
    let before = problems.0.len();
    let prefix = format!("{scope}__{}__{n}__", provider.to_ascii_uppercase());
    let req = |field: &str, problems: &mut Problems| -> Option<String> {
        match fields.get(field) {
            Some((_, v)) if !v.trim().is_empty() => Some(v.trim().to_string()),
            Some((key, _)) => {
                problems.add(key, "must not be empty");
                None
            }
            None => {
                problems.add(&format!("{prefix}{field}"), "required");
                None
            }
        }
    };
    let base_url = req("BASE_URL", problems).map(|u| u.trim_end_matches('/').to_string());
    // Also a rule of `validate.rs`; checked here too so that it is reported in the same run
    // as the source's other problems (a source with any is not built, nor validated).
    if let (Some(url), Some((key, _))) = (&base_url, fields.get("BASE_URL"))
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        problems.add(
            key,
            format!(
                "expected an http:// or https:// URL, got `{}`",
                crate::transport::strip_userinfo(url)
            ),
        );
    }
    let model = req("MODEL", problems);
    let opt = |field: &str| fields.get(field).map(|(k, v)| (k.as_str(), v.as_str()));

    let plugin = match opt("PLUGIN") {
        Some((key, v)) => {
            let v = v.trim();
            if let Some(fp) = FirstParty::from_name(v) {
                Some(PluginRef::FirstParty(fp))
            } else if v.ends_with(".wasm") {
                Some(PluginRef::File(PathBuf::from(v)))
            } else {
                problems.add(
                    key,
                    format!("expected a first-party provider (openai, deepseek, qwen) or a path to a .wasm file, got `{v}`"),
                );
                None
            }
        }
        None => match FirstParty::from_name(provider) {
            Some(fp) => Some(PluginRef::FirstParty(fp)),
            None => {
                problems.add(
                    &format!("{prefix}PLUGIN"),
                    format!("provider `{provider}` is not first-party (openai, deepseek, qwen): set PLUGIN to a .wasm path"),
                );
                None
            }
        },
    };
    let plugin_sha256 = match opt("PLUGIN_SHA256") {
        Some((key, v)) => {
            let v = v.trim().to_ascii_lowercase();
            if v.len() != 64 || !v.chars().all(|c| c.is_ascii_hexdigit()) {
                problems.add(key, "expected 64 hex digits");
            }
            Some(v)
        }
        None => None,
    };
    let enable_thinking = opt("ENABLE_THINKING").and_then(|(k, v)| parse_bool(k, v, problems));
    let extra_body = match opt("EXTRA_BODY") {
        Some((key, v)) => match serde_json::from_str::<serde_json::Value>(v) {
            Ok(serde_json::Value::Object(map)) => {
                for p in PROTECTED_BODY_KEYS {
                    if map.contains_key(p) {
                        problems.add(key, format!("must not set the protected key `{p}`"));
                    }
                }
                map
            }
            Ok(_) => {
                problems.add(key, "expected a JSON object");
                serde_json::Map::new()
            }
            Err(e) => {
                problems.add(key, format!("invalid JSON: {e}"));
                serde_json::Map::new()
            }
        },
        None => serde_json::Map::new(),
    };
    let mut timeouts = TimeoutSettings::default();
    if let Some((k, v)) = opt("TIMEOUT_S")
        && let Some(d) = parse_seconds(k, v, problems)
    {
        timeouts.total = d;
    }
    if let Some((k, v)) = opt("TTFT_TIMEOUT_S")
        && let Some(d) = parse_seconds(k, v, problems)
    {
        timeouts.ttft = d;
    }
    if let Some((k, v)) = opt("INTER_TOKEN_TIMEOUT_S")
        && let Some(d) = parse_seconds(k, v, problems)
    {
        timeouts.inter_token = d;
    }
    let missing_done = match opt("MISSING_DONE") {
        None => MissingDone::Retry,
        Some((_, v)) if v.trim() == "retry" => MissingDone::Retry,
        Some((_, v)) if v.trim() == "salvage" => MissingDone::Salvage,
        Some((k, v)) => {
            problems.add(k, format!("expected retry|salvage, got `{v}`"));
            MissingDone::Retry
        }
    };
    let num = |field: &str, problems: &mut Problems| -> u64 {
        opt(field)
            .and_then(|(k, v)| parse_u64(k, v, problems))
            .unwrap_or(0)
    };
    let as_u32 = |field: &str, v: u64, problems: &mut Problems| -> u32 {
        u32::try_from(v).unwrap_or_else(|_| {
            problems.add(&format!("{prefix}{field}"), "value too large");
            0
        })
    };
    let max_concurrency = num("MAX_CONCURRENCY", problems);
    let max_concurrency = as_u32("MAX_CONCURRENCY", max_concurrency, problems);
    let rpm = num("RPM", problems);
    let rpm = as_u32("RPM", rpm, problems);
    let tpm = num("TPM", problems);
    let est_tokens = num("EST_TOKENS", problems);
    let max_batch = num("MAX_BATCH", problems);
    let max_batch = as_u32("MAX_BATCH", max_batch, problems);
    let weight = match opt("WEIGHT") {
        Some((k, v)) => match v.trim().parse::<u32>() {
            Ok(w) => w,
            _ => {
                problems.add(k, format!("expected an integer ≥ 1, got `{v}`"));
                DEFAULT_WEIGHT
            }
        },
        None => DEFAULT_WEIGHT,
    };
    let trust_env = opt("TRUST_ENV")
        .and_then(|(k, v)| parse_bool(k, v, problems))
        .unwrap_or(false);
    let api_key = opt("API_KEY")
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty());

    if problems.0.len() != before {
        return None;
    }
    Some(SourceSettings {
        name: Arc::from(format!("{provider}-{n}")),
        provider: Arc::from(provider),
        index: n,
        base_url: base_url?,
        model: model?,
        api_key,
        plugin: plugin?,
        plugin_sha256,
        enable_thinking,
        extra_body,
        timeouts,
        missing_done,
        weight,
        max_concurrency,
        rpm,
        tpm,
        est_tokens,
        max_batch,
        trust_env,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn problems(list: &[(&str, &str)]) -> Vec<ConfigProblem> {
        match settings_from_vars(vars(list)) {
            Err(ConfigError::Invalid(p)) => p,
            other => vec![ConfigProblem {
                key: "<none>".into(),
                message: format!("expected problems, got {other:?}"),
            }],
        }
    }

    #[test]
    fn no_error_or_debug_output_shows_a_password_or_a_key() {
        // A bad scheme and a bad Redis URL, both with userinfo: the messages name the key
        // and show the URL without it.
        let p = problems(&[
            (
                "LLM__OPENAI__1__BASE_URL",
                "ftp://admin:hunter2secret@up.example/v1",
            ),
            ("LLM__OPENAI__1__MODEL", "m"),
            ("PGW_REDIS_URL", "rediss://:hunter3secret@ cache.example"),
        ]);
        let shown = format!("{p:?}");
        assert!(!shown.contains("hunter2secret"), "{shown}");
        assert!(!shown.contains("hunter3secret"), "{shown}");
        assert!(
            p.iter().any(|x| x.key == "LLM__OPENAI__1__BASE_URL"
                && x.message == "expected an http:// or https:// URL, got `ftp://up.example/v1`"),
            "{p:?}"
        );
        assert!(p.iter().any(|x| x.key == "PGW_REDIS_URL"), "{p:?}");

        // `Debug` of valid settings: keys counted, passwords stripped.
        let s = settings_from_vars(vars(&[
            ("LLM__OPENAI__1__BASE_URL", "http://up.example/v1"),
            ("LLM__OPENAI__1__MODEL", "m"),
            ("LLM__OPENAI__1__API_KEY", "sk-source-secret-1"),
            ("PGW_API_KEYS", "sk-client-secret-2,sk-client-secret-3"),
            ("PGW_ADMIN_KEYS", "sk-admin-secret-4"),
            ("PGW_TELEMETRY_BACKEND", "postgres"),
            (
                "PGW_TELEMETRY_PG_DSN",
                "postgres://pgw:pg-secret-5@db.example/test",
            ),
            (
                "PGW_REDIS_URL",
                "redis://:redis-secret-6@cache.example:6379",
            ),
        ]))
        .expect("valid settings");
        let shown = format!("{s:?}");
        for secret in [
            "secret-1", "secret-2", "secret-3", "secret-4", "secret-5", "secret-6",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains(r#"api_keys: "<2 redacted>""#), "{shown}");
        assert!(shown.contains("postgres://db.example/test"), "{shown}");
        assert!(shown.contains("redis://cache.example:6379"), "{shown}");
    }

    #[test]
    fn parses_two_sources_in_order() {
        let s = settings_from_vars(vars(&[
            ("LLM__QWEN__2__BASE_URL", "http://b/v1/"),
            ("LLM__QWEN__2__MODEL", "qwen-plus"),
            ("LLM__DEEPSEEK__1__BASE_URL", "http://a/v1"),
            ("LLM__DEEPSEEK__1__MODEL", "deepseek-chat"),
            ("LLM__DEEPSEEK__1__API_KEY", "sk-1"),
            ("LLM__DEEPSEEK__1__ENABLE_THINKING", "true"),
            ("LLM__RETRY__MAX_ATTEMPTS", "5"),
            ("PATH", "/usr/bin"),
            ("SOME__OTHER", "x"),
        ]));
        let s = s.expect("valid settings");
        assert_eq!(s.scopes.len(), 1);
        let scope = &s.scopes[0];
        assert_eq!(&*scope.name, "LLM");
        assert_eq!(scope.aliases, vec!["llm".to_string()]);
        assert_eq!(scope.retry.max_attempts, 5);
        let names: Vec<&str> = scope.sources.iter().map(|s| &*s.name).collect();
        assert_eq!(names, vec!["deepseek-1", "qwen-2"]);
        assert_eq!(scope.sources[1].base_url, "http://b/v1");
        assert_eq!(scope.sources[0].enable_thinking, Some(true));
        assert_eq!(
            scope.sources[0].plugin,
            PluginRef::FirstParty(FirstParty::DeepSeek)
        );
        assert!(!format!("{:?}", scope.sources[0]).contains("sk-1"));
    }

    #[test]
    fn every_problem_names_its_key() {
        let p = problems(&[
            ("LLM__OPENAI__1__BASE_URL", "http://a"),
            ("LLM__OPENAI__1__MODEL", "m"),
            ("LLM__OPENAI__1__COLOUR", "blue"),
            ("LLM__OPENAI__1__RPM", "ten"),
            ("LLM__OPENAI__1__MISSING_DONE", "maybe"),
            ("LLM__OPENAI__1__EXTRA_BODY", r#"{"model":"x"}"#),
            ("LLM__RETRY__MAX_ATTEMPTS", "0"),
            ("LLM__RETRY__FOO", "1"),
            ("PGW_NOPE", "1"),
            ("PGW_LOG_FORMAT", "xml"),
            ("LLM__CALL_DEADLINE_S", "NaN"),
        ]);
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            vec![
                "LLM__CALL_DEADLINE_S",
                "LLM__OPENAI__1__COLOUR",
                "LLM__OPENAI__1__EXTRA_BODY",
                "LLM__OPENAI__1__MISSING_DONE",
                "LLM__OPENAI__1__RPM",
                "LLM__RETRY__FOO",
                "LLM__RETRY__MAX_ATTEMPTS",
                "PGW_LOG_FORMAT",
                "PGW_NOPE",
            ]
        );
        assert!(p[2].message.contains("protected key `model`"));
    }

    #[test]
    fn missing_required_fields_and_unknown_provider() {
        let p = problems(&[("VL__ACME__1__BASE_URL", "http://a")]);
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, vec!["VL__ACME__1__MODEL", "VL__ACME__1__PLUGIN"]);
    }

    #[test]
    fn watchdog_order_is_enforced() {
        let p = problems(&[
            ("LLM__OPENAI__1__BASE_URL", "http://a"),
            ("LLM__OPENAI__1__MODEL", "m"),
            ("LLM__OPENAI__1__TTFT_TIMEOUT_S", "10"),
            ("LLM__OPENAI__1__INTER_TOKEN_TIMEOUT_S", "20"),
        ]);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].key, "LLM__OPENAI__1__INTER_TOKEN_TIMEOUT_S");
    }

    #[test]
    fn scope_settings_without_sources_are_refused() {
        let p = problems(&[("JUDGE__RETRY__MAX_ATTEMPTS", "2")]);
        assert_eq!(p.len(), 1);
        assert!(p[0].message.contains("no sources"));
    }
}
