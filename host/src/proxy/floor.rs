//! The benchmark's floor: the proxy's HTTP edge with nothing behind it — the accept loop and
//! client connections ([`super::server`]: hyper's HTTP/1 server, `TCP_NODELAY`, the
//! connection timers), an axum router, and the upstream client chat calls use
//! (`transport::HttpClients`: hyper's HTTP/1 client driven inside the call's task) —
//! forwarding each request to the upstream and streaming the answer back with no governance
//! at all. `polygateway bench` runs it as its own process (`polygateway bench-passthrough`),
//! like the gateway, so the floor pays the same process boundary and scheduling as the
//! gateway it is compared with. What the gateway spends above this floor is its own work on
//! a call; what the floor spends above nginx is the HTTP stack's. It lives here, not in
//! `bench/`, because it is the proxy's own server (the library's modules never import the
//! proxy).
//!
//! Until the sixteenth round (2026-12-07) the floor was axum's `serve` with a reqwest
//! client, which the gateway had stopped using for chat calls on 2026-12-05; it keeps reqwest
//! only for sources with `TRUST_ENV` and for multipart uploads (`docs/benchmark-history.md`).

use std::net::SocketAddr;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::post;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{ListenerSettings, UpstreamLimits};
use crate::transport::{HttpClients, UpstreamBody, UpstreamError};

#[derive(Clone)]
struct Floor {
    clients: HttpClients,
    /// `{upstream}/v1/chat/completions`, parsed once.
    url: url::Url,
}

/// 502 with the client's error as text (its URL has no userinfo).
fn bad_gateway(e: &UpstreamError) -> Response {
    let mut resp = Response::new(Body::from(e.to_string()));
    *resp.status_mut() = StatusCode::BAD_GATEWAY;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

async fn forward(State(floor): State<Floor>, body: Bytes) -> Response {
    let mut headers = HeaderMap::with_capacity(1);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let sent = floor
        .clients
        .send(false, "POST", &floor.url, headers, body.into())
        .await;
    let upstream = match sent {
        Ok(r) => r,
        Err(e) => return bad_gateway(&e),
    };
    let ctype = upstream.headers.get(CONTENT_TYPE).cloned();
    // Like nginx, a body of known length goes on with its length, not chunked.
    let length = upstream.headers.get(CONTENT_LENGTH).cloned();
    // The body is read by the response's own poll, inside the connection's task.
    let chunks = futures_util::stream::unfold(upstream.body, |mut body: UpstreamBody| async {
        body.chunk().await.transpose().map(|chunk| (chunk, body))
    });
    let mut out = Response::new(Body::from_stream(chunks));
    *out.status_mut() = StatusCode::from_u16(upstream.status).unwrap_or(StatusCode::BAD_GATEWAY);
    out.headers_mut().insert(
        CONTENT_TYPE,
        ctype.unwrap_or(HeaderValue::from_static("application/json")),
    );
    if let Some(length) = length {
        out.headers_mut().insert(CONTENT_LENGTH, length);
    }
    out
}

/// Serve on `listen` (port 0: a free one), accepting up to `max_connections` clients at once
/// (`polygateway bench` gives every server under test the same cap), forwarding
/// `POST /v1/chat/completions` to `upstream` (`http://host:port`). Returns the bound address;
/// the server runs in the background until the process ends.
///
/// Errors: `upstream` is not a URL, the client cannot be built, or `listen` cannot be bound.
pub async fn start(
    listen: SocketAddr,
    upstream: String,
    max_connections: u32,
) -> std::io::Result<SocketAddr> {
    let url = url::Url::parse(&format!("{upstream}/v1/chat/completions"))
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let clients = HttpClients::new(UpstreamLimits::default()).map_err(std::io::Error::other)?;
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let app = Router::new()
        .route("/v1/chat/completions", post(forward))
        .with_state(Floor { clients, url });
    tokio::spawn(async move {
        let limits = ListenerSettings {
            max_connections,
            ..ListenerSettings::default()
        };
        let draining = CancellationToken::new();
        super::server::run(listener, app, &limits, draining, std::future::pending()).await;
    });
    Ok(addr)
}
