//! The Anthropic Messages dialect end to end: a real `polygateway serve`, the official
//! `anthropic` Python SDK as the client (`tests/python/anthropic_sdk.py`), and the mock
//! upstream speaking each source's own protocol — an OpenAI-compatible source, a DeepSeek
//! reasoning source and an Anthropic source. Exact text, tool ids, usage and upstream bodies;
//! thinking handed back across two turns; the SDK's exception classes; a cache entry shared
//! with an OpenAI client; the ledger's `ingress`.

use polygateway::mock::thinking_signature;
use polygateway_tests::{MockUpstream, eventually, hits, mock, run_python, script, telemetry_rows};
use serde_json::{Value, json};

use crate::common::{gateway, kv, source};

const PIXEL_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const REASONING: &str = "The user wants Paris weather; I should call the tool.";

async fn post(
    base_url: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut req = reqwest::Client::new()
        .post(format!("{base_url}{path}"))
        .json(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("gateway reachable");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.expect("body"))
}

fn sqlite(env: &mut Vec<(String, String)>) {
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    env.push(kv("PGW_CACHE_BACKEND", "none"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_creates_and_streams_text_on_an_openai_source() {
    let m = mock().await;
    let sc = "msg-text";
    let step = json!({"content": "Hello there friend", "chunks": 3});
    script(&m, sc, json!({"steps": [step.clone(), step]})).await;
    let mut env = source(&m, "openai", 1, sc, "gpt-test");
    sqlite(&mut env);
    let gw = gateway(env).await;

    let msg = run_python("anthropic_sdk.py", &[&gw.base_url, "llm", "text"]).await;
    let call_id = msg["id"].as_str().unwrap().strip_prefix("msg_").unwrap();
    assert_eq!(
        msg,
        json!({
            "id": format!("msg_{call_id}"), "type": "message", "role": "assistant",
            "model": "gpt-test",
            "content": [{"type": "text", "text": "Hello there friend"}],
            "stop_reason": "end_turn", "stop_sequence": null,
            // The mock counts the words of string contents ("Be brief." + "Say hello").
            "usage": {"input_tokens": 4, "output_tokens": 3,
                      "cache_creation_input_tokens": null, "cache_read_input_tokens": null},
        }),
        "{msg}"
    );
    let out = run_python("anthropic_sdk.py", &[&gw.base_url, "llm", "stream"]).await;
    assert_eq!(
        out["pieces"],
        json!(["Hello ", "there ", "friend"]),
        "{out}"
    );
    assert_eq!(out["final"]["content"][0]["text"], "Hello there friend");
    assert_eq!(out["final"]["stop_reason"], "end_turn");
    // message_start's counts are null; message_delta's are the real ones.
    assert_eq!(out["final"]["usage"]["input_tokens"], 2, "{out}");
    assert_eq!(out["final"]["usage"]["output_tokens"], 3, "{out}");

    let h = hits(&m, sc).await;
    assert_eq!(h.len(), 2);
    assert_eq!(
        h[0]["body"],
        json!({"model": "gpt-test", "stream": false, "max_tokens": 64,
               "messages": [{"role": "system", "content": "Be brief."},
                            {"role": "user", "content": "Say hello"}]}),
    );
    assert_eq!(h[1]["body"]["stream"], true);
    assert_eq!(
        h[1]["body"]["messages"],
        json!([{"role": "user", "content": "Say hello"}])
    );
    // Both calls are in the ledger as Messages calls.
    let rows = eventually(20, || async {
        let rows = telemetry_rows(&gw.telemetry_db(), &["event", "ingress"]).await;
        (rows.len() >= 4).then_some(rows)
    })
    .await;
    assert!(rows.iter().all(|r| r["ingress"] == "messages"), "{rows:?}");
    assert_eq!(rows.len(), 4, "{rows:?}");
}

/// Turn 1 of a tool conversation from a DeepSeek-style source: reasoning, text and one
/// tool call, as a whole body and as the same answer's chunks.
fn deepseek_turn1() -> (String, Vec<String>) {
    let tool = json!({"id": "call_9", "type": "function",
                      "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}});
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "deepseek-reasoner",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me check.", "reasoning_content": REASONING,
            "tool_calls": [tool]}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29,
                  "completion_tokens_details": {"reasoning_tokens": 5}},
    });
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
               "model": "deepseek-reasoner",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let events = vec![
        chunk(
            json!({"role": "assistant", "reasoning_content": REASONING}),
            Value::Null,
        ),
        chunk(json!({"content": "Let me check."}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                   "function": {"name": "get_weather", "arguments": ""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Paris\"}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
               "model": "deepseek-reasoner", "choices": [],
               "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}})
        .to_string(),
    ];
    (body.to_string(), events)
}

async fn deepseek_turns(mode: &str) {
    let m = mock().await;
    let sc = format!("msg-ds-{mode}");
    let (body, events) = deepseek_turn1();
    let first = if mode == "stream" {
        json!({"events": events})
    } else {
        json!({"body": body})
    };
    script(
        &m,
        &sc,
        json!({"steps": [first, {"content": "It is sunny.", "reasoning": "Done."}]}),
    )
    .await;
    let gw = gateway(source(&m, "deepseek", 1, &sc, "deepseek-reasoner")).await;
    let out = run_python("anthropic_sdk.py", &[&gw.base_url, "llm", "turns", mode]).await;
    let t1 = &out["turn1"];
    // The unsigned reasoning of an OpenAI-compatible source is a thinking block with an
    // empty signature (non-streamed) or none (streamed: Anthropic's stream never names one).
    let thinking = &t1["content"][0];
    assert_eq!(thinking["type"], "thinking", "{mode}: {out}");
    assert_eq!(thinking["thinking"], REASONING, "{mode}: {out}");
    assert_eq!(
        t1["content"][1],
        json!({"type": "text", "text": "Let me check."}),
        "{mode}: {out}"
    );
    assert_eq!(
        t1["content"][2],
        json!({"type": "tool_use", "id": "call_9", "name": "get_weather", "input": {"city": "Paris"}}),
        "{mode}: {out}"
    );
    assert_eq!(t1["stop_reason"], "tool_use", "{mode}: {out}");
    assert_eq!(t1["usage"]["input_tokens"], 20, "{mode}: {out}");
    assert_eq!(t1["usage"]["output_tokens"], 9, "{mode}: {out}");
    assert_eq!(
        out["turn2"]["content"][1]["text"], "It is sunny.",
        "{mode}: {out}"
    );

    let h = hits(&m, &sc).await;
    assert_eq!(h.len(), 2, "{h:?}");
    let first = &h[0]["body"];
    assert_eq!(
        first["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "What is the weather in Paris?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PIXEL_B64}")}}]}])
    );
    assert_eq!(
        first["tools"][0],
        json!({"type": "function", "function": {"name": "get_weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
    );
    assert_eq!(first["max_tokens"], 2048);
    // The client's `thinking` is DeepSeek's own switch (the budget is Anthropic's only).
    assert_eq!(first["thinking"], json!({"type": "enabled"}));
    // Turn 2 hands the reasoning back as DeepSeek spells it, with the tool call and result.
    let messages = &h[1]["body"]["messages"];
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": "Let me check.", "reasoning_content": REASONING,
               "tool_calls": [{"id": "call_9", "type": "function",
                               "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}),
        "{messages}"
    );
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_call_id": "call_9", "content": "Sunny, 24 C"}),
        "{messages}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deepseek_source_takes_its_reasoning_and_tool_result_back() {
    deepseek_turns("nonstream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_deepseek_turn_takes_its_reasoning_and_tool_result_back() {
    deepseek_turns("stream").await;
}

fn anthropic_source(m: &MockUpstream, scenario: &str) -> Vec<(String, String)> {
    vec![
        kv(
            "LLM__ANTHROPIC__1__BASE_URL",
            m.anthropic_base_url(scenario),
        ),
        kv("LLM__ANTHROPIC__1__MODEL", "claude-test"),
        kv("LLM__ANTHROPIC__1__API_KEY", format!("sk-ant-{scenario}")),
    ]
}

async fn anthropic_turns(mode: &str) {
    let m = mock().await;
    let sc = format!("msg-anth-{mode}");
    let first = json!({
        "reasoning": REASONING,
        "content": "Let me check.",
        "tool_calls": [{"id": "toolu_01A", "name": "get_weather", "arguments": {"city": "Paris"}}],
        "cached_tokens": 5,
        "cache_write_tokens": 7,
    });
    script(
        &m,
        &sc,
        json!({"steps": [first, {"content": "It is sunny in Paris."}]}),
    )
    .await;
    let mut env = anthropic_source(&m, &sc);
    sqlite(&mut env);
    let gw = gateway(env).await;
    let out = run_python("anthropic_sdk.py", &[&gw.base_url, "llm", "turns", mode]).await;
    let signature = thinking_signature(REASONING);
    let t1 = &out["turn1"];
    assert_eq!(
        t1["content"],
        json!([
            {"type": "thinking", "thinking": REASONING, "signature": signature},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
        ]),
        "{mode}: {out}"
    );
    assert_eq!(t1["stop_reason"], "tool_use");
    // The mock counts 6 input words plus 5 cache reads and 7 writes: Anthropic's own split.
    assert_eq!(t1["usage"]["input_tokens"], 6, "{out}");
    assert_eq!(t1["usage"]["cache_read_input_tokens"], 5, "{out}");
    assert_eq!(t1["usage"]["cache_creation_input_tokens"], 7, "{out}");
    assert_eq!(t1["usage"]["output_tokens"], 14, "{out}");
    if mode == "stream" {
        assert_eq!(
            out["events1"].as_array().unwrap().first(),
            Some(&json!("message_start")),
            "{out}"
        );
    }
    assert_eq!(
        out["turn2"]["content"],
        json!([{"type": "text", "text": "It is sunny in Paris."}]),
        "{out}"
    );

    let h = hits(&m, &sc).await;
    assert_eq!(h.len(), 2, "{h:?}");
    let first = &h[0]["body"];
    assert_eq!(
        first["thinking"],
        json!({"type": "enabled", "budget_tokens": 1024})
    );
    assert_eq!(first["max_tokens"], 2048);
    assert_eq!(
        first["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "What is the weather in Paris?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL_B64}}]}])
    );
    // The signature goes back upstream byte-exact, the blocks in Anthropic's order.
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
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "Sunny, 24 C"}]}),
        "{messages}"
    );
    let rows = eventually(20, || async {
        let rows = telemetry_rows(
            &gw.telemetry_db(),
            &["event", "ingress", "cache_write_tokens"],
        )
        .await;
        (rows.len() >= 4).then_some(rows)
    })
    .await;
    assert!(rows.iter().all(|r| r["ingress"] == "messages"), "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_source_gets_its_signature_back() {
    anthropic_turns("nonstream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_anthropic_turn_gets_its_signature_back() {
    anthropic_turns("stream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_the_sdks_exceptions() {
    let m = mock().await;
    script(
        &m,
        "msg-429",
        json!({"then": {"status": 429, "headers": {"retry-after": "3600"}}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "msg-429", "a")).await;
    let out = run_python("anthropic_sdk.py", &[&gw.base_url, "llm", "error"]).await;
    assert_eq!(out["class"], "RateLimitError", "{out}");
    assert_eq!(out["rate_limit_error"], true);
    assert_eq!(out["status"], 429);
    assert_eq!(out["body"]["type"], "error");
    assert_eq!(out["body"]["error"]["type"], "rate_limit_error");
    assert_eq!(out["retry_after"], "3600");
    assert_eq!(out["should_retry"], "false");
    assert_eq!(hits(&m, "msg-429").await.len(), 1);

    let out = run_python("anthropic_sdk.py", &[&gw.base_url, "nope", "error"]).await;
    assert_eq!(out["class"], "NotFoundError", "{out}");
    assert_eq!(out["body"]["error"]["type"], "not_found_error");
    assert!(
        out["body"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nope"),
        "{out}"
    );

    // A bad body: 400 naming the field, in Anthropic's shape.
    let (status, _, body) = post(
        &gw.base_url,
        "/v1/messages",
        &[],
        &json!({"model": "llm", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 400);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["message"], "`max_tokens` is required");
    // count_tokens: a clear 501.
    let (status, _, body) = post(
        &gw.base_url,
        "/v1/messages/count_tokens",
        &[],
        &json!({"model": "llm", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 501, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["type"], "not_supported_error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_read_from_x_api_key_and_models_list_in_anthropics_shape() {
    let m = mock().await;
    script(&m, "msg-keys", json!({"then": {"content": "ok"}})).await;
    let mut env = source(&m, "openai", 1, "msg-keys", "a");
    env.push(kv("PGW_API_KEYS", "client-key"));
    let gw = gateway(env).await;
    let body =
        json!({"model": "llm", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    let (status, _, text) = post(
        &gw.base_url,
        "/v1/messages",
        &[("x-api-key", "client-key")],
        &body,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let (status, _, text) = post(
        &gw.base_url,
        "/v1/messages",
        &[("x-api-key", "wrong")],
        &body,
    )
    .await;
    assert_eq!(status, 401);
    let err: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        err,
        json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid API key"}})
    );
    let models = reqwest::Client::new()
        .get(format!("{}/v1/models", gw.base_url))
        .header("x-api-key", "client-key")
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap();
    assert_eq!(models.status().as_u16(), 200);
    let models: Value = models.json().await.unwrap();
    assert_eq!(
        models,
        json!({"data": [{"type": "model", "id": "llm", "display_name": "llm",
                         "created_at": "1970-01-01T00:00:00Z"}],
               "has_more": false, "first_id": "llm", "last_id": "llm"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_client_and_an_anthropic_client_share_a_cache_entry() {
    let m = mock().await;
    script(
        &m,
        "msg-cache",
        json!({"then": {"content": "Cached words here"}}),
    )
    .await;
    let mut env = source(&m, "openai", 1, "msg-cache", "a");
    env.push(kv("PGW_CACHE_BACKEND", "memory"));
    env.push(kv("LLM__CACHE__TTL_S", "600"));
    let gw = gateway(env).await;
    let (status, headers, _) = post(
        &gw.base_url,
        "/v1/chat/completions",
        &[],
        &json!({"model": "llm", "max_tokens": 32, "messages": [{"role": "user", "content": "Same question"}]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-pgw-cache-hit"], "false");
    let (status, headers, text) = post(
        &gw.base_url,
        "/v1/messages",
        &[],
        &json!({"model": "llm", "max_tokens": 32,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "Same question"}]}]}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["x-pgw-cache-hit"], "true");
    let msg: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        msg["content"],
        json!([{"type": "text", "text": "Cached words here"}])
    );
    assert_eq!(hits(&m, "msg-cache").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_after_tokens_ends_with_an_error_event() {
    let m = mock().await;
    script(
        &m,
        "msg-cut",
        json!({"then": {"content": "one two three four five six", "cut_after_chunks": 3, "inter_chunk_delay_ms": 30}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "msg-cut", "gpt-x")).await;
    let (status, _, body) = post(
        &gw.base_url,
        "/v1/messages",
        &[],
        &json!({"model": "llm", "max_tokens": 64, "stream": true,
                "messages": [{"role": "user", "content": "count"}]}),
    )
    .await;
    assert_eq!(status, 200);
    let events: Vec<&str> = body
        .split("\n\n")
        .filter_map(|e| e.lines().next()?.strip_prefix("event: "))
        .collect();
    // The text that reached the client, then the error: never a message_stop, so the SDKs
    // raise instead of returning a truncated message as whole.
    assert_eq!(
        events,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "error"
        ],
        "{body}"
    );
    let last = body.trim_end().lines().last().unwrap();
    let err: Value = serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "api_error");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("interrupted"),
        "{err}"
    );
}
