//! The response-cache layer (docs/cache.md#position): outside the structured-output
//! ladder and the retry loop, so a hit never touches the limiter, the breaker or the
//! upstream. Inside the deadline, so cache I/O counts against it.
//!
//! One call here: `x-pgw-cache: bypass` → straight through. Otherwise look the key up; a
//! hit is replayed (a stream: `Start`, then role, reasoning, content, tool calls and finish
//! deltas, which the proxy encodes like a live answer). A miss joins the single-flight of
//! its key: the first caller (the leader) runs the call in a spawned task and streams it
//! live through a relay that outlives the leader, so a leader that goes away does not cancel
//! the call for the others; identical callers meanwhile (followers) wait for the answer and
//! get a replay. The task stores a complete answer unless the leader said `no-store`. When
//! the shared call fails, followers get the same error — except an interrupted stream
//! (only the leader's client saw output), after which each follower runs its own call.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::cache::{CachedAnswer, CallKey, Publisher};
use crate::error::GatewayError;
use crate::plugin::{Delta, FinishReason, Passthrough, ToolCallDelta};

pub(crate) mod state;

use super::layer::Layer;
use super::request::{CacheMode, ChatRequest};
use super::response::ChatResponse;
use super::runtime::{Inner, ScopeRuntime};
use super::sink::{CallEvent, CallState, EventTx, Sink, StreamStart, event_channel};

use state::Shared;
pub(crate) use state::{CacheRuntime, health};

/// Capacity of the relay channel between the shared call and its leader (event batches).
const RELAY_CAPACITY: usize = 64;

/// What `req` contributes to its cache key (docs/cache.md#key).
fn call_key(req: &ChatRequest) -> CallKey<'_> {
    CallKey {
        messages: &req.messages,
        namespace: req.cache_namespace.as_deref(),
        partition: req.principal.as_deref().map(|p| p.partition()),
        salt: req.cache_salt.as_deref(),
        sampling: &req.overlay,
        structured: req.structured_strategy.as_deref(),
    }
}

/// The cache layer, with the layers inside it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cache<N>(pub N);

impl<N: Layer> Layer for Cache<N> {
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

/// Serve a call through the cache, `next` on a miss.
async fn serve<N: Layer>(
    next: N,
    inner: &Arc<Inner>,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let rt = match &inner.cache {
        Some(rt) if req.cache_mode != CacheMode::Bypass => rt,
        _ => return next.serve(inner, scope, req, st, sink).await,
    };
    let scope_name = &scope.settings.name;
    let (Some(key), Some(scope_idx)) = (
        rt.cache.key(scope_name, &call_key(req)),
        inner.scopes.iter().position(|s| std::ptr::eq(s, scope)),
    ) else {
        return next.serve(inner, scope, req, st, sink).await;
    };
    let at = Flight {
        rt,
        inner,
        scope,
        scope_idx,
        key,
    };
    let result = serve_cached(next, at, req, st, sink).await;
    // `/metrics`: a hit is a call answered without an upstream call of its own (a stored
    // answer, or the answer of an identical call in flight).
    let hit = matches!(&result, Ok(r) if r.cache_hit);
    inner.recorder.metrics().cache_lookup(scope_name, hit);
    result
}

/// Where a cached call's flight is: the cache, the configuration and scope, and the key.
struct Flight<'a> {
    rt: &'a CacheRuntime,
    inner: &'a Arc<Inner>,
    scope: &'a ScopeRuntime,
    scope_idx: usize,
    key: String,
}

