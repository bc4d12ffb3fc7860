//! The source section: `SourceSettings` (one upstream account) with its watchdog
//! `TimeoutSettings` and `MissingDone`, its fields (`{SCOPE}__{PROVIDER}__{N}__{FIELD}`)
//! with their defaults, the body keys no configuration may set, and the parser of one
//! source.

use std::sync::Arc;
use std::time::Duration;

use super::plugins::{FirstParty, PluginRef};
use super::problems::Problems;
use super::vars::{Vars, bool_value, seconds, u64_value};

/// `TIMEOUT_S`: a long reasoning answer fits; a stuck one ends.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// `TTFT_TIMEOUT_S`: reasoning models may think a minute before their first token.
pub const DEFAULT_TTFT_TIMEOUT: Duration = Duration::from_secs(60);
/// `INTER_TOKEN_TIMEOUT_S`: a stream silent this long has stalled.
pub const DEFAULT_INTER_TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
/// `WEIGHT`: every source counts the same until told otherwise.
pub const DEFAULT_WEIGHT: u32 = 1;

/// Keys of a request body that neither `EXTRA_BODY` nor a client's sampling overlay may set.
pub const PROTECTED_BODY_KEYS: [&str; 4] = ["model", "messages", "stream", "stream_options"];

/// The `FIELD` segments of a source's keys.
pub(super) const FIELDS: &[&str] = &[
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
    "MAX_TOKENS",
    "THINKING_BUDGET",
];

/// The per-source liveness watchdog (docs/streaming.md#watchdog): 0 < inter-token < TTFT <
/// total.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeoutSettings {
    /// `TIMEOUT_S`: the whole attempt, default 120 s.
    pub total: Duration,
    /// `TTFT_TIMEOUT_S`: request sent → first token (content or reasoning), default 60 s.
    pub ttft: Duration,
    /// `INTER_TOKEN_TIMEOUT_S`: longest silence between tokens, default 30 s.
    pub inter_token: Duration,
}

impl Default for TimeoutSettings {
    fn default() -> Self {
        Self {
            total: DEFAULT_TIMEOUT,
            ttft: DEFAULT_TTFT_TIMEOUT,
            inter_token: DEFAULT_INTER_TOKEN_TIMEOUT,
        }
    }
}

/// What to do when a stream ends without `[DONE]` (docs/streaming.md#missing-done).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingDone {
    /// Treat it as a broken stream (transient failure). The default.
    Retry,
    /// Keep what arrived; usage that did arrive is marked `estimated`.
    Salvage,
}

/// One upstream account: base URL + key + model.
#[derive(Clone)]
pub struct SourceSettings {
    /// Unique within the scope: `{provider}-{n}` in lower case, e.g. `deepseek-1`.
    pub name: Arc<str>,
    /// The `PROVIDER` segment, lower case.
    pub provider: Arc<str>,
    /// The `N` segment.
    pub index: u32,
    /// `BASE_URL`, without a trailing `/`.
    pub base_url: String,
    /// `MODEL`: the upstream's model name.
    pub model: String,
    /// Never logged (see the `Debug` impl), never passed to a plugin.
    pub api_key: Option<String>,
    /// `PLUGIN` (default the first-party provider of the `PROVIDER` segment).
    pub plugin: PluginRef,
    /// `PLUGIN_SHA256`: expected lower-case hex digest of the component file.
    pub plugin_sha256: Option<String>,
    /// `ENABLE_THINKING`: turn the model's thinking on or off; none = the provider's default.
    pub enable_thinking: Option<bool>,
    /// `EXTRA_BODY` as a JSON object (protected keys refused at parse time).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// `MAX_TOKENS`: output-token cap the provider sends when the client sent none (an
    /// integer ≥ 1; required by Anthropic's protocol, whose component defaults it).
    pub max_tokens: Option<u32>,
    /// `THINKING_BUDGET`: reasoning tokens allowed when thinking is on (an integer ≥ 1);
    /// none = the provider's default.
    pub thinking_budget_tokens: Option<u32>,
    /// `TIMEOUT_S`, `TTFT_TIMEOUT_S`, `INTER_TOKEN_TIMEOUT_S`.
    pub timeouts: TimeoutSettings,
    /// `MISSING_DONE` (default `retry`).
    pub missing_done: MissingDone,
    /// `WEIGHT` for selectors (default 1).
    pub weight: u32,
    /// `MAX_CONCURRENCY`, `RPM`, `TPM`, `EST_TOKENS` (0 = gate off).
    pub max_concurrency: u32,
    /// `RPM` (0 = gate off).
    pub rpm: u32,
    /// `TPM` (0 = gate off).
    pub tpm: u64,
    /// `EST_TOKENS`: the TPM pre-charge of an attempt (0 = derived from `TPM`;
    /// docs/limiter.md#tpm-pre-charge).
    pub est_tokens: u64,
    /// `MAX_BATCH` for embeddings (0 = unlimited).
    pub max_batch: u32,
    /// `TRUST_ENV`: use the process's proxy settings (default false).
    pub trust_env: bool,
}

