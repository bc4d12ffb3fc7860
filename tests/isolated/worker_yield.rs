//! Guest code never holds the gateway's runtime workers: with four looping plugin calls in
//! flight on one scope (each runs until its 1 s CPU budget traps it: about 2 s here, four
//! loops sharing two cores), good calls on another scope keep p99 under 100 ms and none
//! waits 900 ms, on a gateway with two worker threads. Before guest calls yielded, the four
//! loops held every worker and good calls waited seconds (until a loop's budget trapped
//! it). The bounds sit between the two: the good calls share two cores with four busy
//! guest threads and the test's own client, so their p99 is the operating system's
//! time-slicing (about 20 ms when the machine is busy with other work), not a stall; a
//! single call's bound is under the loops' 1 s budget and leaves room for one hiccup of a
//! loaded VM (half a second is not rare there).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use polygateway_tests::mock;
use serde_json::{Value, json};

use crate::plugin_fixtures::hostile_provider;
use crate::plugin_serve::{Serve, kv};

fn scope(wasm: &str, base_url: &str, scope: &str, model: &str) -> Vec<(String, String)> {
    let p = format!("{scope}__HOSTILE__1__");
    vec![
        kv(&format!("{p}PLUGIN"), wasm),
        kv(&format!("{p}BASE_URL"), base_url),
        kv(&format!("{p}MODEL"), model),
        kv(&format!("{p}API_KEY"), "sk-hostile"),
    ]
}

async fn post(client: &reqwest::Client, base_url: &str, model: &str) -> (u16, Value) {
    let resp = client
        .post(format!("{base_url}/v1/chat/completions"))
        .json(&json!({"model": model, "messages": [{"role": "user", "content": "hello"}]}))
        .send()
        .await
        .expect("gateway reachable");
    let status = resp.status().as_u16();
    let body = resp.json().await.unwrap_or(Value::Null);
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn looping_guest_calls_do_not_stall_good_calls_on_another_scope() {
    let _alone = crate::one_at_a_time().await;
    let wasm = hostile_provider().await;
    let wasm = wasm.to_str().unwrap();
    let mock = mock().await;
    let base = mock.base_url("sandbox");
    let mut env = vec![
        // Two runtime workers, as on this project's 2-core CI machine; the default 1 s
        // plugin budget.
        kv("TOKIO_WORKER_THREADS", 2),
        kv("PGW_TELEMETRY_BACKEND", "none"),
    ];
    env.extend(scope(wasm, &base, "LOOP", "loop"));
    env.extend(scope(wasm, &base, "FINE", "fine"));
    let gw = Arc::new(Serve::start(&env, &[]).await);
    let client = reqwest::Client::new();
    for _ in 0..50 {
        let (status, body) = post(&client, &gw.base_url, "fine").await;
        assert_eq!(status, 200, "{body}");
    }

    // Four clients keep a looping call in flight each, back to back.
    let stop = Arc::new(AtomicBool::new(false));
    let looped = Arc::new(AtomicU64::new(0));
    let mut loops = Vec::new();
    for _ in 0..4 {
        let (gw, stop, looped) = (gw.clone(), stop.clone(), looped.clone());
        loops.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut messages = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let (status, body) = post(&client, &gw.base_url, "loop").await;
                assert_eq!(status, 502, "{body}");
                messages.push(body["error"]["message"].as_str().unwrap_or("").to_string());
                looped.fetch_add(1, Ordering::Relaxed);
            }
            messages
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Good calls, one after another, for 4.5 s: past the first round of loops ending and the
    // next one starting.
    let mut latencies = Vec::new();
    let measuring = Instant::now();
    while measuring.elapsed() < Duration::from_millis(4500) {
        let started = Instant::now();
        let (status, body) = post(&client, &gw.base_url, "fine").await;
        latencies.push(started.elapsed());
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["object"], "chat.completion", "{body}");
    }
    stop.store(true, Ordering::Relaxed);
    let mut messages = Vec::new();
    for l in loops {
        messages.extend(l.await.expect("loop client"));
    }

    // Every looping call ran into its budget, and each client's first one ended.
    assert!(looped.load(Ordering::Relaxed) >= 4, "{messages:?}");
    for m in &messages {
        assert!(
            m.contains("exceeded its time budget of 1000 ms") && m.contains("build-request"),
            "{m}"
        );
    }
    latencies.sort();
    let p50 = latencies[latencies.len() / 2];
    let p99 = latencies[latencies.len() * 99 / 100];
    println!(
        "good calls: {} in 4.5 s, p50 {p50:?}, p99 {p99:?}, max {:?}; looping calls: {}",
        latencies.len(),
        latencies[latencies.len() - 1],
        looped.load(Ordering::Relaxed)
    );
    assert!(
        latencies.len() >= 100,
        "only {} good calls in 4.5 s (p50 {p50:?})",
        latencies.len()
    );
    assert!(
        p99 < Duration::from_millis(100)
            && latencies[latencies.len() - 1] < Duration::from_millis(900),
        "good calls: p50 {p50:?}, p99 {p99:?}, max {:?} over {} calls",
        latencies[latencies.len() - 1],
        latencies.len()
    );
    // Bounded in memory too: the slow calls' threads and fibers are gone with their calls.
    let rss_mib = gw.rss_kib() / 1024;
    assert!(rss_mib < 256, "gateway RSS {rss_mib} MiB");
    let health = gw.health().await;
    let sources = &health["scopes"]["FINE"]["sources"][0];
    assert_eq!(sources["breaker"], "closed", "{health}");
}
