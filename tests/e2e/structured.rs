//! Structured output end to end (docs/structured-output.md): a real gateway, the mock
//! upstream scripting the model's raw answer text, the wasm strategy components.
//!
//! - repair without a re-ask: fenced JSON, trailing commas, a truncated object — one upstream
//!   hit each;
//! - the bounded re-ask: a schema violation is re-asked exactly once with the validation
//!   error quoted in the new messages; a second failure is a 422 carrying the raw text; with
//!   `MAX_RETRIES=0` there is no re-ask;
//! - prevention: `native-schema` sends `response_format` to openai (native json_schema) and
//!   falls back to prompt instructions + repair for deepseek (no native support);
//! - strategy choice: per scope and per call (`x-pgw-structured-strategy`; unknown → 400);
//! - streaming: the caller receives only the validated JSON;
//! - the embedded API returns the parsed value beside the text;
//! - conformance: `tests/fixtures/strategies/*.json` against every first-party component in
//!   the real wasm runtime;
//! - contract enforcement: a deliberately rogue strategy built from
//!   `tests/fixtures/strategies/rogue-strategy` and loaded from its `.wasm` file — its native
//!   schema for a provider without support is dropped, its traps and runaway loops are 502
//!   `plugin_fault`, its non-JSON "repairs" are repair failures.

use std::sync::{Arc, OnceLock};

use polygateway::config::settings_from_vars;
use polygateway::plugin::{
    BUILTIN_STRATEGIES, Capabilities, JsonTarget, PluginEngine, PluginLimits, RepairError,
    ResponseFormat, StrategyComponent, ThinkingStyle, builtin_strategy_bytes,
};
use polygateway::{ChatRequest, Gateway, GatewayError};
use serde_json::{Value, json};

use crate::common::{gateway, kv, source};
use polygateway_tests::{GatewayProcess, eventually, fixture, hits, mock, script, telemetry_rows};

/// The schema of every call here: a person with a name and a non-negative integer age.
fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["name", "age"]
    })
}

fn structured_body(model: &str, stream: bool) -> Value {
    let mut b = json!({
        "model": model,
        "messages": [{"role": "user", "content": "Describe Ada Lovelace as a person."}],
        "stream": stream,
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "person", "schema": person_schema()}},
    });
    if stream {
        b["stream_options"] = json!({"include_usage": true});
    }
    b
}

/// POST a chat completion with extra headers; status and body.
async fn post(gw: &GatewayProcess, body: &Value, headers: &[(&str, &str)]) -> (u16, String) {
    let mut rb = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .json(body);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let resp = rb.send().await.expect("gateway reachable");
    let status = resp.status().as_u16();
    (status, resp.text().await.expect("body"))
}

fn content_of(body: &str) -> Value {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let text = v["choices"][0]["message"]["content"].as_str().unwrap();
    serde_json::from_str(text).unwrap_or_else(|e| panic!("content is not JSON ({e}): {text}"))
}

fn messages_of(hit: &Value) -> &Vec<Value> {
    hit["body"]["messages"].as_array().unwrap()
}

