//! `parse-response` and the stream parser: exact delta lists (as typed values), call ids and
//! indexes across chunks, argument compaction, usage accounting, finish and done rules, and
//! the independence of the result from how events are batched.

use polygateway_plugin_sdk::bindings::polygateway::plugin::types::{
    EncryptedReasoning, ReasoningSignature,
};
use polygateway_plugin_sdk::golden::frame_sse;
use polygateway_plugin_sdk::{
    Delta, ErrorClass, FinishReason, Guest, GuestStreamParser, SseEvent, ToolCallDelta, Usage,
};

use super::{replay, replay_all_batches, source};
use crate::stream::StreamParser;
use crate::{Gemini, GeminiStreamParser};

const FORMAT: &str = "google-gemini-v1";

fn data(json: &str) -> String {
    format!("data: {json}\n\n")
}

fn usage(prompt: u64, completion: u64, cached: Option<u64>, reasoning: Option<u64>) -> Delta {
    Delta::Usage(Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        cached_prompt_tokens: cached,
        reasoning_tokens: reasoning,
        cache_write_tokens: None,
    })
}

fn call(index: u32, id: &str, name: &str, arguments: &str) -> Delta {
    Delta::ToolCall(ToolCallDelta {
        index,
        id: Some(id.into()),
        name: Some(name.into()),
        arguments: Some(arguments.into()),
    })
}

#[test]
fn thinking_stream_gives_the_exact_deltas() {
    let sse = include_str!("../../conformance/streams/thinking.sse");
    let expected = vec![
        Delta::Model("gemini-2.5-flash".into()),
        Delta::Role("assistant".into()),
        Delta::Reasoning(
            "**Here's how I'm thinking about this:**\n\nOkay, so we've got an aquatic mammal, freshwater, smaller than a cat."
                .into(),
        ),
        Delta::Reasoning(" The platypus, being unique, is a great fit.".into()),
        Delta::ReasoningSignature(ReasoningSignature {
            signature: "CiIB0e2Kb3dRh+BYdbZvmulSN2Pwwm/t0/tSaSXv9bUrbEVJ".into(),
            format: FORMAT.into(),
        }),
        Delta::Content("This is a fun one! Let's break down the clues:".into()),
        Delta::Content("\n\n1.  **Aquatic mammal:** Lives in or around water.".into()),
        Delta::Finish(FinishReason::Stop),
        usage(58, 820 + 1477, None, Some(1477)),
        Delta::Done,
    ];
    assert_eq!(replay(sse, 1).unwrap(), expected);
    assert_eq!(replay(sse, usize::MAX).unwrap(), expected);
    assert_eq!(replay(sse, 2).unwrap(), expected);
}

#[test]
fn signed_function_calls_and_cached_usage() {
    let sse = include_str!("../../conformance/streams/function_calls_signed.sse");
    let id0 = "call_Il0taoSYJ5Cez7IPh7q_kQ4_0";
    assert_eq!(
        replay(sse, 1).unwrap(),
        vec![
            Delta::Model("gemini-3-flash-preview".into()),
            Delta::Role("assistant".into()),
            call(
                0,
                id0,
                "find_theaters",
                r#"{"movie":"Barbie","location":"Mountain View, CA"}"#
            ),
            Delta::ReasoningEncrypted(EncryptedReasoning {
                data: "CrICAdHtim827fQ/pa+9zS0+rLQ9Kk4mLGIc2L0Xz1Q=".into(),
                id: Some(id0.into()),
                format: FORMAT.into(),
            }),
            call(
                1,
                "call_Il0taoSYJ5Cez7IPh7q_kQ4_1",
                "find_movies",
                r#"{"location":"Mountain View, CA","description":"comedy"}"#
            ),
            Delta::Finish(FinishReason::ToolCalls),
            usage(187, 46 + 72, None, Some(72)),
            Delta::Done,
        ]
    );
    let sse = include_str!("../../conformance/streams/cached_text_signed.sse");
    let deltas = replay(sse, 1).unwrap();
    assert_eq!(
        deltas[4..],
        [
            Delta::ReasoningEncrypted(EncryptedReasoning {
                data: "EjQKMgEMOdbHk2hVnUv7ub8sAsZ0yu3+JIpGYHYo+wt/oOv1=".into(),
                id: None,
                format: FORMAT.into(),
            }),
            Delta::Finish(FinishReason::Stop),
            usage(323_388, 397, Some(323_383), None),
            Delta::Done,
        ]
    );
}

