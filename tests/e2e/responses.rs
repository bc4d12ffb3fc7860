//! The OpenAI Responses dialect end to end: a real `polygateway serve`, the official `openai`
//! Python SDK's `client.responses` as the client (`tests/python/responses_sdk.py`), and the
//! mock upstream. Exact text, usage, item ids and upstream bodies; the stream helper's events
//! and final response; `responses.parse` through the structured-output ladder; a function
//! calling round trip; DeepSeek reasoning handed back across two turns, and an Anthropic
//! signature handed back byte-exact through `encrypted_content`; the SDK's `RateLimitError`;
//! a cut stream ending with `response.failed`; the stateful fields refused by name; the
//! ledger's `ingress`; and the Vercel AI SDK's default `openai(model)` (`tests/node`).

use polygateway_tests::{MockUpstream, eventually, hits, mock, run_python, script, telemetry_rows};
use serde_json::{Value, json};

use crate::common::{gateway, kv, source};

const ANSWER: &str = "Hello, test! Nice to meet you.";
const REASONING: &str = "The user wants a greeting. Keep it short.";

async fn post(base_url: &str, body: &Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{base_url}/v1/responses"))
        .json(body)
        .send()
        .await
        .expect("gateway reachable");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn no_cache(env: &mut Vec<(String, String)>) {
    env.push(kv("PGW_CACHE_BACKEND", "none"));
}

/// The call id inside a `resp_<call id>`.
fn call_id(resp: &Value) -> String {
    resp["id"]
        .as_str()
        .and_then(|s| s.strip_prefix("resp_"))
        .unwrap_or_else(|| panic!("no resp_ id: {resp}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_creates_and_streams_text_and_the_ledger_says_responses() {
    let m = mock().await;
    let sc = "resp-text";
    script(&m, sc, json!({"then": {"content": ANSWER}})).await;
    let mut env = source(&m, "openai", 1, sc, "gpt-test");
    no_cache(&mut env);
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    let gw = gateway(env).await;
    let out = run_python("responses_sdk.py", &[&gw.base_url, "llm", "text"]).await;

    // The mock counts the words of string contents ("Be brief." + "say hello to the test")
    // and one output token per word of the answer.
    let usage = json!({"input_tokens": 7,
                       "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                       "output_tokens": 6, "output_tokens_details": {"reasoning_tokens": 0},
                       "total_tokens": 13});
    for mode in ["nonstream", "stream"] {
        let r = &out[mode];
        let id = call_id(r);
        assert_eq!(
            *r,
            json!({
                "id": format!("resp_{id}"), "object": "response", "status": "completed",
                "model": "gpt-test", "output_text": ANSWER,
                "output": [{"id": format!("msg_{id}_0"), "type": "message", "role": "assistant",
                            "status": "completed",
                            "content": [{"type": "output_text", "text": ANSWER, "annotations": [],
                                         "logprobs": []}]}],
                "usage": usage, "incomplete_details": null, "instructions": "Be brief.",
                "max_output_tokens": 64, "temperature": 0.2, "tool_choice": "auto",
                "parallel_tool_calls": true,
            }),
            "{mode}"
        );
    }
    let deltas = ["Hello, ", "test! ", "Nice ", "to ", "meet ", "you."];
    assert_eq!(out["deltas"], json!(deltas));
    let mut types = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    types.extend(["response.output_text.delta"; 6]);
    types.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(out["types"], json!(types));
    assert_eq!(out["sequence_numbers"], json!((0..14).collect::<Vec<_>>()));

    let h = hits(&m, sc).await;
    assert_eq!(h.len(), 2, "{h:?}");
    let expected_messages = json!([{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "say hello to the test"}]);
    for (hit, stream) in h.iter().zip([false, true]) {
        let body = &hit["body"];
        assert_eq!(body["model"], "gpt-test");
        assert_eq!(body["messages"], expected_messages);
        assert_eq!(body["max_tokens"], 64);
        assert_eq!(body["temperature"], 0.2);
        assert_eq!(body["stream"], stream);
        assert_eq!(hit["authorization"], format!("Bearer sk-{sc}"));
    }
    assert_eq!(
        h[1]["body"]["stream_options"],
        json!({"include_usage": true})
    );

    let rows = eventually(20, || async {
        let rows = telemetry_rows(&gw.telemetry_db(), &["event", "ingress"]).await;
        (rows.iter().filter(|r| r["event"] != "attempt").count() >= 2).then_some(rows)
    })
    .await;
    assert!(rows.iter().all(|r| r["ingress"] == "responses"), "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_parse_goes_through_the_structured_output_ladder() {
    let m = mock().await;
    let sc = "resp-parse";
    script(
        &m,
        sc,
        json!({"then": {"content": "```json\n{'name': 'Ada Lovelace', 'age': 36,}\n```"}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, sc, "gpt-x")).await;
    let out = run_python("responses_sdk.py", &[&gw.base_url, "llm", "parse"]).await;
    assert_eq!(
        out["parsed"],
        json!({"name": "Ada Lovelace", "age": 36}),
        "{out}"
    );
    let text: Value = serde_json::from_str(out["output_text"].as_str().unwrap()).unwrap();
    assert_eq!(text, json!({"name": "Ada Lovelace", "age": 36}));
    let h = hits(&m, sc).await;
    assert_eq!(h.len(), 1);
    // The SDK asked for a strict json_schema named after the model; json-repair (the scope
    // default) turned it into prompt instructions, and repaired the fenced answer.
    let sys = &h[0]["body"]["messages"][0];
    assert_eq!(sys["role"], "system", "{sys}");
    assert!(
        sys["content"].as_str().unwrap().contains("\"Person\""),
        "{sys}"
    );
}

/// An OpenAI-compatible answer calling `get_weather` for Paris and Rome: a whole body for a
/// non-streamed request, chunks for a streamed one.
fn tool_step() -> Value {
    let call = |id: &str, city: &str| {
        json!({"id": id, "type": "function",
               "function": {"name": "get_weather", "arguments": format!("{{\"city\":\"{city}\"}}")}})
    };
    let body = json!({
        "id": "chatcmpl-t", "object": "chat.completion", "created": 1_700_000_000u64,
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null,
                                 "tool_calls": [call("call_paris", "Paris"), call("call_rome", "Rome")]}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
    });
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 1_700_000_000u64,
               "model": "gpt-test", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let frag = |index: u32, head: Option<(&str, &str)>, args: &str| {
        let mut t = json!({"index": index, "function": {"arguments": args}});
        if let Some((id, name)) = head {
            t["id"] = json!(id);
            t["type"] = json!("function");
            t["function"]["name"] = json!(name);
        }
        chunk(json!({"tool_calls": [t]}), Value::Null)
    };
    let events = vec![
        chunk(json!({"role": "assistant", "content": null}), Value::Null),
        frag(0, Some(("call_paris", "get_weather")), ""),
        frag(0, None, "{\"city\":"),
        frag(0, None, "\"Paris\"}"),
        frag(1, Some(("call_rome", "get_weather")), "{\"city\":"),
        frag(1, None, "\"Rome\"}"),
        chunk(json!({}), json!("tool_calls")),
        json!({"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 1_700_000_000u64,
               "model": "gpt-test", "choices": [],
               "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}})
        .to_string(),
    ];
    json!({"body": body.to_string(), "events": events})
}

async fn function_calling_round_trip(mode: &str) {
    let m = mock().await;
    let sc = format!("resp-tools-{mode}");
    script(
        &m,
        &sc,
        json!({"steps": [tool_step(), {"content": "Sunny in both."}]}),
    )
    .await;
    let mut env = source(&m, "openai", 1, &sc, "gpt-test");
    no_cache(&mut env);
    let gw = gateway(env).await;
    let out = run_python("responses_sdk.py", &[&gw.base_url, "llm", "tools", mode]).await;
    let t1 = &out["turn1"];
    let id = call_id(t1);
    assert_eq!(t1["status"], "completed", "{mode}: {out}");
    assert_eq!(
        t1["output"],
        json!([
            {"id": format!("fc_{id}_0"), "type": "function_call", "status": "completed",
             "call_id": "call_paris", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            {"id": format!("fc_{id}_1"), "type": "function_call", "status": "completed",
             "call_id": "call_rome", "name": "get_weather", "arguments": "{\"city\":\"Rome\"}"},
        ]),
        "{mode}: {out}"
    );
    assert_eq!(t1["usage"]["input_tokens"], 30, "{mode}");
    assert_eq!(t1["usage"]["output_tokens"], 12, "{mode}");
    assert_eq!(
        out["turn2"]["output_text"], "Sunny in both.",
        "{mode}: {out}"
    );

    let h = hits(&m, &sc).await;
    assert_eq!(h.len(), 2, "{h:?}");
    let user = json!({"role": "user", "content": "What is the weather in Paris and Rome?"});
    assert_eq!(h[0]["body"]["messages"], json!([user]), "{mode}");
    assert_eq!(h[0]["body"]["tools"][0]["type"], "function", "{mode}");
    assert_eq!(
        h[0]["body"]["tools"][0]["function"]["name"], "get_weather",
        "{mode}"
    );
    assert_eq!(
        h[0]["body"]["tools"][0]["function"]["strict"], true,
        "{mode}"
    );
    let call = |id: &str, city: &str| {
        json!({"id": id, "type": "function",
               "function": {"name": "get_weather", "arguments": format!("{{\"city\":\"{city}\"}}")}})
    };
    assert_eq!(
        h[1]["body"]["messages"],
        json!([
            user,
            {"role": "assistant", "content": null,
             "tool_calls": [call("call_paris", "Paris"), call("call_rome", "Rome")]},
            {"role": "tool", "tool_call_id": "call_paris", "content": "sunny in Paris"},
            {"role": "tool", "tool_call_id": "call_rome", "content": "sunny in Rome"},
        ]),
        "{mode}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_call_round_trip_hands_the_calls_back() {
    function_calling_round_trip("nonstream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_function_call_round_trip_hands_the_calls_back() {
    function_calling_round_trip("stream").await;
}

async fn deepseek(m: &MockUpstream, sc: &str) -> polygateway_tests::GatewayProcess {
    script(
        m,
        sc,
        json!({"then": {"content": ANSWER, "reasoning": REASONING}}),
    )
    .await;
    let mut env = source(m, "deepseek", 1, sc, "deepseek-reasoner");
    env.push(kv("LLM__DEEPSEEK__1__ENABLE_THINKING", "true"));
    no_cache(&mut env);
    gateway(env).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deepseek_reasoning_is_handed_back_across_two_turns() {
    let m = mock().await;
    for mode in ["nonstream", "stream"] {
        let sc = format!("resp-ds-{mode}");
        let gw = deepseek(&m, &sc).await;
        let out = run_python(
            "responses_sdk.py",
            &[&gw.base_url, "llm", "reasoning", mode],
        )
        .await;
        let t1 = &out["turn1"];
        let id = call_id(t1);
        assert_eq!(
            t1["output"],
            json!([
                {"id": format!("rs_{id}_0"), "type": "reasoning", "status": "completed",
                 "summary": [{"type": "summary_text", "text": REASONING}]},
                {"id": format!("msg_{id}_1"), "type": "message", "role": "assistant",
                 "status": "completed",
                 "content": [{"type": "output_text", "text": ANSWER, "annotations": [],
                              "logprobs": []}]},
            ]),
            "{mode}: {out}"
        );
        assert_eq!(
            t1["usage"]["output_tokens_details"],
            json!({"reasoning_tokens": 8}),
            "{mode}"
        );
        assert_eq!(out["turn2"]["output_text"], ANSWER, "{mode}");
        let h = hits(&m, &sc).await;
        assert_eq!(h.len(), 2, "{mode}: {h:?}");
        assert_eq!(
            h[0]["body"]["thinking"],
            json!({"type": "enabled"}),
            "{mode}"
        );
        assert_eq!(h[0]["body"]["reasoning_effort"], "low", "{mode}");
        // Turn 1's reasoning goes back on its assistant message, in DeepSeek's spelling.
        assert_eq!(
            h[1]["body"]["messages"],
            json!([
                {"role": "user", "content": "say hello to the test"},
                {"role": "assistant", "content": ANSWER, "reasoning_content": REASONING},
                {"role": "user", "content": "once more"},
            ]),
            "{mode}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_scope_raises_rate_limit_error() {
    let m = mock().await;
    let sc = "resp-429";
    script(&m, sc, json!({"then": {"status": 429}})).await;
    let mut env = source(&m, "openai", 1, sc, "a");
    env.extend([
        kv("LLM__RETRY__BASE_DELAY_S", 1),
        kv("LLM__BACKPRESSURE__STALL_WINDOW_S", "0.3"),
    ]);
    let gw = gateway(env).await;
    for mode in ["nonstream", "stream"] {
        let out = run_python(
            "responses_sdk.py",
            &[&gw.base_url, "llm", "ratelimit", mode],
        )
        .await;
        assert_eq!(
            out,
            json!({"raised": "RateLimitError", "rate_limit_error": true, "status": 429,
                   "code": "stalled", "type": "rate_limit_exceeded", "should_retry": "false"}),
            "{mode}"
        );
    }
}

#[tokio::test]
async fn stateful_fields_and_built_in_tools_are_refused_by_name() {
    let m = mock().await;
    let sc = "resp-refused";
    script(&m, sc, json!({"then": {"content": ANSWER}})).await;
    let gw = gateway(source(&m, "openai", 1, sc, "gpt-test")).await;
    let base = json!({"model": "llm", "input": "hi"});
    for (extra, param) in [
        (
            json!({"previous_response_id": "resp_123"}),
            "previous_response_id",
        ),
        (json!({"store": true}), "store"),
        (json!({"background": true}), "background"),
        (json!({"conversation": "conv_1"}), "conversation"),
        (json!({"tools": [{"type": "web_search"}]}), "tools[0].type"),
        (json!({"frobnicate": 1}), "frobnicate"),
    ] {
        let mut body = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, err) = post(&gw.base_url, &body).await;
        assert_eq!(status, 400, "{body}: {err}");
        assert_eq!(err["error"]["param"], param, "{err}");
        assert_eq!(err["error"]["type"], "invalid_request_error", "{err}");
        assert!(
            err["error"]["message"].as_str().unwrap().contains(param),
            "{err}"
        );
    }
    // `store: false` (what stateless clients send) is a call like any other.
    let mut body = base.clone();
    body["store"] = json!(false);
    let (status, r) = post(&gw.base_url, &body).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["output"][0]["content"][0]["text"], ANSWER);
    assert_eq!(hits(&m, sc).await.len(), 1);
}

/// The Vercel AI SDK's default `openai(model)` (the Responses API) with `generateText` and
/// `streamText` (`tests/node/ai_sdk.mjs`, with the `ai` and `@ai-sdk/openai` that
/// `tests/node/package-lock.json` pins, installed by `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vercel_ai_sdk_generates_and_streams_text() {
    let dir = polygateway_tests::repo_root().join("tests/node");
    assert!(
        dir.join("node_modules/ai").is_dir(),
        "{}/node_modules not found: run `.ci/run` (or `npm ci --prefix tests/node`)",
        dir.display()
    );
    let m = mock().await;
    let sc = "resp-ai-sdk";
    script(&m, sc, json!({"then": {"content": ANSWER}})).await;
    let mut env = source(&m, "openai", 1, sc, "gpt-test");
    no_cache(&mut env);
    let gw = gateway(env).await;
    let run = tokio::process::Command::new("node")
        .arg("ai_sdk.mjs")
        .args([&gw.base_url, "llm"])
        .current_dir(&dir)
        .output()
        .await
        .expect("run node");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "ai_sdk.mjs failed: {}\nstdout: {stdout}\nstderr: {}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let out: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let usage = json!({"inputTokens": 7, "outputTokens": 6, "totalTokens": 13});
    let g = &out["generate"];
    assert_eq!(g["text"], ANSWER, "{out}");
    assert_eq!(g["finishReason"], "stop", "{out}");
    assert_eq!(g["usage"], usage, "{out}");
    assert_eq!(g["modelId"], "gpt-test", "{out}");
    assert!(
        g["responseId"].as_str().unwrap().starts_with("resp_"),
        "{out}"
    );
    let s = &out["stream"];
    assert_eq!(
        s["deltas"],
        json!(["Hello, ", "test! ", "Nice ", "to ", "meet ", "you."]),
        "{out}"
    );
    assert_eq!(s["text"], ANSWER, "{out}");
    assert_eq!(s["finishReason"], "stop", "{out}");
    assert_eq!(s["usage"], usage, "{out}");
    let h = hits(&m, sc).await;
    assert_eq!(h.len(), 2, "{h:?}");
    let messages = json!([{"role": "system", "content": "Be brief."},
                          {"role": "user", "content": "say hello to the test"}]);
    assert_eq!(h[0]["body"]["messages"], messages);
    assert_eq!(h[0]["body"]["stream"], false);
    assert_eq!(h[1]["body"]["messages"], messages);
    assert_eq!(h[1]["body"]["stream"], true);
}

/// `(event name, data)` of each event of a Responses SSE body.
fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split_terminator("\n\n")
        .map(|e| {
            let (name, data) = e
                .strip_prefix("event: ")
                .and_then(|e| e.split_once("\ndata: "))
                .unwrap_or_else(|| panic!("not an event: {e:?}"));
            (name.to_string(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn a_stream_cut_after_tokens_ends_with_response_failed() {
    let m = mock().await;
    script(
        &m,
        "resp-cut",
        json!({"then": {"content": "one two three four five six",
                                           "cut_after_chunks": 3, "inter_chunk_delay_ms": 30}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "resp-cut", "gpt-x")).await;
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/responses", gw.base_url))
        .json(&json!({"model": "llm", "input": "count", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = sse_events(&resp.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "error",
            "response.failed",
        ]
    );
    for (i, (_, e)) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], i, "{e}");
    }
    let (_, failed) = &events[8];
    assert_eq!(failed["response"]["status"], "failed");
    assert_eq!(failed["response"]["error"]["code"], "server_error");
    assert_eq!(failed["response"]["error"]["type"], "stream_interrupted");
    assert_eq!(events[7].1["code"], "server_error");
}

/// An Anthropic source's signed thinking rides in the reasoning item's `encrypted_content`
/// and reaches Anthropic again, signature byte for byte, when the client hands the item back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_signature_is_handed_back_byte_exact() {
    let m = mock().await;
    for mode in ["nonstream", "stream"] {
        let sc = format!("resp-anth-{mode}");
        script(
            &m,
            &sc,
            json!({"then": {"content": ANSWER, "reasoning": REASONING}}),
        )
        .await;
        let p = "LLM__ANTHROPIC__1__";
        let mut env = vec![
            kv(&format!("{p}BASE_URL"), m.anthropic_base_url(&sc)),
            kv(&format!("{p}MODEL"), "claude-test"),
            kv(&format!("{p}API_KEY"), format!("sk-ant-{sc}")),
        ];
        no_cache(&mut env);
        let gw = gateway(env).await;
        let out = run_python(
            "responses_sdk.py",
            &[&gw.base_url, "llm", "reasoning", mode],
        )
        .await;
        let item = &out["turn1"]["output"][0];
        assert_eq!(item["type"], "reasoning", "{mode}: {out}");
        assert_eq!(
            item["summary"],
            json!([{"type": "summary_text", "text": REASONING}]),
            "{mode}"
        );
        assert!(
            item["encrypted_content"]
                .as_str()
                .is_some_and(|e| e.starts_with("pgw1.")),
            "{mode}: {item}"
        );
        assert_eq!(out["turn1"]["output_text"], ANSWER, "{mode}");
        let h = hits(&m, &sc).await;
        assert_eq!(h.len(), 2, "{mode}: {h:?}");
        assert_eq!(
            h[1]["body"]["messages"][1],
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": REASONING,
                 "signature": polygateway::mock::thinking_signature(REASONING)},
                {"type": "text", "text": ANSWER},
            ]}),
            "{mode}"
        );
    }
}
