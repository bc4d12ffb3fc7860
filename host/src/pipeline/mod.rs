//! The call pipeline (docs/pipeline.md#layer-order). `runtime/` is its floor (a started
//! configuration); `stack.rs` composes a chat call — telemetry → deadline → cache →
//! structured output → retry loop → attempt — each layer given the next (`layer.rs`); the
//! retry loop (`retry/`) is one loop for chat and for the one-shot operations of embeddings
//! and OCR (`lean/`). `gateway.rs` is the public façade over all of it.

mod admission;
mod attempt;
mod bookkeeping;
mod boxed;
mod cache_layer;
mod call;
mod embed;
mod failure;
mod gateway;
mod health;
mod layer;
mod lean;
mod ocr;
mod options;
mod own_wakes;
pub(crate) mod passthrough;
pub(crate) mod reasoning;
mod reload;
mod request;
mod response;
mod retry;
mod rows;
mod runtime;
mod sink;
mod stack;
mod structured;
mod structured_layer;
mod tenancy;
mod traces;
mod upstream;

pub use embed::{EmbeddingInput, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage};
pub use gateway::{Gateway, SettingsSource};
pub use ocr::{
    MAX_IMAGE_BYTES, OcrElement, OcrHealth, OcrLayoutResult, OcrPageSize, OcrRequest,
    OcrTextResult, OcrUsage,
};
pub use options::CallOptions;
pub use passthrough::AnswerFields;
pub use reload::{ReloadError, ReloadReport};
pub use request::{CacheMode, ChatRequest, Ingress, validate_meta, validate_tenant_id};
pub use response::{Accumulator, ChatResponse, TokenUsage, ToolCall};
pub use runtime::StartError;
pub use sink::{CallEvent, StreamStart};
