//! The Responses dialect against OpenAI's documented shapes: the request mapping (every field
//! at fault named), the Response object of an answer, and the streamed sequence compared
//! event by event with the documented examples in `tests/fixtures/responses/` (ids and
//! timestamps normalised).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::request::parse;
use super::{Echo, ResponsesStream, answer};
use crate::error::GatewayError;
use crate::pipeline::{Accumulator, ChatRequest, ChatResponse, Ingress, StreamStart};
use crate::plugin::{
    Delta, EncryptedReasoning, FinishReason, ReasoningSignature, ToolCallDelta, Usage,
};
use crate::proxy::dialect::StreamEncoder;

const CALL: &str = "0190abc";

fn parsed(body: Value) -> (ChatRequest, Echo) {
    parse(body.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn param(body: Value) -> Option<String> {
    match parse(body.to_string().as_bytes()) {
        Err(GatewayError::InvalidRequest { param, .. }) => param,
        other => Some(format!("unexpected: {other:?}")),
    }
}

#[test]
fn a_string_input_is_one_user_message() {
    let (req, echo) = parsed(json!({"model": "llm", "input": "Say hi"}));
    assert_eq!(req.model, "llm");
    assert_eq!(
        req.messages,
        vec![json!({"role": "user", "content": "Say hi"})]
    );
    assert!(req.overlay.is_empty(), "{:?}", req.overlay);
    assert!(!req.stream);
    assert_eq!(req.ingress, Ingress::Responses);
    assert_eq!(
        Value::Object(echo.fields),
        json!({"instructions": null, "max_output_tokens": null, "temperature": null,
               "top_p": null, "tools": [], "tool_choice": "auto", "parallel_tool_calls": true,
               "text": {"format": {"type": "text"}}, "reasoning": {"effort": null, "summary": null},
               "user": null, "metadata": {}})
    );
    let (req, _) = parsed(json!({"model": "llm", "input": "x", "stream": true, "store": false}));
    assert!(req.stream && req.include_usage);
}

#[test]
fn every_field_maps_to_the_neutral_request() {
    let schema =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let tool = json!({"type": "function", "name": "get_weather", "description": "Weather.",
                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                      "strict": true});
    let (req, echo) = parsed(json!({
        "model": "llm",
        "instructions": "Be brief.",
        "input": [
            {"role": "developer", "content": "Answer in English."},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAA", "detail": "low"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think."}]},
            {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
             "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_A", "name": "get_weather",
             "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
            {"type": "function_call_output", "call_id": "call_A", "output": "sunny"},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [tool],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": false,
        "text": {"format": {"type": "json_schema", "name": "person", "schema": schema, "strict": true},
                 "verbosity": "low"},
        "reasoning": {"effort": "high", "summary": "auto"},
        "max_output_tokens": 256,
        "temperature": 0.5,
        "top_p": 0.9,
        "safety_identifier": "user-7",
        "metadata": {"Topic": "weather"},
        "include": ["reasoning.encrypted_content"],
        "truncation": "disabled",
        "service_tier": "auto",
        "stream": true,
        "stream_options": {"include_obfuscation": false},
    }));
    assert_eq!(
        req.messages,
        vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "system", "content": "Answer in English."}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA", "detail": "low"}}]}),
            json!({"role": "assistant", "content": "Let me check.", "reasoning_content": "Think.",
                   "tool_calls": [{"id": "call_A", "type": "function",
                                   "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}),
            json!({"role": "tool", "tool_call_id": "call_A", "content": "sunny"}),
            json!({"role": "user", "content": "Thanks"}),
        ]
    );
    assert_eq!(
        Value::Object(req.overlay.clone()),
        json!({
            "max_tokens": 256, "temperature": 0.5, "top_p": 0.9,
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                       "strict": true}}],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": false,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "person", "schema": schema, "strict": true}},
            "verbosity": "low",
            "reasoning_effort": "high",
            "user": "user-7",
        })
    );
    assert!(req.stream && req.include_usage);
    assert_eq!(echo.fields["instructions"], "Be brief.");
    assert_eq!(echo.fields["tools"], json!([tool]));
    assert_eq!(
        echo.fields["tool_choice"],
        json!({"type": "function", "name": "get_weather"})
    );
    assert_eq!(echo.fields["metadata"], json!({"Topic": "weather"}));
    assert_eq!(echo.fields["user"], "user-7");
    assert_eq!(echo.fields["max_output_tokens"], 256);
    // json_object, and a tool choice without tools (sent as neither).
    let (req, _) = parsed(
        json!({"model": "llm", "input": "x", "tool_choice": "required",
                                 "parallel_tool_calls": true, "text": {"format": {"type": "json_object"}}}),
    );
    assert_eq!(
        Value::Object(req.overlay),
        json!({"response_format": {"type": "json_object"}})
    );
}

