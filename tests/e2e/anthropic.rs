//! The `anthropic` component end to end: a real `polygateway serve`, the mock speaking the
//! Anthropic Messages API, and the official OpenAI Python SDK as the client. Text, reasoning
//! as `reasoning_content`, a two-turn tool conversation whose second upstream request hands
//! the first turn's thinking signature back byte-exact, an image part as an image block,
//! usage with cache reads and writes priced into the ledger, every error class, and failover
//! from an overloaded Anthropic source to an OpenAI-compatible one with one stream shape.

use std::time::Instant;

use polygateway::mock::thinking_signature;
use polygateway_tests::{
    GatewayProcess, MockUpstream, eventually, hits, mock, run_python, script, telemetry_rows,
};
use serde_json::{Value, json};

use crate::common::{chat_body, gateway, kv, post_chat, source, sse_contents};

const MODEL: &str = "claude-test";
const REASONING: &str = "The user wants Paris weather; I should call the tool.";
/// The 1×1 PNG of `sdk_reasoning_turns.py`, as its data URL's base64.
const PIXEL_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn anthropic_source(m: &MockUpstream, n: u32, scenario: &str) -> Vec<(String, String)> {
    let p = format!("LLM__ANTHROPIC__{n}__");
    vec![
        kv(&format!("{p}BASE_URL"), m.anthropic_base_url(scenario)),
        kv(&format!("{p}MODEL"), MODEL),
        kv(&format!("{p}API_KEY"), format!("sk-ant-{scenario}")),
    ]
}

fn first_turn() -> Value {
    json!({
        "reasoning": REASONING,
        "content": "Let me check.",
        "tool_calls": [{"id": "toolu_01A", "name": "get_weather", "arguments": {"city": "Paris"}}],
        "cached_tokens": 5,
        "cache_write_tokens": 7,
    })
}

async fn with_pricing(env: &mut Vec<(String, String)>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pricing.json");
    let prices = json!({MODEL: {"input": 3.0, "output": 15.0, "cached_input": 0.3, "cache_write_input": 3.75}});
    std::fs::write(&path, prices.to_string()).unwrap();
    env.push(kv("PGW_PRICING_FILE", path.display()));
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    env.push(kv("PGW_CACHE_BACKEND", "none"));
    dir
}

