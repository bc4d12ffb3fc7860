//! The one place that composes a chat call (docs/pipeline.md#layer-order): which layers it
//! goes through, in which order, and why that order. Each layer is given the rest of the
//! stack as its `next` (`layer.rs`); none names the layer beneath it.

use std::sync::Arc;

use crate::error::GatewayError;

use super::cache_layer::Cache;
use super::call::{Deadline, Telemetry};
use super::layer::Layer;
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::retry::Retry;
use super::runtime::Inner;
use super::sink::{CallState, Sink};
use super::structured_layer::Structured;
use super::tenancy::{Access, Spend};

/// The layers of a chat call, outermost first.
fn chat_stack() -> impl Layer {
    // Telemetry outermost: every call leaves one terminal row, even one its deadline cut.
    // It boxes the future of the layers under it (`call.rs`).
    Telemetry(under_telemetry())
}

/// The layers under the telemetry layer, outermost first.
fn under_telemetry() -> impl Layer {
    // The deadline: one hard bound around everything below it, cache I/O included.
    Deadline(
        // A virtual key's scopes and its own rate gates, outside the cache: a cache hit
        // is still a request of that key, and a key may not read a scope it may not call.
        Access(
            // The cache: a hit never touches the limiter, the breaker or the upstream,
            // and identical calls in flight share one upstream call.
            Cache(
                // The key's and team's budgets inside the cache: a hit costs nothing.
                Spend(
                    // Structured output inside the cache: a re-ask is a real attempt,
                    // and the cache only ever stores an answer the ladder validated.
                    Structured(
                        // The retry loop: admission, attempts, and every decision to
                        // retry.
                        Retry,
                    ),
                ),
            ),
        ),
    )
}

/// Run one chat call on the configuration `inner`: find the scope of `req.model` (404
/// `model_not_found` otherwise), then the stack. A streamed call's events go to `sink`.
pub(crate) async fn run_call(
    inner: Arc<Inner>,
    req: ChatRequest,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let Some(scope) = inner.scope_of(&req.model) else {
        return Err(GatewayError::ModelNotFound {
            model: req.model.clone(),
            known: inner.known_aliases(),
        });
    };
    // One reading of the clock: the id's time and `created` are the same instant.
    let now = scope.clock.unix_ms();
    let mut st = CallState::new(scope.entropy.uuid_v7(now).to_string(), now);
    // The stack's big future, everything under the telemetry layer, is boxed by that layer
    // (`call.rs`): what is built here and in the futures around it (`Gateway::chat`, the
    // proxy's handler, axum's handler service) holds a pointer to it.
    chat_stack().serve(&inner, scope, &req, &mut st, sink).await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::under_telemetry;
    use crate::pipeline::layer::Layer;
    use crate::pipeline::request::ChatRequest;
    use crate::pipeline::runtime::{Inner, ScopeRuntime};
    use crate::pipeline::sink::{CallState, Sink};

    /// The size of the future `make` returns, without calling it.
    fn future_size<'a, F: Future>(
        _make: impl FnOnce(
            &'a Arc<Inner>,
            &'a ScopeRuntime,
            &'a ChatRequest,
            &'a mut CallState,
            &'a mut Sink,
        ) -> F,
    ) -> usize {
        std::mem::size_of::<F>()
    }

    /// The future of the layers under telemetry is one heap allocation per call, held for
    /// the call's whole life — 512 of them under 512 streams. It is as large as its largest
    /// await, so a layer awaiting something large inline grows every call: with the upstream
    /// send and the stack under the structured-output ladder awaited inline it was 11,536
    /// bytes in a dev build (jemalloc's 12 KiB class; 11,520 in a release build); boxed while
    /// they run, 7,968 (8 KiB). Either one inline again fails this.
    #[test]
    fn the_future_under_telemetry_stays_within_8_kib() {
        let size = future_size(|inner, scope, req, st, sink| {
            under_telemetry().serve(inner, scope, req, st, sink)
        });
        assert!(size <= 8 * 1024, "{size} bytes");
    }
}