#[test]
fn the_same_question_is_the_same_neutral_request_as_chat() {
    let (resp, _) = parsed(
        json!({"model": "llm", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "say hello"}]}], "max_output_tokens": 5}),
    );
    let chat = ChatRequest::from_openai_body(
        br#"{"model":"llm","messages":[{"role":"user","content":"say hello"}],"max_tokens":5}"#,
    )
    .unwrap();
    assert_eq!(resp.messages, chat.messages);
    assert_eq!(resp.overlay, chat.overlay);
}

#[test]
fn field_errors_name_the_field() {
    let base = |extra: Value| {
        let mut b = json!({"model": "llm", "input": "x"});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let item = |i: Value| json!({"model": "llm", "input": [i]});
    let cases = [
        (json!({"input": "x"}), "model"),
        (json!({"model": "llm"}), "input"),
        (json!({"model": "llm", "input": []}), "input"),
        (
            base(json!({"previous_response_id": "resp_1"})),
            "previous_response_id",
        ),
        (base(json!({"store": true})), "store"),
        (base(json!({"conversation": "conv_1"})), "conversation"),
        (base(json!({"background": true})), "background"),
        (base(json!({"prompt": {"id": "pmpt_1"}})), "prompt"),
        (base(json!({"frequency_penalty": 1})), "frequency_penalty"),
        (base(json!({"stream": "yes"})), "stream"),
        (base(json!({"stream_options": {}})), "stream_options"),
        (base(json!({"max_output_tokens": 0})), "max_output_tokens"),
        (base(json!({"temperature": "hot"})), "temperature"),
        (base(json!({"top_p": []})), "top_p"),
        (base(json!({"instructions": 3})), "instructions"),
        (
            base(json!({"tools": [{"type": "web_search"}]})),
            "tools[0].type",
        ),
        (
            base(json!({"tools": [{"type": "function", "name": "f"}, {"type": "file_search"}]})),
            "tools[1].type",
        ),
        (
            base(json!({"tools": [{"type": "function"}]})),
            "tools[0].name",
        ),
        (
            base(json!({"tools": [{"type": "function", "name": "f", "parameters": 1}]})),
            "tools[0].parameters",
        ),
        (
            base(json!({"tools": [{"type": "function", "name": "f", "defer_loading": true}]})),
            "tools[0].defer_loading",
        ),
        (base(json!({"tool_choice": "any"})), "tool_choice"),
        (
            base(json!({"tool_choice": {"type": "web_search_preview"}})),
            "tool_choice.type",
        ),
        (
            base(json!({"tool_choice": {"type": "function"}})),
            "tool_choice.name",
        ),
        (
            base(json!({"text": {"format": {"type": "xml"}}})),
            "text.format.type",
        ),
        (
            base(json!({"text": {"format": {"type": "json_schema", "name": "p"}}})),
            "text.format.schema",
        ),
        (
            base(json!({"text": {"format": {"type": "json_schema", "schema": {}}}})),
            "text.format.name",
        ),
        (
            base(json!({"text": {"verbosity": "loud"}})),
            "text.verbosity",
        ),
        (
            base(json!({"reasoning": {"effort": "max"}})),
            "reasoning.effort",
        ),
        (
            base(json!({"reasoning": {"summary": "long"}})),
            "reasoning.summary",
        ),
        (
            base(json!({"include": ["file_search_call.results"]})),
            "include[0]",
        ),
        (base(json!({"truncation": "auto"})), "truncation"),
        (base(json!({"top_logprobs": 2})), "top_logprobs"),
        (base(json!({"max_tool_calls": 3})), "max_tool_calls"),
        (base(json!({"user": 1})), "user"),
        (base(json!({"metadata": {"k": 1}})), "metadata.k"),
        (
            item(json!({"type": "item_reference", "id": "msg_1"})),
            "input[0].type",
        ),
        (
            item(json!({"type": "web_search_call", "id": "ws_1"})),
            "input[0].type",
        ),
        (
            item(json!({"role": "tool", "content": "x"})),
            "input[0].role",
        ),
        (item(json!({"role": "user"})), "input[0].content"),
        (
            item(json!({"role": "user", "content": "x", "name": "bob"})),
            "input[0].name",
        ),
        (
            item(json!({"role": "user", "content": [{"type": "input_file", "file_id": "f"}]})),
            "input[0].content[0].type",
        ),
        (
            item(
                json!({"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}),
            ),
            "input[0].content[0].file_id",
        ),
        (
            item(json!({"role": "system", "content": [{"type": "input_image", "image_url": "u"}]})),
            "input[0].content[0].type",
        ),
        (
            item(
                json!({"role": "assistant", "content": [{"type": "input_image", "image_url": "u"}]}),
            ),
            "input[0].content[0].type",
        ),
        (
            item(json!({"type": "function_call", "call_id": "c", "name": "f"})),
            "input[0].arguments",
        ),
        (
            item(json!({"type": "function_call_output", "call_id": "c", "output": 3})),
            "input[0].output",
        ),
        (
            item(json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAAABo"})),
            "input[0].encrypted_content",
        ),
        (
            item(json!({"type": "reasoning", "summary": [{"type": "summary_text"}]})),
            "input[0].summary[0].text",
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(param(body.clone()).as_deref(), Some(expected), "{body}");
    }
    assert_eq!(param(json!([])), None);
    assert!(matches!(
        parse(b"{"),
        Err(GatewayError::InvalidRequest { param: None, .. })
    ));
}

fn start() -> StreamStart {
    StreamStart {
        call_id: CALL.into(),
        source_name: "llm-openai-1".into(),
        model: "gpt-4.1".into(),
        model_reported: Some("gpt-4.1-2025-04-14".into()),
        attempts: 1,
        overhead_us: 0,
        created: 1_741_290_958,
        cache_hit: false,
        budget_warnings: Vec::new(),
    }
}

/// The answer the accumulated deltas make (what the pipeline hands `end`).
fn response(acc: &Accumulator) -> ChatResponse {
    ChatResponse {
        call_id: CALL.into(),
        scope: "LLM".into(),
        content: acc.content.clone(),
        reasoning: (!acc.reasoning.is_empty()).then(|| acc.reasoning.clone()),
        reasoning_details: acc.reasoning_details.entries().to_vec(),
        tool_calls: acc.tool_calls.clone(),
        finish_reason: acc.finish_reason.clone(),
        usage: acc.usage,
        usage_source: crate::telemetry::UsageSource::Measured,
        model: "gpt-4.1".into(),
        model_reported: acc.model_reported.clone(),
        source_name: "llm-openai-1".into(),
        provider: "openai".into(),
        attempts: 1,
        latency_ms: 3,
        created: 1_741_290_958,
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

fn usage(prompt: u64, completion: u64) -> Delta {
    Delta::Usage(Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        cached_prompt_tokens: None,
        reasoning_tokens: None,
        cache_write_tokens: None,
    })
}

fn tool(index: u32, id: Option<&str>, name: Option<&str>, args: &str) -> Delta {
    Delta::ToolCall(ToolCallDelta {
        index,
        id: id.map(str::to_string),
        name: name.map(str::to_string),
        arguments: Some(args.to_string()),
    })
}

/// Stream `deltas` through the encoder (in frames of 3, as bursts arrive) and end it;
/// returns the bytes and the answer.
fn stream(echo: Echo, deltas: &[Delta]) -> (String, ChatResponse) {
    let mut enc = ResponsesStream::new(&start(), echo);
    let mut acc = Accumulator {
        model_reported: Some("gpt-4.1-2025-04-14".into()),
        ..Default::default()
    };
    let mut out = Vec::new();
    for burst in deltas.chunks(3) {
        let mut frame = Vec::new();
        for d in burst {
            acc.apply(d);
            enc.delta(d, &mut frame);
        }
        out.extend_from_slice(&frame);
    }
    let r = response(&acc);
    enc.end(&r, &mut out);
    (String::from_utf8(out).unwrap(), r)
}

/// `(event name, data)` of each event of an SSE text, checking the framing byte for byte:
/// `event: <type>\ndata: <one line of JSON>\n\n`, the name equal to the data's `type`.
fn events(sse: &str) -> Vec<(String, Value)> {
    assert!(sse.ends_with("\n\n"), "{sse}");
    sse.split_terminator("\n\n")
        .map(|e| {
            let (name, data) = e
                .strip_prefix("event: ")
                .and_then(|e| e.split_once("\ndata: "))
                .unwrap_or_else(|| panic!("not an event: {e:?}"));
            assert!(!data.contains('\n'), "{data}");
            let v: Value = serde_json::from_str(data).unwrap();
            assert_eq!(v["type"], name, "{e}");
            (name.to_string(), v)
        })
        .collect()
}

/// Ids (`resp_…`, `msg_…`, `fc_…`, `rs_…`) replaced by their prefix and order of first
/// appearance, so two streams compare by structure.
fn normalise(v: &mut Value, seen: &mut HashMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if let (true, Value::String(s)) = (k == "id" || k == "item_id", &*x)
                    && let Some((prefix, _)) = s.split_once('_')
                {
                    let n = seen.len();
                    let id = seen
                        .entry(s.clone())
                        .or_insert_with(|| format!("{prefix}_{n}"))
                        .clone();
                    *x = Value::String(id);
                } else {
                    normalise(x, seen);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| normalise(x, seen)),
        _ => {}
    }
}

/// Fields OpenAI's service writes that the gateway does not: its service tier, the tool-call
/// and log-probability caps it applied, the stream obfuscation padding.
const SERVICE_ONLY: [&str; 4] = [
    "service_tier",
    "max_tool_calls",
    "top_logprobs",
    "obfuscation",
];
/// What the gateway writes beyond the documented examples: the prompt-cache writes it
/// reports for every source (0 when none).
const GATEWAY_ONLY: [&str; 1] = ["cache_write_tokens"];

/// `ours` equals `documented` but for the service-only and gateway-only fields.
fn same(ours: &Value, documented: &Value, at: &str) {
    match (ours, documented) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                if SERVICE_ONLY.contains(&k.as_str()) {
                    continue;
                }
                let mine = a
                    .get(k)
                    .unwrap_or_else(|| panic!("{at}.{k} missing in {ours}"));
                same(mine, v, &format!("{at}.{k}"));
            }
            for k in a.keys() {
                assert!(
                    b.contains_key(k) || GATEWAY_ONLY.contains(&k.as_str()),
                    "{at}.{k} not in the documented event {documented}"
                );
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}: {ours} vs {documented}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                same(x, y, &format!("{at}[{i}]"));
            }
        }
        // 1.0 and 1 are the same number in JSON.
        (Value::Number(a), Value::Number(b)) => assert_eq!(a.as_f64(), b.as_f64(), "{at}"),
        _ => assert_eq!(ours, documented, "{at}"),
    }
}

fn compare_with_fixture(sse: &str, fixture: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/responses")
        .join(fixture);
    let documented = std::fs::read_to_string(&path).unwrap();
    let (ours, theirs) = (events(sse), events(&documented));
    let names = |e: &[(String, Value)]| e.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&theirs), "{sse}");
    let (mut a, mut b) = (HashMap::new(), HashMap::new());
    for (i, ((_, mut x), (_, mut y))) in ours.into_iter().zip(theirs).enumerate() {
        normalise(&mut x, &mut a);
        normalise(&mut y, &mut b);
        assert_eq!(x["sequence_number"], i, "{x}");
        same(&x, &y, &format!("event {i}"));
    }
}

