//! Failover and failure classes through a real gateway process (docs/errors.md):
//! 503 → next source; 401 → next source with no back-off; 400 → one attempt, upstream
//! message kept; 429 + `Retry-After: 2` honoured; everything failing → 503 with reasons;
//! telemetry rows of a failover.

use std::time::Instant;

use serde_json::{Value, json};

use crate::common::{chat_body, gateway, kv, post_chat, source};
use polygateway_tests::{eventually, hits, mock, script, telemetry_rows};

#[tokio::test]
async fn a_503_fails_over_to_the_next_source_and_writes_three_rows() {
    let m = mock().await;
    script(&m, "f503-a", json!({"steps": [{"status": 503}]})).await;
    let mut env = source(&m, "openai", 1, "f503-a", "model-a");
    env.extend(source(&m, "openai", 2, "f503-b", "model-b"));
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    let gw = gateway(env).await;
    let (status, headers, body) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-pgw-source"], "openai-2");
    assert_eq!(headers["x-pgw-attempts"], "2");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Hello from the mock upstream."
    );
    assert_eq!(hits(&m, "f503-a").await.len(), 1);
    assert_eq!(hits(&m, "f503-b").await.len(), 1);

    let call_id = headers["x-pgw-call-id"].to_str().unwrap().to_string();
    let db = gw.telemetry_db();
    let rows = eventually(10, || {
        let db = db.clone();
        async move {
            let rows = telemetry_rows(
                &db,
                &[
                    "logical_call_id",
                    "event",
                    "source_name",
                    "error_type",
                    "prompt_tokens",
                    "completion_tokens",
                    "usage_source",
                    "attempts",
                ],
            )
            .await;
            (rows.len() == 3).then_some(rows)
        }
    })
    .await;
    let mut rows: Vec<Value> = rows;
    rows.sort_by_key(|r| {
        (
            r["event"].as_str().unwrap().to_string(),
            r["source_name"].as_str().unwrap().to_string(),
        )
    });
    assert_eq!(
        Value::Array(rows),
        json!([
            {"logical_call_id": call_id, "event": "attempt", "source_name": "openai-1", "error_type": "transient",
             "prompt_tokens": null, "completion_tokens": null, "usage_source": "unavailable", "attempts": null},
            {"logical_call_id": call_id, "event": "attempt", "source_name": "openai-2", "error_type": null,
             "prompt_tokens": 5, "completion_tokens": 5, "usage_source": "measured", "attempts": null},
            {"logical_call_id": call_id, "event": "terminal_success", "source_name": "openai-2", "error_type": null,
             "prompt_tokens": 5, "completion_tokens": 5, "usage_source": "measured", "attempts": 2},
        ])
    );
}

#[tokio::test]
async fn a_401_switches_source_at_once_without_back_off() {
    let m = mock().await;
    script(&m, "f401-a", json!({"then": {"status": 401}})).await;
    let mut env = source(&m, "openai", 1, "f401-a", "model-a");
    env.extend(source(&m, "openai", 2, "f401-b", "model-b"));
    // Any back-off would sleep at least 10 s (20 s × 0.5 jitter floor).
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "20"));
    env.push(kv("LLM__RETRY__MAX_DELAY_S", "30"));
    let gw = gateway(env).await;
    let t = Instant::now();
    let (status, headers, body) = post_chat(&gw, chat_body(false)).await;
    let elapsed = t.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-pgw-source"], "openai-2");
    assert!(
        elapsed.as_secs_f64() < 8.0,
        "no back-off after a 401: took {elapsed:?}"
    );
    assert_eq!(hits(&m, "f401-a").await.len(), 1);
    assert_eq!(hits(&m, "f401-b").await.len(), 1);
}

#[tokio::test]
async fn a_400_is_one_attempt_and_keeps_the_upstream_message() {
    let m = mock().await;
    let err = json!({"error": {"message": "messages[0].content is too long for this model", "type": "invalid_request_error", "code": "context_length_exceeded"}});
    script(
        &m,
        "f400-a",
        json!({"then": {"status": 400, "body": err.to_string()}}),
    )
    .await;
    let mut env = source(&m, "openai", 1, "f400-a", "model-a");
    env.extend(source(&m, "openai", 2, "f400-b", "model-b"));
    let gw = gateway(env).await;
    let (status, _, body) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "upstream_rejected");
    assert_eq!(v["error"]["code"], "context_length_exceeded");
    assert_eq!(
        v["error"]["message"],
        "upstream openai-1 rejected the request (HTTP 400): messages[0].content is too long for this model"
    );
    assert_eq!(hits(&m, "f400-a").await.len(), 1);
    assert_eq!(hits(&m, "f400-b").await.len(), 0);
}

#[tokio::test]
async fn a_429_retry_after_is_honoured() {
    let m = mock().await;
    script(
        &m,
        "f429",
        json!({"steps": [{"status": 429, "headers": {"Retry-After": "2"}}]}),
    )
    .await;
    let mut env = source(&m, "openai", 1, "f429", "model-a");
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    let gw = gateway(env).await;
    let (status, _, body) = post_chat(&gw, chat_body(true)).await;
    assert_eq!(status, 200, "{body}");
    let h = hits(&m, "f429").await;
    assert_eq!(h.len(), 2);
    let gap_ms = h[1]["at_ms"].as_f64().unwrap() - h[0]["at_ms"].as_f64().unwrap();
    assert!(
        gap_ms >= 1950.0,
        "second attempt only {gap_ms} ms after the 429"
    );
}

#[tokio::test]
async fn every_source_failing_is_a_503_with_reasons_and_retry_after() {
    let m = mock().await;
    script(&m, "fall-a", json!({"then": {"status": 503}})).await;
    script(&m, "fall-b", json!({"then": {"status": 500}})).await;
    let mut env = source(&m, "openai", 1, "fall-a", "model-a");
    env.extend(source(&m, "openai", 2, "fall-b", "model-b"));
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    env.push(kv("LLM__RETRY__MAX_ATTEMPTS", "2"));
    let gw = gateway(env).await;
    let (status, headers, body) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "scope_unavailable");
    assert_eq!(v["error"]["reason"], "retry_exhausted");
    assert_eq!(
        v["error"]["per_source_reasons"],
        json!({"openai-1": "server_error", "openai-2": "server_error"})
    );
    // Neither failure carried a Retry-After hint.
    assert_eq!(v["error"]["retry_after_s"], json!(0.0));
    assert_eq!(headers["retry-after"], "0");
    assert_eq!(hits(&m, "fall-a").await.len(), 1);
    assert_eq!(hits(&m, "fall-b").await.len(), 1);
}
