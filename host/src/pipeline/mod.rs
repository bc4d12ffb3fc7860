//! The call pipeline (DESIGN §3): telemetry → deadline → retry loop → attempt. Later layers
//! (cache, structured output) slot in between without touching the loop.

mod admission;
mod attempt;
mod cache_layer;
mod call;
mod gateway;
mod request;
mod response;
mod retry;
mod rows;
mod sink;
mod structured;
mod structured_layer;

pub use gateway::{Gateway, ReloadError, ReloadReport, SettingsSource, StartError};
pub use request::{CacheMode, ChatRequest, validate_meta, validate_tenant_id};
pub use response::{Accumulator, ChatResponse, TokenUsage, ToolCall};
pub use sink::{CallEvent, StreamStart};
