//! The `gemini` component end to end: a real `polygateway serve`, the mock speaking the Gemini
//! API, and the official OpenAI Python SDK as the client. Text, thought parts as
//! `reasoning_content`, a two-turn tool conversation whose second upstream request hands the
//! first turn's `thoughtSignature` back byte-exact on its `functionCall`, an image part as
//! `inlineData`, usage with cached and thought tokens priced into the ledger, every error
//! class, embeddings, and failover from an overloaded Anthropic source to Gemini.

use std::time::Instant;

use polygateway::mock::{DEFAULT_EMBEDDING_DIMS, embedding_vector, thought_signature};
use polygateway_tests::{
    GatewayProcess, MockUpstream, eventually, hits, mock, run_python, script, telemetry_rows,
};
use serde_json::{Value, json};

use crate::common::{chat_body, gateway, kv, post_chat, sse_contents};

const MODEL: &str = "gemini-test";
const REASONING: &str = "The user wants Paris weather; I should call the tool.";
const PIXEL_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn gemini_source(m: &MockUpstream, scope: &str, n: u32, scenario: &str) -> Vec<(String, String)> {
    let p = format!("{scope}__GEMINI__{n}__");
    vec![
        kv(&format!("{p}BASE_URL"), m.gemini_base_url(scenario)),
        kv(&format!("{p}MODEL"), MODEL),
        kv(&format!("{p}API_KEY"), format!("gk-{scenario}")),
    ]
}

