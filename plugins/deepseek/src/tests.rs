//! Native tests of the deepseek component: capabilities, the `thinking` switch, prefix
//! completion, and the golden transcripts whose provider is `deepseek` (through the
//! exported stream-parser resource type).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::golden::{deltas_to_json, frame_sse};
use polygateway_plugin_sdk::{
    ChatRequest, Guest, GuestStreamParser, ProviderStreamParser, SourceInfo, ThinkingStyle,
};
use serde_json::{Value, json};

use super::DeepSeek;

fn source(enable_thinking: Option<bool>) -> SourceInfo {
    SourceInfo {
        model: "deepseek-reasoner".into(),
        base_url: "https://api.deepseek.com".into(),
        enable_thinking,
        extra_body_json: "{}".into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    }
}

fn body(prefill: Option<&str>, enable_thinking: Option<bool>) -> Value {
    let req = ChatRequest {
        messages_json: r#"[{"role":"user","content":"Write a poem"}]"#.into(),
        overlay_json: "{}".into(),
        stream: false,
        prefill: prefill.map(str::to_owned),
    };
    let http = <DeepSeek as Guest>::build_request(req, source(enable_thinking)).unwrap();
    serde_json::from_slice(&http.body).unwrap()
}

#[test]
fn describes_itself() {
    let info = <DeepSeek as Guest>::describe();
    assert_eq!(
        (info.name.as_str(), info.contract_version.as_str()),
        ("deepseek", "0.2.0")
    );
    let c = info.capabilities;
    assert!(c.streaming && !c.native_json_schema && c.prefill_continuation);
    assert_eq!(c.thinking, ThinkingStyle::ReasoningField);
}

#[test]
fn thinking_switch() {
    assert_eq!(
        body(None, Some(true))["thinking"],
        json!({"type": "enabled"})
    );
    assert_eq!(
        body(None, Some(false))["thinking"],
        json!({"type": "disabled"})
    );
    assert!(body(None, None).get("thinking").is_none());
}

#[test]
fn prefill_is_a_prefix_message() {
    assert_eq!(
        body(Some("Roses are"), None)["messages"],
        json!([{"role": "user", "content": "Write a poem"},
               {"role": "assistant", "content": "Roses are", "prefix": true}])
    );
}

#[test]
fn golden_transcripts_through_the_resource() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/golden");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let cases: Value = serde_json::from_str(&read("cases.json")).unwrap();
    let mut ran = 0;
    for case in cases
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["provider"] == "deepseek")
    {
        let name = case["name"].as_str().unwrap();
        let parser = <ProviderStreamParser<DeepSeek> as GuestStreamParser>::new(source(Some(true)));
        let mut got = Vec::new();
        for event in frame_sse(&read(&format!("{name}.sse"))) {
            got.extend(parser.parse(vec![event]).unwrap());
        }
        got.extend(parser.finish());
        let expected: Value =
            serde_json::from_str(&read(&format!("{name}.expected.json"))).unwrap();
        assert_eq!(deltas_to_json(&got), expected, "{name}");
        ran += 1;
    }
    assert_eq!(ran, 1);
}

#[test]
fn payment_required_switches_source() {
    let body = br#"{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}"#;
    let e = <DeepSeek as Guest>::classify_error(402, Vec::new(), body.to_vec());
    assert_eq!(e.class, polygateway_plugin_sdk::ErrorClass::SourceDead);
    assert_eq!(e.message, "Insufficient Balance");
}
