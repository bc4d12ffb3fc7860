//! The one seam between a client dialect and the call. A dialect (OpenAI Chat Completions in
//! `chat.rs`, Anthropic Messages in `messages/`, OpenAI Responses in `responses/`) maps its
//! request body to the call's neutral [`ChatRequest`] (OpenAI-shaped messages and parameters,
//! with the conventions of `wit/types.wit` for reasoning and cache hints), and the call's
//! answer — whole, or as deltas — to its own wire format. Everything else is shared and
//! written once here: client auth, the body limit, the `x-pgw-*` call headers, the response
//! head that waits for the call to commit, the framing of one body write per burst of
//! deltas, and the rule that a stream which ends without an answer ends with an error.
//! Nothing below the proxy learns which dialect was spoken except the ledger's `ingress`
//! column ([`ChatRequest::ingress`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;

use super::AppState;
use super::call_headers::{CallHeaders, names, set, trace_parent};
use crate::error::GatewayError;
use crate::keys::Principal;
use crate::pipeline::{CallEvent, ChatRequest, ChatResponse, StreamStart};
use crate::plugin::Delta;

/// Most call events coalesced into one body frame (one write to the client).
const EVENTS_PER_FRAME: usize = 64;
/// Bytes reserved per coalesced event: a chunk head with a short delta fits.
const FRAME_BYTES_HINT: usize = 192;

/// Headers an answer carries: content type, the six `x-pgw-*` of the call, the request id,
/// a budget warning or two.
const RESPONSE_HEADERS: usize = 12;

/// One client dialect: how its requests become calls and how answers go back.
pub(crate) trait Dialect: 'static {
    /// What the dialect keeps from the request to write its answer (fields the answer
    /// echoes, whether usage was asked for, …).
    type Echo: Send + 'static;
    /// The encoder of one streamed answer.
    type Stream: StreamEncoder;

    /// The request body as a neutral call request (with `ingress` set) and the echo.
    ///
    /// Errors: an invalid body, naming the field at fault.
    fn parse(body: &[u8], headers: &HeaderMap) -> Result<(ChatRequest, Self::Echo), GatewayError>;

    /// The body of a non-streamed answer.
    fn whole(r: &ChatResponse, echo: &Self::Echo) -> Vec<u8>;

    /// The encoder of a streamed answer, once the call has committed.
    fn stream(start: &StreamStart, echo: Self::Echo) -> Self::Stream;

    /// An error before the answer started, as this dialect's HTTP response.
    fn error(e: &GatewayError) -> Response;

    /// An error that is not a `GatewayError` (auth, body size): status, the error type
    /// (`authentication_error`, `permission_error` or `request_too_large`, names both
    /// OpenAI's and Anthropic's clients know), message.
    fn plain_error(status: u16, ty: &'static str, message: &str) -> Response;
}

/// Writes one streamed answer in a dialect's wire format.
pub(crate) trait StreamEncoder: Send + 'static {
    /// Append what one delta becomes (possibly nothing) to `out`.
    fn delta(&mut self, d: &Delta, out: &mut Vec<u8>);
    /// Append the end of a complete answer.
    fn end(&mut self, r: &ChatResponse, out: &mut Vec<u8>);
    /// Append the in-band error that ends a stream which cannot be completed.
    fn failed(&mut self, e: &GatewayError, out: &mut Vec<u8>);
}

/// Read the request body up to the limit; over it, the dialect's 413.
pub(crate) async fn read_body<D: Dialect>(
    state: &AppState,
    body: Body,
) -> Result<Bytes, Box<Response>> {
    axum::body::to_bytes(body, state.max_body_bytes)
        .await
        .map_err(|_| {
            Box::new(D::plain_error(
                413,
                "request_too_large",
                &format!(
                    "request body exceeds PGW_MAX_BODY_BYTES ({} bytes)",
                    state.max_body_bytes
                ),
            ))
        })
}

