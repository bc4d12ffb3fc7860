//! One logical call from the top (docs/pipeline.md#layer-order): scope lookup, the telemetry
//! layer (one terminal row, always — outside the deadline, so an expired call still leaves its
//! row), the deadline (one hard boundary around everything inside), then the cache layer. A
//! call the cache answered gets a cache-hit row instead of a terminal row.

use std::sync::Arc;
use std::time::Duration;

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
    // If this future is dropped before the call ends (the client went away, the embedding
    // task was aborted), the guard still writes the call's terminal row. The row is built
    // only then, from the call's ids (the state itself is borrowed by the call).
    let ids = (
        st.call_id.clone(),
        st.started,
        st.created_unix,
        st.created_at_ms,
    );
    let recorder = &inner.recorder;
    let req_ref = &req;
    let mut cancelled = CancelGuard {
        inner: inner.clone(),
        row: Some(move || {
            let mut at_start = CallState::new();
            (
                at_start.call_id,
                at_start.started,
                at_start.created_unix,
                at_start.created_at_ms,
            ) = ids;
            let mut row = rows::terminal_row(
                recorder,
                scope,
                req_ref,
                &at_start,
                &Err(GatewayError::Internal(String::new())),
                std::time::Duration::ZERO,
            );
            row.error_type = Some("cancelled".into());
            row.error = Some("the caller went away before the call finished".into());
            row.attempts = None;
            row
        }),
        started: st.started,
    };
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
    cancelled.row = None;
    let latency = st.started.elapsed();
    let row = match &result {
        Ok(r) if r.cache_hit => rows::cache_hit_row(
            &inner.recorder,
            scope,
            &req,
            &st,
            r,
            Duration::from_millis(r.latency_ms),
        ),
        _ => rows::terminal_row(&inner.recorder, scope, &req, &st, &result, latency),
    };
    inner.recorder.record(row);
    if let (Ok(r), Sink::Channel(tx)) = (&result, &*sink) {
        let _ = tx.send(CallEvent::End(Box::new(r.clone()))).await;
    }
    result
}

/// Writes a `cancelled` terminal row when a call's future is dropped before it ends
/// (attempts and source unknown at that point: NULL).
pub(crate) struct CancelGuard<F: FnOnce() -> crate::telemetry::CallRow> {
    pub inner: Arc<Inner>,
    /// Builds the row to write if dropped; set to `None` once the call wrote its own.
    pub row: Option<F>,
    pub started: tokio::time::Instant,
}

impl<F: FnOnce() -> crate::telemetry::CallRow> Drop for CancelGuard<F> {
    fn drop(&mut self) {
        if let Some(build) = self.row.take() {
            let mut row = build();
            row.total_latency_ms = Some(self.started.elapsed().as_millis() as u64);
            self.inner.recorder.record(row);
        }
    }
}
