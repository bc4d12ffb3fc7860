//! `POST /v1/chat/completions`: auth, body limit, validation, `x-pgw-*` headers, then the
//! pipeline; a non-streamed answer as one JSON object, a streamed one as SSE. The response
//! head waits for the call to commit, so failover stays invisible to the client.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;

use super::AppState;
use super::call_headers::{call_options, header_str, set};
use super::errors::{error_response, plain_error};
use super::sse::{ChunkEncoder, completion_body, done, error_event};
use crate::error::GatewayError;
use crate::pipeline::{CallEvent, ChatRequest};

/// Most call events coalesced into one body frame (one write to the client).
const EVENTS_PER_FRAME: usize = 64;
/// Bytes reserved per coalesced event: a chunk head with a short delta fits.
const FRAME_BYTES_HINT: usize = 192;

pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Err(e) = super::auth::check(&state.api_keys, &headers, peer) {
        let (status, ty, message) = e.into_gateway_error();
        return plain_error(status, ty, &message);
    }
    let bytes = match axum::body::to_bytes(body, state.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return plain_error(
                413,
                "request_too_large",
                &format!(
                    "request body exceeds PGW_MAX_BODY_BYTES ({} bytes)",
                    state.max_body_bytes
                ),
            );
        }
    };
    let mut req = match ChatRequest::from_openai_body(&bytes) {
        Ok(r) => r,
        Err(e) => return error_response(&e),
    };
    let extra = (|| -> Result<(), GatewayError> {
        let o = call_options(&headers)?;
        req.session_id = o.session_id;
        req.parent_call_id = o.parent_call_id;
        req.call_deadline = o.call_deadline;
        if o.tenant_id.is_some() {
            req.tenant_id = o.tenant_id;
        }
        if o.meta.is_some() {
            req.meta = o.meta;
        }
        if o.cache_namespace.is_some() {
            req.cache_namespace = o.cache_namespace;
        }
        if o.cache_salt.is_some() {
            req.cache_salt = o.cache_salt;
        }
        if headers.contains_key("x-pgw-cache") {
            req.cache_mode = o.cache_mode;
        }
        req.structured_strategy = header_str(&headers, "x-pgw-structured-strategy")?;
        Ok(())
    })();
    if let Err(e) = extra {
        return error_response(&e);
    }
    if !req.stream {
        return match state.gateway.chat(req).await {
            Ok(r) => {
                let mut resp = Response::new(Body::from(completion_body(&r, r.created)));
                resp.headers_mut().insert(
                    axum::http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                set(&mut resp, "x-pgw-call-id", &r.call_id);
                set(&mut resp, "x-pgw-source", &r.source_name);
                set(&mut resp, "x-pgw-attempts", r.attempts);
                set(&mut resp, "x-pgw-cache-hit", r.cache_hit);
                set(&mut resp, "x-pgw-usage-source", r.usage_source.as_str());
                set(&mut resp, "x-pgw-overhead-us", r.overhead_us);
                resp
            }
            Err(e) => error_response(&e),
        };
    }
    let include_usage = req.include_usage;
    let mut events = state.gateway.chat_stream(req);
    let start = match events.next().await {
        Some(CallEvent::Start(s)) => s,
        Some(CallEvent::Failed(e)) => return error_response(&e),
        Some(_) | None => {
            return error_response(&GatewayError::Internal(
                "the call ended without an answer".into(),
            ));
        }
    };
    let enc = ChunkEncoder::new(&start);
    // Every event already waiting when the body is polled goes out as one frame: one write
    // to the client per burst of deltas (typically one upstream read) instead of one per
    // delta. Nothing waits for more: a lone delta is written as soon as it arrives.
    let mut events = events.ready_chunks(EVENTS_PER_FRAME);
    let body = async_stream::stream! {
        let mut finished = false;
        while let Some(batch) = events.next().await {
            let mut frame = Vec::with_capacity(batch.len() * FRAME_BYTES_HINT);
            for ev in batch {
                match ev {
                    CallEvent::Delta(d) => {
                        enc.encode_delta(&d, &mut frame);
                    }
                    CallEvent::End(r) => {
                        if include_usage {
                            frame.extend_from_slice(&enc.usage(r.usage.as_ref()));
                        }
                        frame.extend_from_slice(&done());
                        finished = true;
                        break;
                    }
                    CallEvent::Failed(e) => {
                        tracing::warn!(error = %e, "stream ended with an error after it started");
                        frame.extend_from_slice(&error_event(&e));
                        finished = true;
                        break;
                    }
                    CallEvent::Start(_) => {}
                }
            }
            if !frame.is_empty() {
                yield Ok::<_, std::convert::Infallible>(Bytes::from(frame));
            }
            if finished {
                break;
            }
        }
        if !finished {
            // The call's task ended without an answer or an error (a bug): never let the
            // client take the truncated stream for a complete one.
            yield Ok(error_event(&GatewayError::Internal(
                "the call ended before its answer was complete".into(),
            )));
        }
    };
    let mut resp = Response::new(Body::from_stream(body));
    *resp.status_mut() = StatusCode::OK;
    set(&mut resp, "content-type", "text/event-stream");
    set(&mut resp, "cache-control", "no-cache");
    set(&mut resp, "x-pgw-call-id", &start.call_id);
    set(&mut resp, "x-pgw-source", &start.source_name);
    set(&mut resp, "x-pgw-attempts", start.attempts);
    set(&mut resp, "x-pgw-cache-hit", start.cache_hit);
    set(&mut resp, "x-pgw-overhead-us", start.overhead_us);
    resp
}
