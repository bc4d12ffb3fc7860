//! Attempts cut before they end — by the call deadline or by a client that goes away — still
//! leave their attempt row, `cancelled`, beside the call's terminal row (the upstream
//! received the request and may bill it); and an OCR attempt settles its TPM pre-charge to 0
//! whether it fails or is cut (OCR usage is not measured in tokens).

use std::time::Duration;

use futures_util::StreamExt;
use polygateway::config::settings_from_vars;
use polygateway::{Gateway, GatewayError, OcrRequest};
use serde_json::{Value, json};

use crate::common::{gateway, kv, source};
use polygateway_tests::{GatewayProcess, eventually, hits, mock, script, telemetry_rows};

const COLUMNS: &[&str] = &[
    "logical_call_id",
    "event",
    "source_name",
    "model",
    "error_type",
    "error",
    "prompt_tokens",
    "completion_tokens",
    "usage_source",
    "response",
    "attempts",
];

/// Open a streamed chat call; returns its call id and the body as it arrives.
async fn open(
    gw: &GatewayProcess,
) -> (
    String,
    impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + use<>,
) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .json(&json!({
            "model": "llm",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": true,
        }))
        .send()
        .await
        .expect("gateway reachable");
    assert_eq!(resp.status().as_u16(), 200);
    let call_id = resp.headers()["x-pgw-call-id"]
        .to_str()
        .unwrap()
        .to_string();
    (call_id, resp.bytes_stream())
}

/// The rows of `call_id` once there are two, then a pause that would let a stray third
/// arrive; sorted attempt first.
async fn two_rows(gw: &GatewayProcess, call_id: &str) -> Vec<Value> {
    let db = gw.telemetry_db();
    let of_call = |rows: Vec<Value>| -> Vec<Value> {
        rows.into_iter()
            .filter(|r| r["logical_call_id"] == call_id)
            .collect()
    };
    eventually(10, || {
        let db = db.clone();
        async move { (of_call(telemetry_rows(&db, COLUMNS).await).len() >= 2).then_some(()) }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut rows = of_call(telemetry_rows(&db, COLUMNS).await);
    rows.sort_by_key(|r| r["event"].as_str().unwrap_or_default().to_string());
    rows
}

/// The attempt row of a cut stream: `cancelled` with `error`, the text the client got, and
/// the usage seen (`(prompt, completion)`, `estimated`) or none (`unavailable`).
fn assert_cancelled_attempt(row: &Value, error: &str, usage: Option<(u64, u64)>) {
    assert_eq!(row["event"], "attempt", "{row}");
    assert_eq!(row["source_name"], "openai-1", "{row}");
    assert_eq!(row["model"], "gpt-x", "{row}");
    assert_eq!(row["error_type"], "cancelled", "{row}");
    assert_eq!(row["error"], error, "{row}");
    assert_eq!(row["prompt_tokens"], json!(usage.map(|u| u.0)), "{row}");
    assert_eq!(row["completion_tokens"], json!(usage.map(|u| u.1)), "{row}");
    let source = if usage.is_some() {
        "estimated"
    } else {
        "unavailable"
    };
    assert_eq!(row["usage_source"], source, "{row}");
    assert_eq!(row["response"], "a b ", "{row}");
}

/// A gateway on a scenario that streams `a `, `b ` and then stalls; `usage_on_first_chunk`:
/// the usage (1 prompt word, 4 completion words) comes on the first chunk, before the stall.
async fn stalling_gateway(
    extra: &[(&str, &str)],
    usage_on_first_chunk: bool,
) -> (polygateway_tests::MockUpstream, GatewayProcess) {
    let m = mock().await;
    script(
        &m,
        "stall",
        json!({"then": {
            "content": "a b c d",
            "stall_after_chunks": 2,
            "usage_on_first_chunk": usage_on_first_chunk,
        }}),
    )
    .await;
    let mut env = source(&m, "openai", 1, "stall", "gpt-x");
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    env.extend(extra.iter().map(|(k, v)| kv(k, v)));
    let gw = gateway(env).await;
    (m, gw)
}

#[tokio::test]
async fn a_stalled_stream_cut_by_the_call_deadline_leaves_a_cancelled_attempt_row() {
    let (m, gw) = stalling_gateway(&[("LLM__CALL_DEADLINE_S", "0.5")], true).await;
    let (call_id, stream) = open(&gw).await;
    let started = std::time::Instant::now();
    let body: Vec<u8> = stream.map(|b| b.unwrap().to_vec()).concat().await;
    let body = String::from_utf8(body).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "{body}");
    assert!(body.contains("deadline_exceeded"), "{body}");
    assert!(!body.contains("[DONE]"), "{body}");
    assert_eq!(hits(&m, "stall").await.len(), 1);

    let rows = two_rows(&gw, &call_id).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_cancelled_attempt(
        &rows[0],
        "the call deadline of 0.5s expired during the attempt",
        Some((1, 4)),
    );
    assert_eq!(rows[1]["event"], "terminal_failure");
    assert_eq!(rows[1]["error_type"], "deadline_exceeded");
    assert_eq!(rows[1]["attempts"], 1);
}

#[tokio::test]
async fn a_client_disconnect_mid_stream_leaves_a_cancelled_attempt_row() {
    let (m, gw) = stalling_gateway(&[], false).await;
    let (call_id, stream) = open(&gw).await;
    let mut stream = Box::pin(stream);
    let mut got = String::new();
    while !got.contains(r#"{"content":"b "}"#) {
        let bytes = stream.next().await.unwrap().unwrap();
        got.push_str(std::str::from_utf8(&bytes).unwrap());
    }
    drop(stream);
    eventually(10, || {
        let m = m.clone();
        async move {
            let h = hits(&m, "stall").await;
            (h.len() == 1 && h[0]["cancelled"] == json!(true)).then_some(())
        }
    })
    .await;

    let rows = two_rows(&gw, &call_id).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_cancelled_attempt(&rows[0], "the caller went away during the attempt", None);
    assert_eq!(rows[1]["event"], "terminal_failure");
    assert_eq!(rows[1]["error_type"], "cancelled");
}

/// A small "PNG" (signature and IHDR start, then filler).
fn png(len: usize) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    b.resize(len, 7);
    b
}

