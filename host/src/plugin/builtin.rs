//! The first-party provider, selector and strategy components, compiled from `plugins/` by
//! `build.rs` and embedded in the binary so `polygateway serve` needs no files beside it.

use crate::config::FirstParty;

/// The component bytes of a first-party provider.
pub fn builtin_provider_bytes(p: FirstParty) -> &'static [u8] {
    match p {
        FirstParty::OpenAi => include_bytes!(concat!(env!("OUT_DIR"), "/openai.wasm")),
        FirstParty::DeepSeek => include_bytes!(concat!(env!("OUT_DIR"), "/deepseek.wasm")),
        FirstParty::Qwen => include_bytes!(concat!(env!("OUT_DIR"), "/qwen.wasm")),
        FirstParty::MonkeyOcr => include_bytes!(concat!(env!("OUT_DIR"), "/monkeyocr.wasm")),
        FirstParty::Anthropic => include_bytes!(concat!(env!("OUT_DIR"), "/anthropic.wasm")),
        FirstParty::Gemini => include_bytes!(concat!(env!("OUT_DIR"), "/gemini.wasm")),
    }
}

/// The names of the first-party selector components, default first.
pub const BUILTIN_SELECTORS: [&str; 3] = ["health-aware", "round-robin", "least-inflight"];

/// The component bytes of a first-party selector by its name — `health-aware` (the default:
/// power of two choices on health and load), `round-robin` or `least-inflight` — or `None`
/// for any other name.
pub fn builtin_selector_bytes(name: &str) -> Option<&'static [u8]> {
    match name {
        "health-aware" => Some(include_bytes!(concat!(
            env!("OUT_DIR"),
            "/health_aware.wasm"
        ))),
        "round-robin" => Some(include_bytes!(concat!(
            env!("OUT_DIR"),
            "/round_robin.wasm"
        ))),
        "least-inflight" => Some(include_bytes!(concat!(
            env!("OUT_DIR"),
            "/least_inflight.wasm"
        ))),
        _ => None,
    }
}

/// The names of the first-party structured-output strategy components, default first.
pub const BUILTIN_STRATEGIES: [&str; 3] = ["json-repair", "native-schema", "unwrap-parameters"];

/// The component bytes of a first-party strategy by its name — `json-repair` (the default:
/// prompt instructions and JSON repair), `native-schema` (a native `response_format` where
/// every source supports it) or `unwrap-parameters` (`json-repair` plus unwrapping a
/// tool-call envelope) — or `None` for any other name.
pub fn builtin_strategy_bytes(name: &str) -> Option<&'static [u8]> {
    match name {
        "json-repair" => Some(include_bytes!(concat!(
            env!("OUT_DIR"),
            "/json_repair.wasm"
        ))),
        "native-schema" => Some(include_bytes!(concat!(
            env!("OUT_DIR"),
            "/native_schema.wasm"
        ))),
        "unwrap-parameters" => Some(include_bytes!(concat!(
            env!("OUT_DIR"),
            "/unwrap_parameters.wasm"
        ))),
        _ => None,
    }
}