async fn serve_cached<N: Layer>(
    next: N,
    at: Flight<'_>,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let Flight {
        rt,
        inner,
        scope,
        scope_idx,
        key,
    } = at;
    let scope_name = &scope.settings.name;
    if let Some(hit) = rt.cache.lookup::<ChatResponse>(&key).await {
        return replay(hit, scope_name, Duration::ZERO, st, sink).await;
    }

    let store = req.cache_mode != CacheMode::NoStore;
    let (relay_tx, relay_rx) = match sink {
        Sink::Channel(_) => {
            let (tx, rx) = event_channel(RELAY_CAPACITY);
            (Some(tx), Some(rx))
        }
        Sink::Collect => (None, None),
    };
    let (state_tx, state_rx) = oneshot::channel();
    // Only a leader builds the shared call (the closure runs only then).
    let flight = rt.flights.join(&key, |publisher| {
        SharedCall {
            next,
            inner: inner.clone(),
            scope_idx,
            req: req.clone(),
            state: same_call(st),
            relay: relay_tx,
            state_back: state_tx,
            key: key.clone(),
            store,
        }
        .run(publisher)
    });
    if flight.is_leader() {
        if let (Some(mut rx), Sink::Channel(out)) = (relay_rx, &*sink) {
            while let Some(batch) = rx.recv_batch().await {
                if batch.iter().any(|ev| matches!(ev, CallEvent::Start(_))) {
                    st.committed = true;
                }
                if out.send_batch(batch).await.is_err() {
                    return Err(GatewayError::Internal("the client went away".into()));
                }
            }
        }
        if let Ok(state) = state_rx.await {
            *st = state;
        }
        return match flight.wait().await {
            Some(shared) => (*shared).clone(),
            None => Err(GatewayError::Internal(
                "the shared call ended without an answer".into(),
            )),
        };
    }

    // A follower: wait for the leader's answer (time spent waiting counts as upstream wait).
    let waited = Instant::now();
    let shared = flight.wait().await;
    drop(flight);
    st.upstream_wait += waited.elapsed();
    match shared.as_deref() {
        Some(Ok(answer)) => {
            rt.cache.note_coalesced();
            let latency = st.started.elapsed();
            replay(answer.clone(), scope_name, latency, st, sink).await
        }
        Some(Err(GatewayError::StreamInterrupted { .. })) | None => {
            let result = next.serve(inner, scope, req, st, sink).await;
            if let (Ok(answer), true) = (&result, store) {
                rt.cache.store(scope_name, &key, answer).await;
            }
            result
        }
        Some(Err(e)) => Err(e.clone()),
    }
}

/// A fresh call state for the shared call, with the leader's ids and start time (so its
/// answer, events and telemetry rows carry the leader's call id).
fn same_call(st: &CallState) -> CallState {
    let mut s = CallState::new(st.call_id.clone(), st.created_at_ms);
    s.started = st.started;
    // The shared call's attempts are the leader's: children of its call span.
    s.trace = st.trace.clone();
    s
}

/// The leader's call, run in its own task by the single-flight.
struct SharedCall<N> {
    /// The layers inside the cache.
    next: N,
    inner: Arc<Inner>,
    scope_idx: usize,
    req: ChatRequest,
    state: CallState,
    /// Live events to the leader, when it streams.
    relay: Option<EventTx>,
    /// The call state back to the leader (attempts, sources, timings for its row).
    state_back: oneshot::Sender<CallState>,
    key: String,
    store: bool,
}

impl<N: Layer> SharedCall<N> {
    async fn run(self, publisher: Publisher<Shared>) {
        let SharedCall {
            next,
            inner,
            scope_idx,
            req,
            mut state,
            relay,
            state_back,
            key,
            store,
        } = self;
        let Some(scope) = inner.scopes.get(scope_idx) else {
            publisher.publish(Arc::new(Err(GatewayError::Internal(
                "scope vanished".into(),
            ))));
            return;
        };
        let result = match relay {
            None => {
                next.serve(&inner, scope, &req, &mut state, &mut Sink::Collect)
                    .await
            }
            Some(leader) => {
                let (tx, mut rx) = event_channel(RELAY_CAPACITY);
                let call = async {
                    let mut sink = Sink::Channel(tx);
                    next.serve(&inner, scope, &req, &mut state, &mut sink).await
                };
                // Forward to the leader while it listens; once it is gone keep draining, so
                // the call goes on for the followers.
                let relay = async move {
                    let mut to = Some(leader);
                    while let Some(batch) = rx.recv_batch().await {
                        if let Some(t) = &to
                            && t.send_batch(batch).await.is_err()
                        {
                            to = None;
                        }
                    }
                };
                tokio::join!(call, relay).0
            }
        };
        let _ = state_back.send(state);
        let to_store = match &result {
            Ok(answer) if store && answer.is_storable() => Some(answer.clone()),
            _ => None,
        };
        publisher.publish(Arc::new(result));
        // After publishing: callers are answered; joiners meanwhile still get the result.
        if let (Some(rt), Some(answer)) = (&inner.cache, to_store) {
            rt.cache.store(&scope.settings.name, &key, &answer).await;
        }
    }
}