#[test]
fn a_streamed_text_answer_is_the_documented_sequence() {
    let (_, echo) = parsed(
        json!({"model": "llm", "input": "Say hi", "temperature": 1.0,
                                  "top_p": 1.0, "stream": true, "store": false}),
    );
    let mut deltas = vec![Delta::Role("assistant".into())];
    for t in ["Hi", " there", "!", " How", " can", " I", " help", "?"] {
        deltas.push(Delta::Content(t.into()));
    }
    deltas.extend([Delta::Finish(FinishReason::Stop), usage(9, 8), Delta::Done]);
    let (sse, _) = stream(echo, &deltas);
    compare_with_fixture(&sse, "stream_text.sse");
    // The hot path's bytes: one text delta exactly.
    let id = format!("msg_{CALL}_0");
    assert!(
        sse.contains(&format!(
            "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"item_id\":\"{id}\",\"output_index\":0,\"content_index\":0,\"delta\":\" there\",\"logprobs\":[],\"sequence_number\":5}}\n\n"
        )),
        "{sse}"
    );
}

#[test]
fn a_streamed_function_call_is_the_documented_sequence() {
    let tools = json!([{"type": "function", "description": "Get current temperature for a given location.",
        "name": "get_weather", "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
        "required": ["location"], "additionalProperties": false}, "strict": true}]);
    let (_, echo) = parsed(
        json!({"model": "llm", "input": "Weather in Paris?", "tools": tools,
                                  "temperature": 1, "top_p": 1, "stream": true}),
    );
    let mut deltas = vec![
        Delta::Role("assistant".into()),
        tool(
            0,
            Some("call_sFfbdqHSUhsUcYyLiI3rTnpS"),
            Some("get_weather"),
            "",
        ),
    ];
    for p in ["{\"", "location", "\":\"", "Paris", ",", " France", "\"}"] {
        deltas.push(tool(0, None, None, p));
    }
    deltas.extend([
        Delta::Finish(FinishReason::ToolCalls),
        usage(63, 17),
        Delta::Done,
    ]);
    let (sse, _) = stream(echo, &deltas);
    compare_with_fixture(&sse, "stream_function_call.sse");
}

