//! Native tests of the openai component: capabilities, request body, prefill refusal, and
//! the golden transcripts of `tests/fixtures/golden/` whose provider is `openai`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::golden::check_transcript;
use polygateway_plugin_sdk::{
    BuildError, ChatRequest, EmbeddingGuest, EmbeddingInputs, EmbeddingRequest, Guest, Provider,
    SourceInfo, ThinkingStyle,
};
use serde_json::{Value, json};

use super::OpenAi;

fn source(enable_thinking: Option<bool>) -> SourceInfo {
    SourceInfo {
        model: "gpt-4o-mini".into(),
        base_url: "https://api.openai.com/v1".into(),
        enable_thinking,
        extra_body_json: "{}".into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    }
}

fn request(prefill: Option<&str>) -> ChatRequest {
    ChatRequest {
        messages_json: r#"[{"role":"user","content":"hi"}]"#.into(),
        overlay_json: r#"{"temperature":0}"#.into(),
        stream: true,
        prefill: prefill.map(str::to_owned),
    }
}

#[test]
fn describes_itself() {
    let info = <OpenAi as Guest>::describe();
    assert_eq!(info.name, "openai");
    assert_eq!(info.contract_version, "0.2.0");
    let c = info.capabilities;
    assert!(c.streaming && c.native_json_schema && !c.prefill_continuation);
    assert_eq!(c.thinking, ThinkingStyle::None);
}

#[test]
fn body_ignores_enable_thinking() {
    for thinking in [None, Some(true), Some(false)] {
        let http = <OpenAi as Guest>::build_request(request(None), source(thinking)).unwrap();
        let body: Value = serde_json::from_slice(&http.body).unwrap();
        assert_eq!(
            body,
            json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
                   "stream": true, "stream_options": {"include_usage": true}, "temperature": 0})
        );
    }
}

#[test]
fn prefill_is_unsupported() {
    let err = <OpenAi as Guest>::build_request(request(Some("abc")), source(None)).unwrap_err();
    assert!(matches!(err, BuildError::Unsupported(_)), "{err:?}");
}

#[test]
fn token_id_arrays_reach_the_embeddings_body_as_given() {
    let req = EmbeddingRequest {
        inputs: EmbeddingInputs::Tokens(vec![vec![15339], vec![1917, 3]]),
        dimensions: None,
    };
    let http = <OpenAi as EmbeddingGuest>::build_embedding_request(req, source(None)).unwrap();
    assert_eq!(http.path, "/embeddings");
    assert_eq!(
        String::from_utf8(http.body).unwrap(),
        r#"{"encoding_format":"float","input":[[15339],[1917,3]],"model":"gpt-4o-mini"}"#
    );
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
        .filter(|c| c["provider"] == "openai")
    {
        let name = case["name"].as_str().unwrap();
        let result = check_transcript(
            || OpenAi::stream_parser(&source(None)),
            &read(&format!("{name}.sse")),
            &read(&format!("{name}.expected.json")),
        );
        assert_eq!(result, Ok(()), "{name}");
        ran += 1;
    }
    assert_eq!(ran, 2);
}

/// What other dialects' clients put on messages (Claude Code: `cache_control` everywhere) never
/// reaches OpenAI, which refuses unknown message properties; the client's `thinking` neither.
#[test]
fn the_contracts_extensions_and_thinking_stay_out_of_the_body() {
    let req = ChatRequest {
        messages_json: json!([
            {"role": "system", "content": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": "ok", "reasoning_content": "hm",
             "reasoning_details": [{"type": "reasoning.text", "text": "hm", "signature": "s",
                                    "format": "anthropic-claude-v1", "index": 0}],
             "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "boom", "is_error": true},
        ])
        .to_string(),
        overlay_json: json!({
            "thinking": {"type": "adaptive"},
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}},
                       "cache_control": {"type": "ephemeral"}}],
        })
        .to_string(),
        stream: false,
        prefill: None,
    };
    let http = <OpenAi as Guest>::build_request(req, source(None)).unwrap();
    let body: Value = serde_json::from_slice(&http.body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "gpt-4o-mini", "stream": false,
            "messages": [
                {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "assistant", "content": "ok",
                 "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "t1", "content": "boom"},
            ],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        })
    );
}
