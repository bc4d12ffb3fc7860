//! Hostile upstreams against a real gateway process: an SSE line that never ends, a stream
//! that is always ready but never sends an event, non-streamed and error bodies far over
//! `PGW_UPSTREAM_MAX_BODY_BYTES`, an upstream that echoes the credential in its error, and
//! a `BASE_URL` with userinfo. Each test asserts its time bound, and the body tests the
//! gateway's peak RSS (`VmHWM`).
//!
//! The hostile upstream is a few lines of tokio TCP in this file: it answers every request
//! with one scripted, deliberately broken HTTP/1.1 response and counts what it wrote.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{chat_body, gateway, kv, post_chat, source};
use polygateway_tests::{GatewayProcess, eventually, mock, script, telemetry_rows};

const MIB: u64 = 1024 * 1024;

/// What the hostile upstream answers.
#[derive(Clone, Copy)]
enum Answer {
    /// `200 text/event-stream`, then `data: ` and `len` bytes of `x`, never a newline; the
    /// connection then stays open.
    EndlessLine { len: u64 },
    /// `200 text/event-stream`, then `: ping` comment lines, as fast as the socket takes them,
    /// until the gateway goes away: always ready, never an event.
    KeepAliveFlood,
    /// `status` with a JSON-looking body of `len` bytes, with a `Content-Length` or delimited
    /// by closing the connection.
    Body {
        status: u16,
        len: u64,
        content_length: bool,
    },
}

/// A scripted upstream on a free port: the requests it saw and the body bytes it wrote.
struct Hostile {
    base_url: String,
    hits: Arc<AtomicUsize>,
    written: Arc<AtomicU64>,
}

impl Hostile {
    async fn start(answer: Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let hits = Arc::new(AtomicUsize::new(0));
        let written = Arc::new(AtomicU64::new(0));
        let (h, w) = (hits.clone(), written.clone());
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (h, w) = (h.clone(), w.clone());
                // `None`: the gateway closed the connection; nothing more to do.
                tokio::spawn(async move { read_request(conn, answer, h, w).await });
            }
        });
        Self {
            base_url,
            hits,
            written,
        }
    }
}

/// Read one request (head and `Content-Length` body), then write the scripted answer.
async fn read_request(
    mut conn: TcpStream,
    answer: Answer,
    hits: Arc<AtomicUsize>,
    written: Arc<AtomicU64>,
) -> Option<()> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        let n = conn.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = conn.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    hits.fetch_add(1, Ordering::SeqCst);
    match answer {
        Answer::EndlessLine { len } => {
            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: ")
                .await
                .ok()?;
            let chunk = vec![b'x'; 64 * 1024];
            let mut sent = 0;
            while sent < len {
                send(&mut conn, &chunk, &written).await?;
                sent += chunk.len() as u64;
            }
            tokio::time::sleep(Duration::from_secs(120)).await;
        }
        Answer::KeepAliveFlood => {
            conn.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
            )
            .await
            .ok()?;
            let chunk = b": ping\n".repeat(8 * 1024);
            loop {
                send(&mut conn, &chunk, &written).await?;
            }
        }
        Answer::Body {
            status,
            len,
            content_length,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Hostile\r\ncontent-type: application/json\r\nconnection: close\r\n"
            );
            if content_length {
                head.push_str(&format!("content-length: {len}\r\n"));
            }
            head.push_str("\r\n{\"error\":{\"message\":\"");
            conn.write_all(head.as_bytes()).await.ok()?;
            let chunk = vec![b'a'; 64 * 1024];
            let mut sent = 0;
            while sent < len {
                send(&mut conn, &chunk, &written).await?;
                sent += chunk.len() as u64;
            }
            let _ = conn.shutdown().await;
        }
    }
    Some(())
}

/// Write `bytes`, counting them once written.
async fn send(conn: &mut TcpStream, bytes: &[u8], written: &AtomicU64) -> Option<()> {
    conn.write_all(bytes).await.ok()?;
    written.fetch_add(bytes.len() as u64, Ordering::SeqCst);
    Some(())
}

/// The gateway's peak resident set (`VmHWM`), in bytes.
fn peak_rss(gw: &GatewayProcess) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", gw.pid())).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// One source on `base_url`, one attempt per call, SQLite telemetry, plus `extra`.
async fn gateway_on(base_url: &str, extra: Vec<(String, String)>) -> GatewayProcess {
    let mut env = vec![
        kv("LLM__OPENAI__1__BASE_URL", base_url),
        kv("LLM__OPENAI__1__MODEL", "hostile-model"),
        kv("LLM__OPENAI__1__API_KEY", "sk-hostile-test-key"),
        kv("LLM__RETRY__MAX_ATTEMPTS", "1"),
        kv("PGW_TELEMETRY_BACKEND", "sqlite"),
    ];
    env.extend(extra);
    gateway(env).await
}

