//! `Vars`, the one way a section parser reads its keys — the process's `PGW_*` keys, one
//! scope's `{SCOPE}__…` keys or one source's `{SCOPE}__{PROVIDER}__{N}__…` fields, each
//! looked up by its name within the section — and the value parsers the sections share
//! (seconds, integers, booleans, comma-separated lists). Every section parser is
//! `fn parse(vars: &Vars, problems: &mut Problems) -> …Settings`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::problems::Problems;

/// The variables of one section, by their name within it (the whole key for a `PGW_*` key,
/// the part after `{SCOPE}__` for a scope key, the `FIELD` segment for a source).
#[derive(Debug, Clone, Default)]
pub(super) struct Vars {
    /// What precedes a name in its env key (empty for the process section).
    prefix: String,
    /// name → (the key as written, the raw value).
    entries: BTreeMap<String, (String, String)>,
}

impl Vars {
    /// No variable yet; `prefix` precedes every name in its env key.
    pub(super) fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            entries: BTreeMap::new(),
        }
    }

    /// The variables `pairs` (name, raw value), each keyed `prefix` + name.
    #[cfg(test)]
    pub(super) fn from_pairs(prefix: &str, pairs: &[(&str, &str)]) -> Self {
        let mut vars = Self::new(prefix);
        for (name, value) in pairs {
            vars.insert(name, format!("{prefix}{name}"), value.to_string());
        }
        vars
    }

    /// Add the variable `key` (as written) under `name`; a later one of the same name wins.
    pub(super) fn insert(&mut self, name: &str, key: String, value: String) {
        self.entries.insert(name.to_string(), (key, value));
    }

    /// The env key of `name` (for a problem about a key that is absent).
    pub(super) fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// `name`'s key as written and its raw value.
    pub(super) fn raw(&self, name: &str) -> Option<(&str, &str)> {
        self.entries
            .get(name)
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// `name`'s value, trimmed; `None` when absent or blank.
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.entries
            .get(name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Every variable: (name, key as written, raw value), by name.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.entries
            .iter()
            .map(|(n, (k, v))| (n.as_str(), k.as_str(), v.as_str()))
    }
}

/// A finite, non-negative number of seconds below 10^7 (whether 0 is allowed is a rule of
/// `validate.rs`).
pub(super) fn seconds(key: &str, v: &str, problems: &mut Problems) -> Option<Duration> {
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

/// A non-negative integer.
pub(super) fn u64_value(key: &str, v: &str, problems: &mut Problems) -> Option<u64> {
    match v.trim().parse::<u64>() {
        Ok(n) => Some(n),
        Err(_) => {
            problems.add(key, format!("expected a non-negative integer, got `{v}`"));
            None
        }
    }
}

/// `true|1|yes|on` or `false|0|no|off`, in any case.
pub(super) fn bool_value(key: &str, v: &str, problems: &mut Problems) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => {
            problems.add(key, format!("expected true|false, got `{v}`"));
            None
        }
    }
}

/// The non-empty, trimmed items of a comma-separated list.
pub(super) fn comma_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}
