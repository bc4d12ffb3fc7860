//! The plugins section: which component a source uses (`FirstParty`, `PluginRef`, read from
//! a source's `PLUGIN` field) and the process-wide plugin keys (`PGW_PLUGIN_CACHE_DIR`,
//! `PGW_PLUGIN_TIMEOUT_MS`, `PGW_PLUGIN_MEMORY_MB`, `PGW_PLUGIN_MAX_BYTES`) with their
//! defaults and parser.

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
];

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
}

impl FirstParty {
    /// All first-party providers.
    pub const ALL: [FirstParty; 4] = [
        FirstParty::OpenAi,
        FirstParty::DeepSeek,
        FirstParty::Qwen,
        FirstParty::MonkeyOcr,
    ];

    /// The name used in `PLUGIN` and as the `PROVIDER` segment (lower case).
    pub fn name(self) -> &'static str {
        match self {
            FirstParty::OpenAi => "openai",
            FirstParty::DeepSeek => "deepseek",
            FirstParty::Qwen => "qwen",
            FirstParty::MonkeyOcr => "monkeyocr",
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
}

/// The `PGW_PLUGIN_*` keys; a bad value is a problem naming its key (0 where the rule of
/// `validate.rs` is the one to report it).
pub(super) fn parse(vars: &Vars, problems: &mut Problems) -> PluginSettings {
    PluginSettings {
        cache_dir: vars.get("PGW_PLUGIN_CACHE_DIR").map(PathBuf::from),
        timeout: parse_timeout(vars, problems),
        memory_bytes: parse_memory(vars, problems),
        max_bytes: parse_max_bytes(vars, problems),
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
