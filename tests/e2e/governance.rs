//! Governance through the embedded API with an injected clock (breaker cooldowns and limiter
//! windows move only when the test says so) and through a real proxy process: the breaker's
//! life cycle with one probe at a time, exact RPM/TPM admission under 200 concurrent callers,
//! quota policies, permits returned after cancellation, the call deadline, and mid-stream
//! continuation on a prefill-capable source.

use std::sync::Arc;
use std::time::{Duration, Instant};

use polygateway::config::settings_from_vars;
use polygateway::governance::{Clock, ManualClock};
use polygateway::{ChatRequest, Gateway, GatewayError, UnavailableReason};
use serde_json::{Value, json};

use crate::common::{chat_body, gateway as proxy, kv, post_chat, source};
use polygateway_tests::{MockUpstream, eventually, hits, mock, script};

async fn embedded(
    vars: Vec<(String, String)>,
    clock: Arc<ManualClock>,
    window: Option<Duration>,
) -> Gateway {
    let mut vars = vars;
    vars.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    vars.push(kv("LLM__SELECTOR", "round-robin"));
    let mut settings = settings_from_vars(vars).unwrap();
    if let Some(w) = window {
        for s in &mut settings.scopes {
            s.governance.rate_window = w;
        }
    }
    Gateway::from_settings_with_clock(settings, clock)
        .await
        .unwrap()
}

fn source_health(gw: &Gateway, name: &str) -> Value {
    let h = gw.health();
    h["scopes"]["LLM"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap()
}

async fn hit_count(m: &MockUpstream, scenario: &str) -> usize {
    hits(m, scenario).await.len()
}

#[tokio::test]
async fn breaker_opens_probes_one_at_a_time_and_recovers() {
    let m = mock().await;
    script(&m, "br-a", json!({"then": {"status": 503}})).await;
    let clock = ManualClock::new(0);
    let mut vars = source(&m, "openai", 1, "br-a", "a");
    vars.extend(source(&m, "openai", 2, "br-b", "b"));
    vars.extend([
        kv("LLM__BREAKER__FAIL_THRESHOLD", 3),
        kv("LLM__BREAKER__COOLDOWN_S", 10),
        kv("LLM__RETRY__BASE_DELAY_S", "0.001"),
    ]);
    let gw = embedded(vars, clock.clone(), None).await;
    let call = || gw.chat(ChatRequest::user("llm", "hi"));

    // Round robin alternates; every call that starts on A fails over to B. The third
    // failure opens A's breaker.
    for _ in 0..6 {
        assert_eq!(call().await.unwrap().source_name, "openai-2");
    }
    assert_eq!(hit_count(&m, "br-a").await, 3);
    assert_eq!(source_health(&gw, "openai-1")["breaker"], "open");
    assert_eq!(
        source_health(&gw, "openai-1")["cooldown_remaining_s"],
        json!(10.0)
    );
    // Open: A gets nothing, B takes all traffic.
    for _ in 0..6 {
        assert_eq!(call().await.unwrap().source_name, "openai-2");
    }
    assert_eq!(hit_count(&m, "br-a").await, 3);

    // Cooldown over: half-open. Four concurrent calls, one slow probe to A; the others go
    // to B. The probe fails: A opens again.
    script(
        &m,
        "br-a",
        json!({"then": {"status": 503, "first_token_delay_ms": 300}}),
    )
    .await;
    clock.advance(10_000);
    let results = futures_util::future::join_all((0..4).map(|_| call())).await;
    assert!(
        results
            .iter()
            .all(|r| r.as_ref().unwrap().source_name == "openai-2")
    );
    // (Re-scripting a scenario resets its hit log.)
    assert_eq!(hit_count(&m, "br-a").await, 1, "exactly one probe");
    assert_eq!(source_health(&gw, "openai-1")["breaker"], "open");

    // A recovers; after the cooldown the next probe succeeds and traffic returns to A.
    script(&m, "br-a", json!({"then": {}})).await;
    clock.advance(10_000);
    let mut sources = Vec::new();
    for _ in 0..6 {
        sources.push(call().await.unwrap().source_name);
    }
    assert_eq!(source_health(&gw, "openai-1")["breaker"], "closed");
    assert_eq!(
        sources.iter().filter(|s| *s == "openai-1").count(),
        3,
        "{sources:?}"
    );
    assert_eq!(hit_count(&m, "br-a").await, 3);
}

async fn burst(gw: &Gateway, n: usize) -> (usize, usize) {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let gw = gw.clone();
            tokio::spawn(async move {
                gw.chat(ChatRequest::user("llm", "say hello to the test"))
                    .await
            })
        })
        .collect();
    let (mut ok, mut quota) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(GatewayError::ScopeUnavailable {
                reason: UnavailableReason::QuotaExhausted,
                ..
            }) => quota += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    (ok, quota)
}