#[test]
fn a_whole_answer_is_a_response_object() {
    let (_, echo) = parsed(
        json!({"model": "llm", "input": "hi", "max_output_tokens": 50,
                                  "metadata": {"run": "7"}}),
    );
    let mut acc = Accumulator::default();
    for d in [
        Delta::Reasoning("Think.".into()),
        Delta::Content("Let me check.".into()),
        tool(
            0,
            Some("call_A"),
            Some("get_weather"),
            "{\"city\":\"Paris\"}",
        ),
        tool(1, None, Some("get_time"), "{}"),
        Delta::Finish(FinishReason::ToolCalls),
        Delta::Usage(Usage {
            prompt_tokens: 20,
            completion_tokens: 9,
            cached_prompt_tokens: Some(4),
            reasoning_tokens: Some(3),
            cache_write_tokens: None,
        }),
    ] {
        acc.apply(&d);
    }
    let body: Value =
        serde_json::from_slice(&answer::response_body(&response(&acc), &echo)).unwrap();
    assert_eq!(
        body,
        json!({
            "id": format!("resp_{CALL}"), "object": "response", "created_at": 1_741_290_958,
            "status": "completed", "background": false, "error": null, "incomplete_details": null,
            "instructions": null, "max_output_tokens": 50, "model": "gpt-4.1",
            "output": [
                {"id": format!("rs_{CALL}_0"), "type": "reasoning", "status": "completed",
                 "summary": [{"type": "summary_text", "text": "Think."}]},
                {"id": format!("msg_{CALL}_1"), "type": "message", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "Let me check.", "annotations": [], "logprobs": []}]},
                {"id": format!("fc_{CALL}_2"), "type": "function_call", "status": "completed",
                 "call_id": "call_A", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
                {"id": format!("fc_{CALL}_3"), "type": "function_call", "status": "completed",
                 "call_id": format!("call_{CALL}_1"), "name": "get_time", "arguments": "{}"},
            ],
            "parallel_tool_calls": true, "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null}, "store": false, "temperature": null,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": null,
            "truncation": "disabled",
            "usage": {"input_tokens": 20, "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
                      "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 3},
                      "total_tokens": 29},
            "user": null, "metadata": {"run": "7"},
        })
    );
}

