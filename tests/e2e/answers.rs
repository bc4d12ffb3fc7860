//! Valid answers with no text (a refusal, a `content_filter` stop, a `length` stop after only
//! reasoning, `content: ""`, a legacy `function_call`) and the upstream fields the gateway
//! does not own (`logprobs`, `system_fingerprint`, `service_tier`, `function_call`), through
//! a real gateway, streamed and not: each answer reaches the client as the upstream gave it,
//! from one upstream hit, as a breaker success and a successful telemetry row.

use serde_json::{Value, json};

use crate::common::{gateway, kv, post_chat, source};
use polygateway_tests::{GatewayProcess, eventually, hits, mock, script, telemetry_rows};

/// The upstream's `logprobs` object, with number forms a re-encoding would change.
const LOGPROBS: &str = r#"{"content":[{"token":"Hi","logprob":-1.9361265e-07,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-1.9361265e-07,"bytes":[72,105]},{"token":"Hello","logprob":-15.50,"bytes":[72,101,108,108,111]}]}],"refusal":null}"#;
const FINGERPRINT: &str = r#""system_fingerprint":"fp_44709d6fcb""#;
const TIER: &str = r#""service_tier":"default""#;
/// How many answers of a kind each test sends per mode (more than the breaker needs to
/// open on failures with the default settings).
const ROUNDS: usize = 3;

/// One kind of answer: the upstream's non-streamed body and streamed chunks, what the
/// client must see (`content`, `refusal`, `reasoning`, `finish_reason`, `function_call`)
/// and the byte strings that must appear verbatim in both answers.
struct Case {
    scenario: &'static str,
    response: Value,
    chunks: Vec<Value>,
    want: Value,
    raw: Vec<String>,
}

/// An OpenAI completion object around `message`, with a fingerprint and a service tier.
fn completion(message: Value, finish: &str, choice_extra: Value) -> Value {
    let mut choice =
        json!({"index": 0, "message": message, "logprobs": null, "finish_reason": finish});
    if let Value::Object(extra) = choice_extra {
        choice.as_object_mut().unwrap().extend(extra);
    }
    json!({
        "id": "chatcmpl-up", "object": "chat.completion", "created": 1_700_000_000u64,
        "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_44709d6fcb",
        "service_tier": "default", "choices": [choice],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
    })
}

/// An OpenAI chunk object around `delta`.
fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1_700_000_000u64,
        "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_44709d6fcb",
        "service_tier": "default",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    })
}

