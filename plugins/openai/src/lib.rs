//! The generic OpenAI-compatible provider component (`openai.wasm`): plain chat completions
//! and embeddings (`POST /embeddings`, text or token-id inputs), no thinking switch, no prefill continuation.
//! Everything is the SDK's default behaviour.

use polygateway_plugin_sdk::{Capabilities, Provider, ThinkingStyle};

/// Any OpenAI chat-completions API (OpenAI, OpenRouter, vLLM, …). `ENABLE_THINKING` is
/// ignored; a prefill makes `build-request` fail with `unsupported`.
pub struct OpenAi;

impl Provider for OpenAi {
    const NAME: &'static str = "openai";
    const CAPABILITIES: Capabilities = Capabilities {
        streaming: true,
        native_json_schema: true,
        thinking: ThinkingStyle::None,
        prefill_continuation: false,
        chat: true,
        embedding: true,
        ocr: false,
        audio: false,
    };
    /// OpenAI's `/embeddings` takes token-id arrays (`input: [[15339], [1917, 3]]`), as
    /// LangChain's `OpenAIEmbeddings` sends by default.
    const EMBEDDING_TOKEN_INPUT: bool = true;
}

polygateway_plugin_sdk::export_provider!(OpenAi);

#[cfg(test)]
mod tests;
