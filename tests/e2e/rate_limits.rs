//! Rate limits and retry advice on the wire, through a real gateway process: a call that
//! gives up because of rate limiting is a 429 with `Retry-After` (whole seconds, rounded up)
//! and a `code` saying why; every back-off is bounded by what is left of the stall window and
//! the call deadline (a hint beyond both ends the call at once); the errors the gateway already
//! retried carry `x-should-retry: false`, so the official OpenAI SDK raises at once instead of
//! multiplying the upstream attempts.

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::common::{bin, chat_body, gateway, kv, post_chat, source};
use polygateway_tests::{GatewayProcess, hits, mock, run_python, script};

/// POST a chat body; the call must answer within `limit` (a hang fails the test, it does
/// not stall the suite). Returns status, headers, the JSON body and the time taken.
async fn post_within(
    gw: &GatewayProcess,
    body: Value,
    limit: Duration,
) -> (u16, HeaderMap, Value, Duration) {
    let t = Instant::now();
    let (status, headers, text) = tokio::time::timeout(limit, post_chat(gw, body))
        .await
        .unwrap_or_else(|_| panic!("the call did not answer within {limit:?}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, headers, v, t.elapsed())
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).map(|v| v.to_str().unwrap())
}

/// Run `sdk_errors.py` against the gateway, bounded in time (generously: starting Python
/// and importing the SDK takes seconds on a loaded machine; the SDK's own retries of these
/// answers would take its whole 30 s timeout per attempt on the old code).
async fn sdk_error(gw: &GatewayProcess, mode: &str) -> Value {
    tokio::time::timeout(
        Duration::from_secs(80),
        run_python("sdk_errors.py", &[&gw.base_url, "llm", mode]),
    )
    .await
    .expect("the SDK call did not end within 80 s")
}

/// The body of a 429 `rate_limited` after one upstream 429 whose hint is `hint_s`.
fn rate_limited_body(hint_s: f64) -> Value {
    json!({"error": {
        "message": format!(
            "scope LLM unavailable (rate_limited): the upstream asked to wait {hint_s:.3} s, \
             longer than the call may still wait within its stall window and deadline; \
             last error: openai-1: mock error 429"
        ),
        "type": "rate_limit_exceeded",
        "param": null,
        "code": "rate_limited",
        "reason": "rate_limited",
        "retry_after_s": hint_s,
        "per_source_reasons": {"openai-1": "rate_limited"},
    }})
}

#[tokio::test]
async fn an_absurd_plugin_hint_ends_the_call_at_once_with_429_and_that_hint() {
    let m = mock().await;
    // The first-party components read OpenAI's `retry-after-ms`; this value saturates to
    // u64::MAX ms. It used to be slept (the stall budget was only checked afterwards).
    script(
        &m,
        "rl-absurd",
        json!({"then": {"status": 429, "headers": {"retry-after-ms": "99999999999999999999"}}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "rl-absurd", "a")).await;
    let hint_s = Duration::from_millis(u64::MAX).as_secs_f64();
    for stream in [false, true] {
        let (status, headers, body, took) =
            post_within(&gw, chat_body(stream), Duration::from_secs(5)).await;
        assert_eq!(status, 429, "stream={stream}: {body}");
        assert!(
            took < Duration::from_secs(1),
            "stream={stream}: took {took:?}"
        );
        assert_eq!(header(&headers, "retry-after"), Some("18446744073709552"));
        assert_eq!(header(&headers, "x-should-retry"), Some("false"));
        assert_eq!(
            header(&headers, "content-type"),
            Some("application/json"),
            "stream={stream}"
        );
        assert_eq!(body, rate_limited_body(hint_s), "stream={stream}");
    }
    // One upstream request per call: nothing was retried.
    assert_eq!(hits(&m, "rl-absurd").await.len(), 2);
}

#[tokio::test]
async fn a_retry_after_of_an_hour_is_not_slept_when_the_stall_window_is_shorter() {
    let m = mock().await;
    script(
        &m,
        "rl-hour",
        json!({"then": {"status": 429, "headers": {"Retry-After": "3600"}}}),
    )
    .await;
    // The default stall window (300 s) and no call deadline.
    let gw = gateway(source(&m, "openai", 1, "rl-hour", "a")).await;
    let (status, headers, body, took) =
        post_within(&gw, chat_body(false), Duration::from_secs(5)).await;
    assert_eq!(status, 429, "{body}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert_eq!(header(&headers, "retry-after"), Some("3600"));
    assert_eq!(header(&headers, "x-should-retry"), Some("false"));
    assert_eq!(body, rate_limited_body(3600.0));
    assert_eq!(hits(&m, "rl-hour").await.len(), 1);
}

#[tokio::test]
async fn the_call_deadline_bounds_a_back_off_and_retry_after_rounds_up() {
    let m = mock().await;
    // A hint shorter than the stall window but longer than the call deadline.
    script(
        &m,
        "rl-deadline",
        json!({"then": {"status": 429, "headers": {"Retry-After": "1.5"}}}),
    )
    .await;
    let mut env = source(&m, "openai", 1, "rl-deadline", "a");
    env.push(kv("LLM__CALL_DEADLINE_S", 1));
    let gw = gateway(env).await;
    let (status, headers, body, took) =
        post_within(&gw, chat_body(false), Duration::from_secs(5)).await;
    // Before: a 1.5 s sleep cut by the deadline into a 504 after 1 s.
    assert_eq!(status, 429, "{body}");
    // At once, not at the 1 s deadline; the margin is a loaded machine's first call.
    assert!(took < Duration::from_millis(900), "took {took:?}");
    // RFC 9110 delay-seconds: 1.5 s is `2`, never `1`.
    assert_eq!(header(&headers, "retry-after"), Some("2"));
    assert_eq!(body, rate_limited_body(1.5));
    assert_eq!(hits(&m, "rl-deadline").await.len(), 1);
}

#[tokio::test]
async fn a_503_hint_beyond_the_budget_is_a_503_the_client_should_not_retry() {
    let m = mock().await;
    script(
        &m,
        "rl-503",
        json!({"then": {"status": 503, "headers": {"Retry-After": "3600"}}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "rl-503", "a")).await;
    let (status, headers, body, took) =
        post_within(&gw, chat_body(false), Duration::from_secs(5)).await;
    assert_eq!(status, 503, "{body}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert_eq!(header(&headers, "retry-after"), Some("3600"));
    assert_eq!(header(&headers, "x-should-retry"), Some("false"));
    assert_eq!(body["error"]["type"], "scope_unavailable");
    assert_eq!(body["error"]["code"], "retry_exhausted");
    assert_eq!(body["error"]["retry_after_s"], json!(3600.0));
    assert_eq!(hits(&m, "rl-503").await.len(), 1);
}

#[tokio::test]
async fn a_stalled_call_is_a_429_with_code_stalled() {
    let m = mock().await;
    script(&m, "rl-stall", json!({"then": {"status": 429}})).await;
    let mut env = source(&m, "openai", 1, "rl-stall", "a");
    // The first back-off (0.5–1.5 s) is longer than the whole stall window: it is cut to
    // the window, and the call stalls after exactly one upstream request.
    env.extend([
        kv("LLM__RETRY__BASE_DELAY_S", 1),
        kv("LLM__BACKPRESSURE__STALL_WINDOW_S", "0.3"),
    ]);
    let gw = gateway(env).await;
    let (status, headers, body, took) =
        post_within(&gw, chat_body(false), Duration::from_secs(5)).await;
    assert_eq!(status, 429, "{body}");
    assert!(
        // The 0.3 s window and 0.9 s for a loaded machine's first call on a fresh gateway;
        // a back-off not cut to the window would make a second upstream request, which the
        // hit count below refuses.
        took >= Duration::from_millis(290) && took < Duration::from_millis(1200),
        "took {took:?}"
    );
    assert_eq!(header(&headers, "retry-after"), Some("0"));
    assert_eq!(header(&headers, "x-should-retry"), Some("false"));
    assert_eq!(
        body,
        json!({"error": {
            "message": "scope LLM unavailable (stalled): rate limited without progress for the \
                        stall window of 300ms; last error: openai-1: mock error 429",
            "type": "rate_limit_exceeded",
            "param": null,
            "code": "stalled",
            "reason": "stalled",
            "retry_after_s": 0.0,
            "per_source_reasons": {"openai-1": "rate_limited"},
        }})
    );
    assert_eq!(hits(&m, "rl-stall").await.len(), 1);
}

#[tokio::test]
async fn errors_the_gateway_already_retried_say_x_should_retry_false() {
    let m = mock().await;
    script(&m, "rl-500", json!({"then": {"status": 500}})).await;
    script(
        &m,
        "rl-slow",
        json!({"then": {"first_token_delay_ms": 3000}}),
    )
    .await;
    script(&m, "rl-dead", json!({"then": {"status": 401}})).await;

    // retry_exhausted: 503, the three attempts of the default budget.
    let mut env = source(&m, "openai", 1, "rl-500", "a");
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    let gw = gateway(env).await;
    let (status, headers, body, _) =
        post_within(&gw, chat_body(false), Duration::from_secs(10)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "retry_exhausted");
    assert_eq!(header(&headers, "x-should-retry"), Some("false"));
    assert_eq!(header(&headers, "retry-after"), Some("0"));
    assert_eq!(hits(&m, "rl-500").await.len(), 3);

    // deadline_exceeded: 504.
    let mut env = source(&m, "openai", 1, "rl-slow", "a");
    env.push(kv("LLM__CALL_DEADLINE_S", "0.3"));
    let gw = gateway(env).await;
    let (status, headers, body, _) =
        post_within(&gw, chat_body(false), Duration::from_secs(10)).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["type"], "deadline_exceeded");
    assert_eq!(header(&headers, "x-should-retry"), Some("false"));

    // A dead source (401) opens its breaker at once: the call itself ends `no_sources`, the
    // next one fails fast with `circuit_open` (the default `CIRCUIT_OPEN=fail_fast`).
    let mut env = source(&m, "openai", 1, "rl-dead", "a");
    env.push(kv("LLM__BREAKER__COOLDOWN_S", 30));
    let gw = gateway(env).await;
    let (status, headers, body, _) =
        post_within(&gw, chat_body(false), Duration::from_secs(10)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "no_sources");
    assert_eq!(header(&headers, "x-should-retry"), Some("false"));
    let (status, headers, body, _) =
        post_within(&gw, chat_body(false), Duration::from_secs(10)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "circuit_open");
    assert_eq!(header(&headers, "x-should-retry"), Some("false"));
    assert_eq!(header(&headers, "retry-after"), Some("30"));
    assert_eq!(hits(&m, "rl-dead").await.len(), 1);
}

#[tokio::test]
async fn the_openai_sdk_raises_rate_limit_error_without_retrying_a_stalled_call() {
    let m = mock().await;
    script(&m, "sdk-stall", json!({"then": {"status": 429}})).await;
    let mut env = source(&m, "openai", 1, "sdk-stall", "a");
    env.extend([
        kv("LLM__RETRY__BASE_DELAY_S", 1),
        kv("LLM__BACKPRESSURE__STALL_WINDOW_S", "0.3"),
    ]);
    let gw = gateway(env).await;
    for (mode, upstream_hits) in [("nonstream", 1), ("stream", 2)] {
        let out = sdk_error(&gw, mode).await;
        assert_eq!(out["raised"], "RateLimitError", "{mode}: {out}");
        assert_eq!(out["rate_limit_error"], true, "{mode}");
        assert_eq!(out["status"], 429, "{mode}");
        assert_eq!(out["code"], "stalled", "{mode}");
        assert_eq!(out["type"], "rate_limit_exceeded", "{mode}");
        assert_eq!(out["retry_after"], "0", "{mode}");
        assert_eq!(out["should_retry"], "false", "{mode}");
        // One gateway call's attempts (one, then the stall), not the SDK's three calls.
        assert_eq!(hits(&m, "sdk-stall").await.len(), upstream_hits, "{mode}");
    }
}

#[tokio::test]
async fn the_openai_sdk_raises_rate_limit_error_at_once_for_a_hint_beyond_the_budget() {
    let m = mock().await;
    script(
        &m,
        "sdk-hint",
        json!({"then": {"status": 429, "headers": {"retry-after-ms": "99999999999999999999"}}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "sdk-hint", "a")).await;
    let out = sdk_error(&gw, "nonstream").await;
    assert_eq!(out["raised"], "RateLimitError", "{out}");
    assert_eq!(out["code"], "rate_limited");
    assert_eq!(out["retry_after"], "18446744073709552");
    assert_eq!(out["should_retry"], "false");
    // No sleep and no SDK retry (its back-off alone is 0.5–8 s); the gateway's own time
    // bound is asserted over plain HTTP above.
    assert!(out["elapsed_s"].as_f64().unwrap() < 5.0, "{out}");
    assert_eq!(hits(&m, "sdk-hint").await.len(), 1);
}

#[tokio::test]
async fn the_openai_sdk_does_not_multiply_a_retry_exhausted_call() {
    let m = mock().await;
    script(&m, "sdk-500", json!({"then": {"status": 500}})).await;
    let mut env = source(&m, "openai", 1, "sdk-500", "a");
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    let gw = gateway(env).await;
    let out = sdk_error(&gw, "nonstream").await;
    assert_eq!(out["raised"], "InternalServerError", "{out}");
    assert_eq!(out["status"], 503);
    assert_eq!(out["code"], "retry_exhausted");
    assert_eq!(out["should_retry"], "false");
    // RETRY__MAX_ATTEMPTS (3) upstream requests; the SDK's default two retries used to make
    // it 9.
    assert_eq!(hits(&m, "sdk-500").await.len(), 3);
}

#[tokio::test]
async fn a_quota_opening_beyond_the_deadline_is_a_429_at_once_not_a_504_later() {
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "rl-rpm", "a");
    // One request per 60 s window; `QUOTA_FULL=wait` (the default) would wait for the
    // window, but the call deadline (2 s) ends long before it has room.
    env.extend([kv("LLM__OPENAI__1__RPM", 1), kv("LLM__CALL_DEADLINE_S", 2)]);
    let gw = gateway(env).await;
    let (status, _, body, _) = post_within(&gw, chat_body(false), Duration::from_secs(5)).await;
    assert_eq!(status, 200, "{body}");
    let (status, headers, body, took) =
        post_within(&gw, chat_body(false), Duration::from_secs(5)).await;
    assert_eq!(status, 429, "{body}");
    // At once, not at the 2 s deadline; the margin is a loaded machine's.
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert_eq!(body["error"]["code"], "quota_exhausted");
    assert_eq!(body["error"]["type"], "rate_limit_exceeded");
    let retry_after: u64 = header(&headers, "retry-after").unwrap().parse().unwrap();
    assert!((58..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(
        body["error"]["retry_after_s"].as_f64().unwrap().ceil() as u64,
        retry_after
    );
    // No upstream work was done for it: the client's own policy decides on a retry.
    assert_eq!(header(&headers, "x-should-retry"), None);
    assert_eq!(hits(&m, "rl-rpm").await.len(), 1);
}

#[tokio::test]
async fn an_embeddings_call_deadline_bounds_its_back_off_too() {
    let m = mock().await;
    script(
        &m,
        "rl-emb",
        json!({"then": {"status": 429, "headers": {"Retry-After": "1.5"}}}),
    )
    .await;
    let env = vec![
        kv("EMB__OPENAI__1__BASE_URL", m.base_url("rl-emb")),
        kv("EMB__OPENAI__1__MODEL", "text-embedding-3-small"),
        kv("EMB__OPENAI__1__API_KEY", "sk-rl-emb"),
        kv("EMB__CALL_DEADLINE_S", 1),
        kv("PGW_TELEMETRY_BACKEND", "none"),
    ];
    let gw = GatewayProcess::start(bin(), &env).await;
    let t = Instant::now();
    let resp = tokio::time::timeout(
        Duration::from_secs(5),
        reqwest::Client::new()
            .post(format!("{}/v1/embeddings", gw.base_url))
            .json(&json!({"model": "emb", "input": ["one text"]}))
            .send(),
    )
    .await
    .expect("the call answered within 5 s")
    .unwrap();
    let took = t.elapsed();
    let headers = resp.headers().clone();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    // Before: the 1.5 s sleep ran into the deadline, a 504 after 1 s.
    assert_eq!(status, 429, "{body}");
    // At once, not at the 1 s deadline; the margin is a loaded machine's first call.
    assert!(took < Duration::from_millis(900), "took {took:?}");
    assert_eq!(body["error"]["code"], "rate_limited");
    assert_eq!(body["error"]["retry_after_s"], json!(1.5));
    assert_eq!(header(&headers, "retry-after"), Some("2"));
    assert_eq!(header(&headers, "x-should-retry"), Some("false"));
    assert_eq!(hits(&m, "rl-emb").await.len(), 1);
}
