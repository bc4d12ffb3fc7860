//! The entry of parsing: `settings_from_vars` sorts variables (`.env` + process environment,
//! or any list; docs/configuration.md#validated-at-start-up) into their sections — the
//! process's `PGW_*` keys, each scope's `{SCOPE}__…` keys and each source's
//! `{SCOPE}__{PROVIDER}__{N}__{FIELD}` keys — has each section parsed, then runs the rules of
//! `validate.rs` on what was built. Every problem is collected, so one start-up reports all
//! of them, each naming its key.

use std::collections::BTreeMap;

use super::problems::{ConfigError, Problems};
use super::scope::ScopeSettings;
use super::settings::Settings;
use super::vars::Vars;

/// Settings from the process environment (call `load_dotenv` first to include `.env`).
pub fn settings_from_env() -> Result<Settings, ConfigError> {
    settings_from_vars(std::env::vars())
}

/// The variables sorted by section.
#[derive(Default)]
struct Sections {
    /// The `PGW_*` keys, named by the whole key.
    process: Vars,
    /// Scope → its keys, named by the part after `{SCOPE}__`.
    scopes: BTreeMap<String, Vars>,
    /// Scope → (N, provider in lower case) → the source's fields.
    sources: BTreeMap<String, BTreeMap<(u32, String), Vars>>,
}

/// Whether `s` can be a `SCOPE` or `PROVIDER` segment: upper-case letters, digits and `_`,
/// starting with a letter, with no `__`.
fn is_scope_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !s.contains("__")
}

impl Sections {
    /// Put `key` in its section; an unknown key of a known shape is a problem, a variable
    /// of no known shape (`PATH`, …) is ignored.
    fn sort(&mut self, key: String, value: String, problems: &mut Problems) {
        // The standard OpenTelemetry variables the trace exporter reads go with the process
        // keys; the other `OTEL_*` ones belong to other signals or SDKs (docs/tracing.md).
        if key.starts_with("OTEL_") {
            if super::otel::KEYS.contains(&key.as_str()) {
                self.process.insert(&key, key.clone(), value);
            }
            return;
        }
        if key.starts_with("PGW_") {
            if super::process::is_known(&key) {
                self.process.insert(&key, key.clone(), value);
            } else {
                problems.add(&key, "unknown PGW_ key");
            }
            return;
        }
        let parts: Vec<&str> = key.split("__").collect();
        if parts.len() < 2 || !is_scope_name(parts[0]) {
            return;
        }
        let scope = parts[0];
        if parts.len() == 4 && parts[2].chars().all(|c| c.is_ascii_digit()) && !parts[2].is_empty()
        {
            self.sort_source(&parts, &key, value, problems);
            return;
        }
        let sub = parts[1..].join("__");
        if super::scope::is_key(&sub) {
            self.scopes
                .entry(scope.to_string())
                .or_insert_with(|| Vars::new(format!("{scope}__")))
                .insert(&sub, key.clone(), value);
        } else if super::scope::is_group(parts[1]) {
            problems.add(&key, format!("unknown scope key `{sub}`"));
        }
    }

    /// `{SCOPE}__{PROVIDER}__{N}__{FIELD}`: `parts` are the four segments of `key`, `N`
    /// all digits.
    fn sort_source(&mut self, parts: &[&str], key: &str, value: String, problems: &mut Problems) {
        let &[scope, provider, n, field] = parts else {
            return;
        };
        if !is_scope_name(provider) {
            problems.add(
                key,
                "PROVIDER segment must be upper-case letters, digits, _",
            );
            return;
        }
        let Ok(n) = n.parse::<u32>() else {
            problems.add(key, "N segment is not a number");
            return;
        };
        if !super::source::FIELDS.contains(&field) {
            problems.add(
                key,
                format!(
                    "unknown source field `{field}` (known: {})",
                    super::source::FIELDS.join(", ")
                ),
            );
            return;
        }
        let provider = provider.to_ascii_lowercase();
        let prefix = format!("{scope}__{}__{n}__", provider.to_ascii_uppercase());
        self.sources
            .entry(scope.to_string())
            .or_default()
            .entry((n, provider))
            .or_insert_with(|| Vars::new(prefix))
            .insert(field, key.to_string(), value);
    }
}

/// Settings from an explicit list of variables (the environment, or a test's map).
pub fn settings_from_vars(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Settings, ConfigError> {
    let mut problems = Problems::new();
    let mut sections = Sections::default();
    for (key, value) in vars {
        sections.sort(key, value, &mut problems);
    }
    let cache_on = matches!(
        sections.process.get("PGW_CACHE_BACKEND"),
        Some("memory" | "redis")
    );
    let process = super::process::parse(&sections.process, &mut problems);
    for (scope, keys) in &sections.scopes {
        if !sections.sources.contains_key(scope)
            && let Some((_, key, _)) = keys.iter().next()
        {
            problems.add(
                key,
                format!("scope {scope} has settings but no sources ({scope}__<PROVIDER>__<N>__BASE_URL …)"),
            );
        }
    }
    let scopes = parse_scopes(&sections, &mut problems);

    // The rules on values, as for typed settings (`validate.rs`), on whatever was built;
    // a key the parser already found fault with is not reported twice.
    let mut rules = Problems::new();
    if let Some(p) = &process {
        super::validate::check_process(p, &mut rules);
    }
    for (i, scope) in scopes.iter().enumerate() {
        super::validate::check_scope(i, scope, cache_on, &mut rules);
    }
    super::validate::check_aliases(&scopes, &mut rules);
    problems.add_unreported(rules);

    problems.into_result()?;
    match process {
        Some(process) => Ok(Settings { process, scopes }),
        None => Err(ConfigError::Invalid(Vec::new())),
    }
}

/// Every scope that has sources, with the sources that parse.
fn parse_scopes(sections: &Sections, problems: &mut Problems) -> Vec<ScopeSettings> {
    let mut scopes = Vec::new();
    for (name, scope_sources) in &sections.sources {
        let mut sources = Vec::new();
        for ((n, provider), fields) in scope_sources {
            if let Some(s) = super::source::parse(provider, *n, fields, problems) {
                sources.push(s);
            }
        }
        let empty = Vars::new(format!("{name}__"));
        let keys = sections.scopes.get(name).unwrap_or(&empty);
        scopes.push(super::scope::parse(name, keys, sources, problems));
    }
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigProblem, FirstParty, PluginRef};

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

    #[test]
    fn the_selector_is_typed_at_parse_time() {
        let base = [
            ("LLM__OPENAI__1__BASE_URL", "http://a"),
            ("LLM__OPENAI__1__MODEL", "m"),
        ];
        let with = |v: &'static str| {
            let mut list = base.to_vec();
            list.push(("LLM__SELECTOR", v));
            list
        };
        let s = settings_from_vars(vars(&base)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s.scopes[0].governance.selector,
            crate::config::DEFAULT_SELECTOR
        );
        assert_eq!(s.scopes[0].governance.selector.to_string(), "health-aware");
        let s =
            settings_from_vars(vars(&with(" /opt/sel.wasm "))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s.scopes[0].governance.selector,
            crate::config::SelectorRef::File("/opt/sel.wasm".into())
        );
        let p = problems(&with("random"));
        assert_eq!(
            p,
            vec![ConfigProblem {
                key: "LLM__SELECTOR".into(),
                message:
                    "expected health-aware|round-robin|least-inflight or a .wasm path, got `random`"
                        .into(),
            }]
        );
    }
}
