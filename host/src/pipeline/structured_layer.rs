//! The structured-output layer (docs/pipeline.md#layer-order): between the cache and the retry
//! loop, so a re-ask is a real attempt through admission and telemetry, and the cache only
//! ever sees an answer the ladder validated (a failed ladder is an error, never stored).
//!
//! A call whose `response_format` asks for JSON (`json_schema` or `json_object`) goes
//! through the ladder (`structured::ladder`) with its strategy — `x-pgw-structured-strategy`
//! or the scope's `{SCOPE}__STRUCTURED__STRATEGY`; every other call goes straight to the
//! retry loop (a wrong `x-pgw-structured-strategy` is a 400 either way).

use crate::error::GatewayError;

use super::gateway::{Inner, ScopeRuntime};
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::retry;
use super::sink::{CallState, Sink};
use super::structured::{Target, ladder};

/// Serve a call through the structured-output ladder, or straight through.
pub(crate) async fn serve(
    inner: &Inner,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let asked = req.structured_strategy.as_deref();
    let Some(target) = Target::from_overlay(&req.overlay)? else {
        inner.structured.check(&scope.settings, asked)?;
        return retry::retry_loop(inner, scope, req, st, sink).await;
    };
    let strategy = inner.structured.for_call(&scope.settings, asked).await?;
    ladder::run(inner, scope, req, &target, &strategy, st, sink).await
}
