//! The structured-output ladder (reference D7, D14, §7.9): between the cache and the retry
//! loop, so a re-ask is a real attempt through admission and telemetry.
//! Not built yet: every call passes through to the retry loop.

use crate::error::GatewayError;

use super::gateway::{Inner, ScopeRuntime};
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::retry;
use super::sink::{CallState, Sink};

/// Serve a call through the ladder (today: straight through).
pub(crate) async fn serve(
    inner: &Inner,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    retry::retry_loop(inner, scope, req, st, sink).await
}
