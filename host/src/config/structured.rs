//! The structured-output section of a scope: typed settings
//! (`{SCOPE}__STRUCTURED__STRATEGY|MAX_RETRIES`; docs/structured-output.md#re-ask), their
//! keys, defaults and parsing; every problem names its key.

use super::problems::Problems;
use super::vars::Vars;

/// Scope keys of this section: the part after `{SCOPE}__`.
pub(super) const KEYS: &[&str] = &["STRUCTURED__STRATEGY", "STRUCTURED__MAX_RETRIES"];

/// The first segment of this section's scope keys.
pub(super) const GROUPS: &[&str] = &["STRUCTURED"];

/// The first-party strategy names (the components `plugin::builtin` embeds), default first.
pub(super) const FIRST_PARTY_STRATEGIES: [&str; 3] =
    ["json-repair", "native-schema", "unwrap-parameters"];

/// `{SCOPE}__STRUCTURED__STRATEGY`: prompt instructions and JSON repair need nothing of the
/// provider, so they work with every source.
pub const DEFAULT_STRUCTURED_STRATEGY: &str = FIRST_PARTY_STRATEGIES[0];
/// `{SCOPE}__STRUCTURED__MAX_RETRIES`: one re-ask with the errors as feedback, since each is
/// a billed upstream call.
pub const DEFAULT_STRUCTURED_RETRIES: u32 = 1;

/// Most re-asks `{SCOPE}__STRUCTURED__MAX_RETRIES` may allow: each is a real, billed
/// upstream call.
pub const MAX_STRUCTURED_RETRIES: u32 = 10;

/// `{SCOPE}__STRUCTURED__*`: how the scope's calls that ask for JSON
/// (`response_format` `json_schema` or `json_object`) go through the structured-output
/// ladder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeStructuredSettings {
    /// `{SCOPE}__STRUCTURED__STRATEGY`: the scope's default strategy — a first-party name
    /// (`json-repair`, the default; `native-schema`; `unwrap-parameters`) or the path of a
    /// `.wasm` strategy component. A call may pick another with `x-pgw-structured-strategy`.
    pub strategy: String,
    /// `{SCOPE}__STRUCTURED__MAX_RETRIES`: re-asks with the validation errors as feedback
    /// after the first answer fails repair or validation (default 1; 0 = none, the answer
    /// is repaired or refused with 422; at most [`MAX_STRUCTURED_RETRIES`]).
    pub max_retries: u32,
}

impl Default for ScopeStructuredSettings {
    fn default() -> Self {
        Self {
            strategy: DEFAULT_STRUCTURED_STRATEGY.to_string(),
            max_retries: DEFAULT_STRUCTURED_RETRIES,
        }
    }
}

/// Parse `{SCOPE}__STRUCTURED__STRATEGY` and `{SCOPE}__STRUCTURED__MAX_RETRIES` (named by
/// the part after `{SCOPE}__`).
pub(super) fn parse(vars: &Vars, problems: &mut Problems) -> ScopeStructuredSettings {
    let mut s = ScopeStructuredSettings::default();
    if let Some((key, v)) = vars.raw("STRUCTURED__STRATEGY") {
        let v = v.trim();
        if FIRST_PARTY_STRATEGIES.contains(&v) || v.ends_with(".wasm") {
            s.strategy = v.to_string();
        } else {
            problems.add(
                key,
                format!(
                    "expected {} or a .wasm path, got `{v}`",
                    FIRST_PARTY_STRATEGIES.join("|")
                ),
            );
        }
    }
    if let Some((key, v)) = vars.raw("STRUCTURED__MAX_RETRIES") {
        match v.trim().parse::<u32>() {
            Ok(n) if n <= MAX_STRUCTURED_RETRIES => s.max_retries = n,
            _ => problems.add(
                key,
                format!("expected an integer from 0 to {MAX_STRUCTURED_RETRIES}, got `{v}`"),
            ),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(vars: &[(&str, &str)]) -> (ScopeStructuredSettings, Vec<(String, String)>) {
        let mut problems = Problems::new();
        let s = super::parse(&Vars::from_pairs("LLM__", vars), &mut problems);
        let problems = problems
            .into_list()
            .into_iter()
            .map(|p| (p.key, p.message))
            .collect();
        (s, problems)
    }

    #[test]
    fn defaults_to_json_repair_with_one_re_ask() {
        let (s, problems) = parse(&[]);
        assert_eq!(s, ScopeStructuredSettings::default());
        assert_eq!((s.strategy.as_str(), s.max_retries), ("json-repair", 1));
        assert!(problems.is_empty());
    }

    #[test]
    fn reads_names_paths_and_zero_retries() {
        let (s, problems) = parse(&[
            ("STRUCTURED__STRATEGY", " native-schema "),
            ("STRUCTURED__MAX_RETRIES", "0"),
        ]);
        assert_eq!((s.strategy.as_str(), s.max_retries), ("native-schema", 0));
        assert!(problems.is_empty());
        let (s, _) = parse(&[("STRUCTURED__STRATEGY", "/opt/pgw/mine.wasm")]);
        assert_eq!(s.strategy, "/opt/pgw/mine.wasm");
    }

    #[test]
    fn the_environment_reaches_the_scope_settings() {
        let base = [
            ("LLM__OPENAI__1__BASE_URL", "http://127.0.0.1:1/v1"),
            ("LLM__OPENAI__1__MODEL", "m"),
        ];
        let vars = |extra: &[(&str, &str)]| {
            base.iter()
                .chain(extra)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let s = crate::config::settings_from_vars(vars(&[
            ("LLM__STRUCTURED__STRATEGY", "unwrap-parameters"),
            ("LLM__STRUCTURED__MAX_RETRIES", "2"),
        ]))
        .unwrap();
        let scope = &s.scopes[0];
        assert_eq!(scope.structured.strategy, "unwrap-parameters");
        assert_eq!(scope.structured.max_retries, 2);
        assert!(scope.other.keys().all(|k| !k.starts_with("STRUCTURED__")));
        let err = crate::config::settings_from_vars(vars(&[("LLM__STRUCTURED__MAX_RETRIES", "x")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("LLM__STRUCTURED__MAX_RETRIES"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let (_, problems) = parse(&[
            ("STRUCTURED__STRATEGY", "json_repair"),
            ("STRUCTURED__MAX_RETRIES", "-1"),
        ]);
        let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["LLM__STRUCTURED__STRATEGY", "LLM__STRUCTURED__MAX_RETRIES"]
        );
        let (_, problems) = parse(&[("STRUCTURED__MAX_RETRIES", "11")]);
        assert!(problems[0].1.contains("0 to 10"), "{problems:?}");
    }
}