async fn two_turns(mode: &str) {
    let m = mock().await;
    let sc = format!("anth-turns-{mode}");
    let second = json!({"content": "It is sunny in Paris."});
    script(&m, &sc, json!({"steps": [first_turn(), second]})).await;
    let mut env = anthropic_source(&m, 1, &sc);
    let _prices = with_pricing(&mut env).await;
    let gw = gateway(env).await;
    let out = run_python("sdk_reasoning_turns.py", &[&gw.base_url, "llm", mode]).await;
    let t1 = &out["turn1"];
    let signature = thinking_signature(REASONING);
    assert_eq!(t1["reasoning_content"], REASONING, "{mode}: {out}");
    assert_eq!(
        t1["reasoning_details"],
        json!([{"type": "reasoning.text", "text": REASONING, "signature": signature,
                "format": "anthropic-claude-v1", "index": 0}]),
        "{mode}: {out}"
    );
    assert_eq!(t1["content"], "Let me check.", "{mode}: {out}");
    assert_eq!(
        t1["tool_calls"],
        json!([{"id": "toolu_01A", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}]),
        "{mode}: {out}"
    );
    assert_eq!(t1["finish_reason"], "tool_calls", "{mode}: {out}");
    // The mock counts 6 input words; Anthropic reports cache reads (5) and writes (7) apart
    // from input_tokens: prompt_tokens counts all three.
    let usage = &t1["usage"];
    assert_eq!(usage["prompt_tokens"], 18, "{mode}: {out}");
    assert_eq!(usage["completion_tokens"], 14, "{mode}: {out}");
    assert_eq!(
        usage["prompt_tokens_details"]["cached_tokens"], 5,
        "{mode}: {out}"
    );
    assert_eq!(
        usage["prompt_tokens_details"]["cache_write_tokens"], 7,
        "{mode}: {out}"
    );
    assert_eq!(
        out["turn2"]["content"], "It is sunny in Paris.",
        "{mode}: {out}"
    );
    assert_eq!(out["turn2"]["finish_reason"], "stop", "{mode}: {out}");

    let h = hits(&m, &sc).await;
    assert_eq!(h.len(), 2, "{h:?}");
    let first = &h[0];
    assert_eq!(first["path"], format!("/sc/{sc}/v1/messages"));
    assert_eq!(first["headers"]["x-api-key"], format!("sk-ant-{sc}"));
    assert_eq!(first["headers"]["anthropic-version"], "2023-06-01");
    assert_eq!(first["authorization"], Value::Null);
    assert_eq!(first["body"]["model"], MODEL);
    assert_eq!(first["body"]["max_tokens"], 4096);
    assert_eq!(first["body"]["stream"], mode == "stream");
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL_B64}});
    assert_eq!(
        first["body"]["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "What is the weather in Paris?"}, image]}])
    );
    assert_eq!(first["body"]["tools"][0]["name"], "get_weather");
    assert_eq!(
        first["body"]["tools"][0]["input_schema"]["required"],
        json!(["city"])
    );
    // Turn 2 carries turn 1's thinking block first, its signature byte-exact, then the text
    // and the tool call; the tool result goes back in a user turn.
    let messages = &h[1]["body"]["messages"];
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": REASONING, "signature": signature},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
        ]}),
        "{messages}"
    );
    assert_eq!(messages[2]["role"], "user", "{messages}");
    assert_eq!(
        messages[2]["content"][0]["type"], "tool_result",
        "{messages}"
    );
    assert_eq!(
        messages[2]["content"][0]["tool_use_id"], "toolu_01A",
        "{messages}"
    );

    // The ledger prices the first turn from its cache reads and writes:
    // (18 − 5 − 7) × 3 + 5 × 0.3 + 7 × 3.75 + 14 × 15 = 255.75 per million.
    let rows = eventually(20, || async {
        let rows = telemetry_rows(
            &gw.telemetry_db(),
            &[
                "event",
                "cost",
                "cache_write_tokens",
                "cached_prompt_tokens",
                "prompt_tokens",
            ],
        )
        .await;
        (rows.iter().filter(|r| r["event"] == "attempt").count() >= 2).then_some(rows)
    })
    .await;
    let answered = rows
        .iter()
        .find(|r| r["event"] == "attempt" && r["cache_write_tokens"] == 7)
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(answered["cached_prompt_tokens"], 5, "{answered}");
    assert_eq!(answered["prompt_tokens"], 18, "{answered}");
    let cost = answered["cost"].as_f64().unwrap();
    assert!((cost - 255.75e-6).abs() < 1e-12, "{cost}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_turn_tool_conversation_hands_the_signature_back() {
    two_turns("nonstream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_two_turn_tool_conversation_hands_the_signature_back() {
    two_turns("stream").await;
}

async fn one_anthropic(m: &MockUpstream, sc: &str, steps: Value) -> GatewayProcess {
    script(m, sc, json!({ "steps": steps })).await;
    let mut env = anthropic_source(m, 1, sc);
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    env.push(kv("PGW_CACHE_BACKEND", "none"));
    gateway(env).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_errors_are_retried() {
    let m = mock().await;
    // 529 overloaded_error, a 500, a 429 with retry-after, and an error event mid-stream:
    // each is retried on the same source and the call succeeds on the next attempt.
    let cases = [
        ("anth-529", json!([{"status": 529}]), false),
        ("anth-500", json!([{"status": 500}]), true),
        (
            "anth-429",
            json!([{"status": 429, "headers": {"retry-after": "1"}}]),
            false,
        ),
        (
            "anth-event",
            json!([{"stream_error": "overloaded_error", "content": ""}]),
            true,
        ),
    ];
    for (sc, steps, stream) in cases {
        let gw = one_anthropic(&m, sc, steps).await;
        let t = Instant::now();
        let (status, _, body) = post_chat(&gw, chat_body(stream)).await;
        assert_eq!(status, 200, "{sc}: {body}");
        let text = match stream {
            true => sse_contents(&body).concat(),
            false => {
                serde_json::from_str::<Value>(&body).unwrap()["choices"][0]["message"]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            }
        };
        assert_eq!(text, "Hello from the mock upstream.", "{sc}: {body}");
        assert_eq!(hits(&m, sc).await.len(), 2, "{sc}");
        if sc == "anth-429" {
            assert!(
                t.elapsed().as_secs_f64() >= 0.9,
                "{sc}: retry-after honoured"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_is_rejected_with_the_upstream_message_and_a_401_kills_the_source() {
    let m = mock().await;
    let err = json!({"type": "error", "error": {"type": "invalid_request_error",
                     "message": "messages: roles must alternate"}});
    let gw = one_anthropic(
        &m,
        "anth-400",
        json!([{"status": 400, "body": err.to_string()}]),
    )
    .await;
    let (status, _, body) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "upstream_rejected", "{v}");
    assert_eq!(v["error"]["code"], "invalid_request_error", "{v}");
    assert_eq!(
        v["error"]["message"],
        "upstream anthropic-1 rejected the request (HTTP 400): messages: roles must alternate"
    );
    assert_eq!(hits(&m, "anth-400").await.len(), 1);

    // 401: no retry on that source, at once to the next one (no back-off).
    script(&m, "anth-401", json!({"then": {"status": 401}})).await;
    let mut env = anthropic_source(&m, 1, "anth-401");
    env.extend(source(&m, "openai", 2, "anth-401-b", "gpt-test"));
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "20"));
    env.push(kv("LLM__RETRY__MAX_DELAY_S", "30"));
    let gw = gateway(env).await;
    let t = Instant::now();
    let (status, headers, body) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-pgw-source"], "openai-2");
    assert!(t.elapsed().as_secs_f64() < 8.0, "{:?}", t.elapsed());
    assert_eq!(hits(&m, "anth-401").await.len(), 1);
}

/// The `delta` keys of every chunk of a streamed answer, in order, with the text joined.
fn stream_shape(body: &str) -> (Vec<Vec<String>>, String) {
    let mut shapes = Vec::new();
    let mut text = String::new();
    for line in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        if let Some(delta) = v["choices"][0]["delta"].as_object() {
            keys.extend(delta.keys().map(|k| format!("delta.{k}")));
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                text.push_str(t);
            }
        }
        shapes.push(keys);
    }
    (shapes, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_anthropic_source_fails_over_with_one_stream_shape() {
    let m = mock().await;
    // Streamed straight from each kind of source, then from the scope with an overloaded
    // Anthropic source first: the client sees the same chunk shapes every time.
    script(&m, "mix-a-ok", json!({"steps": []})).await;
    let direct_anthropic = gateway(anthropic_source(&m, 1, "mix-a-ok")).await;
    let direct_openai = gateway(source(&m, "openai", 1, "mix-o", "gpt-test")).await;
    let (_, _, a) = post_chat(&direct_anthropic, chat_body(true)).await;
    let (_, _, o) = post_chat(&direct_openai, chat_body(true)).await;
    let (a_shape, a_text) = stream_shape(&a);
    let (o_shape, o_text) = stream_shape(&o);
    assert_eq!(a_text, "Hello from the mock upstream.", "{a}");
    assert_eq!(a_text, o_text);
    assert_eq!(a_shape, o_shape, "{a}\n{o}");

    script(&m, "mix-a-529", json!({"then": {"status": 529}})).await;
    let mut env = anthropic_source(&m, 1, "mix-a-529");
    env.extend(source(&m, "openai", 2, "mix-o2", "gpt-test"));
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    let gw = gateway(env).await;
    let (status, headers, body) = post_chat(&gw, chat_body(true)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-pgw-source"], "openai-2");
    let (shape, text) = stream_shape(&body);
    assert_eq!(text, "Hello from the mock upstream.");
    assert_eq!(shape, o_shape);
    assert!(!hits(&m, "mix-a-529").await.is_empty());
}
