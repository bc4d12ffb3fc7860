//! The component's own conformance fixtures (`plugins/gemini/conformance/`, the format of
//! `tests/fixtures/conformance/provider/`) replayed natively the way the host's kit replays
//! them through the `.wasm`: streams (every batch size, here), responses, the errors table and
//! the build-request cases — so the fixtures are proven before the kit runs them.

use std::path::{Path, PathBuf};

use polygateway_plugin_sdk::golden::deltas_to_json;
use polygateway_plugin_sdk::{
    BuildError, ChatRequest, ClassifiedError, ErrorClass, Guest, Header, SourceInfo,
};
use serde_json::Value;

use super::replay_all_batches;
use crate::Gemini;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(dir().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn json(path: &str) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The kit's byte encodings: text, hex, json (compact), repeat, concat.
fn bytes(spec: &Value) -> Vec<u8> {
    let (kind, v) = spec.as_object().unwrap().iter().next().unwrap();
    match kind.as_str() {
        "text" => v.as_str().unwrap().as_bytes().to_vec(),
        "json" => v.to_string().into_bytes(),
        "hex" => {
            let hex: String = v.as_str().unwrap().split_whitespace().collect();
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect()
        }
        "repeat" => v["text"]
            .as_str()
            .unwrap()
            .repeat(usize::try_from(v["times"].as_u64().unwrap()).unwrap())
            .into_bytes(),
        "concat" => v.as_array().unwrap().iter().flat_map(bytes).collect(),
        other => panic!("unknown byte encoding {other}"),
    }
}

fn class_name(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::Transient => "transient",
        ErrorClass::SourceDead => "source-dead",
        ErrorClass::RequestRejected => "request-rejected",
        ErrorClass::ResultInvalid => "result-invalid",
    }
}

fn accepts(expected: &Value, got: &Value) -> bool {
    match expected {
        Value::Array(options) => options.contains(got),
        one => one == got,
    }
}

fn check_error(name: &str, expected: &Value, got: &ClassifiedError) {
    let class = Value::from(class_name(got.class));
    assert!(
        accepts(&expected["class"], &class),
        "{name}: class {class}, expected {}",
        expected["class"]
    );
    assert!(!got.message.trim().is_empty(), "{name}: empty message");
}

/// Every case of a file is for this provider (so the kit runs all of them).
fn for_gemini(case: &Value) {
    assert_eq!(case["providers"], serde_json::json!(["gemini"]), "{case}");
}

#[test]
fn streams_fixtures() {
    let file = json("streams.json");
    let cases = file["cases"].as_array().unwrap();
    for case in cases {
        for_gemini(case);
        let name = case["name"].as_str().unwrap();
        let sse = read(case["sse"].as_str().unwrap());
        let got = replay_all_batches(&sse);
        match (&case["expected"], &case["error"]) {
            (Value::String(expected), Value::Null) => {
                let expected = json(expected);
                let got = got.unwrap_or_else(|e| panic!("{name}: {e:?}"));
                assert_eq!(
                    got,
                    expected,
                    "{name}: got {}",
                    serde_json::to_string_pretty(&got).unwrap()
                );
            }
            (Value::Null, error @ Value::Object(_)) => {
                let got = got.expect_err(name);
                check_error(name, error, &got);
            }
            _ => panic!("{name}: needs `expected` or `error`"),
        }
    }
    assert!(cases.len() >= 10);
    // Every transcript in streams/ is used by a case.
    for entry in std::fs::read_dir(dir().join("streams")).unwrap() {
        let file_name = entry.unwrap().file_name().into_string().unwrap();
        let path = format!("streams/{file_name}");
        assert!(
            cases
                .iter()
                .any(|c| c["sse"] == path.as_str() || c["expected"] == path.as_str()),
            "{path} is not used by streams.json"
        );
    }
}

