//! The Messages dialect against Anthropic's documentation: the streamed examples of its
//! docs (the anthropic component's conformance transcripts, `plugins/anthropic/conformance/`)
//! go through the component's deltas and back out of this encoder as the same events; the
//! request mapping names every field at fault.

use serde_json::{Value, json};

use super::MessagesStream;
use super::request::parse;
use crate::error::GatewayError;
use crate::pipeline::{Accumulator, ChatResponse, StreamStart, TokenUsage};
use crate::plugin::{
    Delta, EncryptedReasoning, FinishReason, ReasoningSignature, ToolCallDelta, Usage,
};
use crate::proxy::dialect::StreamEncoder;

/// A delta from the transcripts' JSON form (`plugin::delta_to_json`'s inverse).
fn delta(v: &Value) -> Delta {
    if v == "done" {
        return Delta::Done;
    }
    let (k, x) = v
        .as_object()
        .and_then(|o| o.iter().next())
        .expect("one key");
    let s = |k: &str| x.get(k).and_then(Value::as_str).map(str::to_string);
    match k.as_str() {
        "model" => Delta::Model(x.as_str().unwrap().into()),
        "role" => Delta::Role(x.as_str().unwrap().into()),
        "content" => Delta::Content(x.as_str().unwrap().into()),
        "reasoning" => Delta::Reasoning(x.as_str().unwrap().into()),
        "refusal" => Delta::Refusal(x.as_str().unwrap().into()),
        "tool_call" => Delta::ToolCall(ToolCallDelta {
            index: x["index"].as_u64().unwrap() as u32,
            id: s("id"),
            name: s("name"),
            arguments: s("arguments"),
        }),
        "finish" => Delta::Finish(match x.as_str() {
            Some("stop") => FinishReason::Stop,
            Some("length") => FinishReason::Length,
            Some("tool_calls") => FinishReason::ToolCalls,
            Some("content_filter") => FinishReason::ContentFilter,
            _ => FinishReason::Other(x["other"].as_str().unwrap().into()),
        }),
        "usage" => Delta::Usage(Usage {
            prompt_tokens: x["prompt_tokens"].as_u64().unwrap(),
            completion_tokens: x["completion_tokens"].as_u64().unwrap(),
            cached_prompt_tokens: x["cached_prompt_tokens"].as_u64(),
            reasoning_tokens: x["reasoning_tokens"].as_u64(),
            cache_write_tokens: x["cache_write_tokens"].as_u64(),
        }),
        "reasoning_signature" => Delta::ReasoningSignature(ReasoningSignature {
            signature: s("signature").unwrap(),
            format: s("format").unwrap(),
        }),
        "reasoning_encrypted" => Delta::ReasoningEncrypted(EncryptedReasoning {
            data: s("data").unwrap(),
            id: s("id"),
            format: s("format").unwrap(),
        }),
        other => panic!("unknown delta {other}"),
    }
}

fn start() -> StreamStart {
    StreamStart {
        call_id: "0190-abc".into(),
        source_name: "llm-anthropic-1".into(),
        model: "claude-sonnet-4-5-20250929".into(),
        model_reported: None,
        attempts: 1,
        overhead_us: 0,
        created: 1_700_000_000,
        cache_hit: false,
        budget_warnings: Vec::new(),
    }
}

/// The answer the accumulated deltas make (what the pipeline hands `end`).
fn response(acc: &Accumulator) -> ChatResponse {
    ChatResponse {
        call_id: "0190-abc".into(),
        scope: "LLM".into(),
        content: acc.content.clone(),
        reasoning: (!acc.reasoning.is_empty()).then(|| acc.reasoning.clone()),
        reasoning_details: acc.reasoning_details.entries().to_vec(),
        tool_calls: acc.tool_calls.clone(),
        finish_reason: acc.finish_reason.clone(),
        usage: acc.usage,
        usage_source: crate::telemetry::UsageSource::Measured,
        model: "claude-sonnet-4-5-20250929".into(),
        model_reported: acc.model_reported.clone(),
        source_name: "llm-anthropic-1".into(),
        provider: "anthropic".into(),
        attempts: 1,
        latency_ms: 3,
        created: 1_700_000_000,
        ttft_ms: None,
        max_inter_token_ms: None,
        salvaged: false,
        overhead_us: 10,
        cache_hit: false,
        refusal: acc.refusal(),
        upstream_fields: None,
        structured: None,
        budget_warnings: Vec::new(),
    }
}

