//! The stream parser: Anthropic's documented transcripts → exact deltas, batching
//! independence, error events, forward compatibility.

use polygateway_plugin_sdk::bindings::polygateway::plugin::types::{
    EncryptedReasoning, ReasoningSignature,
};
use polygateway_plugin_sdk::golden::frame_sse;
use polygateway_plugin_sdk::{Delta, ErrorClass, FinishReason, ToolCallDelta, Usage};

use super::{ev, replay, replay_all_batchings};

const FORMAT: &str = "anthropic-claude-v1";

fn transcript(name: &str) -> Vec<polygateway_plugin_sdk::SseEvent> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("conformance/streams")
        .join(format!("{name}.sse"));
    frame_sse(&std::fs::read_to_string(path).unwrap())
}

fn usage(prompt: u64, completion: u64) -> Delta {
    Delta::Usage(Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        cached_prompt_tokens: None,
        reasoning_tokens: None,
        cache_write_tokens: None,
    })
}

fn call(index: u32, id: Option<&str>, name: Option<&str>, arguments: Option<&str>) -> Delta {
    Delta::ToolCall(ToolCallDelta {
        index,
        id: id.map(str::to_owned),
        name: name.map(str::to_owned),
        arguments: arguments.map(str::to_owned),
    })
}

fn text(s: &str) -> Delta {
    Delta::Content(s.into())
}

#[test]
fn documented_basic_stream() {
    let got = replay_all_batchings(&transcript("docs_basic")).unwrap();
    assert_eq!(
        got,
        vec![
            Delta::Model("claude-sonnet-4-5-20250929".into()),
            Delta::Role("assistant".into()),
            usage(25, 1),
            text("Hello"),
            text("!"),
            Delta::Finish(FinishReason::Stop),
            usage(25, 15),
            Delta::Done,
        ]
    );
}

#[test]
fn documented_extended_thinking_stream() {
    let got = replay_all_batchings(&transcript("docs_extended_thinking")).unwrap();
    let mut want = vec![
        Delta::Model("claude-sonnet-4-5-20250929".into()),
        Delta::Role("assistant".into()),
    ];
    for step in [
        "Let me solve this step by step:\n\n1. First break down 27 * 453",
        "\n2. 453 = 400 + 50 + 3",
        "\n3. 27 * 400 = 10,800",
        "\n4. 27 * 50 = 1,350",
        "\n5. 27 * 3 = 81",
        "\n6. 10,800 + 1,350 + 81 = 12,231",
    ] {
        want.push(Delta::Reasoning(step.into()));
    }
    want.extend([
        Delta::ReasoningSignature(ReasoningSignature {
            signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds...".into(),
            format: FORMAT.into(),
        }),
        text("27 * 453 = 12,231"),
        Delta::Finish(FinishReason::Stop),
        Delta::Done,
    ]);
    assert_eq!(got, want);
}

#[test]
fn documented_tool_use_stream() {
    let got = replay_all_batchings(&transcript("docs_tool_use")).unwrap();
    let mut want = vec![
        Delta::Model("claude-sonnet-4-5-20250929".into()),
        Delta::Role("assistant".into()),
        usage(472, 2),
    ];
    for t in [
        "Okay",
        ",",
        " let",
        "'s",
        " check",
        " the",
        " weather",
        " for",
        " San",
        " Francisco",
        ",",
        " CA",
        ":",
    ] {
        want.push(text(t));
    }
    want.push(call(
        0,
        Some("toolu_01T1x1fJ34qAmk2tNTrN7Up6"),
        Some("get_weather"),
        None,
    ));
    for a in [
        "{\"location\":",
        " \"San",
        " Francisc",
        "o,",
        " CA\"",
        ", ",
        "\"unit\": \"fah",
        "renheit\"}",
    ] {
        want.push(call(0, None, None, Some(a)));
    }
    want.extend([
        Delta::Finish(FinishReason::ToolCalls),
        usage(472, 89),
        Delta::Done,
    ]);
    assert_eq!(got, want);
    // The fragments make the tool's input.
    let args: String = got
        .iter()
        .filter_map(|d| match d {
            Delta::ToolCall(t) => t.arguments.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&args).unwrap(),
        serde_json::json!({"location": "San Francisco, CA", "unit": "fahrenheit"})
    );
}

