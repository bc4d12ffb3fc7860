//! The call pipeline (docs/pipeline.md#layer-order): telemetry → deadline → cache →
//! structured output → retry loop → attempt; the cache and structured-output layers slot in
//! between without touching the loop. Embeddings and OCR
//! run the lean loop (`lean/`), which shares admission and bookkeeping with chat.

mod admission;
mod attempt;
mod bookkeeping;
mod cache_layer;
mod call;
mod embed;
mod gateway;
mod lean;
mod ocr;
mod options;
pub(crate) mod passthrough;
mod request;
mod response;
mod retry;
mod rows;
mod sink;
mod structured;
mod structured_layer;
mod upstream;

pub use embed::{EmbeddingInput, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage};
pub use gateway::{Gateway, ReloadError, ReloadReport, SettingsSource, StartError};
pub use ocr::{
    MAX_IMAGE_BYTES, OcrElement, OcrHealth, OcrLayoutResult, OcrPageSize, OcrRequest,
    OcrTextResult, OcrUsage,
};
pub use options::CallOptions;
pub use passthrough::AnswerFields;
pub use request::{CacheMode, ChatRequest, validate_meta, validate_tenant_id};
pub use response::{Accumulator, ChatResponse, TokenUsage, ToolCall};
pub use sink::{CallEvent, StreamStart};