#[test]
fn responses_fixtures() {
    let file = json("responses.json");
    for case in file["cases"].as_array().unwrap() {
        for_gemini(case);
        let name = case["name"].as_str().unwrap();
        let got = <Gemini as Guest>::parse_response(bytes(&case["body"]));
        match (&case["expected"], &case["error"]) {
            (expected @ Value::Array(_), Value::Null) => {
                let got = deltas_to_json(&got.unwrap_or_else(|e| panic!("{name}: {e:?}")));
                assert_eq!(&got, expected, "{name}");
            }
            (Value::Null, error @ Value::Object(_)) => {
                check_error(name, error, &got.expect_err(name));
            }
            _ => panic!("{name}: needs `expected` or `error`"),
        }
    }
}

#[test]
fn errors_fixtures() {
    let file = json("errors.json");
    for case in file["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let status = u16::try_from(case["status"].as_u64().unwrap()).unwrap();
        let headers = case["headers"]
            .as_object()
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
        let got = <Gemini as Guest>::classify_error(status, headers, body);
        check_error(name, &case["expect"], &got);
        if let Some(hints) = case["expect"].get("retry_after_ms") {
            let hint = got.retry_after_ms.map_or(Value::Null, Value::from);
            assert!(
                hints.as_array().unwrap().contains(&hint),
                "{name}: hint {hint}, expected one of {hints}"
            );
        }
    }
}

#[test]
fn requests_fixtures() {
    let file = json("requests.json");
    let canary = file["canary_api_key"].as_str().unwrap();
    let default = &file["default_source"];
    for case in file["cases"].as_array().unwrap() {
        for_gemini(case);
        let name = case["name"].as_str().unwrap();
        let when = &case["when"];
        if when["streaming"] == false || when["prefill-continuation"] == true {
            continue; // Not applicable to gemini's capabilities.
        }
        let spec = &case["source"];
        let pick = |key: &str| match spec.get(key) {
            Some(v) => v.clone(),
            None => default[key].clone(),
        };
        let source = SourceInfo {
            model: pick("model").as_str().unwrap().to_owned(),
            base_url: pick("base_url").as_str().unwrap().to_owned(),
            enable_thinking: pick("enable_thinking").as_bool(),
            extra_body_json: pick("extra_body").to_string(),
            max_tokens: None,
            thinking_budget_tokens: None,
        };
        let request = &case["request"];
        let messages = match &request["messages"] {
            Value::Null => file["default_messages"].clone(),
            m => m.clone(),
        };
        let req = ChatRequest {
            messages_json: request["messages_json"]
                .as_str()
                .map_or_else(|| messages.to_string(), str::to_owned),
            overlay_json: request["overlay_json"].as_str().map_or_else(
                || match &request["overlay"] {
                    Value::Null => "{}".to_owned(),
                    o => o.to_string(),
                },
                str::to_owned,
            ),
            stream: request["stream"].as_bool().unwrap(),
            prefill: request["prefill"].as_str().map(str::to_owned),
        };
        let built = <Gemini as Guest>::build_request(req, source);
        let result = match &built {
            Ok(_) => "ok",
            Err(BuildError::InvalidRequest(_)) => "invalid-request",
            Err(BuildError::Unsupported(_)) => "unsupported",
        };
        assert!(
            accepts(&case["expect"]["result"], &Value::from(result)),
            "{name}: {built:?}"
        );
        let Ok(http) = built else { continue };
        assert!(
            http.path.starts_with("/v1beta/models/gemini-2.5-flash:"),
            "{name}"
        );
        let text = String::from_utf8(http.body).unwrap();
        assert!(
            !text.contains(canary) && !http.path.contains(canary),
            "{name}"
        );
        let body: Value = serde_json::from_str(&text).unwrap();
        for (key, want) in case["expect"]["body"].as_object().into_iter().flatten() {
            assert_eq!(&body[key], want, "{name}: body.{key}");
        }
        for key in case["expect"]["body_absent"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let key = key.as_str().unwrap();
            assert!(body.get(key).is_none(), "{name}: body.{key} must be absent");
        }
    }
}