/// Thinking, redacted thinking, text and two tools in one stream, with prompt-cache usage.
#[test]
fn thinking_then_tools_with_cached_usage() {
    let got = replay_all_batchings(&transcript("thinking_redacted_tools_cached")).unwrap();
    let cached = |completion| {
        Delta::Usage(Usage {
            prompt_tokens: 12 + 30000 + 2000,
            completion_tokens: completion,
            cached_prompt_tokens: Some(30000),
            reasoning_tokens: None,
            cache_write_tokens: Some(2000),
        })
    };
    assert_eq!(got[2], cached(1));
    assert_eq!(
        got[3..6],
        [
            Delta::Reasoning("The user wants the weather in Paris and the time in Tokyo.".into()),
            Delta::ReasoningSignature(ReasoningSignature {
                signature: "EuYBCkQYAiJAgCs1le6/Pol5Z4/JMomVOouGrWdhYNsH3ukzUECbB6iWrSQtsQuRHJID6lWV+nWxCjGWZrm8sT/7XQ8sTKw+ZxIMhbYf9AMlRHsBz5WtGgwrm9pXhOUyV8ePbGIiMEvWLOkqZHMxKqUcNaLgHN4Fu5rW0+uVDBEvbkR8DqA+b1Z6NiPB7yVj3hm7bqmqsgA=".into(),
                format: FORMAT.into(),
            }),
            Delta::ReasoningEncrypted(EncryptedReasoning {
                data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pHmN3eMq+P0vFhTn+Kh0hJuc=".into(),
                id: None,
                format: FORMAT.into(),
            }),
        ]
    );
    assert_eq!(
        got[6..],
        [
            text("Let me look both up."),
            call(0, Some("toolu_01Weather"), Some("get_weather"), None),
            call(0, None, None, Some("{\"city\": \"Pa")),
            call(0, None, None, Some("ris\"}")),
            call(1, Some("toolu_02Clock"), Some("tokyo_time"), None),
            call(1, None, None, Some("{}")),
            Delta::Finish(FinishReason::ToolCalls),
            cached(210),
            Delta::Done,
        ]
    );
}

