//! Upstream I/O: the pooled HTTP client, SSE framing, `Retry-After` parsing and the stream
//! liveness watchdog.
//!
//! **Architecture invariant:** only this module (and the mock upstream) opens connections;
//! it knows nothing about providers: bytes in, SSE events out.

mod client;
mod retry_after;
mod sse;
mod watchdog;

pub use client::{HttpClients, MultipartUpload, UpstreamBody, UpstreamError, UpstreamResponse};
pub use retry_after::parse_retry_after;
pub use sse::{SseEvent as FramedEvent, SseFramer};
pub use watchdog::{LivenessTimeout, LivenessTimer, Watchdog};