/// Serve a stored or shared answer as this call's answer: a stream gets `Start` and the
/// answer's deltas; the terminal row is a cache-hit row (`latency`: 0 for a stored answer,
/// the wait for a coalesced one).
async fn replay(
    mut r: ChatResponse,
    scope_name: &str,
    latency: Duration,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    r.call_id = st.call_id.clone();
    r.created = st.created_unix;
    r.scope = scope_name.to_string();
    r.attempts = 0;
    r.latency_ms = latency.as_millis() as u64;
    r.ttft_ms = None;
    r.max_inter_token_ms = None;
    r.cache_hit = true;
    r.overhead_us = st.overhead().as_micros() as u64;
    if let Sink::Channel(tx) = sink {
        st.committed = true;
        let start = StreamStart {
            call_id: r.call_id.clone(),
            source_name: r.source_name.clone(),
            model: r.model.clone(),
            model_reported: r.model_reported.clone(),
            attempts: 0,
            overhead_us: r.overhead_us,
            created: st.created_unix,
            cache_hit: true,
            budget_warnings: Vec::new(),
        };
        let gone = || GatewayError::Internal("the client went away".into());
        let mut events = vec![CallEvent::Start(start)];
        events.extend(replay_deltas(&r).into_iter().map(CallEvent::Delta));
        tx.send_batch(events).await.map_err(|_| gone())?;
    }
    Ok(r)
}

/// The deltas of a whole answer, in the order a live stream sends them.
fn replay_deltas(r: &ChatResponse) -> Vec<Delta> {
    let mut out = vec![Delta::Role("assistant".into())];
    out.extend(crate::pipeline::reasoning::replay(
        r.reasoning.as_deref(),
        &r.reasoning_details,
    ));
    // The answer's pass-through fields go with its text (or, with none, its finish chunk).
    if let Some(f) = &r.upstream_fields {
        out.push(Delta::Passthrough(Passthrough {
            response_json: f.response.clone(),
            choice_json: f.choice.clone(),
            message_json: f.message.clone(),
        }));
    }
    if !r.content.is_empty() {
        out.push(Delta::Content(r.content.clone()));
    }
    if let Some(refusal) = &r.refusal {
        out.push(Delta::Refusal(refusal.clone()));
    }
    for t in &r.tool_calls {
        out.push(Delta::ToolCall(ToolCallDelta {
            index: t.index,
            id: t.id.clone(),
            name: t.name.clone(),
            arguments: Some(t.arguments.clone()),
        }));
    }
    if let Some(f) = &r.finish_reason {
        out.push(Delta::Finish(finish_reason(f)));
    }
    if matches!(out.last(), Some(Delta::Passthrough(_))) {
        // A passthrough is written with the delta after it.
        out.push(Delta::Content(String::new()));
    }
    out
}

/// The typed finish reason of its OpenAI string (the inverse of `finish_reason_str`).
fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        "function_call" => FinishReason::FunctionCall,
        other => FinishReason::Other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::finish_reason_str;

    #[test]
    fn finish_reasons_round_trip() {
        for s in [
            "stop",
            "length",
            "tool_calls",
            "content_filter",
            "function_call",
            "eos",
        ] {
            assert_eq!(finish_reason_str(&finish_reason(s)), s);
        }
    }
}