/// The attempt rows and the terminal row, once both are written.
async fn rows(gw: &GatewayProcess) -> (Vec<Value>, Value) {
    let db = gw.telemetry_db();
    let rows = eventually(10, || {
        let db = db.clone();
        async move {
            let rows = telemetry_rows(&db, &["event", "source_name", "error_type", "error"]).await;
            rows.iter().any(|r| r["event"] != "attempt").then_some(rows)
        }
    })
    .await;
    let (attempts, terminal): (Vec<Value>, Vec<Value>) =
        rows.into_iter().partition(|r| r["event"] == "attempt");
    assert_eq!(terminal.len(), 1, "{terminal:?}");
    (attempts, terminal.into_iter().next().unwrap())
}

/// A 64 MiB SSE line without a newline ends the attempt `transient` at the default 4 MiB
/// event cap, long before the 25 s call deadline, and the rest of the line is not read.
#[tokio::test]
async fn an_endless_sse_line_fails_transient_at_the_event_cap() {
    let up = Hostile::start(Answer::EndlessLine { len: 64 * MIB }).await;
    let gw = gateway_on(&up.base_url, vec![kv("LLM__CALL_DEADLINE_S", "25")]).await;
    let started = Instant::now();
    let (status, _, body) = post_chat(&gw, chat_body(true)).await;
    let took = started.elapsed();
    assert_eq!(status, 503, "{body}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(up.hits.load(Ordering::SeqCst), 1);
    let (attempts, terminal) = rows(&gw).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["error_type"], "transient");
    assert_eq!(
        attempts[0]["error"],
        "an SSE event exceeds 4194304 bytes (PGW_SSE_MAX_EVENT_BYTES) from openai-1"
    );
    assert_eq!(terminal["error_type"], "scope_unavailable");
    let rss = peak_rss(&gw);
    assert!(rss < 150 * MIB, "peak RSS {} MiB", rss / MIB);
    // The gateway hung up: the upstream got rid of far less than the 64 MiB.
    eventually(10, || async {
        let w = up.written.load(Ordering::SeqCst);
        (w < 32 * MIB).then_some(())
    })
    .await;
    drop(gw);
}

/// A stream that always has bytes ready and never an event (a flood of keep-alive comments)
/// still ends at the TTFT limit (1 s), within a small margin.
#[tokio::test]
async fn an_always_ready_stream_still_times_out_at_ttft() {
    let up = Hostile::start(Answer::KeepAliveFlood).await;
    let gw = gateway_on(
        &up.base_url,
        vec![
            kv("LLM__OPENAI__1__TTFT_TIMEOUT_S", "1"),
            kv("LLM__OPENAI__1__INTER_TOKEN_TIMEOUT_S", "0.5"),
        ],
    )
    .await;
    let started = Instant::now();
    let (status, _, body) = post_chat(&gw, chat_body(true)).await;
    let took = started.elapsed();
    assert_eq!(status, 503, "{body}");
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_millis(2500),
        "took {took:?}"
    );
    let (attempts, _) = rows(&gw).await;
    assert_eq!(attempts[0]["error_type"], "transient");
    assert_eq!(attempts[0]["error"], "ttft_timeout from openai-1");
    assert!(up.written.load(Ordering::SeqCst) > MIB, "the flood ran");
}

/// The same flood under a call deadline shorter than every watchdog limit: the call
/// deadline wins, within a small margin.
#[tokio::test]
async fn an_always_ready_stream_cannot_outrun_the_call_deadline() {
    let up = Hostile::start(Answer::KeepAliveFlood).await;
    let gw = gateway_on(&up.base_url, vec![kv("LLM__CALL_DEADLINE_S", "1.5")]).await;
    let started = Instant::now();
    let (status, _, body) = post_chat(&gw, chat_body(true)).await;
    let took = started.elapsed();
    assert_eq!(status, 504, "{body}");
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(3),
        "took {took:?}"
    );
    let (_, terminal) = rows(&gw).await;
    assert_eq!(terminal["error_type"], "deadline_exceeded");
}

/// Non-streamed answers of 100 MB: with a `Content-Length` the attempt fails before the body
/// is read; without one it fails once 32 MiB (the default cap) are read. Both are
/// `transient`, and the gateway's peak RSS stays under 150 MiB.
#[tokio::test]
async fn a_100_mb_answer_fails_transient_within_the_body_cap() {
    for content_length in [false, true] {
        let up = Hostile::start(Answer::Body {
            status: 200,
            len: 100_000_000,
            content_length,
        })
        .await;
        let gw = gateway_on(&up.base_url, vec![]).await;
        let started = Instant::now();
        let (status, _, body) = post_chat(&gw, chat_body(false)).await;
        let took = started.elapsed();
        assert_eq!(status, 503, "{body}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
        let (attempts, _) = rows(&gw).await;
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0]["error_type"], "transient");
        assert_eq!(
            attempts[0]["error"],
            "the answer of openai-1 exceeds 33554432 bytes (PGW_UPSTREAM_MAX_BODY_BYTES)"
        );
        let rss = peak_rss(&gw);
        assert!(
            rss < 150 * MIB,
            "content-length {content_length}: peak RSS {} MiB",
            rss / MIB
        );
        eventually(10, || async {
            let w = up.written.load(Ordering::SeqCst);
            (w < 64 * MIB).then_some(())
        })
        .await;
    }
}