#[tokio::test]
async fn rpm_and_tpm_hold_exactly_under_200_concurrent_callers() {
    let m = mock().await;
    let clock = ManualClock::new(0);
    let mut vars = source(&m, "openai", 1, "rpm", "a");
    vars.extend([
        kv("LLM__OPENAI__1__RPM", 10),
        kv("LLM__QUOTA_FULL", "fail_fast"),
    ]);
    let gw = embedded(vars, clock.clone(), Some(Duration::from_secs(60))).await;
    assert_eq!(burst(&gw, 200).await, (10, 190));
    assert_eq!(hit_count(&m, "rpm").await, 10);
    clock.advance(30_000);
    assert_eq!(burst(&gw, 50).await, (0, 50), "still inside the window");
    clock.advance(30_000);
    assert_eq!(burst(&gw, 200).await, (10, 190));
    assert_eq!(hit_count(&m, "rpm").await, 20);
    assert_eq!(source_health(&gw, "openai-1")["limiter"]["in_flight"], 0);

    // TPM 600 without EST_TOKENS: each attempt pre-charges 600 / 60 = 10 tokens; the mock
    // uses exactly 10 (5 prompt + 5 completion), so 60 calls fit in a window.
    let clock = ManualClock::new(0);
    let mut vars = source(&m, "openai", 1, "tpm", "a");
    vars.extend([
        kv("LLM__OPENAI__1__TPM", 600),
        kv("LLM__QUOTA_FULL", "fail_fast"),
    ]);
    let gw = embedded(vars, clock.clone(), Some(Duration::from_secs(60))).await;
    assert_eq!(burst(&gw, 200).await, (60, 140));
    assert_eq!(hit_count(&m, "tpm").await, 60);
    let health = source_health(&gw, "openai-1");
    assert_eq!(health["limiter"]["tokens_in_window"], 600);
    assert_eq!(health["limiter"]["in_flight"], 0);
}

#[tokio::test]
async fn permits_return_after_cancellation_and_deadline() {
    let m = mock().await;
    script(
        &m,
        "stuck",
        json!({"then": {"content": "a b c", "stall_after_chunks": 1}}),
    )
    .await;
    let clock = ManualClock::new(0);
    let mut vars = source(&m, "openai", 1, "stuck", "a");
    vars.extend([
        kv("LLM__OPENAI__1__MAX_CONCURRENCY", 5),
        kv("LLM__QUOTA_FULL", "fail_fast"),
    ]);
    let gw = embedded(vars, clock, None).await;
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let gw = gw.clone();
            tokio::spawn(async move { gw.chat(ChatRequest::user("llm", "x")).await })
        })
        .collect();
    eventually(10, || {
        let gw = gw.clone();
        async move { (source_health(&gw, "openai-1")["limiter"]["in_flight"] == 5).then_some(()) }
    })
    .await;
    // Full: a sixth call is refused at once.
    let sixth = gw.chat(ChatRequest::user("llm", "x")).await.unwrap_err();
    assert!(matches!(
        sixth,
        GatewayError::ScopeUnavailable {
            reason: UnavailableReason::QuotaExhausted,
            ..
        }
    ));
    for t in &tasks {
        t.abort();
    }
    eventually(10, || {
        let gw = gw.clone();
        async move { (source_health(&gw, "openai-1")["limiter"]["in_flight"] == 0).then_some(()) }
    })
    .await;
    assert_eq!(source_health(&gw, "openai-1")["in_flight"], 0);
    // A deadline also returns the permit.
    let mut req = ChatRequest::user("llm", "x");
    req.call_deadline = Some(Duration::from_millis(200));
    let err = gw.chat(req).await.unwrap_err();
    assert!(
        matches!(err, GatewayError::DeadlineExceeded { .. }),
        "{err}"
    );
    assert_eq!(source_health(&gw, "openai-1")["limiter"]["in_flight"], 0);
}

