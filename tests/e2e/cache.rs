//! The response cache (docs/cache.md) through a real `polygateway serve` process and the embedded
//! API, on the mock upstream over TCP and the machine's Redis: what changes the key and what
//! does not, streamed replays shaped like live streams, single-flight of identical calls,
//! bypass / no-store, what is never stored, one backend contract run against memory and
//! Redis, and a Redis that dies and comes back behind a TCP proxy the test controls.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use polygateway::cache::{CacheBackend, CacheError, MemoryCache, RedisCache};
use polygateway::config::settings_from_vars;
use polygateway::governance::ManualClock;
use polygateway::{CallEvent, ChatRequest, Gateway};
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::common::{gateway, kv, source, sse_contents};
use polygateway_tests::{GatewayProcess, MockUpstream, eventually, hits, mock, script};

const REDIS: &str = "redis://127.0.0.1:6379";

/// A key prefix no other test (or run) shares, so tests run in parallel on one Redis.
fn test_prefix() -> String {
    format!("pgwtest:{}:", uuid::Uuid::new_v4())
}

/// Env of a gateway with one source on `scenario` and the response cache on.
fn cached_env(m: &MockUpstream, scenario: &str, backend: &str) -> Vec<(String, String)> {
    let mut env = source(m, "openai", 1, scenario, "gpt-x");
    env.push(kv("PGW_CACHE_BACKEND", backend));
    env.push(kv("LLM__CACHE__TTL_S", 60));
    env.push(kv("PGW_REDIS_PREFIX", test_prefix()));
    env
}

/// POST a raw body with extra headers; returns status, headers and body text.
async fn post_raw(
    gw: &GatewayProcess,
    body: &str,
    headers: &[(&str, &str)],
) -> (u16, HeaderMap, String) {
    let mut rb = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let resp = rb.send().await.expect("gateway reachable");
    let status = resp.status().as_u16();
    let h = resp.headers().clone();
    (status, h, resp.text().await.expect("body"))
}

/// The answer text of a completion or of an SSE body (its content deltas joined).
fn answer_text(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
    }
    sse_contents(body).concat()
}

fn cache_hit(h: &HeaderMap) -> bool {
    h.get("x-pgw-cache-hit").and_then(|v| v.to_str().ok()) == Some("true")
}

async fn healthz(gw: &GatewayProcess) -> Value {
    reqwest::get(format!("{}/healthz", gw.base_url))
        .await
        .expect("gateway reachable")
        .json()
        .await
        .expect("healthz json")
}

async fn hit_count(m: &MockUpstream, scenario: &str) -> usize {
    hits(m, scenario).await.len()
}

/// A request body, its extra headers, and whether it must be a cache hit.
type Case = (String, Vec<(&'static str, &'static str)>, bool);

