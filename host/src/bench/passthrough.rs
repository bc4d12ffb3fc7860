//! The floor: a bare pass-through proxy on the gateway's own HTTP stack (an axum server with
//! `TCP_NODELAY` on client connections, a reqwest client), forwarding each request to the
//! upstream and streaming the answer back with no governance at all. The benchmark runs it
//! as its own process (`polygateway bench-passthrough`), like the gateway, so the floor pays
//! the same process boundary and scheduling as the gateway it is compared with.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::serve::ListenerExt;
use bytes::Bytes;
use tokio::net::TcpListener;

#[derive(Clone)]
struct Floor {
    client: reqwest::Client,
    /// `{upstream}/v1/chat/completions`, parsed once.
    url: reqwest::Url,
}

async fn forward(State(floor): State<Floor>, body: Bytes) -> Response {
    let sent = floor
        .client
        .post(floor.url.clone())
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => {
            let mut resp = Response::new(Body::from(e.to_string()));
            *resp.status_mut() = StatusCode::BAD_GATEWAY;
            return resp;
        }
    };
    let status = resp.status();
    let ctype = resp.headers().get("content-type").cloned();
    let mut out = Response::new(Body::from_stream(resp.bytes_stream()));
    *out.status_mut() = status;
    out.headers_mut().insert(
        "content-type",
        ctype.unwrap_or(HeaderValue::from_static("application/json")),
    );
    out
}

/// Serve on `listen` (port 0: a free one), forwarding `POST /v1/chat/completions` to
/// `upstream` (`http://host:port`). Returns the bound address; the server runs in the
/// background.
pub async fn start(listen: SocketAddr, upstream: String) -> std::io::Result<SocketAddr> {
    let url = reqwest::Url::parse(&format!("{upstream}/v1/chat/completions"))
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .no_proxy()
        .build()
        .map_err(std::io::Error::other)?;
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let app = Router::new()
        .route("/v1/chat/completions", post(forward))
        .with_state(Floor { client, url });
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}
