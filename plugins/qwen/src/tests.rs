//! Native tests of the qwen component: capabilities, `enable_thinking`, partial-mode prefill,
//! inline `<think>` splitting (streamed and not), DashScope account errors, and the golden
//! transcripts whose provider is `qwen`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::golden::check_transcript;
use polygateway_plugin_sdk::{
    ChatRequest, Delta, ErrorClass, FinishReason, Guest, Provider, SourceInfo, ThinkingStyle,
};
use serde_json::{Value, json};

use super::Qwen;

fn source(enable_thinking: Option<bool>) -> SourceInfo {
    SourceInfo {
        model: "qwen3-32b".into(),
        base_url: "https://dashscope.aliyuncs.com/compatible-mode/v1".into(),
        enable_thinking,
        extra_body_json: "{}".into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    }
}

fn body(prefill: Option<&str>, enable_thinking: Option<bool>) -> Value {
    let req = ChatRequest {
        messages_json: r#"[{"role":"user","content":"hi"}]"#.into(),
        overlay_json: "{}".into(),
        stream: true,
        prefill: prefill.map(str::to_owned),
    };
    let http = <Qwen as Guest>::build_request(req, source(enable_thinking)).unwrap();
    serde_json::from_slice(&http.body).unwrap()
}

#[test]
fn describes_itself() {
    let info = <Qwen as Guest>::describe();
    assert_eq!(
        (info.name.as_str(), info.contract_version.as_str()),
        ("qwen", "0.2.0")
    );
    let c = info.capabilities;
    assert!(c.streaming && c.native_json_schema && c.prefill_continuation);
    assert_eq!(c.thinking, ThinkingStyle::ReasoningField);
}

#[test]
fn enable_thinking_switch() {
    assert_eq!(body(None, Some(true))["enable_thinking"], json!(true));
    assert_eq!(body(None, Some(false))["enable_thinking"], json!(false));
    assert!(body(None, None).get("enable_thinking").is_none());
}

#[test]
fn prefill_is_a_partial_message() {
    assert_eq!(
        body(Some("Sure,"), None)["messages"],
        json!([{"role": "user", "content": "hi"},
               {"role": "assistant", "content": "Sure,", "partial": true}])
    );
}

#[test]
fn non_streamed_inline_think_and_reasoning_content() {
    let body = br#"{"model":"qwq-32b","choices":[{"index":0,"message":{"role":"assistant",
        "content":"<think>\nsimple</think>\n\nHello"},"finish_reason":"stop"}]}"#;
    assert_eq!(
        <Qwen as Guest>::parse_response(body.to_vec()).unwrap(),
        vec![
            Delta::Model("qwq-32b".into()),
            Delta::Role("assistant".into()),
            Delta::Reasoning("\nsimple".into()),
            Delta::Content("\n\nHello".into()),
            Delta::Finish(FinishReason::Stop),
            Delta::Done,
        ]
    );
    let body = br#"{"choices":[{"index":0,"message":{"content":"Hi","reasoning_content":"r"}}]}"#;
    assert_eq!(
        <Qwen as Guest>::parse_response(body.to_vec()).unwrap(),
        vec![
            Delta::Reasoning("r".into()),
            Delta::Content("Hi".into()),
            Delta::Done
        ]
    );
}

#[test]
fn dashscope_account_errors_switch_source() {
    let arrearage = br#"{"error":{"message":"Access denied, please make sure your account is in good standing.","type":"Arrearage","param":null,"code":"Arrearage"}}"#;
    let e = <Qwen as Guest>::classify_error(400, Vec::new(), arrearage.to_vec());
    assert_eq!(
        (e.class, e.code.as_deref()),
        (ErrorClass::SourceDead, Some("Arrearage"))
    );
    let bad = br#"{"error":{"message":"bad input","type":"invalid_request_error","code":"invalid_parameter_error"}}"#;
    let e = <Qwen as Guest>::classify_error(400, Vec::new(), bad.to_vec());
    assert_eq!(e.class, ErrorClass::RequestRejected);
}

#[test]
fn golden_transcripts() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/golden");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let cases: Value = serde_json::from_str(&read("cases.json")).unwrap();
    let mut ran = 0;
    for case in cases
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["provider"] == "qwen")
    {
        let name = case["name"].as_str().unwrap();
        let result = check_transcript(
            || Qwen::stream_parser(&source(None)),
            &read(&format!("{name}.sse")),
            &read(&format!("{name}.expected.json")),
        );
        assert_eq!(result, Ok(()), "{name}");
        ran += 1;
    }
    assert_eq!(ran, 1);
}
