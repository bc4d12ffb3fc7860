//! The component's conformance fixtures (`plugins/anthropic/conformance/`), replayed natively
//! the way the host's kit runs them (`polygateway plugin check anthropic.wasm --fixtures
//! plugins/anthropic/conformance`), so the files are proven before the kit reads them.

use std::path::{Path, PathBuf};

use polygateway_plugin_sdk::golden::{deltas_to_json, frame_sse};
use polygateway_plugin_sdk::{BuildError, ChatRequest, ErrorClass, Guest, Header, SourceInfo};
use serde_json::{Value, json};

use super::{Anthropic, replay};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(dir().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn load(file: &str) -> Value {
    serde_json::from_str(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn cases(file: &Value) -> &Vec<Value> {
    file["cases"].as_array().unwrap()
}

fn class_name(c: ErrorClass) -> &'static str {
    match c {
        ErrorClass::Transient => "transient",
        ErrorClass::SourceDead => "source-dead",
        ErrorClass::RequestRejected => "request-rejected",
        ErrorClass::ResultInvalid => "result-invalid",
    }
}

/// The README's byte encodings: text, hex, json (compact), repeat, concat.
fn bytes(spec: &Value) -> Vec<u8> {
    if let Some(t) = spec.get("text").and_then(Value::as_str) {
        return t.as_bytes().to_vec();
    }
    if let Some(h) = spec.get("hex").and_then(Value::as_str) {
        let digits: Vec<u8> = h.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        return digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect();
    }
    if let Some(j) = spec.get("json") {
        return serde_json::to_vec(j).unwrap();
    }
    if let Some(r) = spec.get("repeat") {
        let text = r["text"].as_str().unwrap();
        return text
            .repeat(r["times"].as_u64().unwrap() as usize)
            .into_bytes();
    }
    if let Some(parts) = spec.get("concat").and_then(Value::as_array) {
        return parts.iter().flat_map(bytes).collect();
    }
    panic!("unknown byte encoding {spec}");
}

fn one_of(want: &Value, got: &str) -> bool {
    match want {
        Value::String(s) => s == got,
        Value::Array(xs) => xs.iter().any(|x| x == got),
        _ => false,
    }
}

#[test]
fn streams_json() {
    let file = load("streams.json");
    for case in cases(&file) {
        let name = case["name"].as_str().unwrap();
        let events = frame_sse(&read(case["sse"].as_str().unwrap()));
        // The kit replays all events in one batch and one event per batch.
        for batch in [events.len(), 1] {
            let got = replay(&events, batch);
            match (&case["expected"], &case["error"]) {
                (Value::String(expected), _) => {
                    let want: Value = serde_json::from_str(&read(expected)).unwrap();
                    let got = deltas_to_json(&got.unwrap_or_else(|e| panic!("{name}: {e:?}")));
                    assert_eq!(got, want, "{name} (batches of {batch})");
                }
                (_, Value::Object(error)) => {
                    let e = got.expect_err(name);
                    assert!(
                        one_of(&error["class"], class_name(e.class)),
                        "{name}: {e:?}"
                    );
                    assert!(!e.message.is_empty(), "{name}");
                }
                _ => panic!("{name}: neither expected nor error"),
            }
        }
    }
    assert_eq!(cases(&file).len(), 7);
}

#[test]
fn responses_json() {
    let file = load("responses.json");
    for case in cases(&file) {
        let name = case["name"].as_str().unwrap();
        let got = <Anthropic as Guest>::parse_response(bytes(&case["body"]));
        match (&case["expected"], &case["error"]) {
            (Value::Array(_), _) => {
                let got = deltas_to_json(&got.unwrap_or_else(|e| panic!("{name}: {e:?}")));
                assert_eq!(got, case["expected"], "{name}");
            }
            (_, Value::Object(error)) => {
                let e = got.expect_err(name);
                assert!(
                    one_of(&error["class"], class_name(e.class)),
                    "{name}: {e:?}"
                );
            }
            _ => panic!("{name}: neither expected nor error"),
        }
    }
}

#[test]
fn errors_json() {
    let file = load("errors.json");
    for case in cases(&file) {
        let name = case["name"].as_str().unwrap();
        let status = u16::try_from(case["status"].as_u64().unwrap()).unwrap();
        let headers: Vec<Header> = case
            .get("headers")
            .and_then(Value::as_object)
            .map(|h| {
                h.iter()
                    .map(|(k, v)| Header {
                        name: k.clone(),
                        value: v.as_str().unwrap().to_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let body = case.get("body").map(bytes).unwrap_or_default();
        let e = <Anthropic as Guest>::classify_error(status, headers, body);
        let expect = &case["expect"];
        assert!(
            one_of(&expect["class"], class_name(e.class)),
            "{name}: {e:?}"
        );
        if let Some(hints) = expect.get("retry_after_ms").and_then(Value::as_array) {
            assert!(hints.contains(&json!(e.retry_after_ms)), "{name}: {e:?}");
        }
        assert!(!e.message.trim().is_empty(), "{name}");
    }
}

/// The kit's source mapping: `default_source` overridden by the case's `source`.
fn source_of(file: &Value, case: &Value) -> SourceInfo {
    let pick = |key: &str| match case.get("source").and_then(|s| s.get(key)) {
        Some(v) => v.clone(),
        None => file["default_source"][key].clone(),
    };
    SourceInfo {
        model: pick("model").as_str().unwrap().to_owned(),
        base_url: pick("base_url").as_str().unwrap().to_owned(),
        enable_thinking: pick("enable_thinking").as_bool(),
        extra_body_json: pick("extra_body").to_string(),
        max_tokens: None,
        thinking_budget_tokens: None,
    }
}

#[test]
fn requests_json() {
    let file = load("requests.json");
    let canary = file["canary_api_key"].as_str().unwrap();
    for case in cases(&file) {
        let name = case["name"].as_str().unwrap();
        let r = &case["request"];
        let messages = r.get("messages").unwrap_or(&file["default_messages"]);
        let req = ChatRequest {
            messages_json: r["messages_json"]
                .as_str()
                .map_or_else(|| messages.to_string(), str::to_owned),
            overlay_json: r["overlay_json"].as_str().map_or_else(
                || {
                    r.get("overlay")
                        .map_or_else(|| "{}".to_owned(), Value::to_string)
                },
                str::to_owned,
            ),
            stream: r["stream"].as_bool().unwrap(),
            prefill: r["prefill"].as_str().map(str::to_owned),
        };
        let built = <Anthropic as Guest>::build_request(req, source_of(&file, case));
        let result = match &built {
            Ok(_) => "ok",
            Err(BuildError::InvalidRequest(_)) => "invalid-request",
            Err(BuildError::Unsupported(_)) => "unsupported",
        };
        let expect = &case["expect"];
        assert!(one_of(&expect["result"], result), "{name}: {built:?}");
        let Ok(http) = built else { continue };
        assert_eq!(
            (http.method.as_str(), http.path.as_str()),
            ("POST", "/v1/messages")
        );
        assert!(
            http.headers
                .iter()
                .all(|h| !h.name.eq_ignore_ascii_case("x-api-key"))
        );
        let text = String::from_utf8(http.body).unwrap();
        assert!(!text.contains(canary), "{name}");
        let body: Value = serde_json::from_str(&text).unwrap();
        for (key, want) in expect["body"].as_object().into_iter().flatten() {
            assert_eq!(&body[key], want, "{name}: body.{key}");
        }
        for key in expect["body_absent"].as_array().into_iter().flatten() {
            let key = key.as_str().unwrap();
            assert!(body.get(key).is_none(), "{name}: body.{key} must be absent");
        }
        if let Some(last) = expect.get("last_message").and_then(Value::as_object) {
            let got = body["messages"].as_array().unwrap().last().unwrap();
            for (k, v) in last {
                assert_eq!(&got[k], v, "{name}: last message {k}");
            }
        }
    }
}

/// Every key an expectation uses is one the kit's requests.json already uses (the kit
/// refuses unknown ones), and never the OpenAI-only `messages_verbatim`.
#[test]
fn requests_json_uses_only_known_expectation_keys() {
    let file = load("requests.json");
    for case in cases(&file) {
        for key in case["expect"].as_object().unwrap().keys() {
            assert!(
                ["result", "body", "body_absent", "last_message"].contains(&key.as_str()),
                "{}: {key}",
                case["name"]
            );
        }
        for key in case["request"].as_object().unwrap().keys() {
            assert!(
                [
                    "stream",
                    "messages",
                    "messages_json",
                    "overlay",
                    "overlay_json",
                    "prefill"
                ]
                .contains(&key.as_str()),
                "{key}"
            );
        }
        for key in case
            .get("source")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            assert!(
                ["model", "base_url", "enable_thinking", "extra_body"].contains(&key.0.as_str()),
                "{}",
                key.0
            );
        }
    }
}
