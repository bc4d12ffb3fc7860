//! The Qwen provider component (`qwen.wasm`, DashScope's OpenAI-compatible mode):
//! `enable_thinking`, `reasoning_content` deltas, inline `<think>…</think>` split out of
//! content, partial-mode prefill, and DashScope's account errors.

use polygateway_plugin_sdk::request::ChatBody;
use polygateway_plugin_sdk::{
    BuildError, Capabilities, ChatRequest, ClassifiedError, ErrorClass, Header, Provider,
    SourceInfo, ThinkingStyle, classify_http_error,
};
use serde_json::Value;

/// DashScope error codes that mean the account cannot serve anything, whatever the status
/// (DashScope answers an overdue account with a 400).
const ACCOUNT_DEAD_CODES: [&str; 2] = ["Arrearage", "InvalidApiKey"];

/// Qwen models. `ENABLE_THINKING` → `"enable_thinking": true | false`; unset → nothing; the
/// client's `thinking` (the contract's convention) overrides the source's.
/// Prefill → a last message `{"role": "assistant", "content": <prefill>, "partial": true}`.
pub struct Qwen;

impl Provider for Qwen {
    const NAME: &'static str = "qwen";
    const CAPABILITIES: Capabilities = Capabilities {
        streaming: true,
        native_json_schema: true,
        thinking: ThinkingStyle::ReasoningField,
        prefill_continuation: true,
        chat: true,
        embedding: false,
        ocr: false,
        audio: false,
    };
    const PREFILL_FLAG: Option<&'static str> = Some("partial");
    const SPLIT_INLINE_THINK: bool = true;

    fn add_body_fields(
        req: &ChatRequest,
        source: &SourceInfo,
        body: &mut ChatBody,
    ) -> Result<(), BuildError> {
        let client = polygateway_plugin_sdk::request::client_thinking(&req.overlay_json);
        if let Some(on) = client.or(source.enable_thinking) {
            body.insert("enable_thinking", &Value::Bool(on));
        }
        Ok(())
    }

    fn classify_error(status: u16, headers: &[Header], body: &[u8]) -> ClassifiedError {
        let mut error = classify_http_error(status, headers, body);
        if error
            .code
            .as_deref()
            .is_some_and(|c| ACCOUNT_DEAD_CODES.contains(&c))
        {
            error.class = ErrorClass::SourceDead;
        }
        error
    }
}

polygateway_plugin_sdk::export_provider!(Qwen);

#[cfg(test)]
mod tests;