/// Every message's content of a recorded request, joined.
fn all_text(hit: &Value) -> String {
    messages_of(hit)
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn fenced_trailing_comma_and_truncated_answers_are_repaired_without_a_reask() {
    let m = mock().await;
    let cases = [
        (
            "Here is the JSON:\n```json\n{\"name\": \"Ada\", \"age\": 36}\n```",
            json!({"name": "Ada", "age": 36}),
        ),
        (
            "{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"math\", \"poetry\",],}",
            json!({"name": "Ada", "age": 36, "tags": ["math", "poetry"]}),
        ),
        (
            "{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"math\", \"poe",
            json!({"name": "Ada", "age": 36, "tags": ["math", "poe"]}),
        ),
    ];
    let steps: Vec<Value> = cases
        .iter()
        .map(|(raw, _)| json!({"content": raw}))
        .collect();
    script(&m, "repair", json!({ "steps": steps })).await;
    let gw = gateway(source(&m, "openai", 1, "repair", "gpt-x")).await;
    for (i, (raw, want)) in cases.iter().enumerate() {
        let (status, body) = post(&gw, &structured_body("llm", false), &[]).await;
        assert_eq!(status, 200, "{raw}: {body}");
        assert_eq!(content_of(&body), *want, "{raw}");
        let h = hits(&m, "repair").await;
        assert_eq!(h.len(), i + 1, "{raw}: repaired without a re-ask");
        // json-repair (the default) asks in the prompt and sends no response_format.
        let sent = &h[i];
        assert!(sent["body"].get("response_format").is_none(), "{sent}");
        let sys = &messages_of(sent)[0];
        assert_eq!(sys["role"], "system");
        assert!(
            sys["content"].as_str().unwrap().contains("\"minimum\":0"),
            "the instructions quote the schema: {sys}"
        );
        assert_eq!(
            messages_of(sent).len(),
            2,
            "instructions + the caller's message"
        );
    }
}

#[tokio::test]
async fn a_schema_violation_is_reasked_once_with_the_validation_error() {
    let m = mock().await;
    script(
        &m,
        "violate",
        json!({"steps": [
            {"content": "{\"name\": \"Ada\", \"age\": \"thirty-six\"}"},
            {"content": "{\"name\": \"Ada\", \"age\": 36}"}
        ]}),
    )
    .await;
    let mut env = source(&m, "openai", 1, "violate", "gpt-x");
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    let gw = gateway(env).await;
    let (status, body) = post(&gw, &structured_body("llm", false), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(content_of(&body), json!({"name": "Ada", "age": 36}));
    // The re-ask is a real attempt: its own attempt row, counted in the call's attempts.
    let call_id = serde_json::from_str::<Value>(&body).unwrap()["id"]
        .as_str()
        .unwrap()
        .trim_start_matches("chatcmpl-")
        .to_string();
    let db = gw.telemetry_db();
    let rows = eventually(20, || async {
        let rows: Vec<Value> = telemetry_rows(&db, &["logical_call_id", "event", "attempts"])
            .await
            .into_iter()
            .filter(|r| r["logical_call_id"] == call_id.as_str())
            .collect();
        (rows.len() >= 3).then_some(rows)
    })
    .await;
    let mut events: Vec<&str> = rows.iter().map(|r| r["event"].as_str().unwrap()).collect();
    events.sort();
    assert_eq!(events, ["attempt", "attempt", "terminal_success"]);
    let terminal = rows
        .iter()
        .find(|r| r["event"] == "terminal_success")
        .unwrap();
    assert_eq!(terminal["attempts"], 2);
    let h = hits(&m, "violate").await;
    assert_eq!(h.len(), 2, "exactly one re-ask");
    let first = messages_of(&h[0]);
    let second = messages_of(&h[1]);
    assert_eq!(second.len(), first.len() + 2);
    assert_eq!(
        &second[..first.len()],
        &first[..],
        "the re-ask extends the prepared messages"
    );
    assert_eq!(
        second[first.len()],
        json!({"role": "assistant", "content": "{\"name\": \"Ada\", \"age\": \"thirty-six\"}"})
    );
    let feedback = &second[first.len() + 1];
    assert_eq!(feedback["role"], "user");
    let text = feedback["content"].as_str().unwrap();
    assert!(
        text.contains("/age") && text.contains("\"thirty-six\" is not of type \"integer\""),
        "the feedback quotes the validation error: {text}"
    );
}

#[tokio::test]
async fn a_second_failure_is_a_422_with_the_raw_text() {
    let m = mock().await;
    script(
        &m,
        "twice",
        json!({"steps": [
            {"content": "{\"name\": \"Ada\", \"age\": -1}"},
            {"content": "```json\n{\"name\": \"Ada\"}\n```"},
            {"content": "{\"name\": \"Ada\", \"age\": 36}"}
        ]}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "twice", "gpt-x")).await;
    let (status, body) = post(&gw, &structured_body("llm", false), &[]).await;
    assert_eq!(status, 422, "{body}");
    let err: Value = serde_json::from_str(&body).unwrap();
    let err = &err["error"];
    assert_eq!(err["type"], "result_invalid");
    assert_eq!(err["raw_text"], "```json\n{\"name\": \"Ada\"}\n```");
    assert_eq!(err["repair_error"], Value::Null);
    assert_eq!(err["reasks"], 1);
    assert_eq!(err["strategy"], "json-repair");
    let errors = err["validation_errors"].as_array().unwrap();
    assert!(
        errors[0]
            .as_str()
            .unwrap()
            .contains("\"age\" is a required property"),
        "{errors:?}"
    );
    assert_eq!(hits(&m, "twice").await.len(), 2, "one re-ask, then give up");

    // Unrepairable text: the 422 carries the repair error instead.
    script(
        &m,
        "prose",
        json!({"then": {"content": "I would rather not say."}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "prose", "gpt-x")).await;
    let (status, body) = post(&gw, &structured_body("llm", false), &[]).await;
    assert_eq!(status, 422, "{body}");
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["error"]["raw_text"], "I would rather not say.");
    assert!(
        err["error"]["repair_error"]
            .as_str()
            .unwrap()
            .contains("no JSON")
    );
    let h = hits(&m, "prose").await;
    assert_eq!(h.len(), 2);
    assert!(all_text(&h[1]).contains("Your previous answer is not valid JSON"));
}

#[tokio::test]
async fn with_max_retries_zero_there_is_no_reask() {
    let m = mock().await;
    script(
        &m,
        "once",
        json!({"then": {"content": "{\"name\": \"Ada\", \"age\": \"old\"}"}}),
    )
    .await;
    let mut env = source(&m, "openai", 1, "once", "gpt-x");
    env.push(kv("LLM__STRUCTURED__MAX_RETRIES", 0));
    let gw = gateway(env).await;
    let (status, body) = post(&gw, &structured_body("llm", false), &[]).await;
    assert_eq!(status, 422, "{body}");
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["error"]["reasks"], 0);
    assert_eq!(
        err["error"]["raw_text"],
        "{\"name\": \"Ada\", \"age\": \"old\"}"
    );
    assert_eq!(hits(&m, "once").await.len(), 1);
}

#[tokio::test]
async fn native_schema_goes_native_to_openai_and_falls_back_for_deepseek() {
    let m = mock().await;
    script(
        &m,
        "oa",
        json!({"then": {"content": "{\"name\": \"Ada\", \"age\": 36}"}}),
    )
    .await;
    // DeepSeek gets no native schema: its answer comes back fenced, with a trailing comma.
    script(
        &m,
        "ds",
        json!({"then": {"content": "```json\n{\"name\": \"Ada\", \"age\": 36,}\n```"}}),
    )
    .await;
    let mut env = source(&m, "openai", 1, "oa", "gpt-x");
    env.push(kv("LLM__STRUCTURED__STRATEGY", "native-schema"));
    env.extend([
        kv("DS__DEEPSEEK__1__BASE_URL", m.base_url("ds")),
        kv("DS__DEEPSEEK__1__MODEL", "deepseek-chat"),
        kv("DS__DEEPSEEK__1__API_KEY", "sk-ds"),
        kv("DS__SELECTOR", "round-robin"),
    ]);
    let gw = gateway(env).await;

    // Scope default: native-schema.
    let (status, body) = post(&gw, &structured_body("llm", false), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(content_of(&body), json!({"name": "Ada", "age": 36}));
    let h = hits(&m, "oa").await;
    assert_eq!(h.len(), 1);
    assert_eq!(
        h[0]["body"]["response_format"],
        json!({"type": "json_schema",
               "json_schema": {"name": "person", "schema": person_schema(), "strict": false}})
    );
    assert_eq!(
        messages_of(&h[0]).len(),
        1,
        "no prompt instructions next to a native schema"
    );

    // Per call: native-schema on a deepseek scope falls back to instructions + repair.
    let headers = [("x-pgw-structured-strategy", "native-schema")];
    let (status, body) = post(&gw, &structured_body("ds", false), &headers).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(content_of(&body), json!({"name": "Ada", "age": 36}));
    let h = hits(&m, "ds").await;
    assert_eq!(h.len(), 1, "repaired without a re-ask");
    assert!(
        h[0]["body"].get("response_format").is_none(),
        "{}",
        h[0]["body"]
    );
    let sys = &messages_of(&h[0])[0];
    assert_eq!(sys["role"], "system");
    assert!(
        sys["content"].as_str().unwrap().contains("JSON Schema"),
        "{sys}"
    );
}

#[tokio::test]
async fn an_unknown_strategy_header_is_a_400_naming_it() {
    let m = mock().await;
    let gw = gateway(source(&m, "openai", 1, "unknown", "gpt-x")).await;
    for body in [
        structured_body("llm", false),
        crate::common::chat_body(false),
    ] {
        let (status, text) =
            post(&gw, &body, &[("x-pgw-structured-strategy", "yaml-please")]).await;
        assert_eq!(status, 400, "{text}");
        let err: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(err["error"]["param"], "x-pgw-structured-strategy");
        assert!(
            err["error"]["message"]
                .as_str()
                .unwrap()
                .contains("yaml-please")
        );
    }
    // A schema that does not compile is a 400 naming the field.
    let mut body = structured_body("llm", false);
    body["response_format"]["json_schema"]["schema"] = json!({"type": 12});
    let (status, text) = post(&gw, &body, &[]).await;
    assert_eq!(status, 400, "{text}");
    let err: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(err["error"]["param"], "response_format.json_schema.schema");
    assert_eq!(hits(&m, "unknown").await.len(), 0);
}

#[tokio::test]
async fn a_per_call_strategy_unwraps_a_tool_call_envelope() {
    let m = mock().await;
    script(
        &m,
        "env",
        json!({"then": {"content": "{\"name\": \"person\", \"parameters\": {\"name\": \"Ada\", \"age\": 36}}"}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "env", "gpt-x")).await;
    let headers = [("x-pgw-structured-strategy", "unwrap-parameters")];
    let (status, body) = post(&gw, &structured_body("llm", false), &headers).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(content_of(&body), json!({"name": "Ada", "age": 36}));
    assert_eq!(hits(&m, "env").await.len(), 1);
}

#[tokio::test]
async fn a_streamed_structured_call_receives_only_the_validated_json() {
    let m = mock().await;
    script(
        &m,
        "stream",
        json!({"steps": [
            {"content": "{\"name\": \"Ada\", \"age\": \"unknown\"}", "chunks": 4},
            {"content": "```json\n{\"name\": \"Ada\", \"age\": 36,}\n```", "chunks": 5}
        ]}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "stream", "gpt-x")).await;
    let (status, body) = post(&gw, &structured_body("llm", true), &[]).await;
    assert_eq!(status, 200, "{body}");
    let mut content = String::new();
    let mut finish = None;
    let mut usage = None;
    for line in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if line == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(line).unwrap();
        assert!(chunk.get("error").is_none(), "{body}");
        if let Some(c) = chunk["choices"][0]["delta"]["content"].as_str() {
            content.push_str(c);
        }
        if let Some(f) = chunk["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
        if !chunk["usage"].is_null() {
            usage = Some(chunk["usage"].clone());
        }
    }
    let value: Value = serde_json::from_str(&content)
        .unwrap_or_else(|e| panic!("the streamed content is one JSON text ({e}): {body}"));
    assert_eq!(
        value,
        json!({"name": "Ada", "age": 36}),
        "only the validated JSON"
    );
    assert!(
        !body.contains("unknown"),
        "the invalid first answer never reached the client"
    );
    assert_eq!(finish.as_deref(), Some("stop"));
    assert!(usage.is_some(), "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    assert_eq!(hits(&m, "stream").await.len(), 2);
}

#[tokio::test]
async fn the_embedded_api_returns_the_parsed_value_beside_the_text() {
    let m = mock().await;
    script(
        &m,
        "emb",
        json!({"then": {"content": "```json\n{'name': 'Ada', 'age': 36}\n```"}}),
    )
    .await;
    let mut vars = source(&m, "openai", 1, "emb", "gpt-x");
    vars.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    let gw = Gateway::from_settings(settings_from_vars(vars).unwrap())
        .await
        .unwrap();
    let mut req = ChatRequest::user("llm", "Describe Ada Lovelace.");
    req.stream = false;
    req.overlay.insert(
        "response_format".into(),
        json!({"type": "json_schema", "json_schema": {"name": "person", "schema": person_schema()}}),
    );
    let r = gw.chat(req.clone()).await.unwrap();
    assert_eq!(r.structured, Some(json!({"name": "Ada", "age": 36})));
    let reparsed: Value = serde_json::from_str(&r.content).unwrap();
    assert_eq!(Some(reparsed), r.structured);

    // A call that asks for no JSON has no structured value; an unknown strategy is refused.
    req.overlay.remove("response_format");
    assert_eq!(gw.chat(req.clone()).await.unwrap().structured, None);
    req.structured_strategy = Some("nope".into());
    match gw.chat(req).await {
        Err(GatewayError::InvalidRequest { param, .. }) => {
            assert_eq!(param.as_deref(), Some("x-pgw-structured-strategy"));
        }
        other => panic!("{other:?}"),
    }
}

// ---- Strategy conformance: the fixtures against the wasm components ----

/// The first-party strategies, loaded once for the whole test binary.
fn strategies() -> &'static [(String, Arc<StrategyComponent>)] {
    static LOADED: OnceLock<Vec<(String, Arc<StrategyComponent>)>> = OnceLock::new();
    LOADED.get_or_init(|| {
        let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
        BUILTIN_STRATEGIES
            .iter()
            .map(|name| {
                let bytes = builtin_strategy_bytes(name).unwrap();
                let c =
                    StrategyComponent::load(&engine, &format!("builtin:{name}"), bytes).unwrap();
                assert_eq!(c.name(), *name);
                (name.to_string(), c)
            })
            .collect()
    })
}

fn strategy(name: &str) -> &'static Arc<StrategyComponent> {
    &strategies().iter().find(|(n, _)| n == name).unwrap().1
}

fn load_fixture(name: &str) -> Value {
    let path = fixture(&format!("strategies/{name}"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn json_target(v: &Value) -> JsonTarget {
    JsonTarget {
        name: v["name"].as_str().unwrap().to_string(),
        schema_json: (!v["schema"].is_null()).then(|| v["schema"].to_string()),
        strict: v["strict"].as_bool().unwrap(),
    }
}

fn names(fx: &Value) -> Vec<String> {
    fx["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn check_repair_fixture(file: &str) -> usize {
    let fx = load_fixture(file);
    let target = json_target(&fx["target"]);
    let mut checked = 0;
    for name in names(&fx) {
        let s = strategy(&name);
        for case in fx["repair"].as_array().unwrap() {
            let note = &case["note"];
            let raw = case["raw"].as_str().unwrap();
            let expect = match case.get("expect-by-strategy") {
                Some(by) => &by[&name],
                None => &case["expect"],
            };
            let got = s.repair(raw, &target).unwrap();
            match (expect, &got) {
                (e, Ok(text)) if e.get("text").is_some() => {
                    assert_eq!(text, e["text"].as_str().unwrap(), "{name}: {note}");
                }
                (e, Ok(text)) if e.get("json").is_some() => {
                    let v: Value = serde_json::from_str(text)
                        .unwrap_or_else(|err| panic!("{name}: {note}: not JSON ({err}): {text}"));
                    assert_eq!(v, e["json"], "{name}: {note}");
                }
                (e, Err(RepairError::Empty)) if e["error"] == "empty" => {}
                (e, Err(RepairError::Unrecoverable(m))) if e["error"] == "unrecoverable" => {
                    assert!(!m.is_empty(), "{name}: {note}: the error says why");
                }
                (e, got) => panic!("{name}: {note}: expected {e}, got {got:?}"),
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn strategy_conformance_repair_fixtures() {
    let n =
        check_repair_fixture("repair-common.json") + check_repair_fixture("repair-envelope.json");
    assert!(n >= 60, "{n} cases checked");
}

#[test]
fn strategy_conformance_prepare_fixture() {
    let fx = load_fixture("prepare.json");
    for case in fx["prepare"].as_array().unwrap() {
        let note = &case["note"];
        let target = json_target(&fx["targets"][case["target"].as_str().unwrap()]);
        let caps = Capabilities {
            streaming: true,
            native_json_schema: case["native-json-schema"].as_bool().unwrap(),
            thinking: ThinkingStyle::None,
            prefill_continuation: false,
            chat: true,
            embedding: false,
            ocr: false,
            audio: false,
        };
        for name in names(&fx) {
            let want = &case["expect"][&name];
            let p = strategy(&name).prepare(&target, &caps).unwrap();
            let format = match &p.response_format {
                None => Value::Null,
                Some(ResponseFormat::JsonObject) => json!("json-object"),
                Some(ResponseFormat::JsonSchema(s)) => {
                    assert_eq!(s.name, target.name, "{name}: {note}");
                    assert_eq!(
                        Some(&s.schema_json),
                        target.schema_json.as_ref(),
                        "{name}: {note}"
                    );
                    assert_eq!(s.strict, target.strict, "{name}: {note}");
                    json!("json-schema")
                }
            };
            assert_eq!(format, want["response-format"], "{name}: {note}");
            let instructions = p.instructions.as_deref().unwrap_or_default();
            assert_eq!(
                !instructions.is_empty(),
                want["instructions"].as_bool().unwrap(),
                "{name}: {note}"
            );
            if !instructions.is_empty() {
                assert!(
                    instructions.contains("JSON"),
                    "{name}: {note}: {instructions}"
                );
                if let Some(schema) = &target.schema_json {
                    assert!(instructions.contains(schema.as_str()), "{name}: {note}");
                }
            }
        }
    }
}

#[tokio::test]
async fn the_openai_python_sdk_parses_a_repaired_answer_into_its_pydantic_model() {
    let m = mock().await;
    // The model ignores the strict schema's spirit: fenced, single-quoted, trailing comma.
    script(
        &m,
        "sdk-parse",
        json!({"then": {"content": "```json\n{'name': 'Ada Lovelace', 'age': 36,}\n```"}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "sdk-parse", "gpt-x")).await;
    let out = polygateway_tests::run_python("sdk_structured.py", &[&gw.base_url, "llm"]).await;
    assert_eq!(
        out["parsed"],
        json!({"name": "Ada Lovelace", "age": 36}),
        "{out}"
    );
    assert_eq!(out["refusal"], Value::Null);
    let h = hits(&m, "sdk-parse").await;
    assert_eq!(h.len(), 1);
    // The SDK asked for a strict json_schema named after the model; json-repair (the scope
    // default) turned it into prompt instructions.
    let sys = &messages_of(&h[0])[0];
    assert!(
        sys["content"].as_str().unwrap().contains("\"Person\""),
        "{sys}"
    );
}

#[tokio::test]
async fn only_a_validated_answer_is_cached() {
    let m = mock().await;
    script(
        &m,
        "cached",
        json!({"steps": [
            {"content": "{\"name\": \"Ada\", \"age\": \"thirty-six\"}"},
            {"content": "```json\n{\"name\": \"Ada\", \"age\": 36}\n```"}
        ], "then": {"content": "{\"name\": \"Someone else\", \"age\": 1}"}}),
    )
    .await;
    script(&m, "refused", json!({"then": {"content": "no JSON today"}})).await;
    let mut env = source(&m, "openai", 1, "cached", "gpt-x");
    env.extend([
        kv("PGW_CACHE_BACKEND", "memory"),
        kv("LLM__CACHE__TTL_S", 60),
        kv("NOPE__OPENAI__1__BASE_URL", m.base_url("refused")),
        kv("NOPE__OPENAI__1__MODEL", "gpt-x"),
        kv("NOPE__OPENAI__1__API_KEY", "sk-test"),
        kv("NOPE__CACHE__TTL_S", 60),
        kv("NOPE__SELECTOR", "round-robin"),
    ]);
    let gw = gateway(env).await;
    let call = |model: &'static str| {
        let body = structured_body(model, false);
        let url = format!("{}/v1/chat/completions", gw.base_url);
        async move {
            let resp = reqwest::Client::new()
                .post(url)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let hit = resp
                .headers()
                .get("x-pgw-cache-hit")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            (status, hit, resp.text().await.unwrap())
        }
    };
    // The bad first answer is re-asked; the validated second one is what gets stored.
    let (status, hit, body) = call("llm").await;
    assert_eq!((status, hit.as_str()), (200, "false"), "{body}");
    assert_eq!(content_of(&body), json!({"name": "Ada", "age": 36}));
    assert_eq!(hits(&m, "cached").await.len(), 2);
    let (status, hit, again) = call("llm").await;
    assert_eq!((status, hit.as_str()), (200, "true"), "{again}");
    assert_eq!(content_of(&again), json!({"name": "Ada", "age": 36}));
    assert_eq!(hits(&m, "cached").await.len(), 2, "served from the cache");

    // A call the ladder gave up on is never stored: the same call goes upstream again.
    for round in 1..=2 {
        let (status, _, body) = call("nope").await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(hits(&m, "refused").await.len(), 2 * round);
    }
}

/// Build `tests/fixtures/strategies/rogue-strategy` for `wasm32-wasip2` (release, `--locked`)
/// into `$CARGO_TARGET_DIR/rogue-strategy` when the variable is set (a reusable cache), else
/// into `scratch`, with the host's flags removed as `host/build.rs` does. Returns the
/// component's path.
async fn build_rogue_strategy(scratch: &std::path::Path) -> std::path::PathBuf {
    let target_dir = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => std::path::PathBuf::from(d).join("rogue-strategy"),
        None => scratch.to_path_buf(),
    };
    polygateway_tests::build_guest_component(
        &fixture("strategies/rogue-strategy/Cargo.toml"),
        &target_dir,
        "rogue_strategy",
    )
    .await
}

#[tokio::test]
async fn a_strategy_from_a_file_is_held_to_the_contract() {
    let scratch = tempfile::tempdir().unwrap();
    let wasm = build_rogue_strategy(scratch.path()).await;
    let m = mock().await;
    script(
        &m,
        "rogue-ds",
        json!({"then": {"content": "{\"name\": \"Ada\", \"age\": 36}"}}),
    )
    .await;
    script(
        &m,
        "rogue-oa",
        json!({"steps": [
            {"content": "{\"name\": \"Ada\", \"age\": 36}"},
            {"content": "TRAP"},
            {"content": "LOOP"},
            {"content": "NOTJSON"},
            {"content": "NOTJSON"}
        ], "then": {"content": "{\"name\": \"Ada\", \"age\": 36}"}}),
    )
    .await;
    // DS: deepseek (no native schema) with the rogue strategy as the scope default. LLM:
    // openai with json-repair, the rogue strategy picked per call by its describe name.
    let mut env = source(&m, "openai", 1, "rogue-oa", "gpt-x");
    env.extend([
        kv("DS__DEEPSEEK__1__BASE_URL", m.base_url("rogue-ds")),
        kv("DS__DEEPSEEK__1__MODEL", "deepseek-chat"),
        kv("DS__DEEPSEEK__1__API_KEY", "sk-ds"),
        kv("DS__SELECTOR", "round-robin"),
        kv("DS__STRUCTURED__STRATEGY", wasm.display()),
        kv("PGW_PLUGIN_TIMEOUT_MS", 200),
    ]);
    let gw = gateway(env).await;

    // The native schema it proposes for deepseek is dropped by the host.
    let (status, body) = post(&gw, &structured_body("ds", false), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(content_of(&body), json!({"name": "Ada", "age": 36}));
    let h = hits(&m, "rogue-ds").await;
    assert!(
        h[0]["body"].get("response_format").is_none(),
        "{}",
        h[0]["body"]
    );

    // Picked per call on an openai scope, whose capabilities allow the native schema.
    let rogue = [("x-pgw-structured-strategy", "rogue-strategy")];
    let (status, body) = post(&gw, &structured_body("llm", false), &rogue).await;
    assert_eq!(status, 200, "{body}");
    let h = hits(&m, "rogue-oa").await;
    assert_eq!(h[0]["body"]["response_format"]["type"], "json_schema");

    // A trap and a runaway loop in `repair` fail the call with 502 plugin_fault.
    for what in ["trap", "time budget"] {
        let (status, body) = post(&gw, &structured_body("llm", false), &rogue).await;
        assert_eq!(status, 502, "{what}: {body}");
        let err: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(err["error"]["type"], "plugin_fault", "{what}");
        if what == "time budget" {
            assert!(
                err["error"]["message"].as_str().unwrap().contains(what),
                "{body}"
            );
        }
    }
    // Text that is not JSON is a repair failure: re-asked once, then 422.
    let (status, body) = post(&gw, &structured_body("llm", false), &rogue).await;
    assert_eq!(status, 422, "{body}");
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["error"]["strategy"], "rogue-strategy");
    assert!(
        err["error"]["repair_error"]
            .as_str()
            .unwrap()
            .contains("is not JSON"),
        "{body}"
    );
    assert_eq!(hits(&m, "rogue-oa").await.len(), 5);
    // The gateway still serves after the faults.
    let (status, body) = post(&gw, &structured_body("llm", false), &[]).await;
    assert_eq!(status, 200, "{body}");
}
