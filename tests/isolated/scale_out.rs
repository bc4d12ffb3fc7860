//! Scale-out on Redis (docs/limiter.md#backends): three real `polygateway serve` processes sharing
//! limiter and breaker state through the real Redis. A shared RPM holds across processes in any
//! window, the concurrency gate holds across processes, a source that died behind one process is
//! skipped by the others, a SIGKILLed process's permits come back after the lease, and a Redis
//! outage fails closed and recovers without a restart.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::common::{chat_body, gateway, kv, post_chat, source};
use polygateway_tests::{GatewayProcess, TcpForwarder, eventually, hits, mock, script};

fn redis_env(prefix: &str, url: &str) -> Vec<(String, String)> {
    vec![
        kv("PGW_LIMITER_BACKEND", "redis"),
        kv("PGW_BREAKER_BACKEND", "redis"),
        kv("PGW_REDIS_URL", url),
        kv("PGW_REDIS_PREFIX", prefix),
    ]
}

fn prefix() -> String {
    format!("pgwtest:{}:", uuid_like())
}

fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{n:x}-{}", std::process::id())
}

async fn three(env: Vec<(String, String)>) -> Vec<GatewayProcess> {
    let (a, b, c) = tokio::join!(gateway(env.clone()), gateway(env.clone()), gateway(env));
    vec![a, b, c]
}

/// Most hits whose arrival times fall in any window of `window_ms`.
fn max_in_window(hits: &[Value], window_ms: f64) -> usize {
    let mut t: Vec<f64> = hits.iter().map(|h| h["at_ms"].as_f64().unwrap()).collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mut best = 0;
    let mut j = 0;
    for i in 0..t.len() {
        while t[i] - t[j] >= window_ms {
            j += 1;
        }
        best = best.max(i - j + 1);
    }
    best
}

/// Most requests in flight at once at the mock (from arrival and completion times).
fn max_overlap(hits: &[Value]) -> usize {
    let mut ev: Vec<(f64, i32)> = Vec::new();
    for h in hits {
        ev.push((h["at_ms"].as_f64().unwrap(), 1));
        ev.push((h["done_ms"].as_f64().unwrap_or(f64::MAX), -1));
    }
    ev.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (mut cur, mut best) = (0i32, 0i32);
    for (_, d) in ev {
        cur += d;
        best = best.max(cur);
    }
    best as usize
}

async fn spread(gws: &[GatewayProcess], n: usize) -> Vec<u16> {
    let client = reqwest::Client::new();
    let futs = (0..n).map(|i| {
        let url = format!("{}/v1/chat/completions", gws[i % gws.len()].base_url);
        let client = client.clone();
        async move {
            let mut body = chat_body(false);
            body["messages"][0]["content"] = json!(format!("request {i}"));
            client
                .post(url)
                .json(&body)
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }
    });
    futures_util::future::join_all(futs).await
}

#[tokio::test]
async fn a_shared_rpm_holds_across_three_processes() {
    let _alone = crate::one_at_a_time().await;
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "rpm3", "a");
    env.extend(redis_env(&prefix(), "redis://127.0.0.1:6379"));
    // A 4 s window stands in for the minute.
    env.extend([
        kv("LLM__GLOBAL__RPM", 60),
        kv("PGW_RATE_WINDOW_S", 4),
        kv("LLM__QUOTA_FULL", "wait"),
    ]);
    let gws = three(env).await;
    let statuses = spread(&gws, 300).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let h = hits(&m, "rpm3").await;
    assert_eq!(h.len(), 300);
    // Arrival at the mock lags admission (more on a loaded machine); allow up to 1 s of it.
    // Without a shared budget the three processes would let 180 through per window.
    let most = max_in_window(&h, 4000.0 - 1000.0);
    assert!(
        most <= 60,
        "{most} requests reached the upstream within one window"
    );
}

#[tokio::test]
async fn the_concurrency_gate_holds_across_processes() {
    let _alone = crate::one_at_a_time().await;
    let m = mock().await;
    script(&m, "conc3", json!({"then": {"first_token_delay_ms": 150}})).await;
    let mut env = source(&m, "openai", 1, "conc3", "a");
    env.extend(redis_env(&prefix(), "redis://127.0.0.1:6379"));
    env.extend([
        kv("LLM__GLOBAL__MAX_CONCURRENCY", 4),
        kv("LLM__QUOTA_FULL", "wait"),
    ]);
    let gws = three(env).await;
    let statuses = spread(&gws, 30).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let h = hits(&m, "conc3").await;
    assert_eq!(h.len(), 30);
    let most = max_overlap(&h);
    assert!((2..=4).contains(&most), "{most} requests in flight at once");
}

