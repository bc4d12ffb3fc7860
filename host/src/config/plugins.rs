//! The plugins section: which component a source uses (`FirstParty`, `PluginRef`, read from
//! a source's `PLUGIN` field) and which selector a scope uses (`FirstPartySelector`,
//! `SelectorRef`, read from `{SCOPE}__SELECTOR`), and the process-wide plugin keys (`PGW_PLUGIN_CACHE_DIR`,
//! `PGW_PLUGIN_TIMEOUT_MS`, `PGW_PLUGIN_MEMORY_MB`, `PGW_PLUGIN_MAX_BYTES`,
//! `PGW_PLUGIN_STREAMS_PER_INSTANCE`, `PGW_PLUGIN_PROFILER`) with their defaults and parser.

use std::path::PathBuf;
use std::time::Duration;

use super::problems::Problems;
use super::vars::Vars;

/// `PGW_PLUGIN_TIMEOUT_MS`: a plugin call is a pure function over one request or batch and
/// takes micro- to milliseconds; one still running after a second is looping.
pub const DEFAULT_PLUGIN_TIMEOUT: Duration = Duration::from_secs(1);
/// `PGW_PLUGIN_MEMORY_MB`: room for an 8 MiB body parsed several times over, while a pool of
/// warm instances stays small.
pub const DEFAULT_PLUGIN_MEMORY_BYTES: usize = 64 * 1024 * 1024;

/// The process keys this section parses.
pub(super) const KEYS: &[&str] = &[
    "PGW_PLUGIN_CACHE_DIR",
    "PGW_PLUGIN_TIMEOUT_MS",
    "PGW_PLUGIN_MEMORY_MB",
    "PGW_PLUGIN_MAX_BYTES",
    "PGW_PLUGIN_STREAMS_PER_INSTANCE",
    "PGW_PLUGIN_PROFILER",
];

/// Most `PGW_PLUGIN_STREAMS_PER_INSTANCE`: the parsers of one instance take turns, so more
/// than this many would queue behind each other's calls.
pub const MAX_STREAMS_PER_INSTANCE: usize = 1024;

/// The first-party provider components embedded in the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstParty {
    /// `openai`.
    OpenAi,
    /// `deepseek`.
    DeepSeek,
    /// `qwen`.
    Qwen,
    /// MonkeyOCR (`/ocr/text`, `/parse`): OCR only.
    MonkeyOcr,
    /// `anthropic`: the Anthropic Messages API (`POST /v1/messages`).
    Anthropic,
    /// `gemini`: the Google Gemini API (`generateContent`, `streamGenerateContent`,
    /// `batchEmbedContents`).
    Gemini,
}

impl FirstParty {
    /// All first-party providers.
    pub const ALL: [FirstParty; 6] = [
        FirstParty::OpenAi,
        FirstParty::DeepSeek,
        FirstParty::Qwen,
        FirstParty::MonkeyOcr,
        FirstParty::Anthropic,
        FirstParty::Gemini,
    ];

    /// The name used in `PLUGIN` and as the `PROVIDER` segment (lower case).
    pub fn name(self) -> &'static str {
        match self {
            FirstParty::OpenAi => "openai",
            FirstParty::DeepSeek => "deepseek",
            FirstParty::Qwen => "qwen",
            FirstParty::MonkeyOcr => "monkeyocr",
            FirstParty::Anthropic => "anthropic",
            FirstParty::Gemini => "gemini",
        }
    }

    /// Look a first-party provider up by name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }
}

/// Which provider component a source uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginRef {
    /// A component embedded in the binary.
    FirstParty(FirstParty),
    /// A component file loaded at start-up.
    File(PathBuf),
}

impl PluginRef {
    /// The reference a `PLUGIN` value (trimmed) names: a first-party provider by name (any
    /// case) or a `.wasm` path; `None` for anything else.
    pub(super) fn from_config(v: &str) -> Option<Self> {
        if let Some(fp) = FirstParty::from_name(v) {
            Some(PluginRef::FirstParty(fp))
        } else if v.ends_with(".wasm") {
            Some(PluginRef::File(PathBuf::from(v)))
        } else {
            None
        }
    }
}

/// The first-party selector components embedded in the binary (`plugin::builtin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstPartySelector {
    /// `health-aware`: power of two choices on health and load.
    HealthAware,
    /// `round-robin`.
    RoundRobin,
    /// `least-inflight`.
    LeastInflight,
}

impl FirstPartySelector {
    /// All first-party selectors, the default first.
    pub const ALL: [FirstPartySelector; 3] = [
        FirstPartySelector::HealthAware,
        FirstPartySelector::RoundRobin,
        FirstPartySelector::LeastInflight,
    ];

