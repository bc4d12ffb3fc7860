//! The plugin sandbox through a real `polygateway serve`, with the hostile provider fixture
//! (`tests/fixtures/plugins/hostile-provider`, behaviour chosen by the source's `MODEL`): an
//! infinite loop, a memory bomb and a panic each fail exactly one call with `502
//! plugin_fault` (telemetry `error_type = plugin_fault`), never count against the source's
//! breaker, release every limiter permit, and the next call on the same component succeeds;
//! under 200 concurrent requests a provider that traps on every 10th call of an instance
//! costs exactly the trapped calls, and the process's memory does not grow; a plugin path at
//! a device or a file over `PGW_PLUGIN_MAX_BYTES` is refused at start-up.

use std::collections::BTreeMap;

use polygateway_tests::{GatewayProcess, eventually, mock, telemetry_rows};
use serde_json::{Value, json};

use crate::plugin_fixtures::hostile_provider;
use crate::plugin_serve::{Serve, kv};

/// One scope per mode, all on the same hostile component and the same mock scenario.
fn scope_env(wasm: &str, base_url: &str, scope: &str, model: &str) -> Vec<(String, String)> {
    let p = format!("{scope}__HOSTILE__1__");
    vec![
        kv(&format!("{p}PLUGIN"), wasm),
        kv(&format!("{p}BASE_URL"), base_url),
        kv(&format!("{p}MODEL"), model),
        kv(&format!("{p}API_KEY"), "sk-hostile"),
        // A limiter gate, so /healthz shows its in-flight count.
        kv(&format!("{p}MAX_CONCURRENCY"), 1000),
        kv(&format!("{scope}__RETRY__BASE_DELAY_S"), "0.01"),
    ]
}

