//! `parse-response`: complete Messages API bodies → deltas, and bodies that are no answer.

use polygateway_plugin_sdk::bindings::polygateway::plugin::types::{
    EncryptedReasoning, ReasoningSignature,
};
use polygateway_plugin_sdk::{Delta, ErrorClass, FinishReason, Guest, ToolCallDelta, Usage};

use super::Anthropic;

fn parse(body: &str) -> Result<Vec<Delta>, polygateway_plugin_sdk::ClassifiedError> {
    <Anthropic as Guest>::parse_response(body.as_bytes().to_vec())
}

#[test]
fn a_whole_message() {
    let body = r#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
        "content":[
            {"type":"thinking","thinking":"Paris weather needed.","signature":"Sig+/="},
            {"type":"redacted_thinking","data":"RedactedData=="},
            {"type":"text","text":"Checking.","citations":null},
            {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{ "zeta" : [1, 2.50], "alpha" : "a b" }},
            {"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}},
            {"type":"tool_use","id":"toolu_2","name":"now","input":{}}
        ],
        "stop_reason":"tool_use","stop_sequence":null,
        "usage":{"input_tokens":3,"cache_creation_input_tokens":40,"cache_read_input_tokens":500,"output_tokens":90,
                 "output_tokens_details":{"thinking_tokens":60},"service_tier":"standard"}}"#;
    assert_eq!(
        parse(body).unwrap(),
        vec![
            Delta::Model("claude-sonnet-4-5-20250929".into()),
            Delta::Role("assistant".into()),
            Delta::Reasoning("Paris weather needed.".into()),
            Delta::ReasoningSignature(ReasoningSignature {
                signature: "Sig+/=".into(),
                format: "anthropic-claude-v1".into()
            }),
            Delta::ReasoningEncrypted(EncryptedReasoning {
                data: "RedactedData==".into(),
                id: None,
                format: "anthropic-claude-v1".into()
            }),
            Delta::Content("Checking.".into()),
            Delta::ToolCall(ToolCallDelta {
                index: 0,
                id: Some("toolu_1".into()),
                name: Some("get_weather".into()),
                arguments: Some(r#"{"zeta":[1,2.50],"alpha":"a b"}"#.into()),
            }),
            Delta::ToolCall(ToolCallDelta {
                index: 1,
                id: Some("toolu_2".into()),
                name: Some("now".into()),
                arguments: Some("{}".into()),
            }),
            Delta::Finish(FinishReason::ToolCalls),
            Delta::Usage(Usage {
                prompt_tokens: 543,
                completion_tokens: 90,
                cached_prompt_tokens: Some(500),
                reasoning_tokens: Some(60),
                cache_write_tokens: Some(40),
            }),
            Delta::Done,
        ]
    );
}

#[test]
fn minimal_and_odd_messages() {
    assert_eq!(
        parse(r#"{"content":[]}"#).unwrap(),
        vec![Delta::Role("assistant".into()), Delta::Done]
    );
    assert_eq!(
        parse(r#"{"content":[7,{"type":"text","text":""},{"type":"text","text":5}],"model":3,"stop_reason":"","usage":{"input_tokens":"x"}}"#)
            .unwrap(),
        vec![Delta::Role("assistant".into()), Delta::Done]
    );
}

#[test]
fn bodies_that_are_no_answer() {
    let cases = [
        (
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ErrorClass::Transient,
            "Overloaded",
        ),
        (
            r#"{"type":"error","error":{"type":"permission_error","message":"denied"}}"#,
            ErrorClass::SourceDead,
            "denied",
        ),
        (
            r#"{"error":{"type":"invalid_request_error","message":"bad"}}"#,
            ErrorClass::RequestRejected,
            "bad",
        ),
        (
            r#"{"type":"message","content":"text"}"#,
            ErrorClass::Transient,
            "anthropic response unusable: the body has no `content` array",
        ),
        (
            "[]",
            ErrorClass::Transient,
            "anthropic response unusable: the body is not a JSON object",
        ),
        (
            "",
            ErrorClass::Transient,
            "anthropic response unusable: the body is not a JSON object",
        ),
    ];
    for (body, class, message) in cases {
        let err = parse(body).unwrap_err();
        assert_eq!(
            (err.class, err.message.as_str()),
            (class, message),
            "{body}"
        );
    }
    let err = <Anthropic as Guest>::parse_response(vec![0xff, 0xfe, b'{']).unwrap_err();
    assert_eq!(
        err.message,
        "anthropic response unusable: the body is not UTF-8"
    );
}
