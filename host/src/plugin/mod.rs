//! The wasmtime runtime for plugin components: one `Engine`, one pre-instantiated component
//! per plugin, pools of warm instances, and the typed, sandboxed calls the host makes.
//!
//! **Architecture invariant:** a plugin never sees a credential, a clock, a socket, a file
//! or the environment; every call runs under an epoch deadline and a memory cap, and a trap
//! fails only that call (`PluginError::Fault`) and discards only that instance — and with a
//! shared stream-parser instance, the other streams parsing in it (`stream_parser.rs`).

mod bindings;
mod builtin;
pub mod cli;
pub(crate) mod compile;
pub mod conformance;
mod engine;
mod error;
mod file;
mod pool;
mod provider;
mod provider_calls;
mod sandbox_io;
mod schedule;
mod selector;
mod state;
mod strategy;
mod stream_parser;
mod ticker;
mod v0_1;
mod versioned;
mod wire;

pub use builtin::builtin_provider_bytes;
pub use builtin::{BUILTIN_SELECTORS, builtin_selector_bytes};
pub use builtin::{BUILTIN_STRATEGIES, builtin_strategy_bytes};
pub use compile::Compiler;
pub use engine::{
    DEFAULT_PLUGIN_MAX_BYTES, DEFAULT_STREAMS_PER_INSTANCE, PluginEngine, PluginLimits, Profiler,
};
pub use error::PluginError;
pub use file::ComponentFileError;
pub use provider::{ProviderComponent, ProviderInstance};
pub use selector::{Candidate, SelectSource, SelectorComponent, SelectorInfo};
pub use strategy::{
    JsonTarget, NativeSchema, Preparation, RepairError, ResponseFormat, StrategyComponent,
    StrategyInfo,
};
pub use stream_parser::StreamParser;
pub use wire::{
    ArchiveFetch, Bbox, EmbeddingInputs, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage,
    ImageInfo, LayoutDocument, LayoutElement, OcrOperation, PageSize, UploadRequest,
};
pub use wire::{
    AuthScheme, BuildError, Capabilities, ChatRequest as PluginChatRequest, ClassifiedError, Delta,
    EncryptedReasoning, ErrorClass, FinishReason, Header, HttpRequest, Passthrough, PluginInfo,
    ReasoningSignature, SourceInfo, SseEvent, ThinkingStyle, ToolCallDelta, Usage, delta_to_json,
    error_class_str, finish_reason_str, source_info, thinking_style_str,
};

pub use versioned::SUPPORTED_CONTRACT_VERSIONS;