    /// The name used in `{SCOPE}__SELECTOR`.
    pub fn name(self) -> &'static str {
        match self {
            FirstPartySelector::HealthAware => "health-aware",
            FirstPartySelector::RoundRobin => "round-robin",
            FirstPartySelector::LeastInflight => "least-inflight",
        }
    }

    /// Look a first-party selector up by its exact name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Which selector component a scope uses (`{SCOPE}__SELECTOR`). `Display` gives back the
/// configured text: the first-party name, or the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorRef {
    /// A component embedded in the binary.
    FirstParty(FirstPartySelector),
    /// A component file loaded at start-up.
    File(PathBuf),
}

impl SelectorRef {
    /// The reference a `{SCOPE}__SELECTOR` value (trimmed) names: a first-party selector by
    /// its exact name or a `.wasm` path; `None` for anything else.
    pub(super) fn from_config(v: &str) -> Option<Self> {
        if let Some(s) = FirstPartySelector::from_name(v) {
            Some(SelectorRef::FirstParty(s))
        } else if v.ends_with(".wasm") {
            Some(SelectorRef::File(PathBuf::from(v)))
        } else {
            None
        }
    }
}

impl std::fmt::Display for SelectorRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SelectorRef::FirstParty(s) => f.write_str(s.name()),
            SelectorRef::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The process-wide plugin keys, as `ProcessSettings` holds them.
pub(super) struct PluginSettings {
    /// `PGW_PLUGIN_CACHE_DIR`.
    pub(super) cache_dir: Option<PathBuf>,
    /// `PGW_PLUGIN_TIMEOUT_MS`.
    pub(super) timeout: Duration,
    /// `PGW_PLUGIN_MEMORY_MB`, in bytes.
    pub(super) memory_bytes: usize,
    /// `PGW_PLUGIN_MAX_BYTES`.
    pub(super) max_bytes: u64,
    /// `PGW_PLUGIN_STREAMS_PER_INSTANCE`.
    pub(super) streams_per_instance: usize,
    /// `PGW_PLUGIN_PROFILER`.
    pub(super) profiler: crate::plugin::Profiler,
}

/// The `PGW_PLUGIN_*` keys; a bad value is a problem naming its key (0 where the rule of
/// `validate.rs` is the one to report it).
pub(super) fn parse(vars: &Vars, problems: &mut Problems) -> PluginSettings {
    PluginSettings {
        cache_dir: vars.get("PGW_PLUGIN_CACHE_DIR").map(PathBuf::from),
        timeout: parse_timeout(vars, problems),
        memory_bytes: parse_memory(vars, problems),
        max_bytes: parse_max_bytes(vars, problems),
        streams_per_instance: parse_streams_per_instance(vars, problems),
        profiler: parse_profiler(vars, problems),
    }
}

fn parse_profiler(vars: &Vars, problems: &mut Problems) -> crate::plugin::Profiler {
    use crate::plugin::Profiler;
    match vars.get("PGW_PLUGIN_PROFILER") {
        None | Some("none") => Profiler::None,
        Some("perfmap") => Profiler::PerfMap,
        Some(v) => {
            problems.add(
                "PGW_PLUGIN_PROFILER",
                format!("expected `none` or `perfmap`, got `{v}`"),
            );
            Profiler::None
        }
    }
}

fn parse_streams_per_instance(vars: &Vars, problems: &mut Problems) -> usize {
    let default = crate::plugin::DEFAULT_STREAMS_PER_INSTANCE;
    let Some(v) = vars.get("PGW_PLUGIN_STREAMS_PER_INSTANCE") else {
        return default;
    };
    match v.parse::<usize>() {
        Ok(n) if (1..=MAX_STREAMS_PER_INSTANCE).contains(&n) => n,
        _ => {
            problems.add(
                "PGW_PLUGIN_STREAMS_PER_INSTANCE",
                format!(
                    "expected an integer in 1..={MAX_STREAMS_PER_INSTANCE} (stream parsers per instance; 1 = an instance per stream), got `{v}`"
                ),
            );
            default
        }
    }
}

fn parse_timeout(vars: &Vars, problems: &mut Problems) -> Duration {
    let Some(v) = vars.get("PGW_PLUGIN_TIMEOUT_MS") else {
        return DEFAULT_PLUGIN_TIMEOUT;
    };
    match v.parse::<u64>() {
        Ok(n) => Duration::from_millis(n),
        _ => {
            problems.add(
                "PGW_PLUGIN_TIMEOUT_MS",
                format!("expected a positive integer (ms), got `{v}`"),
            );
            DEFAULT_PLUGIN_TIMEOUT
        }
    }
}