/// `(event name, data)` of each event of an SSE text.
fn events(sse: &str) -> Vec<(String, Value)> {
    sse.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut name = String::new();
            let mut data = String::new();
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (name, serde_json::from_str(&data).expect("data is JSON"))
        })
        .collect()
}

/// Encode the transcript's deltas and compare with its SSE: every event and its data equal,
/// but for what only the upstream knows at `message_start` (its message id, usage) and the
/// counts of `message_delta`, which are compared where the example has them.
fn round_trip(name: &str) {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/anthropic/conformance");
    let sse = std::fs::read_to_string(dir.join(format!("streams/{name}.sse"))).unwrap();
    let expected: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("streams/{name}.expected.json"))).unwrap(),
    )
    .unwrap();
    let mut enc = MessagesStream::new(&start());
    let mut acc = Accumulator::default();
    let mut out = Vec::new();
    for v in &expected {
        let d = delta(v);
        acc.apply(&d);
        enc.delta(&d, &mut out);
    }
    enc.end(&response(&acc), &mut out);
    let mut ours = events(std::str::from_utf8(&out).unwrap());
    let docs = events(&sse);
    // One of the documented examples leaves out the `ping` Anthropic sends after the first
    // block start: compare without ours there.
    if !docs.iter().any(|(n, _)| n == "ping") {
        ours.retain(|(n, _)| n != "ping");
    }
    let names = |e: &[(String, Value)]| e.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&docs), "{name}");
    for ((n, ours), (_, docs)) in ours.iter().zip(&docs) {
        match n.as_str() {
            "message_start" => {
                let strip = |v: &Value| {
                    let mut m = v["message"].clone();
                    for k in ["id", "usage"] {
                        m.as_object_mut().unwrap().remove(k);
                    }
                    m
                };
                assert_eq!(strip(ours), strip(docs), "{name}");
                assert_eq!(ours["message"]["id"], "msg_0190-abc");
            }
            "message_delta" => {
                assert_eq!(ours["delta"], docs["delta"], "{name}");
                if let Some(n) = docs["usage"].get("output_tokens") {
                    assert_eq!(&ours["usage"]["output_tokens"], n, "{name}");
                }
            }
            // Ours starts a thinking block with `"signature": ""`, as the API does now (an
            // unsigned source's block then still has the field its type requires); the
            // documented example predates it.
            "content_block_start" if ours["content_block"]["type"] == "thinking" => {
                let mut ours = ours.clone();
                assert_eq!(ours["content_block"]["signature"], "", "{name}");
                ours["content_block"]
                    .as_object_mut()
                    .unwrap()
                    .remove("signature");
                assert_eq!(&ours, docs, "{name}: {n}");
            }
            _ => assert_eq!(ours, docs, "{name}: {n}"),
        }
    }
}

#[test]
fn the_documented_streams_come_back_event_for_event() {
    round_trip("docs_basic");
    round_trip("docs_extended_thinking");
    round_trip("docs_tool_use");
}

#[test]
fn text_deltas_are_written_byte_exact() {
    let mut enc = MessagesStream::new(&start());
    let mut out = Vec::new();
    enc.delta(&Delta::Content("Hi \"there\"\n".into()), &mut out);
    let text = String::from_utf8(out).unwrap();
    let expected = concat!(
        "event: message_start\ndata: {\"message\":{\"content\":[],\"id\":\"msg_0190-abc\",\"model\":\"claude-sonnet-4-5-20250929\",\"role\":\"assistant\",\"stop_reason\":null,\"stop_sequence\":null,\"type\":\"message\",\"usage\":{\"input_tokens\":null,\"output_tokens\":null}},\"type\":\"message_start\"}\n\n",
        "event: content_block_start\ndata: {\"content_block\":{\"text\":\"\",\"type\":\"text\"},\"index\":0,\"type\":\"content_block_start\"}\n\n",
        "event: ping\ndata: {\"type\":\"ping\"}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \\\"there\\\"\\n\"}}\n\n",
    );
    assert_eq!(text, expected);
}

