//! Behaviour of the OpenAI SSE stream parser beyond the golden transcripts: ordering within a
//! chunk, first-model rule, lenient fields, in-band errors, malformed data.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::{
    ChatStreamParser, ClassifiedError, Delta, ErrorClass, FinishReason, SseEvent, ToolCallDelta,
    Usage,
};

fn ev(data: &str) -> SseEvent {
    SseEvent {
        event: None,
        data: data.into(),
    }
}

fn parse(split: bool, data: &[&str]) -> Result<Vec<Delta>, ClassifiedError> {
    let events: Vec<_> = data.iter().map(|d| ev(d)).collect();
    ChatStreamParser::new(split).parse(&events)
}

#[test]
fn one_chunk_with_everything_keeps_the_contract_order() {
    let chunk = r#"{"model":"m1","choices":[{"index":0,"delta":{"role":"assistant",
        "reasoning_content":"think","content":"say","tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]},
        "finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
    assert_eq!(
        parse(false, &[chunk]).unwrap(),
        vec![
            Delta::Model("m1".into()),
            Delta::Role("assistant".into()),
            Delta::Reasoning("think".into()),
            Delta::Content("say".into()),
            Delta::ToolCall(ToolCallDelta {
                index: 0,
                id: Some("c".into()),
                name: Some("f".into()),
                arguments: Some("{}".into()),
            }),
            Delta::Finish(FinishReason::Length),
            Delta::Usage(Usage {
                prompt_tokens: 1,
                completion_tokens: 2,
                cached_prompt_tokens: None,
                reasoning_tokens: None,
                cache_write_tokens: None,
            }),
        ]
    );
}

