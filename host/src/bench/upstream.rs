//! A minimal fast upstream for the benchmark: hyper HTTP/1, precomputed bytes, a fixed answer
//! non-streamed, as an SSE stream of N chunks written at once, or — when the request's text
//! holds [`PACED_MARKER`] — as a paced stream like a model's (`deltas` content chunks `pace`
//! apart, on a fixed schedule so that timer lateness does not accumulate). It measures
//! nothing itself; it only has to cost as little as possible so the gateway's share shows.

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
    frames(chunks).chunks
}

/// The text a request carries to get the paced stream instead of the burst.
pub const PACED_MARKER: &str = "bench-paced-stream";

/// The paced stream's shape: `deltas` content chunks, one every `pace`.
#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    pub deltas: usize,
    pub pace: std::time::Duration,
}

/// Precomputed answers.
struct Answers {
    whole: Bytes,
    chunks: Vec<Bytes>,
    /// The paced stream's writes: the first (role chunk and first delta) at once, each next
    /// one `pace` after the previous, the last with the finish, usage and `[DONE]` frames.
    paced: Vec<Bytes>,
    pace: std::time::Duration,
}

/// Groups the frames of an answer with `deltas` content chunks into the paced stream's
/// writes: [role + delta 0], [delta 1], …, [delta n-1 + finish + usage + DONE].
fn paced_writes(frames: &[Bytes]) -> Vec<Bytes> {
    let n = frames.len();
    if n < 5 {
        return vec![frames.concat().into()];
    }
    let deltas = &frames[1..n - 3];
    let mut writes = Vec::with_capacity(deltas.len());
    for (i, d) in deltas.iter().enumerate() {
        let mut w = Vec::new();
        if i == 0 {
            w.extend_from_slice(&frames[0]);
        }
        w.extend_from_slice(d);
        if i + 1 == deltas.len() {
            for f in &frames[n - 3..] {
                w.extend_from_slice(f);
            }
        }
        writes.push(Bytes::from(w));
    }
    writes
}

fn answers(chunks: usize, pacing: Pacing) -> Answers {
    let base = frames(chunks);
    let paced = paced_writes(&frames(pacing.deltas).chunks);
    Answers {
        whole: base.whole,
        chunks: base.chunks,
        paced,
        pace: pacing.pace,
    }
}

/// The whole answer and the frames of the stream with `chunks` content chunks.
struct Frames {
    whole: Bytes,
    chunks: Vec<Bytes>,
}

fn frames(chunks: usize) -> Frames {
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
    Frames {
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
    if contains(&body, PACED_MARKER.as_bytes()) {
        let start = tokio::time::Instant::now();
        let pace = answers.pace;
        let writes = futures_util::stream::unfold(0usize, move |i| {
            let answers = answers.clone();
            async move {
                let w = answers.paced.get(i)?.clone();
                tokio::time::sleep_until(start + pace * i as u32).await;
                Some((Ok::<_, Infallible>(Frame::data(w)), i + 1))
            }
        });
        let mut resp = Response::new(BodyExt::boxed(StreamBody::new(writes)));
        resp.headers_mut().insert(
            "content-type",
            hyper::header::HeaderValue::from_static("text/event-stream"),
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
    contains(body, b"\"stream\":true")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Serve on a free loopback port (`chunks` per burst stream, `pacing` for paced ones);
/// returns the address.
pub async fn start(chunks: usize, pacing: Pacing) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let answers = Arc::new(answers(chunks, pacing));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paced_writes_hold_every_frame_once_in_order() {
        let f = frames(3).chunks;
        let w = paced_writes(&f);
        assert_eq!(w.len(), 3);
        assert_eq!(w.concat(), f.concat());
        assert!(w[0].starts_with(&f[0]) && w[0].ends_with(&f[1]));
        assert_eq!(w[1], f[2]);
        assert!(w[2].starts_with(&f[3]) && w[2].ends_with(b"data: [DONE]\n\n"));
    }
}