#[test]
fn a_failure_after_the_start_is_an_error_event() {
    let mut enc = MessagesStream::new(&start());
    let mut out = Vec::new();
    enc.delta(&Delta::Content("Hel".into()), &mut out);
    out.clear();
    let e = GatewayError::StreamInterrupted {
        source_name: "llm-anthropic-1".into(),
        message: "upstream closed".into(),
    };
    enc.failed(&e, &mut out);
    let ev = events(std::str::from_utf8(&out).unwrap());
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].0, "error");
    assert_eq!(ev[0].1["type"], "error");
    assert_eq!(ev[0].1["error"]["type"], "api_error");
}

#[test]
fn usage_is_anthropics_split_and_null_when_unknown() {
    let mut enc = MessagesStream::new(&start());
    let mut acc = Accumulator::default();
    acc.apply(&Delta::Content("x".into()));
    acc.usage = Some(TokenUsage {
        prompt_tokens: 100,
        completion_tokens: 7,
        cached_prompt_tokens: Some(60),
        reasoning_tokens: None,
        cache_write_tokens: Some(30),
    });
    acc.finish_reason = Some("length".into());
    let mut out = Vec::new();
    enc.end(&response(&acc), &mut out);
    let ev = events(std::str::from_utf8(&out).unwrap());
    let delta = &ev.iter().find(|(n, _)| n == "message_delta").unwrap().1;
    assert_eq!(
        delta["usage"],
        json!({"input_tokens": 10, "output_tokens": 7,
               "cache_creation_input_tokens": 30, "cache_read_input_tokens": 60})
    );
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
    acc.usage = None;
    let body: Value =
        serde_json::from_slice(&super::answer::message_body(&response(&acc))).unwrap();
    assert_eq!(
        body["usage"],
        json!({"input_tokens": null, "output_tokens": null})
    );
}

fn param(body: Value) -> Option<String> {
    match parse(body.to_string().as_bytes()) {
        Err(GatewayError::InvalidRequest { param, .. }) => param,
        other => Some(format!("unexpected: {other:?}")),
    }
}

#[test]
fn field_errors_name_the_field() {
    let base = || json!({"model": "llm", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]});
    let with = |k: &str, v: Value| {
        let mut b = base();
        b[k] = v;
        b
    };
    let mut no_max = base();
    no_max.as_object_mut().unwrap().remove("max_tokens");
    assert_eq!(param(no_max).as_deref(), Some("max_tokens"));
    assert_eq!(
        param(with("max_tokens", json!(0))).as_deref(),
        Some("max_tokens")
    );
    assert_eq!(
        param(with("messages", json!([]))).as_deref(),
        Some("messages")
    );
    assert_eq!(
        param(with("frequency_penalty", json!(1))).as_deref(),
        Some("frequency_penalty")
    );
    assert_eq!(
        param(with("messages", json!([{"role": "tool", "content": "x"}]))).as_deref(),
        Some("messages[0].role")
    );
    assert_eq!(
        param(with(
            "messages",
            json!([{"role": "user", "content": [{"type": "document", "source": {}}]}])
        ))
        .as_deref(),
        Some("messages[0].content[0].type")
    );
    assert_eq!(
        param(with("messages", json!([{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}])))
            .as_deref(),
        Some("messages[0].content[0].source.type")
    );
    assert_eq!(
        param(with(
            "tools",
            json!([{"type": "web_search_20250305", "name": "web_search"}])
        ))
        .as_deref(),
        Some("tools[0].type")
    );
    assert_eq!(
        param(with(
            "thinking",
            json!({"type": "enabled", "budget_tokens": 10})
        ))
        .as_deref(),
        Some("thinking.budget_tokens")
    );
    assert_eq!(
        param(with("metadata", json!({"user_id": 5}))).as_deref(),
        Some("metadata.user_id")
    );
    assert_eq!(
        param(with("tool_choice", json!({"type": "sometimes"}))).as_deref(),
        Some("tool_choice.type")
    );
}