/// An error answer (500) of 100 MB is a `transient` failure with its status once it passes
/// `PGW_UPSTREAM_MAX_BODY_BYTES` (set to 8 MiB here), read with 64 KiB kept.
#[tokio::test]
async fn an_oversized_error_body_fails_transient() {
    let up = Hostile::start(Answer::Body {
        status: 500,
        len: 100_000_000,
        content_length: false,
    })
    .await;
    let gw = gateway_on(
        &up.base_url,
        vec![kv("PGW_UPSTREAM_MAX_BODY_BYTES", 8 * MIB)],
    )
    .await;
    let started = Instant::now();
    let (status, _, body) = post_chat(&gw, chat_body(false)).await;
    let took = started.elapsed();
    assert_eq!(status, 503, "{body}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let (attempts, _) = rows(&gw).await;
    assert_eq!(attempts[0]["error_type"], "transient");
    assert_eq!(
        attempts[0]["error"],
        "HTTP 500: the error answer of openai-1 exceeds 8388608 bytes (PGW_UPSTREAM_MAX_BODY_BYTES)"
    );
    let rss = peak_rss(&gw);
    assert!(rss < 150 * MIB, "peak RSS {} MiB", rss / MIB);
    eventually(10, || async {
        let w = up.written.load(Ordering::SeqCst);
        (w < 64 * MIB).then_some(())
    })
    .await;
}

/// An upstream that echoes the credential in its error (401, then 400): the client's body,
/// the gateway's log and the telemetry rows hold neither the key nor `Bearer <key>`, but
/// the redaction marker.
#[tokio::test]
async fn an_echoed_credential_is_redacted_everywhere() {
    let m = mock().await;
    let key = "sk-echo-9f8e7d6c5b4a";
    for (scenario, status) in [("echo-401", 401), ("echo-400", 400)] {
        script(
            &m,
            scenario,
            json!({"then": {"status": status, "body": format!(
                "{{\"error\":{{\"message\":\"bad key Bearer {key}\",\"type\":\"invalid_request_error\"}}}}"
            )}}),
        )
        .await;
        let mut env = source(&m, "openai", 1, scenario, "model-a");
        env.retain(|(k, _)| !k.ends_with("API_KEY"));
        env.push(kv("LLM__OPENAI__1__API_KEY", key));
        env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
        let gw = gateway(env).await;
        let (code, _, body) = post_chat(&gw, chat_body(false)).await;
        assert_eq!(code, if status == 401 { 503 } else { 400 }, "{body}");
        assert!(!body.contains(key), "{body}");
        assert!(body.contains("bad key [redacted]"), "{body}");
        let (attempts, terminal) = rows(&gw).await;
        for row in attempts.iter().chain([&terminal]) {
            let text = row.to_string();
            assert!(!text.contains(key), "{text}");
            assert!(text.contains("[redacted]"), "{text}");
        }
        let log = gw.stop().await;
        assert!(!log.contains(key), "{log}");
        if status == 401 {
            assert!(log.contains("bad key [redacted]"), "{log}");
        }
    }
}

/// A `BASE_URL` with userinfo on a closed port: the client is told the source and the kind
/// of error only; the row and the log have the URL without `user:pass`.
#[tokio::test]
async fn userinfo_never_leaves_the_gateway() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let gw = gateway_on(
        &format!("http://pgwuser:pgw-secret-pass@127.0.0.1:{port}"),
        vec![],
    )
    .await;
    let (status, _, body) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.ends_with("openai-1: connect_error"), "{message}");
    for leak in ["pgw-secret-pass", "pgwuser", "127.0.0.1", "http://"] {
        assert!(!body.contains(leak), "{leak} in {body}");
    }
    let (attempts, terminal) = rows(&gw).await;
    let url = format!("http://127.0.0.1:{port}/chat/completions");
    let error = attempts[0]["error"].as_str().unwrap();
    assert!(error.starts_with(&format!("connect to {url}: ")), "{error}");
    for row in attempts.iter().chain([&terminal]) {
        let text = row.to_string();
        assert!(
            !text.contains("pgw-secret-pass") && !text.contains("pgwuser"),
            "{text}"
        );
    }
    let log = gw.stop().await;
    assert!(log.contains(&url), "{log}");
    assert!(
        !log.contains("pgw-secret-pass") && !log.contains("pgwuser"),
        "{log}"
    );
}
