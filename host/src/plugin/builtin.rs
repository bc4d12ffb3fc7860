//! The first-party provider components, compiled from `plugins/` by `build.rs` and embedded
//! in the binary so `polygateway serve` needs no files beside it.

use crate::config::FirstParty;

/// The component bytes of a first-party provider.
pub fn builtin_provider_bytes(p: FirstParty) -> &'static [u8] {
    match p {
        FirstParty::OpenAi => include_bytes!(concat!(env!("OUT_DIR"), "/openai.wasm")),
        FirstParty::DeepSeek => include_bytes!(concat!(env!("OUT_DIR"), "/deepseek.wasm")),
        FirstParty::Qwen => include_bytes!(concat!(env!("OUT_DIR"), "/qwen.wasm")),
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