#[tokio::test]
async fn one_upstream_call_per_distinct_question() {
    let m = mock().await;
    let gw = gateway(cached_env(&m, "keys", "memory")).await;
    let img = |b: &str| {
        format!(
            r#"{{"model":"llm","messages":[{{"role":"user","content":[{{"type":"text","text":"what is this?"}},{{"type":"image_url","image_url":{{"url":"data:image/png;base64,{b}"}}}}]}}],"seed":7}}"#
        )
    };
    let base =
        r#"{"model":"llm","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"seed":1}"#;
    let reordered =
        r#"{"seed":1,"temperature":0.2,"messages":[{"content":"hi","role":"user"}],"model":"llm"}"#;
    // (body, headers, expected hit)
    let cases: Vec<Case> = vec![
        (base.into(), vec![], false),
        (base.into(), vec![], true),
        (reordered.into(), vec![], true),
        (base.replace(r#""seed":1"#, r#""seed":2"#), vec![], false),
        (base.replace("0.2", "0.3"), vec![], false),
        (
            base.into(),
            vec![("x-pgw-cache-namespace", "tenant-a")],
            false,
        ),
        (
            base.into(),
            vec![("x-pgw-cache-namespace", "tenant-a")],
            true,
        ),
        (base.into(), vec![("x-pgw-cache-namespace", "LLM")], true), // the scope default
        (base.into(), vec![("x-pgw-cache-salt", "")], false),
        (base.into(), vec![("x-pgw-cache-salt", "")], true),
        (base.into(), vec![("x-pgw-cache-salt", "epoch-2")], false),
        (img("AAAAAAAA"), vec![], false),
        (img("AAAAAAAA"), vec![], true),
        (img("AAAAAAAB"), vec![], false),
        // A streamed call of the same question shares the entry.
        (
            base.replace(r#""seed":1"#, r#""seed":1,"stream":true"#),
            vec![],
            true,
        ),
    ];
    let mut misses = 0;
    for (i, (body, headers, expect_hit)) in cases.iter().enumerate() {
        let (status, h, text) = post_raw(&gw, body, headers).await;
        assert_eq!(status, 200, "case {i}: {text}");
        assert_eq!(cache_hit(&h), *expect_hit, "case {i}: {body} {headers:?}");
        if *expect_hit {
            assert_eq!(h["x-pgw-attempts"], "0", "case {i}");
        } else {
            misses += 1;
        }
        assert!(text.contains("Hello"), "case {i}: {text}");
        assert_eq!(hit_count(&m, "keys").await, misses, "case {i}");
    }
    let cache = &healthz(&gw).await["cache"];
    assert_eq!(cache["backend"], "memory");
    assert_eq!(cache["state"], "ok");
    assert_eq!(cache["hits"], json!(cases.len() - misses));
}

#[tokio::test]
async fn bypass_and_no_store() {
    let m = mock().await;
    let gw = gateway(cached_env(&m, "ctl", "memory")).await;
    let q = |text: &str| {
        format!(r#"{{"model":"llm","messages":[{{"role":"user","content":"{text}"}}]}}"#)
    };
    // bypass: neither read nor write.
    let (_, h, _) = post_raw(&gw, &q("a"), &[("x-pgw-cache", "bypass")]).await;
    assert!(!cache_hit(&h));
    let (_, h, _) = post_raw(&gw, &q("a"), &[]).await; // not stored by the bypass call
    assert!(!cache_hit(&h));
    let (_, h, _) = post_raw(&gw, &q("a"), &[("x-pgw-cache", "bypass")]).await; // not read
    assert!(!cache_hit(&h));
    assert_eq!(hit_count(&m, "ctl").await, 3);
    // no-store: read, don't write.
    let (_, h, _) = post_raw(&gw, &q("a"), &[("x-pgw-cache", "no-store")]).await;
    assert!(cache_hit(&h), "no-store still reads");
    let (_, h, _) = post_raw(&gw, &q("b"), &[("x-pgw-cache", "no-store")]).await;
    assert!(!cache_hit(&h));
    let (_, h, _) = post_raw(&gw, &q("b"), &[]).await;
    assert!(!cache_hit(&h), "the no-store answer was not stored");
    let (_, h, _) = post_raw(&gw, &q("b"), &[]).await;
    assert!(cache_hit(&h));
    assert_eq!(hit_count(&m, "ctl").await, 5);
}

/// `data:` events of an SSE body as JSON (`[DONE]` as a string), ids and times blanked.
fn events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| {
            let mut v: Value = serde_json::from_str(d).unwrap_or_else(|_| json!(d));
            if v.is_object() {
                v["id"] = json!("<id>");
                v["created"] = json!(0);
            }
            v
        })
        .collect()
}

/// The same events with consecutive content (or reasoning) chunks merged into one.
fn merged(evs: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for e in evs {
        let field = ["content", "reasoning_content"].into_iter().find(|f| {
            e["choices"][0]["delta"][*f].is_string()
                && e["choices"][0]["delta"]
                    .as_object()
                    .is_some_and(|o| o.len() == 1)
        });
        if let (Some(f), Some(prev)) = (field, out.last_mut()) {
            let pd = &mut prev["choices"][0]["delta"];
            if pd.as_object().is_some_and(|o| o.len() == 1) && pd[f].is_string() {
                let joined = format!(
                    "{}{}",
                    pd[f].as_str().unwrap_or(""),
                    e["choices"][0]["delta"][f].as_str().unwrap_or("")
                );
                pd[f] = json!(joined);
                continue;
            }
        }
        out.push(e);
    }
    out
}

#[tokio::test]
async fn a_streamed_hit_replays_the_shape_of_a_live_stream() {
    let m = mock().await;
    script(
        &m,
        "replay",
        json!({"then": {"content": "Hi there, friend", "chunks": 1, "reasoning": "pondering", "cached_tokens": 2}}),
    )
    .await;
    let gw = gateway(cached_env(&m, "replay", "memory")).await;
    let body = |usage: bool| {
        let mut b = json!({"model": "llm", "stream": true,
            "messages": [{"role": "user", "content": "greet me"}]});
        if usage {
            b["stream_options"] = json!({"include_usage": true});
        }
        b.to_string()
    };
    let (status, h, live) = post_raw(&gw, &body(true), &[]).await;
    assert_eq!(status, 200, "{live}");
    assert!(!cache_hit(&h));
    let (status, h, replayed) = post_raw(&gw, &body(true), &[]).await;
    assert_eq!(status, 200, "{replayed}");
    assert!(cache_hit(&h));
    assert_eq!(h["content-type"], "text/event-stream");
    assert_eq!(h["x-pgw-source"], "openai-1");
    assert_eq!(h["x-pgw-attempts"], "0");
    // Chunk by chunk the same (ids and times aside): role, reasoning, content, finish,
    // usage, [DONE].
    let (a, b) = (events(&live), events(&replayed));
    assert_eq!(a, b, "live:\n{live}\nreplayed:\n{replayed}");
    assert_eq!(a.len(), 6, "{live}");
    assert!(
        a[4]["usage"]["prompt_tokens_details"]["cached_tokens"] == 2,
        "{live}"
    );
    assert_eq!(a[5], json!("[DONE]"));
    // The replay has its own call id.
    assert_ne!(
        serde_json::from_str::<Value>(
            live.lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("data: ")
        )
        .unwrap_or_default()["id"],
        serde_json::from_str::<Value>(
            replayed
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("data: ")
        )
        .unwrap_or_default()["id"]
    );
    // Without include_usage: no usage chunk, as live.
    let (_, h, no_usage) = post_raw(&gw, &body(false), &[]).await;
    assert!(cache_hit(&h));
    let mut expected = b.clone();
    expected.remove(4);
    assert_eq!(events(&no_usage), expected);
    // A non-streamed hit of the same question is a normal completion.
    let (_, h, whole) = post_raw(
        &gw,
        &body(false).replace(r#""stream":true"#, r#""stream":false"#),
        &[],
    )
    .await;
    assert!(cache_hit(&h));
    let whole: Value = serde_json::from_str(&whole).unwrap_or_default();
    assert_eq!(whole["object"], "chat.completion");
    assert_eq!(
        whole["choices"][0]["message"]["content"],
        "Hi there, friend"
    );
    assert_eq!(
        whole["choices"][0]["message"]["reasoning_content"],
        "pondering"
    );
    assert_eq!(whole["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
    assert_eq!(hit_count(&m, "replay").await, 1);

    // A live answer in many chunks: the replay carries the same text in one chunk per field.
    script(
        &m,
        "replay-words",
        json!({"then": {"content": "one two three four", "reasoning": "a b c"}}),
    )
    .await;
    let gw = gateway(cached_env(&m, "replay-words", "memory")).await;
    let (_, _, live) = post_raw(&gw, &body(true), &[]).await;
    let (_, h, replayed) = post_raw(&gw, &body(true), &[]).await;
    assert!(cache_hit(&h));
    assert!(events(&live).len() > events(&replayed).len());
    assert_eq!(merged(events(&live)), events(&replayed));
}

#[tokio::test]
async fn tool_calls_are_replayed_as_tool_call_deltas() {
    let m = mock().await;
    let answer = json!({
        "id": "chatcmpl-raw", "object": "chat.completion", "created": 1, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    });
    script(&m, "tools", json!({"then": {"body": answer.to_string()}})).await;
    let gw = gateway(cached_env(&m, "tools", "memory")).await;
    let q = |stream: bool| {
        json!({"model": "llm", "stream": stream, "messages": [{"role": "user", "content": "weather in Oslo?"}],
               "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})
        .to_string()
    };
    let (status, h, text) = post_raw(&gw, &q(false), &[]).await;
    assert_eq!(status, 200, "{text}");
    assert!(!cache_hit(&h));
    let (status, h, sse) = post_raw(&gw, &q(true), &[]).await;
    assert_eq!(status, 200, "{sse}");
    assert!(cache_hit(&h), "{sse}");
    let evs = events(&sse);
    let call = &evs[1]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(call["id"], "call_1", "{sse}");
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(call["function"]["arguments"], r#"{"city":"Oslo"}"#);
    assert_eq!(evs[2]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(evs.last(), Some(&json!("[DONE]")));
    assert_eq!(hit_count(&m, "tools").await, 1);
}

#[tokio::test]
async fn fifty_identical_concurrent_requests_make_one_upstream_call() {
    let m = mock().await;
    script(&m, "herd", json!({"then": {"first_token_delay_ms": 1500}})).await;
    let gw = Arc::new(gateway(cached_env(&m, "herd", "memory")).await);
    let mut tasks = Vec::new();
    for i in 0..50 {
        let gw = gw.clone();
        tasks.push(tokio::spawn(async move {
            // Half streamed, half not: they share one entry and one flight.
            let body = json!({"model": "llm", "stream": i % 2 == 0,
                "messages": [{"role": "user", "content": "the same question"}]});
            post_raw(&gw, &body.to_string(), &[]).await
        }));
    }
    let mut replays = 0;
    for t in tasks {
        let (status, h, text) = t.await.expect("task");
        assert_eq!(status, 200, "{text}");
        assert_eq!(
            answer_text(&text),
            "Hello from the mock upstream.",
            "{text}"
        );
        replays += usize::from(cache_hit(&h));
    }
    assert_eq!(hit_count(&m, "herd").await, 1);
    assert_eq!(replays, 49);
    let cache = &healthz(&gw).await["cache"];
    assert_eq!(
        cache["coalesced"].as_u64().unwrap_or(0) + cache["hits"].as_u64().unwrap_or(0),
        49,
        "{cache}"
    );
}

/// An embedded gateway with the memory cache on one mock scenario.
async fn embedded(m: &MockUpstream, scenario: &str, extra: &[(&str, &str)]) -> Gateway {
    let mut vars = cached_env(m, scenario, "memory");
    vars.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    vars.extend(extra.iter().map(|(k, v)| kv(k, v)));
    let settings = settings_from_vars(vars).expect("settings");
    Gateway::from_settings(settings).await.expect("gateway")
}

#[tokio::test]
async fn a_leader_going_away_does_not_cancel_the_shared_call() {
    let m = mock().await;
    script(&m, "lead", json!({"then": {"first_token_delay_ms": 1500}})).await;
    let gw = embedded(&m, "lead", &[]).await;
    let req = || ChatRequest::user("llm", "shared question");
    // The leader streams (a stream runs as it is polled: its client's task polls it); it
    // joins first (its upstream request has arrived).
    let leader = {
        let mut events = Box::pin(gw.chat_stream(req()));
        tokio::spawn(async move { while events.next().await.is_some() {} })
    };
    eventually(10, || {
        let m = m.clone();
        async move { (hit_count(&m, "lead").await == 1).then_some(()) }
    })
    .await;
    let follower = {
        let gw = gw.clone();
        tokio::spawn(async move { gw.chat(req()).await })
    };
    eventually(10, || {
        let gw = gw.clone();
        async move { (gw.health()["cache"]["waiting_callers"] == 2).then_some(()) }
    })
    .await;
    leader.abort(); // the leader's client goes away (its stream is dropped)
    let answer = follower
        .await
        .expect("task")
        .expect("the follower is answered");
    assert!(answer.cache_hit);
    assert_eq!(answer.attempts, 0);
    assert_eq!(answer.content, "Hello from the mock upstream.");
    // The shared upstream call ran to its end (it was not cancelled with the leader).
    eventually(10, || {
        let m = m.clone();
        async move {
            let h = hits(&m, "lead").await;
            assert_eq!(h.len(), 1);
            assert_ne!(h[0]["cancelled"], true, "{h:?}");
            (h[0]["completed"] == true).then_some(())
        }
    })
    .await;
    // And it was stored.
    let again = gw.chat(req()).await.expect("answer");
    assert!(again.cache_hit);
    assert_eq!(hit_count(&m, "lead").await, 1);
}

#[tokio::test]
async fn a_streamed_follower_gets_a_replay_and_failures_are_shared_not_stored() {
    let m = mock().await;
    script(
        &m,
        "fail",
        json!({"steps": [{"status": 400, "first_token_delay_ms": 2000}]}),
    )
    .await;
    let gw = embedded(&m, "fail", &[]).await;
    let req = || ChatRequest::user("llm", "a rejected question");
    let a = {
        let gw = gw.clone();
        tokio::spawn(async move { gw.chat(req()).await })
    };
    eventually(10, || {
        let m = m.clone();
        async move { (hit_count(&m, "fail").await == 1).then_some(()) }
    })
    .await;
    let b = {
        let gw = gw.clone();
        tokio::spawn(async move {
            let mut s = Box::pin(gw.chat_stream(req()));
            let mut out = Vec::new();
            while let Some(ev) = s.next().await {
                out.push(ev);
            }
            out
        })
    };
    eventually(10, || {
        let gw = gw.clone();
        async move { (gw.health()["cache"]["waiting_callers"] == 2).then_some(()) }
    })
    .await;
    let ra = a.await.expect("task");
    let rb = b.await.expect("task");
    assert!(ra.is_err(), "{ra:?}");
    assert!(
        matches!(rb.as_slice(), [CallEvent::Failed(e)] if e.kind() == "request_rejected"),
        "the follower shares the leader's error: {rb:?}"
    );
    assert_eq!(hit_count(&m, "fail").await, 1);
    // The failure was not stored: the next call goes upstream (and succeeds), then hits.
    let ok = gw.chat(req()).await.expect("answer");
    assert!(!ok.cache_hit);
    let mut s = Box::pin(gw.chat_stream(req()));
    let mut kinds = Vec::new();
    while let Some(ev) = s.next().await {
        kinds.push(match ev {
            CallEvent::Start(st) => {
                assert!(st.cache_hit && st.attempts == 0);
                "start"
            }
            CallEvent::Delta(_) => "delta",
            CallEvent::End(r) => {
                assert!(r.cache_hit);
                "end"
            }
            CallEvent::Failed(e) => panic!("{e}"),
        });
    }
    assert_eq!(kinds.first(), Some(&"start"));
    assert_eq!(kinds.last(), Some(&"end"));
    assert_eq!(hit_count(&m, "fail").await, 2);
}

#[tokio::test]
async fn salvaged_and_deadline_cut_answers_are_not_stored() {
    let m = mock().await;
    script(&m, "salvage", json!({"then": {"missing_done": true}})).await;
    let mut env = cached_env(&m, "salvage", "memory");
    env.push(kv("LLM__OPENAI__1__MISSING_DONE", "salvage"));
    let gw = gateway(env).await;
    let body = r#"{"model":"llm","stream":true,"messages":[{"role":"user","content":"x"}]}"#;
    for _ in 0..2 {
        let (status, h, text) = post_raw(&gw, body, &[]).await;
        assert_eq!(status, 200, "{text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        assert!(!cache_hit(&h), "a salvaged answer is never stored");
    }
    assert_eq!(hit_count(&m, "salvage").await, 2);

    script(
        &m,
        "slow",
        json!({"steps": [{"first_token_delay_ms": 3000}]}),
    )
    .await;
    let gw = gateway(cached_env(&m, "slow", "memory")).await;
    let body = r#"{"model":"llm","messages":[{"role":"user","content":"y"}]}"#;
    let (status, _, text) = post_raw(&gw, body, &[("x-pgw-call-deadline-s", "0.3")]).await;
    assert_eq!(status, 504, "{text}");
    let (status, h, text) = post_raw(&gw, body, &[]).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        !cache_hit(&h),
        "nothing was stored by the call the deadline cut"
    );
    assert_eq!(hit_count(&m, "slow").await, 2);
}

#[tokio::test]
async fn a_cache_hit_leaves_a_cache_hit_row() {
    let m = mock().await;
    let mut env = cached_env(&m, "rows", "memory");
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    let gw = gateway(env).await;
    let body = r#"{"model":"llm","messages":[{"role":"user","content":"row"}]}"#;
    let (_, h1, _) = post_raw(&gw, body, &[]).await;
    let (_, h2, _) = post_raw(&gw, body, &[]).await;
    assert!(!cache_hit(&h1) && cache_hit(&h2));
    let id = |h: &HeaderMap| h["x-pgw-call-id"].to_str().unwrap_or_default().to_string();
    let (miss_id, hit_id) = (id(&h1), id(&h2));
    let db = gw.telemetry_db();
    let row_of = |call_id: String| {
        let db = db.clone();
        eventually(10, move || {
            let (db, call_id) = (db.clone(), call_id.clone());
            async move {
                let cols = [
                    "call_id",
                    "event",
                    "attempts",
                    "prompt_tokens",
                    "completion_tokens",
                    "source_name",
                ];
                polygateway_tests::telemetry_rows(&db, &cols)
                    .await
                    .into_iter()
                    .find(|r| r["call_id"] == call_id.as_str())
            }
        })
    };
    let (miss, hit) = (row_of(miss_id).await, row_of(hit_id).await);
    assert_eq!(miss["event"], "terminal_success");
    assert_eq!(hit["event"], "cache_hit");
    assert_eq!(hit["attempts"], 0);
    assert_eq!(hit["source_name"], "openai-1");
    assert!(hit["prompt_tokens"].as_u64().is_some(), "{hit}");
    assert_eq!(
        (&hit["prompt_tokens"], &hit["completion_tokens"]),
        (&miss["prompt_tokens"], &miss["completion_tokens"]),
        "usage as cached"
    );
}

/// Moves the clock of a backend's TTLs: a manual clock, or real waiting.
type Advance = Box<dyn Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync>;

/// The contract every cache backend meets.
async fn backend_contract(
    backend: Arc<dyn CacheBackend>,
    prefix: &str,
    short_ttl: Duration,
    advance: Advance,
) {
    let k = |s: &str| format!("{prefix}cache:{s}");
    let (a, b, c) = (k("a"), k("b"), k("c"));
    assert_eq!(backend.get(&a).await.expect("get"), None);
    let value: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    backend
        .set(&a, value.clone().into(), Duration::from_secs(60))
        .await
        .expect("set");
    assert_eq!(
        backend.get(&a).await.expect("get").as_deref(),
        Some(value.as_slice())
    );
    // Overwrite replaces.
    backend
        .set(&a, "second".into(), Duration::from_secs(60))
        .await
        .expect("set");
    assert_eq!(
        backend.get(&a).await.expect("get").as_deref(),
        Some(&b"second"[..])
    );
    // TTL: a short entry expires, a long one stays.
    backend
        .set(&b, "short".into(), short_ttl)
        .await
        .expect("set");
    backend
        .set(&c, "long".into(), Duration::from_secs(60))
        .await
        .expect("set");
    assert_eq!(
        backend.get(&b).await.expect("get").as_deref(),
        Some(&b"short"[..])
    );
    advance(short_ttl).await;
    eventually(5, || {
        let (backend, b) = (backend.clone(), b.clone());
        async move { backend.get(&b).await.expect("get").is_none().then_some(()) }
    })
    .await;
    assert_eq!(
        backend.get(&c).await.expect("get").as_deref(),
        Some(&b"long"[..])
    );
    // Entries must expire.
    assert!(matches!(
        backend.set(&c, "x".into(), Duration::ZERO).await,
        Err(CacheError::ZeroTtl)
    ));
}

#[tokio::test]
async fn the_memory_backend_meets_the_contract() {
    let clock = ManualClock::new(0);
    let backend = Arc::new(MemoryCache::new(clock.clone(), 1000, 8 * 1024 * 1024));
    let advance: Advance = Box::new(move |d| {
        clock.advance(d.as_millis() as u64);
        Box::pin(async {})
    });
    backend_contract(backend, "pgw:", Duration::from_secs(5), advance).await;
}

#[tokio::test]
async fn the_redis_backend_meets_the_contract() {
    let backend = Arc::new(RedisCache::new(REDIS).expect("url"));
    let advance: Advance = Box::new(|d| Box::pin(tokio::time::sleep(d)));
    backend_contract(backend, &test_prefix(), Duration::from_millis(300), advance).await;
}

#[tokio::test]
async fn the_memory_backend_is_bounded_by_entries_and_bytes() {
    let clock = ManualClock::new(0);
    let ttl = Duration::from_secs(60);
    let mem = MemoryCache::new(clock.clone(), 3, 1000);
    for k in ["k1", "k2", "k3"] {
        mem.set(k, "v".into(), ttl).await.expect("set");
    }
    // k1 used recently: k2 is the least recently used and goes first.
    assert!(mem.get("k1").await.expect("get").is_some());
    mem.set("k4", "v".into(), ttl).await.expect("set");
    assert_eq!(mem.len(), 3);
    assert!(mem.get("k2").await.expect("get").is_none());
    assert!(mem.get("k1").await.expect("get").is_some());
    // Bytes: keys plus values.
    let big = vec![b'x'; 600];
    mem.set("big1", big.clone().into(), ttl).await.expect("set");
    assert!(mem.bytes() <= 1000, "{}", mem.bytes());
    mem.set("big2", big.clone().into(), ttl).await.expect("set");
    assert!(mem.bytes() <= 1000, "{}", mem.bytes());
    assert!(
        mem.get("big1").await.expect("get").is_none(),
        "evicted for big2"
    );
    assert!(mem.get("big2").await.expect("get").is_some());
    // A value larger than the whole budget is not kept (and does not evict the rest).
    mem.set("huge", vec![b'y'; 2000].into(), ttl)
        .await
        .expect("set");
    assert!(mem.get("huge").await.expect("get").is_none());
    assert!(mem.get("big2").await.expect("get").is_some());
    // Expired entries free their room.
    clock.advance(61_000);
    assert!(mem.get("big2").await.expect("get").is_none());
    assert_eq!((mem.len(), mem.bytes()), (0, 0));
}

/// A TCP forwarder to the machine's Redis that the test stops and restarts on the same port
/// (the shared Redis server itself is never touched).
struct RedisProxy {
    port: u16,
    accept: Option<JoinHandle<()>>,
    conns: Arc<std::sync::Mutex<Vec<JoinHandle<()>>>>,
}

impl RedisProxy {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let mut p = Self {
            port,
            accept: None,
            conns: Arc::default(),
        };
        p.serve(listener);
        p
    }

    fn serve(&mut self, listener: TcpListener) {
        let conns = self.conns.clone();
        self.accept = Some(tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect("127.0.0.1:6379").await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                conns.lock().unwrap_or_else(|e| e.into_inner()).push(task);
            }
        }));
    }

    /// Close the port and cut every open connection.
    fn stop(&mut self) {
        if let Some(a) = self.accept.take() {
            a.abort();
        }
        for c in self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            c.abort();
        }
    }

    async fn restart(&mut self) {
        let port = self.port;
        let listener = eventually(10, || async move {
            TcpListener::bind(("127.0.0.1", port)).await.ok()
        })
        .await;
        self.serve(listener);
    }
}

#[tokio::test]
async fn redis_dying_degrades_the_cache_and_hits_resume_when_it_is_back() {
    let m = mock().await;
    let mut proxy = RedisProxy::start().await;
    let mut env = cached_env(&m, "redis-down", "redis");
    env.push(kv(
        "PGW_REDIS_URL",
        format!("redis://127.0.0.1:{}/0", proxy.port),
    ));
    let gw = gateway(env).await;
    let q = |text: &str| {
        format!(r#"{{"model":"llm","messages":[{{"role":"user","content":"{text}"}}]}}"#)
    };
    let (_, h, _) = post_raw(&gw, &q("kept"), &[]).await;
    assert!(!cache_hit(&h));
    let (_, h, _) = post_raw(&gw, &q("kept"), &[]).await;
    assert!(cache_hit(&h), "stored in Redis");
    assert_eq!(healthz(&gw).await["cache"]["state"], "ok");

    proxy.stop();
    for text in ["kept", "new", "new"] {
        let (status, h, body) = post_raw(&gw, &q(text), &[]).await;
        assert_eq!(status, 200, "no error reaches the client: {body}");
        assert!(body.contains("Hello"), "{body}");
        assert!(!cache_hit(&h));
    }
    let cache = healthz(&gw).await["cache"].clone();
    assert_eq!(cache["backend"], "redis");
    assert_eq!(cache["state"], "degraded", "{cache}");
    assert!(cache["errors"].as_u64().unwrap_or(0) >= 1, "{cache}");
    assert_eq!(hit_count(&m, "redis-down").await, 4);

    proxy.restart().await;
    // The cache probes the backend about once a second; the entry stored before the outage
    // is served again.
    eventually(10, || {
        let (gw, q) = (&gw, q("kept"));
        async move {
            let (status, h, _) = post_raw(gw, &q, &[]).await;
            assert_eq!(status, 200);
            cache_hit(&h).then_some(())
        }
    })
    .await;
    assert_eq!(healthz(&gw).await["cache"]["state"], "ok");
    proxy.stop();
}