#[test]
fn model_is_reported_once_per_parser_and_only_when_non_empty() {
    let out = parse(
        false,
        &[
            r#"{"model":"","choices":[]}"#,
            r#"{"model":"a","choices":[]}"#,
            r#"{"model":"b","choices":[]}"#,
        ],
    )
    .unwrap();
    assert_eq!(out, vec![Delta::Model("a".into())]);
    // A new parser (a new attempt) reports again.
    let out = parse(false, &[r#"{"model":"b","choices":[]}"#]).unwrap();
    assert_eq!(out, vec![Delta::Model("b".into())]);
}

#[test]
fn openrouter_reasoning_field_and_empty_or_null_fields() {
    let out = parse(
        false,
        &[
            r#"{"choices":[{"index":0,"delta":{"role":"","reasoning":"r","content":""},"finish_reason":null}],"usage":null}"#,
            r#"{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":null,"reasoning":null},"finish_reason":""}]}"#,
        ],
    )
    .unwrap();
    assert_eq!(out, vec![Delta::Reasoning("r".into())]);
}

#[test]
fn only_choice_zero_is_used() {
    let out = parse(
        false,
        &[r#"{"choices":[{"index":1,"delta":{"content":"one"}},{"index":0,"delta":{"content":"zero"}}]}"#],
    )
    .unwrap();
    assert_eq!(out, vec![Delta::Content("zero".into())]);
}

#[test]
fn unknown_finish_reason_is_kept() {
    let out = parse(
        false,
        &[r#"{"choices":[{"index":0,"delta":{},"finish_reason":"insufficient_system_resource"}]}"#],
    )
    .unwrap();
    assert_eq!(
        out,
        vec![Delta::Finish(FinishReason::Other(
            "insufficient_system_resource".into()
        ))]
    );
}

#[test]
fn empty_data_is_ignored_and_done_is_done() {
    let out = parse(false, &["", "  ", "[DONE]"]).unwrap();
    assert_eq!(out, vec![Delta::Done]);
}

#[test]
fn error_chunks_are_classified() {
    let err = parse(
        false,
        &[
            r#"{"choices":[{"index":0,"delta":{"content":"partial"}}]}"#,
            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
        ],
    )
    .unwrap_err();
    assert_eq!(err.class, ErrorClass::SourceDead);
    assert_eq!(err.message, "You exceeded your current quota");
    assert_eq!(err.code.as_deref(), Some("insufficient_quota"));

    let err = parse(
        false,
        &[r#"{"error":{"message":"Overloaded","type":"overloaded_error"}}"#],
    )
    .unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient);
    let err = parse(
        false,
        &[r#"{"id":"x","error":{"code":429,"message":"Rate limit exceeded"}}"#],
    )
    .unwrap_err();
    assert_eq!(
        (err.class, err.code.as_deref()),
        (ErrorClass::Transient, Some("429"))
    );
    // `"error": null` is not an error.
    assert!(
        parse(false, &[r#"{"error":null,"choices":[]}"#])
            .unwrap()
            .is_empty()
    );
}

#[test]
fn error_named_events_are_errors() {
    let mut p = ChatStreamParser::new(false);
    let e = SseEvent {
        event: Some("error".into()),
        data: "upstream timed out".into(),
    };
    let err = p.parse(&[e]).unwrap_err();
    assert_eq!(
        (err.class, err.message.as_str()),
        (ErrorClass::Transient, "upstream timed out")
    );
    let e = SseEvent {
        event: Some("error".into()),
        data: r#"{"message":"bad","type":"server_error"}"#.into(),
    };
    let err = ChatStreamParser::new(false).parse(&[e]).unwrap_err();
    assert_eq!(
        (err.message.as_str(), err.code.as_deref()),
        ("bad", Some("server_error"))
    );
}

#[test]
fn malformed_data_is_a_transient_error_quoting_it() {
    for data in ["{\"choices\":", "not json", "42", "[1]", "\"s\"", "null"] {
        let err = parse(false, &[data]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Transient, "{data}");
        assert_eq!(err.message, format!("malformed SSE data: {data}"));
    }
    let long = format!("x{}", "y".repeat(10_000));
    let err = parse(false, &[&long]).unwrap_err();
    assert!(err.message.len() < 300 && err.message.ends_with('…'));
}

#[test]
fn think_splitting_is_flushed_before_finish_and_done() {
    let out = parse(
        true,
        &[
            r#"{"choices":[{"index":0,"delta":{"content":"<think>x</thi"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"nk>a<"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ],
    )
    .unwrap();
    assert_eq!(
        out,
        vec![
            Delta::Reasoning("x".into()),
            Delta::Content("a".into()),
            Delta::Content("<".into()),
            Delta::Finish(FinishReason::Stop),
            Delta::Done,
        ]
    );
    // Held text at [DONE] without a finish reason comes out before `done`.
    let out = parse(
        true,
        &[
            r#"{"choices":[{"index":0,"delta":{"content":"<think>abc</"}}]}"#,
            "[DONE]",
        ],
    )
    .unwrap();
    assert_eq!(
        out,
        vec![
            Delta::Reasoning("abc".into()),
            Delta::Reasoning("</".into()),
            Delta::Done
        ]
    );
}

#[test]
fn finish_flushes_at_eof_without_done() {
    let mut p = ChatStreamParser::new(true);
    let out = p
        .parse(&[ev(
            r#"{"choices":[{"index":0,"delta":{"content":"hi <th"}}]}"#,
        )])
        .unwrap();
    assert_eq!(out, vec![Delta::Content("hi ".into())]);
    assert_eq!(p.finish(), vec![Delta::Content("<th".into())]);
    assert!(p.finish().is_empty());
    // Without splitting, `<think>` is ordinary content.
    let out = parse(
        false,
        &[r#"{"choices":[{"index":0,"delta":{"content":"<think>x"}}]}"#],
    )
    .unwrap();
    assert_eq!(out, vec![Delta::Content("<think>x".into())]);
}

#[test]
fn garbage_shapes_never_panic() {
    let shapes = [
        r#"{"choices":null}"#,
        r#"{"choices":[null,1,"x"]}"#,
        r#"{"choices":[{"delta":null,"finish_reason":5}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[null,{"index":"0"},{"function":7}]}}]}"#,
        r#"{"choices":[{"delta":{"content":["a"],"role":1}}]}"#,
        r#"{"model":1,"usage":{"prompt_tokens":"x"}}"#,
        r#"{"usage":[]}"#,
    ];
    for s in shapes {
        assert!(parse(true, &[s]).is_ok(), "{s}");
    }
}