#[test]
fn a_length_stop_is_incomplete_and_a_refusal_a_refusal_part() {
    let (_, echo) = parsed(json!({"model": "llm", "input": "hi"}));
    let mut acc = Accumulator::default();
    acc.apply(&Delta::Content("Once upon".into()));
    acc.apply(&Delta::Finish(FinishReason::Length));
    let body: Value =
        serde_json::from_slice(&answer::response_body(&response(&acc), &echo)).unwrap();
    assert_eq!(body["status"], "incomplete");
    assert_eq!(
        body["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    assert_eq!(body["output"][0]["status"], "incomplete");
    assert_eq!(body["usage"], Value::Null);

    let mut acc = Accumulator::default();
    acc.apply(&Delta::Refusal("I can't help with that.".into()));
    acc.apply(&Delta::Finish(FinishReason::Stop));
    let body: Value =
        serde_json::from_slice(&answer::response_body(&response(&acc), &echo)).unwrap();
    assert_eq!(body["status"], "completed");
    assert_eq!(
        body["output"],
        json!([{"id": format!("msg_{CALL}_0"), "type": "message", "role": "assistant",
                "status": "completed",
                "content": [{"type": "refusal", "refusal": "I can't help with that."}]}])
    );
    // Streamed: the same refusal part, and `response.incomplete` on a length stop.
    let (sse, _) = stream(
        echo.clone(),
        &[
            Delta::Refusal("I can't".into()),
            Delta::Refusal(" help.".into()),
            Delta::Finish(FinishReason::Stop),
        ],
    );
    let ev = events(&sse);
    let names: Vec<_> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.refusal.delta",
            "response.refusal.delta",
            "response.refusal.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    assert_eq!(ev[6].1["refusal"], "I can't help.");
    assert_eq!(
        ev[9].1["response"]["output"][0]["content"],
        json!([{"type": "refusal", "refusal": "I can't help."}])
    );
    let (sse, _) = stream(
        echo,
        &[
            Delta::Content("Once".into()),
            Delta::Finish(FinishReason::Length),
        ],
    );
    let ev = events(&sse);
    let (name, last) = ev.last().unwrap();
    assert_eq!(name, "response.incomplete");
    assert_eq!(last["response"]["status"], "incomplete");
    assert_eq!(
        last["response"]["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    assert_eq!(last["response"]["output"][0]["status"], "incomplete");
}

fn sig(s: &str, format: &str) -> Delta {
    Delta::ReasoningSignature(ReasoningSignature {
        signature: s.into(),
        format: format.into(),
    })
}

#[test]
fn streamed_reasoning_is_a_reasoning_item_whose_entries_come_back() {
    let (_, echo) = parsed(json!({"model": "llm", "input": "hi", "stream": true}));
    let deltas = [
        Delta::Reasoning("Let me ".into()),
        Delta::Reasoning("think.".into()),
        sig("EqA1", "anthropic-claude-v1"),
        Delta::Content("Checking.".into()),
        tool(
            0,
            Some("toolu_1"),
            Some("get_weather"),
            "{\"city\":\"Paris\"}",
        ),
        Delta::ReasoningEncrypted(EncryptedReasoning {
            data: "CiIB".into(),
            id: Some("toolu_1".into()),
            format: "google-gemini-v1".into(),
        }),
        Delta::Finish(FinishReason::ToolCalls),
    ];
    let (sse, r) = stream(echo.clone(), &deltas);
    let ev = events(&sse);
    let names: Vec<_> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(
        ev[4].1,
        json!({"type": "response.reasoning_summary_text.delta", "item_id": format!("rs_{CALL}_0"),
               "output_index": 0, "summary_index": 0, "delta": "Let me ", "sequence_number": 4})
    );
    assert_eq!(ev[6].1["text"], "Let me think.");
    let output = ev[21].1["response"]["output"].as_array().unwrap().clone();
    assert_eq!(output.len(), 4);
    for (i, (_, e)) in ev.iter().enumerate() {
        assert_eq!(e["sequence_number"], i);
    }
    // Handed back as the client got it: the same neutral assistant message the whole answer
    // would have made, entries byte for byte.
    let mut input = vec![json!({"role": "user", "content": "hi"})];
    input.extend(output);
    input.push(json!({"type": "function_call_output", "call_id": "toolu_1", "output": "sunny"}));
    let (req, _) = parsed(json!({"model": "llm", "input": input}));
    assert_eq!(
        req.messages[1],
        json!({"role": "assistant", "content": "Checking.",
               "reasoning_details": r.reasoning_details,
               "tool_calls": [{"id": "toolu_1", "type": "function",
                               "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]})
    );
    assert_eq!(
        r.reasoning_details,
        vec![
            json!({"type": "reasoning.text", "text": "Let me think.", "signature": "EqA1",
                   "format": "anthropic-claude-v1", "index": 0}),
            json!({"type": "reasoning.encrypted", "data": "CiIB", "id": "toolu_1",
                   "format": "google-gemini-v1", "index": 1}),
        ]
    );
    // The whole answer's reasoning item comes back the same way.
    let whole: Value = serde_json::from_slice(&answer::response_body(&r, &echo)).unwrap();
    let mut input = vec![json!({"role": "user", "content": "hi"})];
    input.extend(whole["output"].as_array().unwrap().iter().cloned());
    input.push(json!({"type": "function_call_output", "call_id": "toolu_1", "output": "sunny"}));
    let (again, _) = parsed(json!({"model": "llm", "input": input}));
    assert_eq!(again.messages, req.messages);
}

#[test]
fn unsigned_reasoning_comes_back_as_reasoning_content() {
    let (_, echo) = parsed(json!({"model": "llm", "input": "hi"}));
    let mut acc = Accumulator::default();
    acc.apply(&Delta::Reasoning("Greet them.".into()));
    acc.apply(&Delta::Content("Hello!".into()));
    let r = response(&acc);
    let whole: Value = serde_json::from_slice(&answer::response_body(&r, &echo)).unwrap();
    assert_eq!(whole["output"][0].get("encrypted_content"), None);
    let mut input = vec![json!({"role": "user", "content": "hi"})];
    input.extend(whole["output"].as_array().unwrap().iter().cloned());
    input.push(json!({"role": "user", "content": "again"}));
    let (req, _) = parsed(json!({"model": "llm", "input": input}));
    assert_eq!(
        req.messages[1],
        json!({"role": "assistant", "content": "Hello!", "reasoning_content": "Greet them."})
    );
}

#[test]
fn a_failure_after_the_start_is_response_failed() {
    let (_, echo) = parsed(json!({"model": "llm", "input": "hi", "stream": true}));
    let mut enc = ResponsesStream::new(&start(), echo);
    let mut out = Vec::new();
    enc.delta(&Delta::Content("Hel".into()), &mut out);
    enc.failed(
        &GatewayError::StreamInterrupted {
            source_name: "llm-openai-1".into(),
            message: "upstream cut".into(),
        },
        &mut out,
    );
    let ev = events(&String::from_utf8(out).unwrap());
    let n = ev.len();
    assert_eq!(ev[n - 2].0, "error");
    assert_eq!(ev[n - 2].1["code"], "server_error");
    let (name, failed) = &ev[n - 1];
    assert_eq!(name, "response.failed");
    assert_eq!(failed["sequence_number"], n - 1);
    assert_eq!(failed["response"]["status"], "failed");
    assert_eq!(failed["response"]["error"]["code"], "server_error");
    assert_eq!(failed["response"]["error"]["type"], "stream_interrupted");
    assert!(
        failed["response"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("upstream cut"),
        "{failed}"
    );
}

#[test]
fn interleaved_kinds_are_items_in_order_and_come_back_as_one_turn() {
    let (_, echo) = parsed(json!({"model": "llm", "input": "hi", "stream": true}));
    let (sse, _) = stream(
        echo,
        &[
            Delta::Content("First.".into()),
            Delta::Reasoning("Hmm.".into()),
            Delta::Content("Second.".into()),
            Delta::Finish(FinishReason::Stop),
        ],
    );
    let ev = events(&sse);
    let (name, done) = ev.last().unwrap();
    assert_eq!(name, "response.completed");
    let output = done["response"]["output"].as_array().unwrap().clone();
    let kinds: Vec<_> = output
        .iter()
        .map(|i| (i["type"].as_str().unwrap(), i["id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("message", format!("msg_{CALL}_0").as_str()),
            ("reasoning", format!("rs_{CALL}_1").as_str()),
            ("message", format!("msg_{CALL}_2").as_str()),
        ]
    );
    // Each item announced once and done once, at its output index.
    for (ty, index) in [
        ("response.output_item.added", 0),
        ("response.output_item.done", 0),
    ] {
        let at: Vec<_> = ev
            .iter()
            .filter(|(n, _)| n == ty)
            .map(|(_, e)| e["output_index"].as_u64().unwrap())
            .collect();
        assert_eq!(at, [index, 1, 2], "{ty}");
    }
    let mut input = vec![json!({"role": "user", "content": "hi"})];
    input.extend(output);
    let (req, _) = parsed(json!({"model": "llm", "input": input}));
    assert_eq!(
        req.messages,
        vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "reasoning_content": "Hmm.", "content": [
                {"type": "text", "text": "First."}, {"type": "text", "text": "Second."}]}),
        ]
    );
}

#[test]
fn a_signature_after_a_function_call_leaves_the_call_one_item() {
    let (_, echo) = parsed(json!({"model": "llm", "input": "go", "stream": true,
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]}));
    let encrypted = Delta::ReasoningEncrypted(crate::plugin::EncryptedReasoning {
        data: "sig".into(),
        id: Some("call_1".into()),
        format: "google-gemini-v1".into(),
    });
    let deltas = [
        tool(0, Some("call_1"), Some("f"), "{\"a\":"),
        encrypted,
        tool(0, None, None, "1}"),
        Delta::Finish(FinishReason::ToolCalls),
    ];
    let (sse, _) = stream(echo, &deltas);
    let ev = events(&sse);
    let added: Vec<&Value> = ev
        .iter()
        .filter(|(n, _)| n == "response.output_item.added")
        .map(|(_, d)| &d["item"]["type"])
        .collect();
    assert_eq!(
        added,
        [&json!("function_call"), &json!("reasoning")],
        "{sse}"
    );
    let done = &ev
        .iter()
        .find(|(n, _)| n == "response.function_call_arguments.done")
        .unwrap()
        .1;
    assert_eq!(done["arguments"], "{\"a\":1}");
}