#[test]
fn error_events_end_the_attempt() {
    let err = replay(&transcript("error_event_mid_stream"), 1).unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient);
    assert_eq!(err.message, "Overloaded");
    assert_eq!(err.code.as_deref(), Some("overloaded_error"));
    let cases = [
        (
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
            ErrorClass::RequestRejected,
        ),
        (
            r#"{"type":"error","error":{"type":"authentication_error","message":"key"}}"#,
            ErrorClass::SourceDead,
        ),
        (
            r#"{"type":"error","error":{"type":"permission_error","message":"no"}}"#,
            ErrorClass::SourceDead,
        ),
        (
            r#"{"type":"error","error":{"type":"billing_error","message":"pay"}}"#,
            ErrorClass::SourceDead,
        ),
        (
            r#"{"type":"error","error":{"type":"not_found_error","message":"model"}}"#,
            ErrorClass::SourceDead,
        ),
        (
            r#"{"type":"error","error":{"type":"request_too_large","message":"big"}}"#,
            ErrorClass::RequestRejected,
        ),
        (
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}"#,
            ErrorClass::Transient,
        ),
        (
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"cap","details":{"error_code":"enforced_spend_limit_reached"}}}"#,
            ErrorClass::SourceDead,
        ),
        (
            r#"{"type":"error","error":{"type":"api_error","message":"oops"}}"#,
            ErrorClass::Transient,
        ),
        (
            r#"{"type":"error","error":{"type":"brand_new_error","message":"?"}}"#,
            ErrorClass::Transient,
        ),
    ];
    for (data, class) in cases {
        // Named `error`, or only typed `error` in the data: the same answer.
        for name in ["error", ""] {
            let err = replay(&[ev(name, data)], 1).unwrap_err();
            assert_eq!(err.class, class, "{data}");
        }
    }
    let err = replay(&[ev("error", "upstream exploded")], 1).unwrap_err();
    assert_eq!(
        (err.class, err.message.as_str()),
        (ErrorClass::Transient, "upstream exploded")
    );
    let err = replay(&[ev("error", r#"{"type":"error","error":{}}"#)], 1).unwrap_err();
    assert_eq!(err.message, "anthropic sent an error without a message");
}

#[test]
fn unknown_events_blocks_and_deltas_are_ignored() {
    let got = replay_all_batchings(&transcript("server_tools_and_unknown_events")).unwrap();
    assert!(
        got.iter().all(|d| !matches!(d, Delta::ToolCall(_))),
        "{got:?}"
    );
    let got = replay_all_batchings(&[
        ev("brand_new_event", r#"{"type":"brand_new_event","x":1}"#),
        ev("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"hologram","data":"x"}}"#),
        ev("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"not text"}}"#),
        ev("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"hologram_delta","z":2}}"#),
        ev("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        ev("ping", r#"{"type": "ping"}"#),
        ev("", ""),
        ev("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"model_context_window_exceeded"}}"#),
    ])
    .unwrap();
    assert_eq!(
        got,
        vec![Delta::Finish(FinishReason::Other(
            "model_context_window_exceeded".into()
        ))]
    );
}

#[test]
fn deltas_of_a_block_whose_start_was_missed_are_kept() {
    let got = replay_all_batchings(&[
        ev("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#),
        ev("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#),
        ev("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ok"}}"#),
        ev("content_block_delta", r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#),
    ])
    .unwrap();
    assert_eq!(
        got,
        vec![
            Delta::Reasoning("hm".into()),
            Delta::ReasoningSignature(ReasoningSignature {
                signature: "sig".into(),
                format: FORMAT.into()
            }),
            text("ok"),
        ]
    );
}

#[test]
fn model_is_reported_once_and_usage_is_a_running_total() {
    let start = r#"{"type":"message_start","message":{"model":"claude-x","role":"assistant","usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}"#;
    let got = replay_all_batchings(&[
        ev("message_start", start),
        ev("message_start", start),
        ev(
            "message_delta",
            r#"{"type":"message_delta","delta":{},"usage":{"output_tokens":7,"input_tokens":11}}"#,
        ),
        ev(
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":null},"usage":{}}"#,
        ),
        ev("message_stop", r#"{"type":"message_stop"}"#),
    ])
    .unwrap();
    let u = |input: u64, completion: u64| {
        Delta::Usage(Usage {
            prompt_tokens: input + 5,
            completion_tokens: completion,
            cached_prompt_tokens: Some(5),
            reasoning_tokens: None,
            cache_write_tokens: None,
        })
    };
    assert_eq!(
        got,
        vec![
            Delta::Model("claude-x".into()),
            Delta::Role("assistant".into()),
            u(10, 1),
            Delta::Role("assistant".into()),
            u(10, 1),
            u(11, 7),
            Delta::Done,
        ]
    );
}

#[test]
fn malformed_data_is_transient() {
    for data in ["{not json", "[1,2]", "42", "\"text\""] {
        let err = replay(&[ev("content_block_delta", data)], 1).unwrap_err();
        assert_eq!(err.class, ErrorClass::Transient, "{data}");
        assert!(err.message.starts_with("malformed SSE data: "), "{data}");
    }
}

#[test]
fn text_and_thinking_deltas_read_the_same_on_the_fast_path_and_the_general_one() {
    // The first two take the typed fast path; the spaced-out one (not byte-prefixed as the
    // API writes it) and the mistyped one the general path; a text delta for a thinking
    // block and a thinking delta for a text block are ignored on both.
    let events = vec![
        ev(
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
        ),
        ev(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a \"q\"\n"}}"#,
        ),
        ev(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"not here"}}"#,
        ),
        ev(
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        ),
        ev(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"\u00e9t\u00e9 "}}"#,
        ),
        ev(
            "content_block_delta",
            r#"{ "type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "ok"} }"#,
        ),
        ev(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":7}}"#,
        ),
        ev(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"no"}}"#,
        ),
    ];
    assert_eq!(
        replay(&events, 1).unwrap(),
        vec![
            Delta::Reasoning("a \"q\"\n".into()),
            text("été "),
            text("ok"),
        ]
    );
}
