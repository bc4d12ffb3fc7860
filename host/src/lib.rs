//! PolyGateway: an LLM gateway that governs one model call — source selection, failover,
//! retries, stream liveness, telemetry — with provider behaviour supplied by sandboxed
//! WebAssembly components.
//!
//! Embedded use:
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let gateway = polygateway::Gateway::from_env().await?;
//! let answer = gateway.chat(polygateway::ChatRequest::user("llm", "Hello")).await?;
//! println!("{}", answer.content);
//! # Ok(()) }
//! ```
//! Or run the OpenAI-compatible proxy: `polygateway serve`.

pub mod bench;
pub mod cache;
pub mod cli;
pub mod config;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod governance;
pub mod keys;
pub mod ledger;
pub mod mock;
pub mod pipeline;
pub mod plugin;
pub mod proxy;
pub mod telemetry;
pub mod transport;

pub use error::{GatewayError, StructuredFailure, UnavailableReason};
pub use pipeline::EmbeddingInput;
pub use pipeline::{
    CallEvent, CallOptions, ChatRequest, ChatResponse, EmbeddingRequest, EmbeddingResponse,
    EmbeddingUsage, Gateway, StartError, StreamStart, TokenUsage, ToolCall,
};
pub use pipeline::{OcrElement, OcrLayoutResult, OcrPageSize, OcrRequest, OcrTextResult};
pub use telemetry::UsageSource;
