//! The generated bindings of the WIT contract (`wit/`) and the curated types the rest of the
//! host uses: deltas, usage, classified errors, request descriptions.

use super::bindings::provider as generated;

pub use generated::exports::polygateway::plugin::embedding_provider::{
    EmbeddingInputs, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage,
};
pub use generated::exports::polygateway::plugin::ocr_provider::{
    ArchiveFetch, Bbox, ImageInfo, LayoutDocument, LayoutElement, OcrOperation, PageSize,
    UploadRequest,
};
pub use generated::polygateway::plugin::types::{
    AuthScheme, BuildError, Capabilities, ChatRequest, ClassifiedError, Delta, ErrorClass,
    FinishReason, Header, HttpRequest, Passthrough, PluginInfo, SourceInfo, SseEvent,
    ThinkingStyle, ToolCallDelta, Usage,
};
pub(crate) use generated::{Provider, ProviderPre};

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
        Delta::Usage(u) => json!({ "usage": {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "cached_prompt_tokens": u.cached_prompt_tokens,
            "reasoning_tokens": u.reasoning_tokens } }),
        Delta::Refusal(r) => json!({ "refusal": r }),
        Delta::Model(m) => json!({ "model": m }),
        Delta::Done => json!("done"),
        Delta::Passthrough(p) => json!({ "passthrough": {
            "response": p.response_json, "choice": p.choice_json, "message": p.message_json } }),
    }
}

/// What a provider plugin sees of a configured source: model, base URL, thinking switch and
/// `EXTRA_BODY` as JSON text — never the credential, which only the host attaches (per the
/// plugin's `auth-scheme`). The one mapping the gateway and the conformance kit both use.
pub fn source_info(s: &crate::config::SourceSettings) -> SourceInfo {
    SourceInfo {
        model: s.model.clone(),
        base_url: s.base_url.clone(),
        enable_thinking: s.enable_thinking,
        extra_body_json: serde_json::Value::Object(s.extra_body.clone()).to_string(),
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

/// The contract's name of a thinking style (`none`, `reasoning-field`, `inline-tags`).
pub fn thinking_style_str(t: ThinkingStyle) -> &'static str {
    match t {
        ThinkingStyle::None => "none",
        ThinkingStyle::ReasoningField => "reasoning-field",
        ThinkingStyle::InlineTags => "inline-tags",
    }
}