impl std::fmt::Debug for SourceSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceSettings")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("plugin", &self.plugin)
            .finish_non_exhaustive()
    }
}

/// Source `n` of `provider` (lower case) from its fields (named by the `FIELD` segment);
/// `None` when any field has a problem (each is in `problems`).
pub(super) fn parse(
    provider: &str,
    n: u32,
    vars: &Vars,
    problems: &mut Problems,
) -> Option<SourceSettings> {
    let before = problems.len();
    let base_url = parse_base_url(vars, problems);
    let model = required(vars, "MODEL", problems);
    let plugin = parse_plugin(provider, vars, problems);
    let plugin_sha256 = parse_sha256(vars, problems);
    let enable_thinking = vars
        .raw("ENABLE_THINKING")
        .and_then(|(k, v)| bool_value(k, v, problems));
    let extra_body = parse_extra_body(vars, problems);
    let max_tokens = positive_u32(vars, "MAX_TOKENS", problems);
    let thinking_budget_tokens = positive_u32(vars, "THINKING_BUDGET", problems);
    let timeouts = parse_timeouts(vars, problems);
    let missing_done = parse_missing_done(vars, problems);
    let max_concurrency = gate_u32(vars, "MAX_CONCURRENCY", problems);
    let rpm = gate_u32(vars, "RPM", problems);
    let tpm = gate(vars, "TPM", problems);
    let est_tokens = gate(vars, "EST_TOKENS", problems);
    let max_batch = gate_u32(vars, "MAX_BATCH", problems);
    let weight = parse_weight(vars, problems);
    let trust_env = vars
        .raw("TRUST_ENV")
        .and_then(|(k, v)| bool_value(k, v, problems))
        .unwrap_or(false);
    let api_key = vars.get("API_KEY").map(str::to_string);
    if problems.len() != before {
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
        max_tokens,
        thinking_budget_tokens,
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

/// A field that must be set and not blank, trimmed.
fn required(vars: &Vars, field: &str, problems: &mut Problems) -> Option<String> {
    match vars.raw(field) {
        Some((_, v)) if !v.trim().is_empty() => Some(v.trim().to_string()),
        Some((key, _)) => {
            problems.add(key, "must not be empty");
            None
        }
        None => {
            problems.add(&vars.key(field), "required");
            None
        }
    }
}

/// `BASE_URL`, without a trailing `/`.
fn parse_base_url(vars: &Vars, problems: &mut Problems) -> Option<String> {
    let url = required(vars, "BASE_URL", problems).map(|u| u.trim_end_matches('/').to_string());
    // Also a rule of `validate.rs`; checked here too so that it is reported in the same run
    // as the source's other problems (a source with any is not built, nor validated).
    if let (Some(url), Some((key, _))) = (&url, vars.raw("BASE_URL"))
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
    url
}

/// `PLUGIN`, default the first-party provider named by the `PROVIDER` segment.
fn parse_plugin(provider: &str, vars: &Vars, problems: &mut Problems) -> Option<PluginRef> {
    if let Some((key, v)) = vars.raw("PLUGIN") {
        let v = v.trim();
        let plugin = PluginRef::from_config(v);
        if plugin.is_none() {
            problems.add(
                key,
                format!("expected a first-party provider (openai, deepseek, qwen) or a path to a .wasm file, got `{v}`"),
            );
        }
        return plugin;
    }
    match FirstParty::from_name(provider) {
        Some(fp) => Some(PluginRef::FirstParty(fp)),
        None => {
            problems.add(
                &vars.key("PLUGIN"),
                format!("provider `{provider}` is not first-party (openai, deepseek, qwen): set PLUGIN to a .wasm path"),
            );
            None
        }
    }
}

/// `PLUGIN_SHA256`, lower case.
fn parse_sha256(vars: &Vars, problems: &mut Problems) -> Option<String> {
    let (key, v) = vars.raw("PLUGIN_SHA256")?;
    let v = v.trim().to_ascii_lowercase();
    if v.len() != 64 || !v.chars().all(|c| c.is_ascii_hexdigit()) {
        problems.add(key, "expected 64 hex digits");
    }
    Some(v)
}

/// `EXTRA_BODY`: a JSON object that sets none of [`PROTECTED_BODY_KEYS`].
fn parse_extra_body(
    vars: &Vars,
    problems: &mut Problems,
) -> serde_json::Map<String, serde_json::Value> {
    let Some((key, v)) = vars.raw("EXTRA_BODY") else {
        return serde_json::Map::new();
    };
    match serde_json::from_str::<serde_json::Value>(v) {
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
    }
}

/// The watchdog's three limits (their order is a rule of `validate.rs`).
fn parse_timeouts(vars: &Vars, problems: &mut Problems) -> TimeoutSettings {
    let mut timeouts = TimeoutSettings::default();
    for (field, slot) in [
        ("TIMEOUT_S", &mut timeouts.total),
        ("TTFT_TIMEOUT_S", &mut timeouts.ttft),
        ("INTER_TOKEN_TIMEOUT_S", &mut timeouts.inter_token),
    ] {
        if let Some((k, v)) = vars.raw(field)
            && let Some(d) = seconds(k, v, problems)
        {
            *slot = d;
        }
    }
    timeouts
}

/// `MISSING_DONE`: `retry` (default) or `salvage`.
fn parse_missing_done(vars: &Vars, problems: &mut Problems) -> MissingDone {
    match vars.raw("MISSING_DONE") {
        None => MissingDone::Retry,
        Some((_, v)) if v.trim() == "retry" => MissingDone::Retry,
        Some((_, v)) if v.trim() == "salvage" => MissingDone::Salvage,
        Some((k, v)) => {
            problems.add(k, format!("expected retry|salvage, got `{v}`"));
            MissingDone::Retry
        }
    }
}

/// A gate's limit (0, the default, = gate off).
fn gate(vars: &Vars, field: &str, problems: &mut Problems) -> u64 {
    vars.raw(field)
        .and_then(|(k, v)| u64_value(k, v, problems))
        .unwrap_or(0)
}

/// A gate's limit that must fit a `u32`.
fn gate_u32(vars: &Vars, field: &str, problems: &mut Problems) -> u32 {
    let v = gate(vars, field, problems);
    u32::try_from(v).unwrap_or_else(|_| {
        problems.add(&vars.key(field), "value too large");
        0
    })
}

/// An optional token count that must be an integer in 1..=u32::MAX.
fn positive_u32(vars: &Vars, field: &str, problems: &mut Problems) -> Option<u32> {
    let (k, v) = vars.raw(field)?;
    match v.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Some(n),
        _ => {
            problems.add(
                k,
                format!("expected an integer from 1 to {}, got `{v}`", u32::MAX),
            );
            None
        }
    }
}

/// `WEIGHT` (whether 0 is allowed is a rule of `validate.rs`).
fn parse_weight(vars: &Vars, problems: &mut Problems) -> u32 {
    let Some((k, v)) = vars.raw("WEIGHT") else {
        return DEFAULT_WEIGHT;
    };
    match v.trim().parse::<u32>() {
        Ok(w) => w,
        _ => {
            problems.add(k, format!("expected an integer ≥ 1, got `{v}`"));
            DEFAULT_WEIGHT
        }
    }
}