/// One MonkeyOCR source with a TPM limit (each attempt pre-charges TPM / 60 = 100 tokens)
/// and a single attempt per call.
async fn ocr_gateway(
    m: &polygateway_tests::MockUpstream,
    scenario: &str,
    db: &std::path::Path,
) -> Gateway {
    let vars = vec![
        kv("OCR__MONKEYOCR__1__BASE_URL", m.ocr_base_url(scenario)),
        kv("OCR__MONKEYOCR__1__MODEL", "monkeyocr"),
        kv("OCR__MONKEYOCR__1__TPM", 6000),
        kv("OCR__RETRY__MAX_ATTEMPTS", 1),
        kv("PGW_TELEMETRY_BACKEND", "sqlite"),
        kv("PGW_TELEMETRY_SQLITE_PATH", db.display()),
    ];
    Gateway::from_settings(settings_from_vars(vars).unwrap())
        .await
        .unwrap()
}

fn ocr_tokens_in_window(gw: &Gateway) -> Value {
    gw.health()["scopes"]["OCR"]["sources"][0]["limiter"]["tokens_in_window"].clone()
}

#[tokio::test]
async fn an_ocr_attempt_settles_zero_tokens_when_it_fails_or_is_cut() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");

    // A 503 is transient: a chat attempt keeps its pre-charge, an OCR attempt settles 0.
    script(&m, "ocr-down", json!({"then": {"status": 503}})).await;
    let gw = ocr_gateway(&m, "ocr-down", &db).await;
    let err = gw
        .recognize_text(OcrRequest::new("ocr", png(50)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "scope_unavailable", "{err}");
    assert_eq!(hits(&m, "ocr-down").await.len(), 1);
    assert_eq!(ocr_tokens_in_window(&gw), 0, "{}", gw.health());

    // Cut by the call deadline while the upstream works: 0 too, and a cancelled attempt row.
    script(
        &m,
        "ocr-slow",
        json!({"then": {"first_token_delay_ms": 5000}}),
    )
    .await;
    let gw = ocr_gateway(&m, "ocr-slow", &db).await;
    let mut req = OcrRequest::new("ocr", png(50));
    req.options.call_deadline = Some(Duration::from_millis(300));
    let err = gw.recognize_text(req).await.unwrap_err();
    assert!(
        matches!(err, GatewayError::DeadlineExceeded { .. }),
        "{err}"
    );
    assert_eq!(ocr_tokens_in_window(&gw), 0, "{}", gw.health());
    gw.flush_telemetry().await;
    let rows = telemetry_rows(&db, COLUMNS).await;
    let cut: Vec<&Value> = rows
        .iter()
        .filter(|r| r["event"] == "attempt" && r["error_type"] == "cancelled")
        .collect();
    assert_eq!(cut.len(), 1, "{rows:?}");
    assert_eq!(cut[0]["source_name"], "monkeyocr-1");
    assert_eq!(
        cut[0]["error"],
        "the attempt was cut before it ended: the call deadline expired or the caller went away"
    );
    let call = cut[0]["logical_call_id"].clone();
    let of_call: Vec<&Value> = rows
        .iter()
        .filter(|r| r["logical_call_id"] == call)
        .collect();
    assert_eq!(of_call.len(), 2, "{rows:?}");
    assert!(
        of_call
            .iter()
            .any(|r| r["event"] == "terminal_failure" && r["error_type"] == "deadline_exceeded"),
        "{rows:?}"
    );
}
