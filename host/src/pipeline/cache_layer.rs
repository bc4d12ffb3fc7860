//! The response-cache layer (reference §4.3, §7.5): outside the structured-output ladder and
//! the retry loop, so a hit never touches the limiter, the breaker or the upstream.
//! Not built yet: every call passes through to the structured-output layer.

use crate::error::GatewayError;

use super::gateway::{Inner, ScopeRuntime};
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::sink::{CallState, Sink};
use super::structured_layer;

/// Serve a call through the cache (today: straight through).
pub(crate) async fn serve(
    inner: &Inner,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    structured_layer::serve(inner, scope, req, st, sink).await
}
