//! The structured-output layer (docs/pipeline.md#layer-order): between the cache and the retry
//! loop, so a re-ask is a real attempt through admission and telemetry, and the cache only
//! ever sees an answer the ladder validated (a failed ladder is an error, never stored).
//!
//! A call whose `response_format` asks for JSON (`json_schema` or `json_object`) goes
//! through the ladder (`structured::ladder`) with its strategy — `x-pgw-structured-strategy`
//! or the scope's `{SCOPE}__STRUCTURED__STRATEGY`; every other call goes straight to the
//! layer inside (a wrong `x-pgw-structured-strategy` is a 400 either way).

use std::sync::Arc;

use crate::error::GatewayError;

use super::layer::Layer;
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::runtime::{Inner, ScopeRuntime};
use super::sink::{CallState, Sink};
use super::structured::{Target, ladder};

/// The structured-output layer, with the layers inside it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Structured<N>(pub N);

impl<N: Layer> Layer for Structured<N> {
    fn serve<'a>(
        self,
        inner: &'a Arc<Inner>,
        scope: &'a ScopeRuntime,
        req: &'a ChatRequest,
        st: &'a mut CallState,
        sink: &'a mut Sink,
    ) -> impl Future<Output = Result<ChatResponse, GatewayError>> + Send + 'a {
        serve(self.0, inner, scope, req, st, sink)
    }
}

/// Serve a call through the structured-output ladder, or straight through to `next`.
async fn serve<N: Layer>(
    next: N,
    inner: &Arc<Inner>,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let asked = req.structured_strategy.as_deref();
    let Some(target) = Target::from_overlay(&req.overlay)? else {
        inner.structured.check(&scope.settings, asked)?;
        return next.serve(inner, scope, req, st, sink).await;
    };
    let strategy = inner.structured.for_call(&scope.settings, asked).await?;
    ladder::run(next, inner, scope, req, &target, &strategy, st, sink).await
}