#[test]
fn call_ids_and_indexes_across_chunks() {
    // Gemini's own ids win; without a responseId the fallback is call_<index>; the index
    // counts calls across chunks, text in between.
    let sse = [
        data(r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a","args":{}}}]}}]}"#),
        data(r#"{"candidates":[{"content":{"parts":[{"text":"and"},{"functionCall":{"id":"own-id","name":"b"}}]}}]}"#),
        data(r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"c","args":{"x":[1, 2.50, "a b"]}}}]},"finishReason":"STOP"}]}"#),
    ]
    .concat();
    assert_eq!(
        replay_all_batches(&sse).unwrap(),
        serde_json::json!([
            {"role": "assistant"},
            {"tool_call": {"index": 0, "id": "call_0", "name": "a", "arguments": "{}"}},
            {"content": "and"},
            {"tool_call": {"index": 1, "id": "own-id", "name": "b", "arguments": "{}"}},
            {"tool_call": {"index": 2, "id": "call_2", "name": "c", "arguments": "{\"x\":[1,2.50,\"a b\"]}"}},
            {"finish": "tool_calls"},
            "done"
        ])
    );
}

#[test]
fn non_streamed_answers_compact_args_and_end_with_done() {
    let body = br#"{
  "candidates": [
    {
      "content": {
        "parts": [
          {"text": "Thinking out loud", "thought": true},
          {"text": "Here you go."},
          {
            "functionCall": {
              "name": "set_alarm",
              "args": {
                "time": "07:30",
                "days": [ "mon", "tue" ],
                "volume": 0.80
              }
            }
          }
        ],
        "role": "model"
      },
      "finishReason": "STOP",
      "index": 0
    }
  ],
  "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "toolUsePromptTokenCount": 3, "totalTokenCount": 18},
  "modelVersion": "gemini-2.5-flash",
  "responseId": "r-1"
}"#;
    assert_eq!(
        <Gemini as Guest>::parse_response(body.to_vec()).unwrap(),
        vec![
            Delta::Model("gemini-2.5-flash".into()),
            Delta::Role("assistant".into()),
            Delta::Reasoning("Thinking out loud".into()),
            Delta::Content("Here you go.".into()),
            call(
                0,
                "call_r-1_0",
                "set_alarm",
                r#"{"time":"07:30","days":["mon","tue"],"volume":0.80}"#
            ),
            Delta::Finish(FinishReason::ToolCalls),
            usage(13, 5, None, None),
            Delta::Done,
        ]
    );
    // No finish reason at all: still exactly one done, at the end.
    let body = br#"{"candidates":[{"content":{"parts":[{"text":"partial"}]}}]}"#;
    assert_eq!(
        <Gemini as Guest>::parse_response(body.to_vec()).unwrap(),
        vec![
            Delta::Role("assistant".into()),
            Delta::Content("partial".into()),
            Delta::Done
        ]
    );
    let e = <Gemini as Guest>::parse_response(b"<html>oops</html>".to_vec()).unwrap_err();
    assert_eq!(
        (e.class, e.message.as_str()),
        (
            ErrorClass::Transient,
            "malformed response body: <html>oops</html>"
        )
    );
    let e = <Gemini as Guest>::parse_response(
        br#"{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2.5s"}]}}"#.to_vec(),
    )
    .unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient);
    assert_eq!(e.code.as_deref(), Some("RESOURCE_EXHAUSTED"));
    assert_eq!(e.retry_after_ms, Some(2500));
}

