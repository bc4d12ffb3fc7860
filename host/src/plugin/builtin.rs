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
