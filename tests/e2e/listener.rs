//! The proxy's edges, against the real `polygateway serve` over raw TCP where the bytes
//! matter: JSON 404/405 naming the path, `GET /v1/models/{model}`, CORS per
//! `PGW_CORS_ORIGINS`, `x-request-id` on every response, the header/body/idle timeouts, the
//! connection cap, graceful shutdown on `SIGTERM` (in-flight calls finish, half-sent
//! requests do not hold it up, the grace period bounds it, the SQLite file is closed), and
//! log lines without ANSI colours when stderr is not a terminal.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{chat_body, gateway, kv, open_stream, post_chat, source};
use polygateway_tests::{GatewayProcess, mock, script, telemetry_rows};

/// `host:port` of a gateway.
fn addr(gw: &GatewayProcess) -> String {
    gw.base_url.trim_start_matches("http://").to_string()
}

/// Read until the peer closes (EOF or reset), for at most `max`: what arrived and when the
/// connection closed. Panics when it is still open after `max`.
async fn closed_within(s: &mut TcpStream, max: Duration) -> (Vec<u8>, Duration) {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((start + max).into(), s.read(&mut buf)).await {
            Err(_) => panic!(
                "connection still open after {max:?}; received {:?}",
                String::from_utf8_lossy(&got)
            ),
            Ok(Ok(0)) | Ok(Err(_)) => return (got, start.elapsed()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Read one HTTP/1.1 response with a `content-length` body: status, lower-cased head, body.
async fn read_response(s: &mut TcpStream) -> (u16, String, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                let status = head[9..12].parse().unwrap();
                let body = String::from_utf8_lossy(&got[end + 4..end + 4 + len]).to_string();
                return (status, head, body);
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("a response within 10 s")
            .expect("read");
        assert!(
            n > 0,
            "closed mid-response: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
}

fn llm(m: &polygateway_tests::MockUpstream, scenario: &str) -> Vec<(String, String)> {
    source(m, "openai", 1, scenario, "gpt-x")
}

#[tokio::test]
async fn unknown_paths_and_methods_get_json_errors_and_every_response_an_id() {
    let m = mock().await;
    let gw = gateway(llm(&m, "routes")).await;
    let client = reqwest::Client::new();

    let resp = client
        .post(format!("{}/v1/assistants", gw.base_url))
        .json(&json!({"model": "llm"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let id = resp.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_eq!(id.len(), 36, "{id}");
    let v: Value = resp.json().await.unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("/v1/assistants is not supported by this gateway"),
        "{message}"
    );
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert_eq!(v["error"]["param"], Value::Null);
    assert_eq!(v["error"]["code"], Value::Null);

    let resp = client
        .get(format!("{}/v1/chat/completions", gw.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(resp.headers()["allow"], "POST");
    assert!(resp.headers().contains_key("x-request-id"));
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        v["error"]["message"],
        "method GET is not allowed on /v1/chat/completions; see the Allow header"
    );
    assert_eq!(v["error"]["type"], "invalid_request_error");

    // No origin configured: OPTIONS is a 405 that says why, with no CORS header.
    let resp = client
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/v1/chat/completions", gw.base_url),
        )
        .header("origin", "https://app.example.com")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert!(!resp.headers().contains_key("access-control-allow-origin"));
    let v: Value = resp.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("PGW_CORS_ORIGINS"),
        "{v}"
    );

    let resp = client
        .get(format!("{}/v1/models/llm", gw.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.headers().contains_key("x-request-id"));
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        v,
        json!({"id": "llm", "object": "model", "created": 0, "owned_by": "polygateway"})
    );
    let resp = client
        .get(format!("{}/v1/models/gpt-4o", gw.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "model_not_found");
    assert_eq!(v["error"]["param"], "model");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("gpt-4o"),
        "{v}"
    );

    // A call's answer: the request id is the call id, streamed or not.
    let (status, headers, body) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-request-id"], headers["x-pgw-call-id"]);
    let resp = client
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .json(&chat_body(true))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers()["x-request-id"],
        resp.headers()["x-pgw-call-id"]
    );
    assert!(resp.text().await.unwrap().ends_with("data: [DONE]\n\n"));
    // A refused request still has an id, a fresh one.
    let (status, headers, _) = post_chat(&gw, json!({"model": "llm"})).await;
    assert_eq!(status, 400);
    let fresh = headers["x-request-id"].to_str().unwrap();
    assert_eq!(fresh.len(), 36);
    assert_ne!(fresh, id);

    // stderr is a pipe here: plain text, no colour codes.
    let stderr = gw.stop().await;
    assert!(stderr.contains("serving"), "{stderr}");
    assert!(
        !stderr.contains("\x1b["),
        "ANSI escapes in piped logs:\n{stderr}"
    );
}

#[tokio::test]
async fn cors_follows_pgw_cors_origins() {
    let m = mock().await;
    let mut env = llm(&m, "cors");
    env.push(kv(
        "PGW_CORS_ORIGINS",
        "https://app.example.com,http://localhost:3000",
    ));
    let gw = gateway(env).await;
    let client = reqwest::Client::new();
    let preflight = |origin: &'static str| {
        client
            .request(
                reqwest::Method::OPTIONS,
                format!("{}/v1/chat/completions", gw.base_url),
            )
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type,x-stainless-os",
            )
            .send()
    };
    let resp = preflight("https://app.example.com").await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let h = resp.headers();
    assert_eq!(h["access-control-allow-origin"], "https://app.example.com");
    assert_eq!(
        h["access-control-allow-headers"],
        "authorization,content-type,x-stainless-os"
    );
    assert_eq!(h["access-control-allow-methods"], "GET,POST,OPTIONS");
    assert_eq!(h["access-control-max-age"], "600");
    assert!(h.contains_key("x-request-id"));

    let resp = preflight("https://evil.example.com").await.unwrap();
    assert!(!resp.headers().contains_key("access-control-allow-origin"));

    let resp = client
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .header("origin", "http://localhost:3000")
        .json(&chat_body(false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let h = resp.headers();
    assert_eq!(h["access-control-allow-origin"], "http://localhost:3000");
    let exposed = h["access-control-expose-headers"].to_str().unwrap();
    assert!(exposed.contains("x-request-id") && exposed.contains("x-pgw-call-id"));
    // An error is readable by the page too.
    let resp = client
        .get(format!("{}/v1/nope", gw.base_url))
        .header("origin", "http://localhost:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    assert_eq!(
        resp.headers()["access-control-allow-origin"],
        "http://localhost:3000"
    );
}

/// A head that trickles in is cut at `PGW_HEADER_READ_TIMEOUT_S` from the connection's
/// start, whatever arrives meanwhile, and without a response.
#[tokio::test]
async fn a_half_sent_head_is_closed_at_the_header_timeout() {
    let m = mock().await;
    let mut env = llm(&m, "slow-head");
    env.push(kv("PGW_HEADER_READ_TIMEOUT_S", "1"));
    let gw = gateway(env).await;
    let mut s = TcpStream::connect(addr(&gw)).await.unwrap();
    s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Ty")
        .await
        .unwrap();
    let (mut rd, mut wr) = s.into_split();
    let trickle = tokio::spawn(async move {
        while wr.write_all(b"p").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let start = Instant::now();
    let mut buf = [0u8; 64];
    let r = tokio::time::timeout(Duration::from_secs(5), rd.read(&mut buf))
        .await
        .expect("closed within 5 s");
    let took = start.elapsed();
    assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(3),
        "{took:?}"
    );
    trickle.abort();
    assert!(polygateway_tests::hits(&m, "slow-head").await.is_empty());
}

/// A keep-alive connection that sends its next request in time is served; one that stays
/// idle is closed at `PGW_IDLE_TIMEOUT_S`, well before the header timeout.
#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_at_the_idle_timeout() {
    let m = mock().await;
    let mut env = llm(&m, "idle");
    env.push(kv("PGW_IDLE_TIMEOUT_S", "1"));
    env.push(kv("PGW_HEADER_READ_TIMEOUT_S", "30"));
    let gw = gateway(env).await;
    let mut s = TcpStream::connect(addr(&gw)).await.unwrap();
    let req = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
    s.write_all(req).await.unwrap();
    let (status, head, _) = read_response(&mut s).await;
    assert_eq!(status, 200, "{head}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    s.write_all(req).await.unwrap();
    let (status, _, body) = read_response(&mut s).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"llm\""), "{body}");
    let (rest, took) = closed_within(&mut s, Duration::from_secs(5)).await;
    assert!(rest.is_empty());
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

/// A body that trickles in gets 408 naming the key at `PGW_BODY_READ_TIMEOUT_S`, and the
/// connection is closed; nothing goes upstream.
#[tokio::test]
async fn a_slow_body_gets_408_at_the_body_timeout() {
    let m = mock().await;
    let mut env = llm(&m, "slow-body");
    env.push(kv("PGW_BODY_READ_TIMEOUT_S", "1"));
    let gw = gateway(env).await;
    let s = TcpStream::connect(addr(&gw)).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    wr.write_all(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"model\"",
    )
    .await
    .unwrap();
    let trickle = tokio::spawn(async move {
        while wr.write_all(b" ").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), rd.read(&mut buf))
            .await
            .expect("answered and closed within 5 s")
        {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let took = start.elapsed();
    trickle.abort();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408 "), "{text}");
    let lower = text.to_ascii_lowercase();
    assert!(lower.contains("\r\nconnection: close\r\n"), "{text}");
    assert!(lower.contains("\r\nx-request-id: "), "{text}");
    let body: Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"]["type"], "request_timeout");
    assert_eq!(
        body["error"]["message"],
        "the request body did not arrive within PGW_BODY_READ_TIMEOUT_S (1 s)"
    );
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(polygateway_tests::hits(&m, "slow-body").await.is_empty());
}

/// At `PGW_MAX_CONNECTIONS` the next connection waits unanswered (holding no descriptor of
/// the gateway's) and is served as soon as an earlier one closes.
#[tokio::test]
async fn the_connection_over_the_cap_waits_and_is_served_when_one_closes() {
    let m = mock().await;
    let mut env = llm(&m, "cap");
    env.push(kv("PGW_MAX_CONNECTIONS", "2"));
    env.push(kv("PGW_HEADER_READ_TIMEOUT_S", "30"));
    let gw = gateway(env).await;
    let first = TcpStream::connect(addr(&gw)).await.unwrap();
    let _second = TcpStream::connect(addr(&gw)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut third = TcpStream::connect(addr(&gw)).await.unwrap();
    third
        .write_all(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(
        tokio::time::timeout(Duration::from_millis(1000), third.read(&mut buf))
            .await
            .is_err(),
        "a third connection was served with PGW_MAX_CONNECTIONS=2"
    );
    let start = Instant::now();
    drop(first);
    let (status, _, body) = read_response(&mut third).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

/// A scenario that streams `chunks` chunks `delay_ms` apart.
async fn slow_stream(
    m: &polygateway_tests::MockUpstream,
    scenario: &str,
    chunks: usize,
    delay_ms: u64,
) {
    let content: String = (0..chunks).map(|i| format!("w{i} ")).collect();
    script(
        m,
        scenario,
        json!({"steps": [], "then": {"content": content, "chunks": chunks, "inter_chunk_delay_ms": delay_ms}}),
    )
    .await;
}

/// `SIGTERM` while a streamed call is in flight, one client has sent half a head, another
/// half a body, and a third sits idle on a keep-alive connection: the stream completes, the
/// half-sent requests are let go at once (the body one with 503), the process exits as soon
/// as the stream is done, and the SQLite file alone holds the call's rows.
#[tokio::test]
async fn sigterm_finishes_the_stream_in_flight_and_lets_half_sent_requests_go() {
    let m = mock().await;
    slow_stream(&m, "drain", 10, 150).await;
    let mut env = llm(&m, "drain");
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    env.push(kv("PGW_SHUTDOWN_GRACE_S", "8"));
    let mut gw = gateway(env).await;

    let mut half_head = TcpStream::connect(addr(&gw)).await.unwrap();
    half_head
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut half_body = TcpStream::connect(addr(&gw)).await.unwrap();
    half_body
        .write_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mo",
        )
        .await
        .unwrap();
    let mut idle = TcpStream::connect(addr(&gw)).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(&mut idle).await.0, 200);

    let mut stream = open_stream(&gw, &chat_body(true)).await;
    use futures_util::StreamExt;
    let first = stream.next().await.unwrap().unwrap();
    let reader = tokio::spawn(async move {
        let mut body = first.to_vec();
        while let Some(chunk) = stream.next().await {
            body.extend_from_slice(&chunk.unwrap());
        }
        String::from_utf8(body).unwrap()
    });

    let start = Instant::now();
    let status = gw.terminate(Duration::from_secs(10)).await;
    let took = start.elapsed();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    // The stream needs ~1.4 s; the half-sent requests would hold a server that waits for
    // them until the header timeout (10 s) or forever.
    assert!(took < Duration::from_secs(5), "exit took {took:?}");
    let body = reader.await.unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    assert_eq!(
        crate::common::sse_contents(&body).concat(),
        (0..10).map(|i| format!("w{i} ")).collect::<String>()
    );

    let (got, _) = closed_within(&mut half_head, Duration::from_secs(1)).await;
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    let (got, _) = closed_within(&mut half_body, Duration::from_secs(1)).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 503 "), "{text}");
    assert!(text.contains("shutting down"), "{text}");
    let (got, _) = closed_within(&mut idle, Duration::from_secs(1)).await;
    assert!(got.is_empty());

    let db = gw.telemetry_db();
    let wal = db.with_extension("db-wal");
    assert!(
        std::fs::metadata(&wal)
            .map(|m| m.len() == 0)
            .unwrap_or(true),
        "{} left behind",
        wal.display()
    );
    assert!(!db.with_extension("db-shm").exists());
    let mut rows = telemetry_rows(&db, &["event", "error_type"]).await;
    rows.sort_by_key(|r| r["event"].as_str().unwrap_or_default().to_string());
    assert_eq!(
        rows,
        vec![
            json!({"event": "attempt", "error_type": null}),
            json!({"event": "terminal_success", "error_type": null}),
        ]
    );
    let stderr = gw.stop().await;
    assert!(stderr.contains("shutdown signal received"), "{stderr}");
}

/// A stream longer than `PGW_SHUTDOWN_GRACE_S` is cut when the grace period ends: the
/// process exits then, and the call's `cancelled` row is written before it does.
#[tokio::test]
async fn sigterm_closes_what_is_left_when_the_grace_period_ends() {
    let m = mock().await;
    slow_stream(&m, "grace", 40, 200).await;
    let mut env = llm(&m, "grace");
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    env.push(kv("PGW_SHUTDOWN_GRACE_S", "1"));
    let mut gw = gateway(env).await;
    let mut stream = open_stream(&gw, &chat_body(true)).await;
    use futures_util::StreamExt;
    let _ = stream.next().await.unwrap().unwrap();
    let reader = tokio::spawn(async move {
        let mut body = Vec::new();
        while let Some(Ok(chunk)) = stream.next().await {
            body.extend_from_slice(&chunk);
        }
        String::from_utf8_lossy(&body).to_string()
    });
    let start = Instant::now();
    let status = gw.terminate(Duration::from_secs(10)).await;
    let took = start.elapsed();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "exit took {took:?}"
    );
    let body = reader.await.unwrap();
    assert!(!body.contains("[DONE]"), "{body}");
    let rows = telemetry_rows(&gw.telemetry_db(), &["event", "error_type"]).await;
    assert!(
        rows.contains(&json!({"event": "terminal_failure", "error_type": "cancelled"})),
        "{rows:?}"
    );
}
