//! The floor: a bare pass-through proxy on the gateway's own HTTP stack (hyper server,
//! reqwest client), forwarding each request to the upstream and streaming the answer back
//! with no governance at all.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use futures_util::TryStreamExt;
use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

type Body = BoxBody<Bytes, std::io::Error>;

async fn forward(
    client: reqwest::Client,
    upstream: String,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let sent = client
        .post(format!("{upstream}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => {
            let body = http_body_util::Full::new(Bytes::from(e.to_string()))
                .map_err(|never| match never {})
                .boxed();
            let mut resp = Response::new(body);
            *resp.status_mut() = hyper::StatusCode::BAD_GATEWAY;
            return Ok(resp);
        }
    };
    let status = resp.status();
    let ctype = resp.headers().get("content-type").cloned();
    let stream = resp
        .bytes_stream()
        .map_ok(Frame::data)
        .map_err(std::io::Error::other);
    let mut out = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    *out.status_mut() = status;
    if let Some(c) = ctype {
        out.headers_mut().insert("content-type", c);
    }
    Ok(out)
}

/// Serve on a free loopback port, forwarding to `upstream` (`http://host:port`).
pub async fn start(upstream: String) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .no_proxy()
        .build()
        .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let client = client.clone();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| forward(client.clone(), upstream.clone(), req));
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(addr)
}