async fn post(client: &reqwest::Client, gw: &Serve, model: &str, stream: bool) -> (u16, Value) {
    let resp = client
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .json(&json!({
            "model": model,
            "messages": [{"role": "user", "content": "hello"}],
            "stream": stream,
        }))
        .send()
        .await
        .expect("gateway reachable");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// The sources of a scope in `/healthz`.
fn source<'a>(health: &'a Value, scope: &str) -> &'a Value {
    &health["scopes"][scope]["sources"][0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn loops_memory_bombs_and_panics_fail_one_call_each() {
    let wasm = hostile_provider().await;
    let wasm = wasm.to_str().unwrap();
    let mock = mock().await;
    let base = mock.base_url("sandbox");
    let mut env = vec![
        kv("PGW_PLUGIN_TIMEOUT_MS", 300),
        kv("PGW_PLUGIN_MEMORY_MB", 32),
    ];
    for (scope, model) in [
        ("LOOP", "loop"),
        ("OOM", "oom"),
        ("PANIC", "panic"),
        ("FINE", "fine"),
    ] {
        env.extend(scope_env(wasm, &base, scope, model));
    }
    let gw = Serve::start(&env, &[]).await;
    let client = reqwest::Client::new();

    let expect = [
        ("loop", "exceeded its time budget of 300 ms"),
        ("oom", "memory cap exceeded"),
        (
            "panic",
            "wasm trap: unreachable code executed (a Rust guest panicked)",
        ),
    ];
    // Six faults per mode: more than the breaker's failure threshold (5), so a fault that
    // counted against the source would open its breaker.
    for round in 0..6 {
        for (model, says) in expect {
            let stream = round % 2 == 1;
            let (status, body) = post(&client, &gw, model, stream).await;
            assert_eq!(status, 502, "{model} (stream {stream}): {body}");
            assert_eq!(body["error"]["type"], "plugin_fault", "{body}");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{model}: {message}");
            assert!(message.contains("build-request"), "{model}: {message}");
            // The same component serves the next call at once.
            let (status, body) = post(&client, &gw, "fine", stream).await;
            assert_eq!(status, 200, "after {model}: {body}");
        }
    }

    let health = gw.health().await;
    for scope in ["LOOP", "OOM", "PANIC", "FINE"] {
        let s = source(&health, scope);
        assert_eq!(s["breaker"], "closed", "{scope}: {s}");
        assert_eq!(s["consecutive_failures"], 0, "{scope}: {s}");
        assert_eq!(s["in_flight"], 0, "{scope}: {s}");
        assert_eq!(s["limiter"]["in_flight"], 0, "{scope}: {s}");
    }
    // One component, loaded once: every fault was counted on it.
    assert_eq!(source(&health, "FINE")["plugin_faults"], 18, "{health}");

    // Telemetry: one plugin_fault row per faulted call.
    let db = gw.dir.path().join("polygateway.db");
    let rows = eventually(10, || {
        let db = db.clone();
        async move {
            let rows = telemetry_rows(&db, &["scope", "error_type"]).await;
            let faults = rows
                .iter()
                .filter(|r| r["error_type"] == "plugin_fault")
                .count();
            (faults >= 18).then_some(rows)
        }
    })
    .await;
    let mut per_scope = BTreeMap::<String, usize>::new();
    for r in rows.iter().filter(|r| r["error_type"] == "plugin_fault") {
        *per_scope
            .entry(r["scope"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    // Terminal and attempt rows may both carry it; every faulting scope has some, FINE none.
    for scope in ["LOOP", "OOM", "PANIC"] {
        assert!(
            per_scope.get(scope).copied().unwrap_or(0) >= 6,
            "{per_scope:?}"
        );
    }
    assert!(!per_scope.contains_key("FINE"), "{per_scope:?}");
    let log = gw.stop().await;
    assert!(!log.contains("panicked"), "the host never panics:\n{log}");
}

/// The epoch ticker that counts guest budgets parks after 50 ms with no guest call
/// (`plugin/ticker.rs`); the first call after an idle spell must wake it, or a looping guest
/// would never meet its budget and the request would hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_call_after_an_idle_spell_still_fails_at_its_budget() {
    let wasm = hostile_provider().await;
    let wasm = wasm.to_str().unwrap();
    let mock = mock().await;
    let base = mock.base_url("sandbox-idle");
    let mut env = vec![kv("PGW_PLUGIN_TIMEOUT_MS", 200)];
    env.extend(scope_env(wasm, &base, "LOOP", "loop"));
    env.extend(scope_env(wasm, &base, "FINE", "fine"));
    let gw = Serve::start(&env, &[]).await;
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .unwrap();
    for round in 0..2 {
        // Idle for well past the ticker's 50 ms, then a looping call (round 0) or a fine one.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let (status, body) = post(
            &client,
            &gw,
            if round == 0 { "loop" } else { "fine" },
            false,
        )
        .await;
        if round == 0 {
            assert_eq!(status, 502, "{body}");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("exceeded its time budget of 200 ms"),
                "{message}"
            );
        } else {
            assert_eq!(status, 200, "{body}");
        }
    }
    // And streamed, after another idle spell. A call that never met its budget would hang
    // until the client's 20 s timeout; how long one that does takes depends on the CPU its
    // slow-call thread gets at nice +10 on a loaded machine, so no tighter bound is set.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (status, body) = post(&client, &gw, "loop", true).await;
    assert_eq!(status, 502, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("exceeded its time budget of 200 ms"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provider_trapping_every_tenth_call_costs_exactly_those_calls() {
    let wasm = hostile_provider().await;
    let mock = mock().await;
    let mut env = scope_env(
        wasm.to_str().unwrap(),
        &mock.base_url("trap"),
        "LLM",
        "trap-every-10",
    );
    env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    let gw = Serve::start(&env, &[]).await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(200)
        .build()
        .unwrap();
    const CONCURRENT: usize = 200;

    /// One round: 200 concurrent calls; returns (200s, 502s) and checks nothing else came.
    async fn round(client: &reqwest::Client, gw: &Serve) -> (usize, usize) {
        let calls = (0..CONCURRENT).map(|_| post(client, gw, "llm", false));
        let results = futures_util::future::join_all(calls).await;
        let mut ok = 0;
        let mut faults = 0;
        for (status, body) in results {
            match status {
                200 => ok += 1,
                502 => {
                    assert_eq!(body["error"]["type"], "plugin_fault", "{body}");
                    faults += 1;
                }
                other => panic!("unexpected status {other}: {body}"),
            }
        }
        (ok, faults)
    }
    let faults_so_far = |h: &Value| source(h, "LLM")["plugin_faults"].as_u64().unwrap();

    // Warm up: the pool grows to as many instances as calls run their guest code at once
    // (an instance is checked out per guest call, not for the whole call).
    let (ok, faults) = round(&client, &gw).await;
    assert_eq!(ok + faults, CONCURRENT);
    let warm_faults = faults_so_far(&gw.health().await);
    assert_eq!(faults as u64, warm_faults);
    let rss_before = gw.rss_kib();

    let mut total_faults = 0u64;
    let mut total_ok = 0usize;
    for _ in 0..12 {
        let before = faults_so_far(&gw.health().await);
        let (ok, faults) = round(&client, &gw).await;
        let after = faults_so_far(&gw.health().await);
        // Exactly the trapped calls failed; everything else succeeded.
        assert_eq!(faults as u64, after - before, "502s vs traps in this round");
        assert_eq!(ok + faults, CONCURRENT);
        total_faults += faults as u64;
        total_ok += ok;
    }
    // Every instance traps on its own 10th call: over 13 rounds of 200, a good share of the
    // calls trapped, and never more than one in ten.
    assert!(total_faults > 0, "no trap happened");
    assert!(
        total_faults <= (12 * CONCURRENT as u64) / 10 + CONCURRENT as u64,
        "{total_faults}"
    );
    assert_eq!(total_ok as u64 + total_faults, 12 * CONCURRENT as u64);

    // Trapped instances were replaced, not leaked: memory is flat (generous slack for
    // allocator noise; an instance is about 1–2 MiB, a leak of them would be hundreds).
    let rss_after = gw.rss_kib();
    assert!(
        rss_after <= rss_before + 96 * 1024,
        "RSS grew from {rss_before} KiB to {rss_after} KiB over {total_faults} discarded instances"
    );
    eprintln!(
        "trap-every-10: {total_ok} ok, {total_faults} plugin_fault over {} calls; RSS {rss_before} KiB → {rss_after} KiB",
        12 * CONCURRENT
    );
    let health = gw.health().await;
    let s = source(&health, "LLM");
    assert_eq!(s["breaker"], "closed", "{s}");
    assert_eq!(s["limiter"]["in_flight"], 0, "{s}");
    assert_eq!(s["in_flight"], 0, "{s}");
    gw.stop().await;
}

/// Start `polygateway serve` expecting it to refuse; returns its stderr and how long it ran.
async fn refused(env: &[(String, String)]) -> (String, std::time::Duration) {
    let started = std::time::Instant::now();
    let err = match GatewayProcess::try_start(env!("CARGO_BIN_EXE_polygateway"), env).await {
        Ok(_) => panic!("polygateway serve started with {env:?}"),
        Err(stderr) => stderr,
    };
    (err, started.elapsed())
}

/// A plugin path at a device (`/dev/zero`, endless) is refused at start-up at once — for a
/// provider and for a selector — naming the key and the file, never read.
#[tokio::test]
async fn a_plugin_path_at_a_device_is_refused_at_start_up() {
    // A `.wasm` name (what the configuration asks for) that is a link to the device.
    let dir = tempfile::tempdir().unwrap();
    let zero = dir.path().join("zero.wasm");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let zero = zero.to_str().unwrap();
    let mut env = scope_env(zero, "http://127.0.0.1:9/v1", "DEV", "fine");
    env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    let (err, took) = refused(&env).await;
    assert!(took < std::time::Duration::from_secs(1), "took {took:?}");
    assert!(
        err.contains("DEV__HOSTILE__1__PLUGIN")
            && err.contains(&format!("cannot read {zero}: not a regular file")),
        "{err}"
    );

    let wasm = hostile_provider().await;
    let mut env = scope_env(
        wasm.to_str().unwrap(),
        "http://127.0.0.1:9/v1",
        "SEL",
        "fine",
    );
    env.push(kv("SEL__SELECTOR", zero));
    env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    let (err, took) = refused(&env).await;
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
    assert!(
        err.contains("SEL__SELECTOR")
            && err.contains(&format!("cannot read {zero}: not a regular file")),
        "{err}"
    );
}

/// A component file larger than `PGW_PLUGIN_MAX_BYTES` (64 MiB by default) is refused at
/// start-up from its size, naming the key, the file and the limit; the key itself is
/// validated.
#[tokio::test]
async fn a_plugin_file_over_the_size_cap_is_refused_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.wasm");
    // Sparse: 100 MiB long, no data on disk.
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(100 * 1024 * 1024)
        .unwrap();
    let huge = huge.to_str().unwrap();
    let mut env = scope_env(huge, "http://127.0.0.1:9/v1", "BIG", "fine");
    env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    let (err, took) = refused(&env).await;
    assert!(took < std::time::Duration::from_secs(1), "took {took:?}");
    assert!(
        err.contains("BIG__HOSTILE__1__PLUGIN")
            && err.contains(&format!(
                "cannot read {huge}: 104857600 bytes is over PGW_PLUGIN_MAX_BYTES (67108864)"
            )),
        "{err}"
    );

    // A lower cap refuses a real component.
    let wasm = hostile_provider().await;
    let size = std::fs::metadata(&wasm).unwrap().len();
    let mut env = scope_env(
        wasm.to_str().unwrap(),
        "http://127.0.0.1:9/v1",
        "CAP",
        "fine",
    );
    env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    env.push(kv("PGW_PLUGIN_MAX_BYTES", size - 1));
    let (err, _) = refused(&env).await;
    assert!(
        err.contains(&format!(
            "{size} bytes is over PGW_PLUGIN_MAX_BYTES ({})",
            size - 1
        )),
        "{err}"
    );
    // At the cap it loads.
    let mut env = scope_env(
        wasm.to_str().unwrap(),
        "http://127.0.0.1:9/v1",
        "CAP",
        "fine",
    );
    env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    env.push(kv("PGW_PLUGIN_MAX_BYTES", size));
    Serve::start(&env, &[]).await.stop().await;

    let mut env = scope_env(
        wasm.to_str().unwrap(),
        "http://127.0.0.1:9/v1",
        "CAP",
        "fine",
    );
    env.push(kv("PGW_PLUGIN_MAX_BYTES", "64MiB"));
    let (err, _) = refused(&env).await;
    assert!(
        err.contains("PGW_PLUGIN_MAX_BYTES")
            && err.contains("expected a positive integer (bytes), got `64MiB`"),
        "{err}"
    );
}
