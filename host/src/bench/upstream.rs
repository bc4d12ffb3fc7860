//! A minimal fast upstream for the benchmark: hyper HTTP/1, precomputed bytes, a fixed answer
//! non-streamed or as an SSE stream of N chunks. It measures nothing itself; it only has to
//! cost as little as possible so the gateway's share shows.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::{Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The SSE frames of the streamed answer with `chunks` content chunks (the plugin
/// microbenchmark parses the same answer).
pub(super) fn stream_frames(chunks: usize) -> Vec<Bytes> {
    answers(chunks).chunks
}

/// Precomputed answers.
struct Answers {
    whole: Bytes,
    chunks: Vec<Bytes>,
}

fn answers(chunks: usize) -> Answers {
    let whole = serde_json::json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1_700_000_000u64,
        "model": "bench-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello from the benchmark upstream."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 8, "completion_tokens": 6, "total_tokens": 14}
    })
    .to_string();
    let mut frames = Vec::with_capacity(chunks + 4);
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        let v = serde_json::json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
            "created": 1_700_000_000u64, "model": "bench-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        Bytes::from(format!("data: {v}\n\n"))
    };
    frames.push(chunk(
        serde_json::json!({"role": "assistant", "content": ""}),
        None,
    ));
    for i in 0..chunks {
        frames.push(chunk(
            serde_json::json!({"content": format!("tok{i} ")}),
            None,
        ));
    }
    frames.push(chunk(serde_json::json!({}), Some("stop")));
    frames.push(Bytes::from(format!(
        "data: {}\n\n",
        serde_json::json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000u64,
            "model": "bench-model", "choices": [],
            "usage": {"prompt_tokens": 8, "completion_tokens": chunks, "total_tokens": 8 + chunks}})
    )));
    frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    Answers {
        whole: Bytes::from(whole),
        chunks: frames,
    }
}

type Body = BoxBody<Bytes, Infallible>;

async fn handle(
    answers: Arc<Answers>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    // A streamed request says `"stream":true`; a byte search is enough here.
    let stream = memchr_stream(&body);
    if !stream {
        let mut resp = Response::new(Full::new(answers.whole.clone()).boxed());
        resp.headers_mut().insert(
            "content-type",
            hyper::header::HeaderValue::from_static("application/json"),
        );
        return Ok(resp);
    }
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = answers
        .chunks
        .iter()
        .cloned()
        .map(|b| Ok(Frame::data(b)))
        .collect();
    let body = StreamBody::new(futures_util::stream::iter(frames));
    let mut resp = Response::new(BodyExt::boxed(body));
    resp.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    Ok(resp)
}

fn memchr_stream(body: &[u8]) -> bool {
    body.windows(13).any(|w| w == b"\"stream\":true")
}

/// Serve on a free loopback port; returns the address.
pub async fn start(chunks: usize) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let answers = Arc::new(answers(chunks));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let answers = answers.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| handle(answers.clone(), req));
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(addr)
}
