//! PolyGateway guest SDK: the WIT bindings of the plugin contract
//! (`polygateway:plugin@0.2.0`, worlds `provider`, `selector` and `strategy`) and the building
//! blocks of an OpenAI-compatible provider component — request bodies, SSE and response
//! parsing, error classification, a `<think>` splitter — and of a structured-output strategy
//! — prompt instructions, native `response_format`, fence stripping, JSON repair — as plain
//! Rust that also runs natively in tests.
//!
//! A provider component is a few dozen lines:
//!
//! ```
//! use polygateway_plugin_sdk::{Capabilities, Provider, ThinkingStyle};
//!
//! struct OpenAi;
//!
//! impl Provider for OpenAi {
//!     const NAME: &'static str = "openai";
//!     const CAPABILITIES: Capabilities = Capabilities {
//!         streaming: true,
//!         native_json_schema: true,
//!         thinking: ThinkingStyle::None,
//!         prefill_continuation: false,
//!         chat: true,
//!         embedding: false,
//!         ocr: false,
//!         audio: false,
//!     };
//! }
//!
//! polygateway_plugin_sdk::export_provider!(OpenAi);
//! ```
//!
//! A source selector is a few lines too (see [`Selector`]):
//!
//! ```
//! use polygateway_plugin_sdk::{Selector, SelectorCandidate, available};
//!
//! struct First;
//!
//! impl Selector for First {
//!     const NAME: &'static str = "first";
//!     fn choose(candidates: &[SelectorCandidate], _seed: u64) -> Option<u32> {
//!         available(candidates).next().map(|c| c.index)
//!     }
//! }
//!
//! polygateway_plugin_sdk::export_selector!(First);
//! ```
//!
//! So is a structured-output strategy (see [`Strategy`]; [`repair_json_text`] needs the
//! `repair` feature):
//!
//! ```
//! use polygateway_plugin_sdk::{
//!     Capabilities, JsonTarget, Preparation, RepairError, Strategy, instructions_for,
//!     native_format,
//! };
//!
//! struct NativeOrPrompt;
//!
//! impl Strategy for NativeOrPrompt {
//!     const NAME: &'static str = "native-or-prompt";
//!     fn prepare(target: &JsonTarget, provider: &Capabilities) -> Preparation {
//!         match provider.native_json_schema {
//!             true => Preparation {
//!                 response_format: Some(native_format(target)),
//!                 instructions: None,
//!             },
//!             false => Preparation {
//!                 response_format: None,
//!                 instructions: Some(instructions_for(target)),
//!             },
//!         }
//!     }
//!     fn repair(raw: &str, _target: &JsonTarget) -> Result<String, RepairError> {
//!         Ok(raw.trim().to_string())
//!     }
//! }
//!
//! polygateway_plugin_sdk::export_strategy!(NativeOrPrompt);
//! ```
//!
//! Units: token counts are model tokens, times are milliseconds (`-ms`), bodies are bytes.

pub mod bindings;
mod choice;
pub mod classify;
mod embedding;
mod fields;
pub mod golden;
mod passthrough;
mod provider;
pub mod request;
mod response;
mod selector;
pub mod selector_bindings;
mod strategy;
pub mod strategy_bindings;
mod stream;
mod stream_fast;
mod think;

pub use bindings::export_provider;
pub use bindings::exports::polygateway::plugin::chat_provider::{Guest, GuestStreamParser};
pub use bindings::exports::polygateway::plugin::embedding_provider::{
    EmbeddingInputs, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage, Guest as EmbeddingGuest,
};
pub use bindings::exports::polygateway::plugin::ocr_provider::{
    ArchiveFetch, Bbox, Guest as OcrGuest, ImageInfo, LayoutDocument, LayoutElement, OcrOperation,
    PageSize, UploadRequest,
};
pub use bindings::polygateway::plugin::types::{
    AuthScheme, BuildError, Capabilities, ChatRequest, ClassifiedError, Delta, EncryptedReasoning,
    ErrorClass, FinishReason, Header, HttpRequest, Passthrough, PluginInfo, ReasoningSignature,
    SourceInfo, SseEvent, ThinkingStyle, ToolCallDelta, Usage,
};
pub use classify::{classify_error_object, classify_http_error};
pub use embedding::{EMBEDDINGS_PATH, openai_embedding_request, parse_openai_embeddings};
pub use fields::{finish_reason_from_str, usage_from_json};
pub use provider::{Provider, ProviderStreamParser};
pub use response::parse_chat_response;
pub use selector::{Selector, SplitMix64, available, weight_of};
pub use selector_bindings::export_selector;
pub use selector_bindings::exports::polygateway::plugin::source_selector::{
    Candidate as SelectorCandidate, Guest as SelectorGuest, SelectorInfo,
};
#[cfg(feature = "repair")]
pub use strategy::{MAX_REPAIR_BYTES, MAX_REPAIR_DEPTH, repair_json_text};
pub use strategy::{Strategy, instructions_for, native_format, strip_fences};
pub use strategy_bindings::export_strategy;
pub use strategy_bindings::exports::polygateway::plugin::structured_strategy::{
    Guest as StrategyGuest, JsonTarget, NativeSchema, Preparation, RepairError, ResponseFormat,
    StrategyInfo,
};
pub use stream::ChatStreamParser;
pub use think::ThinkSplitter;

/// The version of the WIT contract this SDK binds (`polygateway:plugin@0.2.0`); `describe`
/// reports it as `contract-version`.
///
/// # Example
/// ```
/// assert_eq!(polygateway_plugin_sdk::CONTRACT_VERSION, "0.2.0");
/// ```
pub const CONTRACT_VERSION: &str = "0.2.0";
