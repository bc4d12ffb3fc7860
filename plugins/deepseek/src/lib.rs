//! The DeepSeek provider component (`deepseek.wasm`): OpenAI chat completions plus
//! DeepSeek's `thinking` switch, `reasoning_content` deltas and chat prefix completion.

use polygateway_plugin_sdk::request::ChatBody;
use polygateway_plugin_sdk::{
    BuildError, Capabilities, ChatRequest, Provider, SourceInfo, ThinkingStyle,
};
use serde_json::json;

/// DeepSeek's API. `ENABLE_THINKING` true/false → `"thinking": {"type": "enabled" |
/// "disabled"}`; unset → nothing; the client's `thinking` (the contract's convention:
/// `enabled` or `adaptive` → enabled, `disabled`) overrides the source's. Prefill → a last message `{"role": "assistant",
/// "content": <prefill>, "prefix": true}` (prefix completion; DeepSeek serves it on its
/// `/beta` base URL).
pub struct DeepSeek;

impl Provider for DeepSeek {
    const NAME: &'static str = "deepseek";
    const CAPABILITIES: Capabilities = Capabilities {
        streaming: true,
        native_json_schema: false,
        thinking: ThinkingStyle::ReasoningField,
        prefill_continuation: true,
        chat: true,
        embedding: false,
        ocr: false,
        audio: false,
    };
    const PREFILL_FLAG: Option<&'static str> = Some("prefix");

    fn add_body_fields(
        req: &ChatRequest,
        source: &SourceInfo,
        body: &mut ChatBody,
    ) -> Result<(), BuildError> {
        let client = polygateway_plugin_sdk::request::client_thinking(&req.overlay_json);
        if let Some(on) = client.or(source.enable_thinking) {
            let kind = if on { "enabled" } else { "disabled" };
            body.insert("thinking", &json!({ "type": kind }));
        }
        Ok(())
    }
}

polygateway_plugin_sdk::export_provider!(DeepSeek);

#[cfg(test)]
mod tests;
