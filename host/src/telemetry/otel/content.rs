//! Message content in the GenAI conventions' JSON shape (docs/tracing.md#message-content),
//! recorded only when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is true:
//! `gen_ai.input.messages` from the call's OpenAI-shaped messages, `gen_ai.output.messages`
//! from the answer. Text, tool calls and tool results are kept; any other part (an image, a
//! file, audio) is recorded by its type only, so no inline data reaches a span.

use serde_json::{Map, Value, json};

/// One tool call of an answer.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallPart<'a> {
    pub id: &'a str,
    pub name: &'a str,
    /// The arguments as the model wrote them (JSON text).
    pub arguments: &'a str,
}

/// An answer, for `gen_ai.output.messages`.
#[derive(Debug, Clone, Default)]
pub struct OutputMessage<'a> {
    pub text: &'a str,
    pub reasoning: Option<&'a str>,
    pub tool_calls: Vec<ToolCallPart<'a>>,
    pub finish_reason: Option<&'a str>,
}

/// Tool-call arguments as JSON when they parse, else as the text they are.
fn arguments(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// The parts of one message's `content` (a string or an array of parts).
fn content_parts(content: &Value, out: &mut Vec<Value>) {
    match content {
        Value::String(s) => out.push(json!({"type": "text", "content": s})),
        Value::Array(parts) => {
            for p in parts {
                match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("text"), Some(Value::String(t))) => {
                        out.push(json!({"type": "text", "content": t}));
                    }
                    (Some(other), _) => out.push(json!({"type": other})),
                    (None, _) => {}
                }
            }
        }
        _ => {}
    }
}

/// `gen_ai.input.messages`: the call's messages as `[{role, parts}]`.
pub(super) fn input_messages(messages: &[Value]) -> String {
    let out: Vec<Value> = messages
        .iter()
        .filter_map(Value::as_object)
        .map(input_message)
        .collect();
    Value::Array(out).to_string()
}

fn input_message(m: &Map<String, Value>) -> Value {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
    let mut parts = Vec::new();
    if role == "tool" {
        let response = match m.get("content") {
            Some(Value::String(s)) => Value::String(s.clone()),
            Some(other) => {
                let mut texts = Vec::new();
                content_parts(other, &mut texts);
                Value::Array(texts)
            }
            None => Value::Null,
        };
        parts.push(json!({
            "type": "tool_call_response",
            "id": m.get("tool_call_id").cloned().unwrap_or(Value::Null),
            "response": response,
        }));
    } else if let Some(c) = m.get("content") {
        content_parts(c, &mut parts);
    }
    if let Some(Value::Array(calls)) = m.get("tool_calls") {
        for c in calls {
            let f = c.get("function");
            let args = f
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
                .map(arguments)
                .unwrap_or(Value::Null);
            parts.push(json!({
                "type": "tool_call",
                "id": c.get("id").cloned().unwrap_or(Value::Null),
                "name": f.and_then(|f| f.get("name")).cloned().unwrap_or(Value::Null),
                "arguments": args,
            }));
        }
    }
    json!({"role": role, "parts": parts})
}

/// `gen_ai.output.messages`: the answer as one assistant message.
pub(super) fn output_messages(m: &OutputMessage<'_>) -> String {
    let mut parts = Vec::new();
    if let Some(r) = m.reasoning.filter(|r| !r.is_empty()) {
        parts.push(json!({"type": "reasoning", "content": r}));
    }
    if !m.text.is_empty() || m.tool_calls.is_empty() {
        parts.push(json!({"type": "text", "content": m.text}));
    }
    for c in &m.tool_calls {
        parts.push(json!({
            "type": "tool_call",
            "id": c.id,
            "name": c.name,
            "arguments": arguments(c.arguments),
        }));
    }
    let mut msg = json!({"role": "assistant", "parts": parts});
    if let Some(f) = m.finish_reason {
        msg["finish_reason"] = Value::String(f.to_string());
    }
    Value::Array(vec![msg]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_take_the_conventions_shape_without_inline_data() {
        let messages = vec![
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ]}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{\"x\":1}"}},
            ]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "a cat"}),
        ];
        let v: Value = serde_json::from_str(&input_messages(&messages)).unwrap();
        assert_eq!(
            v,
            json!([
                {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
                {"role": "user", "parts": [{"type": "text", "content": "what is this?"}, {"type": "image_url"}]},
                {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "look", "arguments": {"x": 1}}]},
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "a cat"}]},
            ])
        );
        let out = output_messages(&OutputMessage {
            text: "hi",
            reasoning: None,
            tool_calls: vec![],
            finish_reason: Some("stop"),
        });
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            json!([{"role": "assistant", "parts": [{"type": "text", "content": "hi"}], "finish_reason": "stop"}])
        );
    }
}