fn parse_memory(vars: &Vars, problems: &mut Problems) -> usize {
    let Some(v) = vars.get("PGW_PLUGIN_MEMORY_MB") else {
        return DEFAULT_PLUGIN_MEMORY_BYTES;
    };
    match v
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
    }
}

fn parse_max_bytes(vars: &Vars, problems: &mut Problems) -> u64 {
    let Some(v) = vars.get("PGW_PLUGIN_MAX_BYTES") else {
        return crate::plugin::DEFAULT_PLUGIN_MAX_BYTES;
    };
    match v.parse::<u64>() {
        Ok(n) if n > 0 => n,
        _ => {
            problems.add(
                "PGW_PLUGIN_MAX_BYTES",
                format!("expected a positive integer (bytes), got `{v}`"),
            );
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profiler_is_none_or_perfmap_naming_the_key() {
        use crate::plugin::Profiler;
        let parse_one = |v: Option<&str>| {
            let pairs: Vec<(&str, &str)> = v
                .map(|v| vec![("PGW_PLUGIN_PROFILER", v)])
                .unwrap_or_default();
            let mut problems = Problems::new();
            let p = parse(&Vars::from_pairs("", &pairs), &mut problems).profiler;
            (p, problems.into_list())
        };
        assert_eq!(parse_one(None), (Profiler::None, vec![]));
        assert_eq!(parse_one(Some("none")), (Profiler::None, vec![]));
        assert_eq!(parse_one(Some("perfmap")), (Profiler::PerfMap, vec![]));
        for bad in ["jitdump", "PerfMap", "1"] {
            let (p, problems) = parse_one(Some(bad));
            assert_eq!(p, Profiler::None, "{bad}");
            assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
            assert_eq!(problems[0].key, "PGW_PLUGIN_PROFILER");
            assert_eq!(
                problems[0].message,
                format!("expected `none` or `perfmap`, got `{bad}`")
            );
        }
    }

    #[test]
    fn streams_per_instance_is_one_to_1024_naming_the_key() {
        let parse_one = |v: Option<&str>| {
            let pairs: Vec<(&str, &str)> = v
                .map(|v| vec![("PGW_PLUGIN_STREAMS_PER_INSTANCE", v)])
                .unwrap_or_default();
            let mut problems = Problems::new();
            let n = parse(&Vars::from_pairs("", &pairs), &mut problems).streams_per_instance;
            (n, problems.into_list())
        };
        assert_eq!(parse_one(None), (16, vec![]));
        assert_eq!(parse_one(Some("1")), (1, vec![]));
        assert_eq!(parse_one(Some("1024")), (1024, vec![]));
        assert_eq!(parse_one(Some("  ")), (16, vec![]), "blank is unset");
        for bad in ["0", "1025", "-3", "sixteen"] {
            let (n, problems) = parse_one(Some(bad));
            assert_eq!(n, 16, "{bad}");
            assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
            assert_eq!(problems[0].key, "PGW_PLUGIN_STREAMS_PER_INSTANCE");
            assert_eq!(
                problems[0].message,
                format!(
                    "expected an integer in 1..=1024 (stream parsers per instance; 1 = an instance per stream), got `{bad}`"
                )
            );
        }
    }

    #[test]
    fn first_party_selectors_are_the_embedded_ones() {
        let names = FirstPartySelector::ALL.map(FirstPartySelector::name);
        assert_eq!(names, crate::plugin::BUILTIN_SELECTORS);
        for name in names {
            assert!(
                crate::plugin::builtin_selector_bytes(name).is_some(),
                "{name}"
            );
        }
    }

    #[test]
    fn a_selector_reference_shows_the_configured_text() {
        for text in [
            "health-aware",
            "round-robin",
            "least-inflight",
            "/opt/pgw/mine.wasm",
        ] {
            let r = SelectorRef::from_config(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(r.to_string(), text);
        }
        assert_eq!(
            SelectorRef::from_config("round-robin"),
            Some(SelectorRef::FirstParty(FirstPartySelector::RoundRobin))
        );
        assert_eq!(
            SelectorRef::from_config("sel.wasm"),
            Some(SelectorRef::File(PathBuf::from("sel.wasm")))
        );
        for bad in ["Health-Aware", "random", "", "x.WASM"] {
            assert_eq!(SelectorRef::from_config(bad), None, "{bad}");
        }
    }
}