#[tokio::test]
async fn a_dead_source_behind_one_process_is_skipped_by_the_others() {
    let _alone = crate::one_at_a_time().await;
    let m = mock().await;
    script(&m, "dead3", json!({"then": {"status": 401}})).await;
    let mut env = source(&m, "openai", 1, "dead3", "a");
    env.extend(source(&m, "openai", 2, "alive3", "b"));
    env.extend(redis_env(&prefix(), "redis://127.0.0.1:6379"));
    let gws = three(env).await;
    // Process A's first call starts on source 1 (round robin), gets 401 and switches.
    let (status, headers, _) = post_chat(&gws[0], chat_body(false)).await;
    assert_eq!(
        (status, headers["x-pgw-source"].to_str().unwrap()),
        (200, "openai-2")
    );
    assert_eq!(hits(&m, "dead3").await.len(), 1);
    // B and C would also start on source 1; the shared breaker turns them away.
    for gw in &gws[1..] {
        let (status, headers, _) = post_chat(gw, chat_body(false)).await;
        assert_eq!(
            (status, headers["x-pgw-source"].to_str().unwrap()),
            (200, "openai-2")
        );
    }
    assert_eq!(
        hits(&m, "dead3").await.len(),
        1,
        "no attempt of B or C reached it"
    );
}

#[tokio::test]
async fn permits_of_a_killed_process_come_back_after_the_lease() {
    let _alone = crate::one_at_a_time().await;
    let m = mock().await;
    script(
        &m,
        "held",
        json!({"then": {"content": "a b", "stall_after_chunks": 1}}),
    )
    .await;
    let p = prefix();
    let mut env = source(&m, "openai", 1, "held", "a");
    env.extend(redis_env(&p, "redis://127.0.0.1:6379"));
    // Lease = the longest attempt (TIMEOUT_S 2) + 5 s.
    env.extend([
        kv("LLM__OPENAI__1__MAX_CONCURRENCY", 2),
        kv("LLM__OPENAI__1__TIMEOUT_S", 2),
        kv("LLM__OPENAI__1__TTFT_TIMEOUT_S", 1),
        kv("LLM__OPENAI__1__INTER_TOKEN_TIMEOUT_S", "0.9"),
        kv("LLM__QUOTA_FULL", "fail_fast"),
        kv("LLM__RETRY__MAX_ATTEMPTS", 1),
    ]);
    let victim = gateway(env.clone()).await;
    let other = gateway(env).await;
    // Two stalled streams hold both permits in the victim.
    let client = reqwest::Client::new();
    let mut held = Vec::new();
    for _ in 0..2 {
        let resp = client
            .post(format!("{}/v1/chat/completions", victim.base_url))
            .json(&chat_body(true))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        held.push(resp);
    }
    // SIGKILL: no settle ever runs.
    let pid = victim.pid();
    assert!(
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    drop(held);
    let (status, _, body) = post_chat(&other, chat_body(false)).await;
    assert_eq!(status, 429, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["reason"], "quota_exhausted");
    script(&m, "held", json!({"then": {}})).await;
    // Within the lease (7 s) plus slack, capacity returns.
    eventually(20, || {
        let other = &other;
        async move {
            let (status, _, _) = post_chat(other, chat_body(false)).await;
            (status == 200).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn a_redis_outage_fails_closed_and_recovers_without_a_restart() {
    let _alone = crate::one_at_a_time().await;
    let m = mock().await;
    let target: SocketAddr = "127.0.0.1:6379".parse().unwrap();
    let mut fwd = TcpForwarder::start(target).await;
    let mut env = source(&m, "openai", 1, "outage", "a");
    env.extend(redis_env(&prefix(), &format!("redis://{}", fwd.addr)));
    let gw = gateway(env).await;
    let (status, _, _) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 200);
    fwd.stop().await;
    let before = hits(&m, "outage").await.len();
    for _ in 0..3 {
        let (status, headers, body) = post_chat(&gw, chat_body(false)).await;
        assert_eq!(status, 503, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["error"]["reason"], "governance_backend_down");
        assert_eq!(v["error"]["retry_after_s"], json!(5.0));
        assert_eq!(headers["retry-after"], "5");
    }
    assert_eq!(
        hits(&m, "outage").await.len(),
        before,
        "nothing went upstream unmetered"
    );
    fwd.restart().await;
    eventually(20, || {
        let gw = &gw;
        async move {
            let (status, _, _) = post_chat(gw, chat_body(false)).await;
            (status == 200).then_some(())
        }
    })
    .await;
}
