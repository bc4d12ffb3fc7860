//! The two outer layers of a chat call (docs/pipeline.md#layer-order): telemetry (the
//! call's span when traces are on, and one terminal row for every call — outside the
//! deadline, so an expired call still leaves its row; a call the cache answered gets a
//! cache-hit row instead; a call dropped before its end gets a `cancelled` row from its
//! guard) and the deadline (one hard boundary around everything inside it, cache I/O
//! included).

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::Either;
use tracing::Instrument;

use crate::error::GatewayError;
use crate::telemetry::otel::CallSpan;

use super::boxed::boxed_in_place;
use super::layer::Layer;
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::rows::{self, CancelGuard};
use super::runtime::{Inner, ScopeRuntime};
use super::sink::{CallEvent, CallState, Sink};
use super::traces;

/// The telemetry layer: the call's span, its terminal row, and the `End` event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Telemetry<N>(pub N);

impl<N: Layer> Layer for Telemetry<N> {
    fn serve<'a>(
        self,
        inner: &'a Arc<Inner>,
        scope: &'a ScopeRuntime,
        req: &'a ChatRequest,
        st: &'a mut CallState,
        sink: &'a mut Sink,
    ) -> impl Future<Output = Result<ChatResponse, GatewayError>> + Send + 'a {
        recorded(self.0, inner, scope, req, st, sink)
    }
}

async fn recorded<N: Layer>(
    next: N,
    inner: &Arc<Inner>,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
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
    let mut cancelled = CancelGuard {
        inner: inner.clone(),
        row: Some(move || {
            let (call_id, started, created_unix, created_at_ms) = ids;
            let mut at_start = CallState::new(call_id, created_at_ms);
            (at_start.started, at_start.created_unix) = (started, created_unix);
            let mut row = rows::terminal_row(
                recorder,
                scope,
                req,
                &at_start,
                &Err(GatewayError::Internal(String::new())),
                Duration::ZERO,
            );
            row.error_type = Some("cancelled".into());
            row.error = Some("the caller went away before the call finished".into());
            row.attempts = None;
            row
        }),
        started: st.started,
    };
    let span = tracing::info_span!("call", call_id = %st.call_id, scope = %scope.settings.name);
    // The call's OpenTelemetry span (docs/tracing.md#spans), when traces are on; dropped
    // with this future, it ends as cancelled.
    let otel = traces::chat_call(inner, scope, req, &st.call_id);
    st.trace = otel.as_ref().map(CallSpan::trace);
    // The rest of the stack's future is built in a heap allocation and stays there: it is
    // ~8 KiB (every inner layer's state nested inline; 11.5 KiB before the parts that run
    // only for a while were boxed, see `boxed_in_place`), and a Rust move is a copy of the
    // whole value. Built by value, it was copied four times per call — as this future's
    // state was written, into `Instrumented`, into the awaiting slot, and into the box
    // `run_call` made: `memcpy` was 63.4k of the 324.9k instructions of a non-streamed call,
    // 16.6k after (`host/src/bench/instructions.py`; docs/benchmark-history.md). Rust has no
    // placement: in an optimised build the compiler builds it in the allocation (a debug
    // build still copies it once, and a compiler upgrade could bring the copy back, which
    // that tool's `memcpy` line shows). What wraps it moves a pointer.
    let result = boxed_in_place(|| next.serve(inner, scope, req, st, sink))
        .instrument(span)
        .await;
    cancelled.row = None;
    let latency = st.started.elapsed();
    let row = match &result {
        Ok(r) if r.cache_hit => rows::cache_hit_row(
            &inner.recorder,
            scope,
            req,
            st,
            r,
            Duration::from_millis(r.latency_ms),
        ),
        _ => rows::terminal_row(&inner.recorder, scope, req, st, &result, latency),
    };
    inner.recorder.record(row);
    if let Some(otel) = otel {
        let last = st.last_source.and_then(|i| scope.sources.get(i));
        traces::end_chat_call(otel, &result, st.attempts, last);
    }
    if let (Ok(r), Sink::Channel(tx)) = (&result, &*sink) {
        let _ = tx.send(CallEvent::End(Box::new(r.clone()))).await;
    }
    result
}

/// The deadline layer: the request's `x-pgw-call-deadline-s`, else the scope's
/// `{SCOPE}__CALL_DEADLINE_S`; expiry is 504 `deadline_exceeded` and drops everything inside.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline<N>(pub N);

impl<N: Layer> Layer for Deadline<N> {
    fn serve<'a>(
        self,
        inner: &'a Arc<Inner>,
        scope: &'a ScopeRuntime,
        req: &'a ChatRequest,
        st: &'a mut CallState,
        sink: &'a mut Sink,
    ) -> impl Future<Output = Result<ChatResponse, GatewayError>> + Send + 'a {
        deadline(self.0, inner, scope, req, st, sink)
    }
}

/// Serve the call through `next` under its deadline ([`with_deadline`]). An `async fn`:
/// `next`'s future (~8 KiB) is built in this one's own state when it is first polled and
/// handed to [`with_deadline`] as a pin, so nothing moves it once pinned. Built first and
/// handed to `Timeout` and `Either` by value, it was moved into each, and a move of a value
/// this large is a `memcpy` unless the optimiser elides it.
async fn deadline<N: Layer>(
    next: N,
    inner: &Arc<Inner>,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let deadline = req.call_deadline.or(scope.settings.call_deadline);
    let call = std::pin::pin!(next.serve(inner, scope, req, st, sink));
    with_deadline(deadline, call).await
}

/// Run `fut` under the call's deadline (the request's, else the scope's): expiry is 504
/// `deadline_exceeded`, and dropping `fut` cancels whatever it was doing. Chat calls (the
/// [`Deadline`] layer, with a pinned future) and the lean calls (embeddings, OCR) all go
/// through it.
///
/// Combinators, not an `async fn`: one that takes `fut` and awaits it (or a `Timeout` around
/// it) keeps two slots of its size, the argument and the awaited value (when the chat stack
/// passed its future by value, 11.4 KiB of the chat call's 23.9 KiB future,
/// `-Zprint-type-sizes`). `Either` holds it once.
pub(crate) fn with_deadline<T>(
    deadline: Option<Duration>,
    fut: impl Future<Output = Result<T, GatewayError>>,
) -> impl Future<Output = Result<T, GatewayError>> {
    match deadline {
        Some(d) => Either::Left(tokio::time::timeout(d, fut).map(move |r| match r {
            Ok(answer) => answer,
            Err(_elapsed) => Err(GatewayError::DeadlineExceeded {
                deadline_s: d.as_secs_f64(),
            }),
        })),
        None => Either::Right(fut),
    }
}