#[test]
fn a_conversation_maps_to_the_neutral_request() {
    let body = json!({
        "model": "llm", "max_tokens": 1024, "stream": true,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "stop_sequences": ["END"], "top_k": 5, "temperature": 0.5,
        "metadata": {"user_id": "u-42"},
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Call it.", "signature": "EqQB"},
                {"type": "redacted_thinking", "data": "EmwK"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "Sunny", "is_error": false},
                {"type": "text", "text": "Thanks"}]},
        ],
    });
    let req = parse(body.to_string().as_bytes()).unwrap();
    assert!(req.stream);
    assert_eq!(req.ingress, crate::pipeline::Ingress::Messages);
    assert_eq!(
        Value::Array(req.messages.clone()),
        json!([
            {"role": "system", "content": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]},
            {"role": "user", "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]},
            {"role": "assistant", "content": "Checking.",
             "reasoning_details": [
                {"type": "reasoning.text", "text": "Call it.", "signature": "EqQB", "format": "anthropic-claude-v1", "index": 0},
                {"type": "reasoning.encrypted", "data": "EmwK", "format": "anthropic-claude-v1", "index": 1}],
             "tool_calls": [{"id": "toolu_01", "type": "function",
                             "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "toolu_01", "content": "Sunny"},
            {"role": "user", "content": "Thanks"},
        ])
    );
    assert_eq!(
        Value::Object(req.overlay.clone()),
        json!({
            "max_tokens": 1024, "temperature": 0.5, "top_k": 5, "stop": ["END"],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}}],
            "tool_choice": "required", "parallel_tool_calls": false,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "user": "u-42",
        })
    );
}

#[test]
fn claude_codes_extra_fields_are_accepted_and_a_format_is_a_response_format() {
    let body = json!({
        "model": "llm", "max_tokens": 32000, "stream": true,
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high",
                          "format": {"type": "json_schema", "schema": {"type": "object"}}},
    });
    let req = parse(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        Value::Object(req.overlay),
        json!({"max_tokens": 32000, "thinking": {"type": "adaptive"},
               "response_format": {"type": "json_schema",
                   "json_schema": {"name": "output", "schema": {"type": "object"}, "strict": true}}})
    );
    let bad = json!({"model": "llm", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
                     "output_config": {"effort": "extreme"}});
    assert_eq!(param(bad).as_deref(), Some("output_config.effort"));
}

#[test]
fn a_signature_after_a_tool_call_leaves_the_call_one_block() {
    let mut enc = MessagesStream::new(&start());
    let mut out = Vec::new();
    let call = |args: &str, first: bool| {
        Delta::ToolCall(ToolCallDelta {
            index: 0,
            id: first.then(|| "call_1".to_string()),
            name: first.then(|| "f".to_string()),
            arguments: Some(args.into()),
        })
    };
    enc.delta(&call("{\"a\":", true), &mut out);
    enc.delta(
        &Delta::ReasoningEncrypted(EncryptedReasoning {
            data: "sig".into(),
            id: Some("call_1".into()),
            format: "google-gemini-v1".into(),
        }),
        &mut out,
    );
    enc.delta(&call("1}", false), &mut out);
    let mut acc = Accumulator::default();
    acc.apply(&call("{\"a\":1}", true));
    acc.finish_reason = Some("stop".into());
    enc.end(&response(&acc), &mut out);
    let ev = events(std::str::from_utf8(&out).unwrap());
    let starts: Vec<&Value> = ev
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, d)| &d["content_block"]["type"])
        .collect();
    assert_eq!(starts, [&json!("tool_use"), &json!("redacted_thinking")]);
    let args: String = ev
        .iter()
        .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(args, "{\"a\":1}");
    let delta = &ev.iter().find(|(n, _)| n == "message_delta").unwrap().1;
    // `stop` with a tool call is `tool_use`.
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
}
