//! The generated bindings of the WIT contract (`wit/`) and the curated types the rest of the
//! host uses: deltas, usage, classified errors, request descriptions.

use super::bindings::v0_2::provider as generated;

pub use generated::exports::polygateway::plugin::embedding_provider::{
    EmbeddingInputs, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage,
};
pub use generated::exports::polygateway::plugin::ocr_provider::{
    ArchiveFetch, Bbox, ImageInfo, LayoutDocument, LayoutElement, OcrOperation, PageSize,
    UploadRequest,
};
pub use generated::polygateway::plugin::types::{
    AuthScheme, BuildError, Capabilities, ChatRequest, ClassifiedError, Delta, EncryptedReasoning,
    ErrorClass, FinishReason, Header, HttpRequest, Passthrough, PluginInfo, ReasoningSignature,
    SourceInfo, SseEvent, ThinkingStyle, ToolCallDelta, Usage,
};

/// The OpenAI `finish_reason` string of a finish reason.
pub fn finish_reason_str(f: &FinishReason) -> &str {
    match f {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::FunctionCall => "function_call",
        FinishReason::Other(s) => s,
    }
}

/// The JSON form of a delta used by the golden transcripts and the conformance kit
/// (`tests/fixtures/golden/README.md` documents it).
pub fn delta_to_json(d: &Delta) -> serde_json::Value {
    use serde_json::json;
    match d {
        Delta::Role(r) => json!({ "role": r }),
        Delta::Content(c) => json!({ "content": c }),
        Delta::Reasoning(r) => json!({ "reasoning": r }),
        Delta::ToolCall(t) => json!({ "tool_call": {
            "index": t.index, "id": t.id, "name": t.name, "arguments": t.arguments } }),
        Delta::Finish(FinishReason::Other(s)) => json!({ "finish": { "other": s } }),
        Delta::Finish(f) => json!({ "finish": finish_reason_str(f) }),
        Delta::Usage(u) => {
            let mut usage = serde_json::Map::new();
            usage.insert("prompt_tokens".into(), json!(u.prompt_tokens));
            usage.insert("completion_tokens".into(), json!(u.completion_tokens));
            usage.insert("cached_prompt_tokens".into(), json!(u.cached_prompt_tokens));
            usage.insert("reasoning_tokens".into(), json!(u.reasoning_tokens));
            // Only when reported: the 0.1 transcripts, which cannot report it, stay valid.
            if let Some(w) = u.cache_write_tokens {
                usage.insert("cache_write_tokens".into(), json!(w));
            }
            json!({ "usage": usage })
        }
        Delta::ReasoningSignature(r) => json!({ "reasoning_signature": {
            "signature": r.signature, "format": r.format } }),
        Delta::ReasoningEncrypted(r) => json!({ "reasoning_encrypted": {
            "data": r.data, "id": r.id, "format": r.format } }),
        Delta::Refusal(r) => json!({ "refusal": r }),
        Delta::Model(m) => json!({ "model": m }),
        Delta::Done => json!("done"),
        Delta::Passthrough(p) => json!({ "passthrough": {
            "response": p.response_json, "choice": p.choice_json, "message": p.message_json } }),
    }
}

/// What a provider plugin sees of a configured source: model, base URL, thinking switch,
/// `EXTRA_BODY` as JSON text, `MAX_TOKENS` and `THINKING_BUDGET` — never the credential, which only the host attaches (per the
/// plugin's `auth-scheme`). The one mapping the gateway and the conformance kit both use.
pub fn source_info(s: &crate::config::SourceSettings) -> SourceInfo {
    SourceInfo {
        model: s.model.clone(),
        base_url: s.base_url.clone(),
        enable_thinking: s.enable_thinking,
        extra_body_json: serde_json::Value::Object(s.extra_body.clone()).to_string(),
        max_tokens: s.max_tokens,
        thinking_budget_tokens: s.thinking_budget_tokens,
    }
}

/// The contract's name of an error class (`transient`, `source-dead`, `request-rejected`,
/// `result-invalid`).
pub fn error_class_str(c: ErrorClass) -> &'static str {
    match c {
        ErrorClass::Transient => "transient",
        ErrorClass::SourceDead => "source-dead",
        ErrorClass::RequestRejected => "request-rejected",
        ErrorClass::ResultInvalid => "result-invalid",
    }
}

/// The contract's name of a thinking style (`none`, `reasoning-field`, `inline-tags`,
/// `reasoning-blocks`).
pub fn thinking_style_str(t: ThinkingStyle) -> &'static str {
    match t {
        ThinkingStyle::None => "none",
        ThinkingStyle::ReasoningField => "reasoning-field",
        ThinkingStyle::InlineTags => "inline-tags",
        ThinkingStyle::ReasoningBlocks => "reasoning-blocks",
    }
}