/// Check the client key: the caller's virtual key (`Ok(Some)`), a static key or an open
/// loopback gateway (`Ok(None)`), else the refusal as the dialect's 401 / 403.
pub(crate) fn caller<D: Dialect>(
    state: &AppState,
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Result<Option<Arc<Principal>>, Box<Response>> {
    super::auth::identify(&state.api_keys, state.keys.as_deref(), headers, peer).map_err(|e| {
        let (status, ty, message) = e.into_gateway_error();
        Box::new(D::plain_error(status, ty, &message))
    })
}

/// Apply the `x-pgw-*` call headers to a parsed request (a header wins over a body field
/// with the same meaning). With a virtual key the identity is the key's: the tenant is its
/// team (or the key), and a client's `x-pgw-tenant-id` only narrows it
/// (`<team>/<header>`); the cache partition is set from the key, whatever the headers say.
fn apply_call_headers(
    req: &mut ChatRequest,
    headers: &HeaderMap,
    principal: Option<Arc<Principal>>,
) -> Result<(), GatewayError> {
    let call = CallHeaders::of(headers);
    let o = call.options()?;
    req.session_id = o.session_id;
    req.parent_call_id = o.parent_call_id;
    req.call_deadline = o.call_deadline;
    if o.tenant_id.is_some() {
        req.tenant_id = o.tenant_id;
    }
    if let Some(p) = &principal {
        req.tenant_id = Some(narrowed_tenant(p, req.tenant_id.as_deref()));
    }
    // Nothing in the body may name a key: only the authenticated one counts.
    req.principal = principal;
    if o.meta.is_some() {
        req.meta = o.meta;
    }
    if o.cache_namespace.is_some() {
        req.cache_namespace = o.cache_namespace;
    }
    if o.cache_salt.is_some() {
        req.cache_salt = o.cache_salt;
    }
    if call.has_cache() {
        req.cache_mode = o.cache_mode;
    }
    req.structured_strategy = call.structured_strategy()?;
    Ok(())
}

/// The tenant of a virtual key's call: the key's tenant (its team, or the key), narrowed
/// by the client's `x-pgw-tenant-id` to `<tenant>/<header>` — a sub-tenant, never another
/// team's.
pub(crate) fn narrowed_tenant(p: &Principal, header: Option<&str>) -> String {
    match header {
        Some(h) => format!("{}/{h}", p.tenant()),
        None => p.tenant().to_string(),
    }
}

/// Serve one call in dialect `D`: auth, body, parse, call headers, then the call; a
/// non-streamed answer as one body, a streamed one as `D`'s event stream.
pub(crate) async fn serve<D: Dialect>(
    state: AppState,
    peer: SocketAddr,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let principal = match caller::<D>(&state, &headers, peer) {
        Ok(p) => p,
        Err(resp) => return *resp,
    };
    let bytes = match read_body::<D>(&state, body).await {
        Ok(b) => b,
        Err(resp) => return *resp,
    };
    let (mut req, echo) = match D::parse(&bytes, &headers) {
        Ok(r) => r,
        Err(e) => return D::error(&e),
    };
    if let Err(e) = apply_call_headers(&mut req, &headers, principal) {
        return D::error(&e);
    }
    if state.gateway.traces_enabled() {
        req.trace_parent = trace_parent(&headers);
    }
    if !req.stream {
        return match state.gateway.chat(req).await {
            Ok(r) => {
                let mut resp = Response::new(Body::from(D::whole(&r, &echo)));
                // Room for every header set here and by the layers above (request id), so
                // the map is allocated once instead of grown.
                resp.headers_mut().reserve(RESPONSE_HEADERS);
                resp.headers_mut().insert(
                    axum::http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                set(&mut resp, names::CALL_ID, &r.call_id);
                set(&mut resp, names::SOURCE, &r.source_name);
                set(&mut resp, names::ATTEMPTS, r.attempts);
                set(&mut resp, names::CACHE_HIT, r.cache_hit);
                set(&mut resp, names::USAGE_SOURCE, r.usage_source.as_str());
                set(&mut resp, names::OVERHEAD_US, r.overhead_us);
                set_budget_warnings(&mut resp, &r.budget_warnings);
                resp
            }
            Err(e) => D::error(&e),
        };
    }
    let mut events = state.gateway.chat_stream(req);
    let start = match events.next().await {
        Some(CallEvent::Start(s)) => s,
        Some(CallEvent::Failed(e)) => return D::error(&e),
        Some(_) | None => {
            return D::error(&GatewayError::Internal(
                "the call ended without an answer".into(),
            ));
        }
    };
    let mut enc = D::stream(&start, echo);
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
                    CallEvent::Delta(d) => enc.delta(&d, &mut frame),
                    CallEvent::End(r) => {
                        enc.end(&r, &mut frame);
                        finished = true;
                        break;
                    }
                    CallEvent::Failed(e) => {
                        tracing::warn!(error = %e, "stream ended with an error after it started");
                        enc.failed(&e, &mut frame);
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
            let mut frame = Vec::new();
            enc.failed(
                &GatewayError::Internal("the call ended before its answer was complete".into()),
                &mut frame,
            );
            yield Ok(Bytes::from(frame));
        }
    };
    let mut resp = Response::new(Body::from_stream(body));
    resp.headers_mut().reserve(RESPONSE_HEADERS);
    *resp.status_mut() = StatusCode::OK;
    set(
        &mut resp,
        axum::http::header::CONTENT_TYPE,
        "text/event-stream",
    );
    set(&mut resp, axum::http::header::CACHE_CONTROL, "no-cache");
    set(&mut resp, names::CALL_ID, &start.call_id);
    set(&mut resp, names::SOURCE, &start.source_name);
    set(&mut resp, names::ATTEMPTS, start.attempts);
    set(&mut resp, names::CACHE_HIT, start.cache_hit);
    set(&mut resp, names::OVERHEAD_US, start.overhead_us);
    set_budget_warnings(&mut resp, &start.budget_warnings);
    resp
}

/// `x-pgw-budget-warning`: one header value per soft budget limit the call crossed.
fn set_budget_warnings(resp: &mut Response, warnings: &[String]) {
    for w in warnings {
        if let Ok(v) = HeaderValue::try_from(w.as_str()) {
            resp.headers_mut().append(names::BUDGET_WARNING, v);
        }
    }
}