#[test]
fn finish_done_and_usage_rules() {
    // Usage arriving after the finish is still reported (after done); a second finish is
    // ignored; a proxy's [DONE] after the finish adds nothing.
    let sse = [
        data(r#"{"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}]}"#),
        data(r#"{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}"#),
        data("[DONE]"),
    ]
    .concat();
    assert_eq!(
        replay(&sse, 1).unwrap(),
        vec![
            Delta::Role("assistant".into()),
            Delta::Content("Hi".into()),
            Delta::Finish(FinishReason::Stop),
            Delta::Done,
            usage(3, 1, None, None),
        ]
    );
    // [DONE] without a finish (a proxy) ends the answer once.
    let sse = [
        data(r#"{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}],"usageMetadata":{"promptTokenCount":3}}"#),
        data("[DONE]"),
        data("[DONE]"),
    ]
    .concat();
    assert_eq!(
        replay(&sse, 1).unwrap(),
        vec![
            Delta::Role("assistant".into()),
            Delta::Content("Hi".into()),
            usage(3, 0, None, None),
            Delta::Done,
        ]
    );
    // Candidates other than index 0 are ignored; a chunk without candidates says nothing.
    let sse = [
        data(r#"{"candidates":[{"index":1,"content":{"parts":[{"text":"no"}]}}]}"#),
        data(r#"{}"#),
    ]
    .concat();
    assert_eq!(replay(&sse, 1).unwrap(), vec![]);
    for (reason, finish) in [
        ("MAX_TOKENS", FinishReason::Length),
        ("RECITATION", FinishReason::ContentFilter),
        ("BLOCKLIST", FinishReason::ContentFilter),
        ("SPII", FinishReason::ContentFilter),
        ("IMAGE_SAFETY", FinishReason::ContentFilter),
        ("LANGUAGE", FinishReason::Other("LANGUAGE".into())),
        (
            "FINISH_REASON_UNSPECIFIED",
            FinishReason::Other("FINISH_REASON_UNSPECIFIED".into()),
        ),
    ] {
        let sse = data(&format!(
            r#"{{"candidates":[{{"finishReason":"{reason}"}}]}}"#
        ));
        assert_eq!(
            replay(&sse, 1).unwrap(),
            vec![
                Delta::Role("assistant".into()),
                Delta::Finish(finish),
                Delta::Done
            ],
            "{reason}"
        );
    }
}

/// A field of an unexpected type is absent, never an error: a numeric text or model, a
/// string `thought`, a `usageMetadata` that is not an object, a string or float index; an
/// escaped text arrives unescaped.
#[test]
fn wrong_types_are_absent_and_escapes_kept() {
    let sse = [
        data(r#"{"modelVersion":7,"responseId":[1],"candidates":[{"index":"0","content":{"parts":[{"text":"no"}]}},{"index":0.0,"content":{"parts":[{"text":"no"}]}}],"usageMetadata":"x"}"#),
        data(r#"{"modelVersion":"gemini-2.5-flash","candidates":[{"content":{"parts":[{"text":5},{"text":"a\"b\u00e9\n","thought":"true"},{"text":"t","thought":true,"thoughtSignature":{"x":1}}]}}],"usageMetadata":{"promptTokenCount":"3","candidatesTokenCount":2.0,"thoughtsTokenCount":-1,"promptTokensDetails":[{"modality":"TEXT","tokenCount":3}]}}"#),
        data(r#"{"candidates":[{"finishReason":5}]}"#),
        data(r#"{"candidates":[{"finishReason":"STOP"}]}"#),
    ]
    .concat();
    replay_all_batches(&sse).unwrap();
    assert_eq!(
        replay(&sse, 1).unwrap(),
        vec![
            Delta::Model("gemini-2.5-flash".into()),
            Delta::Role("assistant".into()),
            Delta::Content("a\"bé\n".into()),
            Delta::Reasoning("t".into()),
            Delta::Finish(FinishReason::Stop),
            usage(0, 2, None, None),
            Delta::Done,
        ]
    );
}

#[test]
fn stream_errors_are_classified() {
    let sse = include_str!("../../conformance/streams/quota_mid_stream.sse");
    let e = replay(sse, 1).unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient);
    assert_eq!(e.code.as_deref(), Some("RESOURCE_EXHAUSTED"));
    assert_eq!(e.retry_after_ms, Some(33_000));
    let mut parser = StreamParser::new();
    let e = parser
        .parse(&[SseEvent {
            event: Some("error".into()),
            data: "upstream exploded".into(),
        }])
        .unwrap_err();
    assert_eq!(
        (e.class, e.message.as_str()),
        (
            ErrorClass::Transient,
            "the stream sent an error event: upstream exploded"
        )
    );
    let e = parser
        .parse(&[SseEvent {
            event: None,
            data: "garbage".into(),
        }])
        .unwrap_err();
    assert_eq!(e.message, "malformed SSE data: garbage");
    let e = replay(
        &data(r#"{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}"#),
        1,
    )
    .unwrap_err();
    assert_eq!(e.class, ErrorClass::SourceDead);
}

#[test]
fn the_wit_resource_wraps_the_parser() {
    let sse = include_str!("../../conformance/streams/text.sse");
    let parser = <GeminiStreamParser as GuestStreamParser>::new(source());
    let mut got = Vec::new();
    for event in frame_sse(sse) {
        got.extend(parser.parse(vec![event]).unwrap());
    }
    got.extend(parser.finish());
    assert_eq!(got, replay(sse, usize::MAX).unwrap());
    assert_eq!(got.last(), Some(&Delta::Done));
}
