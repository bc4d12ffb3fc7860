//! Upstream I/O: the pooled HTTP client (and the trace collector's, `collector_client`), SSE
//! framing, `Retry-After` parsing, the stream liveness watchdog, and the redaction of
//! credentials and URL userinfo from error text.
//!
//! **Architecture invariant:** only this module (and the mock upstream) opens connections;
//! it knows nothing about providers: bytes in, SSE events out.

mod client;
mod h1;
mod redact;
mod retry_after;
mod sse;
mod watchdog;

pub use client::{
    HttpClients, MultipartUpload, UpstreamBody, UpstreamError, UpstreamResponse, collector_client,
};
pub use redact::{REDACTED, redact_secrets, strip_userinfo};
pub use retry_after::parse_retry_after;
pub use sse::{DEFAULT_MAX_EVENT_BYTES, EventTooLarge, SseEvent as FramedEvent, SseFramer};
pub use watchdog::{LivenessTimeout, LivenessTimer, Watchdog};
