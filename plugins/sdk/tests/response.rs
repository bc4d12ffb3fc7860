//! Behaviour of non-streamed response parsing: the same deltas as a stream, tool calls whole,
//! inline reasoning split, errors inside a 200.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::{
    Delta, ErrorClass, FinishReason, ToolCallDelta, Usage, parse_chat_response,
};

#[test]
fn full_response_in_stream_order() {
    let body = br#"{"id":"x","object":"chat.completion","model":"deepseek-reasoner",
      "choices":[{"index":0,"message":{"role":"assistant","content":"4","reasoning_content":"2+2"},
        "logprobs":null,"finish_reason":"stop"}],
      "usage":{"prompt_tokens":10,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":8},
        "completion_tokens_details":{"reasoning_tokens":15}}}"#;
    assert_eq!(
        parse_chat_response(body, false).unwrap(),
        vec![
            Delta::Model("deepseek-reasoner".into()),
            Delta::Role("assistant".into()),
            Delta::Reasoning("2+2".into()),
            Delta::Content("4".into()),
            Delta::Finish(FinishReason::Stop),
            Delta::Usage(Usage {
                prompt_tokens: 10,
                completion_tokens: 20,
                cached_prompt_tokens: Some(8),
                reasoning_tokens: Some(15),
                cache_write_tokens: None,
            }),
            Delta::Done,
        ]
    );
}

#[test]
fn tool_calls_come_whole_one_per_call() {
    let body = br#"{"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,
      "tool_calls":[{"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}},
                    {"id":"call_2","type":"function","function":{"name":"b","arguments":"{}"}}]},
      "finish_reason":"tool_calls"}]}"#;
    let out = parse_chat_response(body, false).unwrap();
    assert_eq!(
        out[2..4],
        [
            Delta::ToolCall(ToolCallDelta {
                index: 0,
                id: Some("call_1".into()),
                name: Some("a".into()),
                arguments: Some("{\"x\":1}".into()),
            }),
            Delta::ToolCall(ToolCallDelta {
                index: 1,
                id: Some("call_2".into()),
                name: Some("b".into()),
                arguments: Some("{}".into()),
            }),
        ]
    );
    assert_eq!(
        out[4..],
        [Delta::Finish(FinishReason::ToolCalls), Delta::Done]
    );
}

#[test]
fn inline_think_is_split_and_flushed() {
    let body = br#"{"choices":[{"index":0,"message":{"content":"<think>hmm</think>\n\nYes"},"finish_reason":"stop"}]}"#;
    assert_eq!(
        parse_chat_response(body, true).unwrap(),
        vec![
            Delta::Reasoning("hmm".into()),
            Delta::Content("\n\nYes".into()),
            Delta::Finish(FinishReason::Stop),
            Delta::Done,
        ]
    );
    // Unterminated reasoning and no finish reason: flushed before `done`.
    let body = br#"{"choices":[{"index":0,"message":{"content":"<think>cut off"}}]}"#;
    assert_eq!(
        parse_chat_response(body, true).unwrap(),
        vec![Delta::Reasoning("cut off".into()), Delta::Done]
    );
}

#[test]
fn errors_in_a_200() {
    let err = parse_chat_response(
        br#"{"error":{"message":"quota","code":"insufficient_quota"}}"#,
        false,
    )
    .unwrap_err();
    assert_eq!(err.class, ErrorClass::SourceDead);
    for body in [&b""[..], b"<html>oops</html>", b"[]", &[0xff, 0x00, 0xfe]] {
        let err = parse_chat_response(body, false).unwrap_err();
        assert_eq!(err.class, ErrorClass::Transient);
        assert!(
            err.message.starts_with("malformed response body"),
            "{}",
            err.message
        );
    }
    let err = parse_chat_response(br#"{"object":"chat.completion"}"#, false).unwrap_err();
    assert_eq!(err.message, "response has no choices");
    // Empty choices: a valid (empty) answer, still ends with done.
    assert_eq!(
        parse_chat_response(br#"{"choices":[]}"#, false).unwrap(),
        vec![Delta::Done]
    );
}
