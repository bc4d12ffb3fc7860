//! One logical call from the top (DESIGN §3): scope lookup, the telemetry layer (one
//! terminal row, always — outside the deadline, so an expired call still leaves its row),
//! the deadline (one hard boundary around everything inside), then the cache layer.

use std::sync::Arc;

use tracing::Instrument;

use crate::error::GatewayError;

use super::cache_layer;
use super::gateway::Inner;
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::rows;
use super::sink::{CallEvent, CallState, Sink};

/// Run one logical call: deadline, retry loop, terminal telemetry row, and the `End` event.
pub(crate) async fn run_call(
    inner: Arc<Inner>,
    req: ChatRequest,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let Some(scope) = inner
        .scopes
        .iter()
        .find(|s| s.settings.aliases.contains(&req.model))
    else {
        let known: Vec<&str> = inner
            .scopes
            .iter()
            .flat_map(|s| s.settings.aliases.iter().map(String::as_str))
            .collect();
        return Err(GatewayError::ModelNotFound {
            model: req.model.clone(),
            known: known.join(", "),
        });
    };
    let mut st = CallState::new();
    let span = tracing::info_span!("call", call_id = %st.call_id, scope = %scope.settings.name);
    let deadline = req.call_deadline.or(scope.settings.call_deadline);
    let result = async {
        match deadline {
            Some(d) => {
                match tokio::time::timeout(
                    d,
                    cache_layer::serve(&inner, scope, &req, &mut st, sink),
                )
                .await
                {
                    Ok(r) => r,
                    Err(_) => Err(GatewayError::DeadlineExceeded {
                        deadline_s: d.as_secs_f64(),
                    }),
                }
            }
            None => cache_layer::serve(&inner, scope, &req, &mut st, sink).await,
        }
    }
    .instrument(span)
    .await;
    let latency = st.started.elapsed();
    inner.recorder.record(rows::terminal_row(
        &inner.recorder,
        scope,
        &req,
        &st,
        &result,
        latency,
    ));
    if let (Ok(r), Sink::Channel(tx)) = (&result, &*sink) {
        let _ = tx.send(CallEvent::End(Box::new(r.clone()))).await;
    }
    result
}