/// The JSON text of `v` with `"logprobs":null` of choice 0 replaced by [`LOGPROBS`]'s
/// exact bytes.
fn with_logprobs(v: &Value) -> String {
    let text = v.to_string();
    assert!(text.contains(r#""logprobs":null"#));
    text.replacen(
        r#""logprobs":null"#,
        &format!(r#""logprobs":{LOGPROBS}"#),
        1,
    )
}

fn cases() -> Vec<Case> {
    let refusal = "I'm sorry, I can't help with that.";
    let common_raw = vec![FINGERPRINT.to_string(), TIER.to_string()];
    vec![
        Case {
            scenario: "refusal",
            response: completion(
                json!({"role": "assistant", "content": null, "refusal": refusal}),
                "stop",
                json!({}),
            ),
            chunks: vec![
                chunk(
                    json!({"role": "assistant", "content": null, "refusal": ""}),
                    None,
                ),
                chunk(json!({"refusal": "I'm sorry, "}), None),
                chunk(json!({"refusal": "I can't help with that."}), None),
                chunk(json!({}), Some("stop")),
            ],
            want: json!({"content": null, "refusal": refusal, "finish_reason": "stop"}),
            raw: common_raw.clone(),
        },
        Case {
            scenario: "filtered",
            response: completion(
                json!({"role": "assistant", "content": null}),
                "content_filter",
                json!({}),
            ),
            chunks: vec![
                chunk(json!({"role": "assistant", "content": ""}), None),
                chunk(json!({}), Some("content_filter")),
            ],
            want: json!({"content": null, "finish_reason": "content_filter"}),
            raw: common_raw.clone(),
        },
        Case {
            scenario: "length-reasoning",
            response: completion(
                json!({"role": "assistant", "content": "", "reasoning_content": "Let me think about"}),
                "length",
                json!({}),
            ),
            chunks: vec![
                chunk(json!({"role": "assistant", "content": ""}), None),
                chunk(
                    json!({"reasoning_content": "Let me ", "content": null}),
                    None,
                ),
                chunk(
                    json!({"reasoning_content": "think about", "content": null}),
                    None,
                ),
                chunk(json!({}), Some("length")),
            ],
            want: json!({"content": "", "reasoning": "Let me think about", "finish_reason": "length"}),
            raw: common_raw.clone(),
        },
        Case {
            scenario: "empty-text",
            response: completion(
                json!({"role": "assistant", "content": ""}),
                "stop",
                json!({}),
            ),
            chunks: vec![
                chunk(json!({"role": "assistant", "content": ""}), None),
                chunk(json!({}), Some("stop")),
            ],
            want: json!({"content": "", "finish_reason": "stop"}),
            raw: common_raw.clone(),
        },
        Case {
            scenario: "function-call",
            response: completion(
                json!({"role": "assistant", "content": null,
                       "function_call": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}),
                "function_call",
                json!({}),
            ),
            chunks: vec![
                chunk(
                    json!({"role": "assistant", "content": null,
                             "function_call": {"name": "get_weather", "arguments": ""}}),
                    None,
                ),
                chunk(json!({"function_call": {"arguments": "{\"city\":"}}), None),
                chunk(json!({"function_call": {"arguments": "\"Paris\"}"}}), None),
                chunk(json!({}), Some("function_call")),
            ],
            want: json!({"content": null, "finish_reason": "function_call",
                         "function_call": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}),
            raw: common_raw.clone(),
        },
        Case {
            scenario: "logprobs",
            response: serde_json::from_str(&with_logprobs(&completion(
                json!({"role": "assistant", "content": "Hi", "refusal": null}),
                "stop",
                json!({}),
            )))
            .unwrap(),
            chunks: vec![
                chunk(json!({"role": "assistant", "content": ""}), None),
                serde_json::from_str(&with_logprobs(&chunk(json!({"content": "Hi"}), None)))
                    .unwrap(),
                chunk(json!({}), Some("stop")),
            ],
            want: json!({"content": "Hi", "finish_reason": "stop"}),
            raw: {
                let mut r = common_raw.clone();
                r.push(format!(r#""logprobs":{LOGPROBS}"#));
                r
            },
        },
    ]
}

/// The texts of the chunks: the logprobs case must keep its exact bytes, so it is written
/// from the strings, not re-encoded from the `Value`.
fn chunk_texts(case: &Case) -> Vec<String> {
    case.chunks
        .iter()
        .map(|c| {
            if case.scenario == "logprobs" && c["choices"][0]["delta"]["content"] == "Hi" {
                with_logprobs(&chunk(json!({"content": "Hi"}), None))
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn response_text(case: &Case) -> String {
    if case.scenario == "logprobs" {
        with_logprobs(&completion(
            json!({"role": "assistant", "content": "Hi", "refusal": null}),
            "stop",
            json!({}),
        ))
    } else {
        case.response.to_string()
    }
}

/// What a client reads from a non-streamed answer, in the `want` shape.
fn read_completion(body: &Value) -> Value {
    let choice = &body["choices"][0];
    let message = &choice["message"];
    let mut got = json!({"content": message["content"], "finish_reason": choice["finish_reason"]});
    for (key, from) in [
        ("refusal", "refusal"),
        ("reasoning", "reasoning_content"),
        ("function_call", "function_call"),
    ] {
        if !message[from].is_null() {
            got[key] = message[from].clone();
        }
    }
    got
}

/// What a client assembles from a streamed answer, in the `want` shape (an answer whose
/// content never had text reads as `want`'s `null` or `""` alike: a stream has no `null`
/// content to send).
fn read_stream(body: &str) -> (Value, Vec<Value>) {
    let chunks: Vec<Value> = body
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    let (mut content, mut refusal, mut reasoning) = (String::new(), String::new(), String::new());
    let (mut name, mut args, mut finish, mut called) =
        (String::new(), String::new(), Value::Null, false);
    for c in &chunks {
        let Some(choice) = c["choices"].get(0) else {
            continue;
        };
        let d = &choice["delta"];
        content.push_str(d["content"].as_str().unwrap_or_default());
        refusal.push_str(d["refusal"].as_str().unwrap_or_default());
        reasoning.push_str(d["reasoning_content"].as_str().unwrap_or_default());
        if let Some(f) = d.get("function_call") {
            called = true;
            name.push_str(f["name"].as_str().unwrap_or_default());
            args.push_str(f["arguments"].as_str().unwrap_or_default());
        }
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].clone();
        }
    }
    let mut got = json!({"content": content, "finish_reason": finish});
    if !refusal.is_empty() {
        got["refusal"] = json!(refusal);
    }
    if !reasoning.is_empty() {
        got["reasoning"] = json!(reasoning);
    }
    if called {
        got["function_call"] = json!({"name": name, "arguments": args});
    }
    (got, chunks)
}

async fn healthz(gw: &GatewayProcess) -> Value {
    reqwest::get(format!("{}/healthz", gw.base_url))
        .await
        .expect("gateway reachable")
        .json()
        .await
        .expect("healthz json")
}

/// Every answer of `case`, `ROUNDS` times in each mode on a default scope: 200 with the
/// exact fields, one upstream hit per call, the breaker closed afterwards and every
/// telemetry row a success.
async fn check(case: Case) {
    let m = mock().await;
    script(
        &m,
        case.scenario,
        json!({"then": {"body": response_text(&case), "events": chunk_texts(&case)}}),
    )
    .await;
    let mut env = source(&m, "openai", 1, case.scenario, "gpt-4o");
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    let gw = gateway(env).await;
    let mut body = json!({"model": "llm", "messages": [{"role": "user", "content": "hi"}]});
    if case.scenario == "logprobs" {
        body["logprobs"] = json!(true);
        body["top_logprobs"] = json!(2);
    }
    if case.scenario == "function-call" {
        body["functions"] = json!([{"name": "get_weather", "parameters": {"type": "object"}}]);
    }
    let mut calls = Vec::new();
    for round in 0..ROUNDS {
        for stream in [false, true] {
            body["stream"] = json!(stream);
            let (status, headers, text) = post_chat(&gw, body.clone()).await;
            let what = format!("{} stream={stream} round={round}", case.scenario);
            assert_eq!(status, 200, "{what}: {text}");
            calls.push(headers["x-pgw-call-id"].to_str().unwrap().to_string());
            let got = if stream {
                let (got, chunks) = read_stream(&text);
                assert!(text.ends_with("data: [DONE]\n\n"), "{what}: {text}");
                // The top-level fields are on the chunks they came with (the finish one too).
                let last = chunks
                    .iter()
                    .rev()
                    .find(|c| !c["choices"][0]["finish_reason"].is_null());
                assert_eq!(
                    last.unwrap()["system_fingerprint"],
                    "fp_44709d6fcb",
                    "{what}: {text}"
                );
                got
            } else {
                read_completion(&serde_json::from_str(&text).unwrap())
            };
            let mut want = case.want.clone();
            if stream && want["content"].is_null() {
                want["content"] = json!("");
            }
            assert_eq!(got, want, "{what}: {text}");
            for raw in &case.raw {
                assert!(text.contains(raw.as_str()), "{what}: {raw} not in {text}");
            }
            // The gateway's own null is gone where the upstream sent its own logprobs.
            if case.scenario == "logprobs" && !stream {
                assert!(!text.contains(r#""logprobs":null"#), "{what}: {text}");
            }
        }
    }
    assert_eq!(
        hits(&m, case.scenario).await.len(),
        2 * ROUNDS,
        "one upstream hit per call"
    );
    let health = healthz(&gw).await;
    let src = &health["scopes"]["LLM"]["sources"][0];
    assert_eq!(src["breaker"], "closed", "{health}");
    // One attempt row and one terminal row per call, all successes.
    let rows = eventually(20, || async {
        let rows = telemetry_rows(
            &gw.telemetry_db(),
            &["logical_call_id", "event", "error_type"],
        )
        .await;
        (rows.len() >= 4 * ROUNDS).then_some(rows)
    })
    .await;
    assert_eq!(rows.len(), 4 * ROUNDS, "{rows:?}");
    for r in &rows {
        assert!(
            calls.iter().any(|c| r["logical_call_id"] == c.as_str()),
            "{r}"
        );
        assert_eq!(r["error_type"], Value::Null, "{r}");
    }
}

#[tokio::test]
async fn a_refusal_reaches_the_client_as_given() {
    check(cases().remove(0)).await;
}

#[tokio::test]
async fn a_content_filter_stop_reaches_the_client_as_given() {
    check(cases().remove(1)).await;
}

#[tokio::test]
async fn a_length_stop_after_only_reasoning_reaches_the_client_as_given() {
    check(cases().remove(2)).await;
}

#[tokio::test]
async fn an_empty_content_reaches_the_client_as_given() {
    check(cases().remove(3)).await;
}

#[tokio::test]
async fn a_legacy_function_call_reaches_the_client_as_given() {
    check(cases().remove(4)).await;
}

#[tokio::test]
async fn logprobs_reach_the_client_byte_for_byte() {
    check(cases().remove(5)).await;
}

/// The cut that is still an error: a stream that ends (with `[DONE]`) with no finish reason
/// and nothing in it is retried on another source.
#[tokio::test]
async fn a_stream_with_nothing_and_no_finish_is_still_an_empty_completion() {
    let m = mock().await;
    let empty = vec![chunk(json!({"role": "assistant", "content": ""}), None).to_string()];
    script(&m, "nothing", json!({"then": {"events": empty}})).await;
    let mut env = source(&m, "openai", 1, "nothing", "a");
    env.extend(source(&m, "openai", 2, "fine", "b"));
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.001"));
    let gw = gateway(env).await;
    let body =
        json!({"model": "llm", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let (status, headers, text) = post_chat(&gw, body).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["x-pgw-source"], "openai-2", "{text}");
    assert_eq!(hits(&m, "nothing").await.len(), 1);
    assert_eq!(hits(&m, "fine").await.len(), 1);
}

/// The official OpenAI Python SDK reads a refusal as `message.refusal` (and `delta.refusal`
/// streamed) with `content` `None`, and the upstream's `logprobs`, `system_fingerprint` and
/// `service_tier` as the upstream sent them.
#[tokio::test]
async fn the_openai_python_sdk_reads_a_refusal_and_the_upstream_fields() {
    let refusal = "I'm sorry, I can't help with that.";
    let logprobs = r#"{"content":null,"refusal":[{"token":"I'm","logprob":-1.9361265e-07,"bytes":[73,39,109],"top_logprobs":[]}]}"#;
    let body = completion(
        json!({"role": "assistant", "content": null, "refusal": refusal}),
        "stop",
        json!({}),
    )
    .to_string()
    .replacen(
        r#""logprobs":null"#,
        &format!(r#""logprobs":{logprobs}"#),
        1,
    );
    let events = vec![
        chunk(
            json!({"role": "assistant", "content": null, "refusal": ""}),
            None,
        )
        .to_string(),
        chunk(json!({"refusal": refusal}), None)
            .to_string()
            .replacen(
                r#""logprobs":null"#,
                &format!(r#""logprobs":{logprobs}"#),
                1,
            ),
        chunk(json!({}), Some("stop")).to_string(),
    ];
    let m = mock().await;
    script(
        &m,
        "sdk-refusal",
        json!({"then": {"body": body, "events": events}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "sdk-refusal", "gpt-4o")).await;
    let token = json!([{"token": "I'm", "logprob": -1.9361265e-07, "bytes": [73, 39, 109], "top_logprobs": []}]);
    for mode in ["nonstream", "stream"] {
        let out =
            polygateway_tests::run_python("sdk_answers.py", &[&gw.base_url, "llm", mode]).await;
        assert_eq!(out["content"], Value::Null, "{mode}: {out}");
        assert_eq!(out["refusal"], refusal, "{mode}: {out}");
        assert_eq!(out["finish_reason"], "stop", "{mode}: {out}");
        assert_eq!(out["system_fingerprint"], "fp_44709d6fcb", "{mode}: {out}");
        assert_eq!(out["service_tier"], "default", "{mode}: {out}");
        assert_eq!(out["logprobs"], token, "{mode}: {out}");
    }
    assert_eq!(hits(&m, "sdk-refusal").await.len(), 2);
    let h = hits(&m, "sdk-refusal").await;
    assert_eq!(h[0]["body"]["logprobs"], json!(true));
    assert_eq!(h[0]["body"]["top_logprobs"], json!(1));
}

/// A cached answer is replayed with its refusal and upstream fields, to a streaming and a
/// non-streaming caller alike.
#[tokio::test]
async fn a_cached_answer_keeps_its_refusal_and_upstream_fields() {
    let case = cases().remove(0);
    let m = mock().await;
    let body = response_text(&case).replacen(
        r#""logprobs":null"#,
        &format!(r#""logprobs":{LOGPROBS}"#),
        1,
    );
    script(&m, "cached", json!({"then": {"body": body}})).await;
    let mut env = source(&m, "openai", 1, "cached", "gpt-4o");
    env.extend([
        kv("PGW_CACHE_BACKEND", "memory"),
        kv("LLM__CACHE__TTL_S", 60),
    ]);
    let gw = gateway(env).await;
    let req =
        json!({"model": "llm", "messages": [{"role": "user", "content": "hi"}], "stream": false});
    let (status, _, first) = post_chat(&gw, req.clone()).await;
    assert_eq!(status, 200, "{first}");
    // The store may land just after the first answer.
    let again = eventually(10, || {
        let req = req.clone();
        let gw = &gw;
        async move {
            let (status, headers, again) = post_chat(gw, req).await;
            assert_eq!(status, 200, "{again}");
            (headers["x-pgw-cache-hit"] == "true").then_some(again)
        }
    })
    .await;
    let mut streamed = req;
    streamed["stream"] = json!(true);
    let (status, headers, stream) = post_chat(&gw, streamed).await;
    assert_eq!(status, 200, "{stream}");
    assert_eq!(headers["x-pgw-cache-hit"], "true");
    assert_eq!(hits(&m, "cached").await.len(), 1);
    for text in [&first, &again, &stream] {
        for raw in [
            FINGERPRINT.to_string(),
            TIER.to_string(),
            format!(r#""logprobs":{LOGPROBS}"#),
        ] {
            assert!(text.contains(raw.as_str()), "{raw} not in {text}");
        }
    }
    let cached: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(read_completion(&cached), case.want);
    let (got, _) = read_stream(&stream);
    assert_eq!(
        got,
        json!({"content": "", "refusal": "I'm sorry, I can't help with that.", "finish_reason": "stop"})
    );
}