async fn two_turns(mode: &str) {
    let m = mock().await;
    let sc = format!("gem-turns-{mode}");
    let first = json!({
        "reasoning": REASONING,
        "content": "Let me check.",
        "tool_calls": [{"id": "call_g1", "name": "get_weather", "arguments": {"city": "Paris"}}],
        "cached_tokens": 5,
    });
    let second = json!({"content": "It is sunny in Paris."});
    script(&m, &sc, json!({"steps": [first, second]})).await;
    let mut env = gemini_source(&m, "LLM", 1, &sc);
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("pricing.json");
    std::fs::write(
        &prices,
        json!({MODEL: {"input": 0.3, "output": 2.5, "cached_input": 0.075}}).to_string(),
    )
    .unwrap();
    env.push(kv("PGW_PRICING_FILE", prices.display()));
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    env.push(kv("PGW_CACHE_BACKEND", "none"));
    env.push(kv("LLM__GEMINI__1__ENABLE_THINKING", "true"));
    let gw = gateway(env).await;
    let out = run_python("sdk_reasoning_turns.py", &[&gw.base_url, "llm", mode]).await;
    let t1 = &out["turn1"];
    let signature = thought_signature(REASONING);
    assert_eq!(t1["reasoning_content"], REASONING, "{mode}: {out}");
    assert_eq!(
        t1["reasoning_details"],
        json!([{"type": "reasoning.encrypted", "data": signature, "id": "call_g1",
                "format": "google-gemini-v1", "index": 0}]),
        "{mode}: {out}"
    );
    assert_eq!(t1["content"], "Let me check.", "{mode}: {out}");
    assert_eq!(
        t1["tool_calls"],
        json!([{"id": "call_g1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}]),
        "{mode}: {out}"
    );
    assert_eq!(t1["finish_reason"], "tool_calls", "{mode}: {out}");
    // promptTokenCount 11 (6 words + 5 cached) includes the cache; completion is the
    // candidates (3 words + 1 call) plus the 10 thought tokens.
    let usage = &t1["usage"];
    assert_eq!(usage["prompt_tokens"], 11, "{mode}: {out}");
    assert_eq!(usage["completion_tokens"], 14, "{mode}: {out}");
    assert_eq!(
        usage["prompt_tokens_details"]["cached_tokens"], 5,
        "{mode}: {out}"
    );
    assert_eq!(
        usage["completion_tokens_details"]["reasoning_tokens"], 10,
        "{mode}: {out}"
    );
    assert_eq!(
        out["turn2"]["content"], "It is sunny in Paris.",
        "{mode}: {out}"
    );

    let h = hits(&m, &sc).await;
    assert_eq!(h.len(), 2, "{h:?}");
    let method = match mode {
        "stream" => "streamGenerateContent",
        _ => "generateContent",
    };
    assert_eq!(
        h[0]["path"],
        format!("/sc/{sc}/v1beta/models/{MODEL}:{method}")
    );
    assert_eq!(h[0]["headers"]["x-goog-api-key"], format!("gk-{sc}"));
    assert_eq!(h[0]["authorization"], Value::Null);
    assert_eq!(
        h[0]["body"]["contents"],
        json!([{"role": "user", "parts": [
            {"text": "What is the weather in Paris?"},
            {"inlineData": {"mimeType": "image/png", "data": PIXEL_B64}}]}])
    );
    assert_eq!(
        h[0]["body"]["generationConfig"]["thinkingConfig"]["includeThoughts"],
        true
    );
    assert_eq!(
        h[0]["body"]["tools"][0]["functionDeclarations"][0]["name"],
        "get_weather"
    );
    // Turn 2: the signature goes back on the functionCall part it came on, byte-exact.
    let contents = &h[1]["body"]["contents"];
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [
            {"text": "Let me check."},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_g1"},
             "thoughtSignature": signature}]}),
        "{contents}"
    );
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [{"functionResponse": {
            "name": "get_weather", "response": {"result": "sunny, 21 C"}, "id": "call_g1"}}]}),
        "{contents}"
    );
    // (11 − 5) × 0.3 + 5 × 0.075 + 14 × 2.5 = 37.175 per million.
    let rows = eventually(20, || async {
        let rows = telemetry_rows(
            &gw.telemetry_db(),
            &["event", "cost", "cached_prompt_tokens", "reasoning_tokens"],
        )
        .await;
        (rows.iter().filter(|r| r["event"] == "attempt").count() >= 2).then_some(rows)
    })
    .await;
    let answered = rows
        .iter()
        .find(|r| r["event"] == "attempt" && r["reasoning_tokens"] == 10)
        .unwrap_or_else(|| panic!("{rows:?}"));
    let cost = answered["cost"].as_f64().unwrap();
    assert!((cost - 37.175e-6).abs() < 1e-12, "{cost}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_turn_tool_conversation_hands_the_thought_signature_back() {
    two_turns("nonstream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_two_turn_tool_conversation_hands_the_thought_signature_back() {
    two_turns("stream").await;
}

async fn one_gemini(m: &MockUpstream, sc: &str, steps: Value) -> GatewayProcess {
    script(m, sc, json!({ "steps": steps })).await;
    let mut env = gemini_source(m, "LLM", 1, sc);
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    env.push(kv("PGW_CACHE_BACKEND", "none"));
    gateway(env).await
}

fn answer_text(body: &str, stream: bool) -> String {
    match stream {
        true => sse_contents(body).concat(),
        false => serde_json::from_str::<Value>(body).unwrap()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_errors_are_retried() {
    let m = mock().await;
    let cases = [
        (
            "gem-429",
            json!([{"status": 429, "retry_delay": "1s"}]),
            false,
        ),
        ("gem-503", json!([{"status": 503}]), true),
        ("gem-500", json!([{"status": 500}]), false),
        (
            "gem-chunk",
            json!([{"stream_error": "UNAVAILABLE", "content": ""}]),
            true,
        ),
    ];
    for (sc, steps, stream) in cases {
        let gw = one_gemini(&m, sc, steps).await;
        let t = Instant::now();
        let (status, _, body) = post_chat(&gw, chat_body(stream)).await;
        assert_eq!(status, 200, "{sc}: {body}");
        assert_eq!(
            answer_text(&body, stream),
            "Hello from the mock upstream.",
            "{sc}: {body}"
        );
        assert_eq!(hits(&m, sc).await.len(), 2, "{sc}");
        if sc == "gem-429" {
            // RESOURCE_EXHAUSTED's RetryInfo.retryDelay is the hint.
            assert!(t.elapsed().as_secs_f64() >= 0.9, "{sc}: {:?}", t.elapsed());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_argument_is_rejected_and_permission_denied_kills_the_source() {
    let m = mock().await;
    let gw = one_gemini(&m, "gem-400", json!([{"status": 400}])).await;
    let (status, _, body) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "upstream_rejected", "{v}");
    assert_eq!(v["error"]["code"], "INVALID_ARGUMENT", "{v}");
    assert_eq!(
        v["error"]["message"],
        "upstream gemini-1 rejected the request (HTTP 400): mock error 400"
    );
    assert_eq!(hits(&m, "gem-400").await.len(), 1);

    for (sc, status) in [("gem-403", 403), ("gem-401", 401)] {
        script(&m, sc, json!({"then": {"status": status}})).await;
        let mut env = gemini_source(&m, "LLM", 1, sc);
        env.extend(crate::common::source(
            &m,
            "openai",
            2,
            &format!("{sc}-b"),
            "gpt-test",
        ));
        env.push(kv("LLM__RETRY__BASE_DELAY_S", "20"));
        env.push(kv("LLM__RETRY__MAX_DELAY_S", "30"));
        let gw = gateway(env).await;
        let t = Instant::now();
        let (code, headers, body) = post_chat(&gw, chat_body(false)).await;
        assert_eq!(code, 200, "{sc}: {body}");
        assert_eq!(headers["x-pgw-source"], "openai-2", "{sc}");
        assert!(t.elapsed().as_secs_f64() < 8.0, "{sc}: {:?}", t.elapsed());
        assert_eq!(hits(&m, sc).await.len(), 1, "{sc}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_anthropic_source_fails_over_to_gemini() {
    let m = mock().await;
    script(&m, "fo-a", json!({"then": {"status": 529}})).await;
    script(&m, "fo-g", json!({"steps": []})).await;
    let mut env = vec![
        kv("LLM__ANTHROPIC__1__BASE_URL", m.anthropic_base_url("fo-a")),
        kv("LLM__ANTHROPIC__1__MODEL", "claude-test"),
        kv("LLM__ANTHROPIC__1__API_KEY", "sk-ant"),
    ];
    env.extend(gemini_source(&m, "LLM", 2, "fo-g"));
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    let gw = gateway(env).await;
    for stream in [false, true] {
        let (status, headers, body) = post_chat(&gw, chat_body(stream)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(headers["x-pgw-source"], "gemini-2");
        assert_eq!(answer_text(&body, stream), "Hello from the mock upstream.");
    }
    assert!(!hits(&m, "fo-a").await.is_empty());
    assert_eq!(hits(&m, "fo-g").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_go_through_batch_embed_contents() {
    let m = mock().await;
    script(&m, "gem-emb", json!({"steps": []})).await;
    let mut env = gemini_source(&m, "EMB", 1, "gem-emb");
    env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    let gw = GatewayProcess::start(crate::common::bin(), &env).await;
    let r = reqwest::Client::new()
        .post(format!("{}/v1/embeddings", gw.base_url))
        .json(&json!({"model": "emb", "input": ["alpha", "beta"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    for (i, text) in ["alpha", "beta"].iter().enumerate() {
        assert_eq!(
            v["data"][i]["embedding"],
            json!(embedding_vector(text, DEFAULT_EMBEDDING_DIMS)),
            "{v}"
        );
    }
    let h = hits(&m, "gem-emb").await;
    assert_eq!(h.len(), 1);
    assert_eq!(
        h[0]["path"],
        format!("/sc/gem-emb/v1beta/models/{MODEL}:batchEmbedContents")
    );
    assert_eq!(
        h[0]["body"]["requests"][1],
        json!({"model": format!("models/{MODEL}"), "content": {"parts": [{"text": "beta"}]}})
    );
}