#[tokio::test]
async fn quota_full_fail_fast_answers_at_once_and_wait_admits_later() {
    let m = mock().await;
    // The first call holds the source's one permit for 1 s; the second comes 300 ms after
    // it. On a loaded machine the first call's own admission may come late, so whichever of
    // the two was refused is the one checked.
    script(&m, "slow1", json!({"then": {"first_token_delay_ms": 1000}})).await;
    for (policy, want) in [("fail_fast", vec![200, 429]), ("wait", vec![200, 200])] {
        let mut env = source(&m, "openai", 1, "slow1", "a");
        env.extend([
            kv("LLM__OPENAI__1__MAX_CONCURRENCY", 1),
            kv("LLM__QUOTA_FULL", policy),
        ]);
        let gw = proxy(env).await;
        let timed = |delay_ms: u64| {
            let gw = &gw;
            async move {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                let t = Instant::now();
                let r = post_chat(gw, chat_body(false)).await;
                (r, t.elapsed())
            }
        };
        let (a, b) = tokio::join!(timed(0), timed(300));
        let mut statuses = vec![(a.0).0, (b.0).0];
        statuses.sort();
        assert_eq!(statuses, want, "{policy}: {} / {}", (a.0).2, (b.0).2);
        if policy == "fail_fast" {
            let ((_, headers, body), took) = if (a.0).0 == 429 { a } else { b };
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["error"]["reason"], "quota_exhausted");
            assert_eq!(
                v["error"]["per_source_reasons"],
                json!({"openai-1": "quota_exhausted"})
            );
            assert_eq!(v["error"]["type"], "rate_limit_exceeded");
            assert_eq!(v["error"]["code"], "quota_exhausted");
            assert!(headers.contains_key("retry-after"));
            // Refused before any upstream work: the client's own retry policy applies.
            assert!(!headers.contains_key("x-should-retry"));
            // At once: well under the 1 s the permit is held.
            assert!(
                took < Duration::from_millis(1000),
                "fail fast took {took:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_call_deadline_cuts_a_silent_upstream_with_504() {
    let m = mock().await;
    script(
        &m,
        "silent",
        json!({"then": {"first_token_delay_ms": 60000}}),
    )
    .await;
    let gw = proxy(source(&m, "openai", 1, "silent", "a")).await;
    let client = reqwest::Client::new();
    let t = Instant::now();
    let resp = client
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .header("x-pgw-call-deadline-s", "0.2")
        .json(&chat_body(true))
        .send()
        .await
        .unwrap();
    let took = t.elapsed();
    assert_eq!(resp.status().as_u16(), 504);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "deadline_exceeded");
    // Generous bound: CI runs many tests in parallel on two cores.
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    eventually(10, || {
        let m = m.clone();
        async move {
            let h = hits(&m, "silent").await;
            (h.len() == 1 && h[0]["cancelled"] == json!(true)).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn a_cut_stream_is_completed_by_continuation_with_nothing_repeated() {
    let m = mock().await;
    let words: Vec<String> = (0..60).map(|i| format!("w{i}")).collect();
    let full = words.join(" ");
    script(
        &m,
        "cont-a",
        json!({"then": {"content": full, "cut_after_chunks": 40, "inter_chunk_delay_ms": 2}}),
    )
    .await;
    script(&m, "cont-b", json!({"then": {"content": full}})).await;
    let mut env = source(&m, "openai", 1, "cont-a", "a");
    env.extend(source(&m, "deepseek", 2, "cont-b", "deepseek-chat"));
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.001"));
    let gw = proxy(env).await;
    let (status, headers, body) = post_chat(&gw, chat_body(true)).await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-pgw-source"], "openai-1");
    let mut text = String::new();
    let mut done = false;
    for line in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if line == "[DONE]" {
            done = true;
            continue;
        }
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(v.get("error").is_none(), "{body}");
        if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
            text.push_str(c);
        }
    }
    assert!(done, "{body}");
    assert_eq!(text, full);
    let prefix: String = words[..40].iter().map(|w| format!("{w} ")).collect();
    let b = hits(&m, "cont-b").await;
    assert_eq!(b.len(), 1);
    let last = b[0]["body"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last,
        json!({"role": "assistant", "content": prefix, "prefix": true})
    );
}

#[tokio::test]
async fn rate_limits_spend_the_stall_budget_not_the_retry_budget() {
    let m = mock().await;
    // Two 429s then an answer: with one allowed attempt the call still succeeds, because
    // 429 attempts do not consume the retry budget.
    script(
        &m,
        "r429",
        json!({"steps": [{"status": 429}, {"status": 429}]}),
    )
    .await;
    let mut vars = source(&m, "openai", 1, "r429", "a");
    vars.extend([
        kv("LLM__RETRY__MAX_ATTEMPTS", 1),
        kv("LLM__RETRY__BASE_DELAY_S", "0.01"),
    ]);
    let gw = embedded(vars, ManualClock::new(0), None).await;
    let r = gw.chat(ChatRequest::user("llm", "x")).await.unwrap();
    assert_eq!(r.attempts, 3);
    assert_eq!(hit_count(&m, "r429").await, 3);

    // Always 429 and the scope never answered: the call ends as `stalled` once its
    // non-productive time reaches the stall window.
    script(&m, "always429", json!({"then": {"status": 429}})).await;
    let mut vars = source(&m, "openai", 1, "always429", "a");
    vars.extend([
        kv("LLM__RETRY__BASE_DELAY_S", "0.05"),
        kv("LLM__RETRY__MAX_DELAY_S", "0.05"),
        // A window of ~20 back-offs: a loaded machine's slow attempts still fit the four
        // the assertion below needs.
        kv("LLM__BACKPRESSURE__STALL_WINDOW_S", "1.0"),
    ]);
    let gw = embedded(vars, ManualClock::new(0), None).await;
    let err = gw.chat(ChatRequest::user("llm", "x")).await.unwrap_err();
    match err {
        GatewayError::ScopeUnavailable {
            reason,
            per_source_reasons,
            ..
        } => {
            assert_eq!(reason, UnavailableReason::Stalled);
            assert_eq!(per_source_reasons["openai-1"], "rate_limited");
        }
        other => panic!("expected stalled, got {other}"),
    }
    // More than the 3 attempts of the retry budget were made before it stalled.
    assert!(hit_count(&m, "always429").await > 3);
}

#[tokio::test]
async fn an_open_circuit_fails_fast_with_its_cooldown_or_waits_for_it() {
    let m = mock().await;
    script(&m, "dead", json!({"steps": [{"status": 401}]})).await;
    let clock = ManualClock::new(0);
    let mut vars = source(&m, "openai", 1, "dead", "a");
    vars.extend([kv("LLM__BREAKER__COOLDOWN_S", 20)]);
    let gw = embedded(vars, clock.clone(), None).await;
    // The 401 forces the breaker open; the only source is gone for this call.
    let first = gw.chat(ChatRequest::user("llm", "x")).await.unwrap_err();
    assert!(
        matches!(
            first,
            GatewayError::ScopeUnavailable {
                reason: UnavailableReason::NoSources,
                ..
            }
        ),
        "{first}"
    );
    clock.advance(5_000);
    let second = gw.chat(ChatRequest::user("llm", "x")).await.unwrap_err();
    match second {
        GatewayError::ScopeUnavailable {
            reason,
            retry_after_s,
            per_source_reasons,
            ..
        } => {
            assert_eq!(reason, UnavailableReason::CircuitOpen);
            assert_eq!(retry_after_s, 15.0);
            // Known open from the memo: skipped without asking the breaker store.
            assert_eq!(per_source_reasons["openai-1"], "cooldown");
        }
        other => panic!("expected circuit_open, got {other}"),
    }
    assert_eq!(
        hit_count(&m, "dead").await,
        1,
        "an open breaker sends nothing"
    );

    // With CIRCUIT_OPEN=wait the call sleeps to the cooldown's end (real time here: a
    // 0.3 s cooldown), then probes and succeeds.
    script(&m, "dead2", json!({"steps": [{"status": 401}]})).await;
    let mut vars = source(&m, "openai", 1, "dead2", "a");
    vars.extend([
        kv("LLM__BREAKER__COOLDOWN_S", "0.3"),
        kv("LLM__CIRCUIT_OPEN", "wait"),
    ]);
    let gw = embedded_real_clock(vars).await;
    let _ = gw.chat(ChatRequest::user("llm", "x")).await.unwrap_err();
    let t = Instant::now();
    let r = gw.chat(ChatRequest::user("llm", "x")).await.unwrap();
    assert_eq!(r.source_name, "openai-1");
    assert!(
        t.elapsed() >= Duration::from_millis(150),
        "it waited for the cooldown"
    );
    assert_eq!(hit_count(&m, "dead2").await, 2);
}

async fn embedded_real_clock(vars: Vec<(String, String)>) -> Gateway {
    let mut vars = vars;
    vars.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    vars.push(kv("LLM__SELECTOR", "round-robin"));
    Gateway::from_settings(settings_from_vars(vars).unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn healthz_reports_breaker_and_limiter_state() {
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "hz", "a");
    env.extend([
        kv("LLM__OPENAI__1__RPM", 100),
        kv("LLM__GLOBAL__MAX_CONCURRENCY", 8),
    ]);
    let gw = proxy(env).await;
    // Sequential calls reuse one warm provider instance: the pool never grows past 1.
    for (i, stream) in [false, true, false, true, false].into_iter().enumerate() {
        let mut body = chat_body(stream);
        body["messages"][0]["content"] = json!(format!("question number {i}"));
        let (status, _, _) = post_chat(&gw, body).await;
        assert_eq!(status, 200);
    }
    let h: Value = reqwest::get(format!("{}/healthz", gw.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(h["scopes"]["LLM"]["sources"][0]["idle_instances"], 1);
    let src = &h["scopes"]["LLM"]["sources"][0];
    assert_eq!(src["name"], "openai-1");
    assert_eq!(src["breaker"], "closed");
    assert_eq!(src["cooldown_remaining_s"], json!(0.0));
    assert_eq!(src["in_flight"], 0);
    assert_eq!(src["limiter"]["requests_in_window"], 5, "{h:#}");
    assert_eq!(src["limiter"]["tokens_in_window"], 5 * (3 + 5), "{h:#}");
    assert_eq!(src["limiter"]["rpm"], 100);
    assert_eq!(
        h["scopes"]["LLM"]["limiter"]["global"]["max_concurrency"],
        8
    );
    assert_eq!(h["scopes"]["LLM"]["limiter"]["global"]["in_flight"], 0);
}

/// Everything a call reports about time comes from the injected clock: its `created`, and
/// the time inside its UUIDv7 id. The manual clock here runs ten days ahead of the system's,
/// so a reading of the system clock would show.
#[tokio::test]
async fn an_answer_and_its_id_carry_the_injected_clocks_time() {
    let m = mock().await;
    let clock = ManualClock::new(0);
    clock.advance(10 * 86_400_000);
    let gw = embedded(source(&m, "openai", 1, "clock-a", "a"), clock.clone(), None).await;
    let wall_ms = clock.unix_ms();
    let r = gw.chat(ChatRequest::user("llm", "hi")).await.unwrap();
    assert_eq!(r.created, u64::try_from(wall_ms / 1000).unwrap());
    let id = uuid::Uuid::parse_str(&r.call_id).unwrap();
    assert_eq!(id.get_version_num(), 7);
    let (secs, nanos) = id.get_timestamp().unwrap().to_unix();
    assert_eq!(
        secs * 1000 + u64::from(nanos) / 1_000_000,
        u64::try_from(wall_ms).unwrap()
    );
    let system_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(r.created > system_s + 9 * 86_400, "not the system clock");
    // A second call's id sorts after the first, though the clock did not move.
    let again = gw.chat(ChatRequest::user("llm", "hi")).await.unwrap();
    assert!(uuid::Uuid::parse_str(&again.call_id).unwrap() > id);
}
