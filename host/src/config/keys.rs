//! The virtual-key section (docs/keys.md#configuration): `PGW_VIRTUAL_KEYS`,
//! `PGW_KEY_HASH_SECRET` and `PGW_KEYS_REFRESH_MS`, their defaults and parsing. The keys live
//! in the telemetry database, so turning them on with `PGW_TELEMETRY_BACKEND=none` is a
//! problem naming `PGW_VIRTUAL_KEYS`.

use std::time::Duration;

use super::problems::Problems;
use super::telemetry::TelemetryBackend;
use super::vars::{Vars, bool_value, u64_value};

/// The process keys this section parses.
pub(super) const KEYS: &[&str] = &[
    "PGW_VIRTUAL_KEYS",
    "PGW_KEY_HASH_SECRET",
    "PGW_KEYS_REFRESH_MS",
];

/// `PGW_KEYS_REFRESH_MS`: four re-reads a second, so a revocation made on one replica
/// reaches every other within 1 s (docs/keys.md#refresh-and-revocation-latency).
pub const DEFAULT_KEYS_REFRESH: Duration = Duration::from_millis(250);
/// The accepted range of `PGW_KEYS_REFRESH_MS`, in ms: below 50 the store is polled for
/// nothing; above 10 s a revocation waits too long.
pub const KEYS_REFRESH_MS_RANGE: std::ops::RangeInclusive<u64> = 50..=10_000;
/// The shortest `PGW_KEY_HASH_SECRET`, in characters: a 256-bit HMAC key as base64 is 43.
pub const MIN_KEY_HASH_SECRET_CHARS: usize = 32;

/// The HMAC key token secrets are hashed with (`PGW_KEY_HASH_SECRET`). `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyHashSecret(String);

impl KeyHashSecret {
    /// A secret from its text (length is checked by the parser, not here).
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The key bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl std::fmt::Debug for KeyHashSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyHashSecret(<redacted>)")
    }
}

/// Virtual-key settings.
#[derive(Debug, Clone, PartialEq)]
pub struct KeysSettings {
    /// `PGW_VIRTUAL_KEYS` (default false): keys and teams kept in the telemetry database.
    pub enabled: bool,
    /// `PGW_KEY_HASH_SECRET`: required (≥ 32 characters) when enabled.
    pub hash_secret: Option<KeyHashSecret>,
    /// `PGW_KEYS_REFRESH_MS`: how often each process re-reads changed keys (default 250 ms).
    pub refresh: Duration,
}

impl Default for KeysSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            hash_secret: None,
            refresh: DEFAULT_KEYS_REFRESH,
        }
    }
}

/// Parse the virtual-key keys (named by the whole key); `telemetry` is where the keys would
/// be stored.
pub(super) fn parse(
    vars: &Vars,
    problems: &mut Problems,
    telemetry: &TelemetryBackend,
) -> KeysSettings {
    let mut k = KeysSettings::default();
    if let Some(v) = vars.get("PGW_VIRTUAL_KEYS") {
        k.enabled = bool_value("PGW_VIRTUAL_KEYS", v, problems).unwrap_or(false);
    }
    if let Some(v) = vars.get("PGW_KEYS_REFRESH_MS") {
        match u64_value("PGW_KEYS_REFRESH_MS", v, problems) {
            Some(ms) if KEYS_REFRESH_MS_RANGE.contains(&ms) => {
                k.refresh = Duration::from_millis(ms);
            }
            Some(ms) => problems.add(
                "PGW_KEYS_REFRESH_MS",
                format!("expected milliseconds in 50..=10000, got {ms}"),
            ),
            None => {}
        }
    }
    let secret = vars.get("PGW_KEY_HASH_SECRET");
    if let Some(s) = secret {
        // Never echo the value: only its length.
        if s.chars().count() < MIN_KEY_HASH_SECRET_CHARS {
            problems.add(
                "PGW_KEY_HASH_SECRET",
                format!(
                    "must be at least {MIN_KEY_HASH_SECRET_CHARS} characters, got {}",
                    s.chars().count()
                ),
            );
        } else {
            k.hash_secret = Some(KeyHashSecret::new(s));
        }
    }
    if k.enabled {
        if secret.is_none() {
            problems.add(
                "PGW_KEY_HASH_SECRET",
                "required when PGW_VIRTUAL_KEYS=true (at least 32 characters)",
            );
        }
        if *telemetry == TelemetryBackend::None {
            problems.add(
                "PGW_VIRTUAL_KEYS",
                "virtual keys live in the telemetry database: set PGW_TELEMETRY_BACKEND to \
                 sqlite or postgres, not none",
            );
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn parse_vars(list: &[(&str, &str)], t: &TelemetryBackend) -> (KeysSettings, Vec<String>) {
        let mut p = Problems::new();
        let k = parse(&Vars::from_pairs("", list), &mut p, t);
        (k, p.into_list().into_iter().map(|p| p.key).collect())
    }

    fn sqlite() -> TelemetryBackend {
        TelemetryBackend::Sqlite {
            path: PathBuf::from("x.db"),
        }
    }

    #[test]
    fn off_by_default_with_a_quarter_second_refresh() {
        let (k, p) = parse_vars(&[], &TelemetryBackend::None);
        assert!(p.is_empty());
        assert_eq!(k, KeysSettings::default());
        assert_eq!(k.refresh, Duration::from_millis(250));
    }

    #[test]
    fn on_needs_a_long_secret_and_a_database() {
        let (k, p) = parse_vars(
            &[
                ("PGW_VIRTUAL_KEYS", "true"),
                ("PGW_KEY_HASH_SECRET", SECRET),
                ("PGW_KEYS_REFRESH_MS", "50"),
            ],
            &sqlite(),
        );
        assert!(p.is_empty(), "{p:?}");
        assert!(k.enabled);
        assert_eq!(k.refresh, Duration::from_millis(50));
        assert_eq!(
            format!("{:?}", k.hash_secret),
            "Some(KeyHashSecret(<redacted>))"
        );
        let (_, p) = parse_vars(&[("PGW_VIRTUAL_KEYS", "true")], &TelemetryBackend::None);
        assert_eq!(p, vec!["PGW_KEY_HASH_SECRET", "PGW_VIRTUAL_KEYS"]);
        let (_, p) = parse_vars(
            &[
                ("PGW_VIRTUAL_KEYS", "maybe"),
                ("PGW_KEY_HASH_SECRET", "short"),
                ("PGW_KEYS_REFRESH_MS", "10001"),
            ],
            &sqlite(),
        );
        assert_eq!(
            p,
            vec![
                "PGW_VIRTUAL_KEYS",
                "PGW_KEYS_REFRESH_MS",
                "PGW_KEY_HASH_SECRET"
            ]
        );
    }

    #[test]
    fn a_short_secret_is_reported_without_its_value() {
        let mut p = Problems::new();
        parse(
            &Vars::from_pairs("", &[("PGW_KEY_HASH_SECRET", "hunter2")]),
            &mut p,
            &sqlite(),
        );
        let list = p.into_list();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].message, "must be at least 32 characters, got 7");
    }
}
