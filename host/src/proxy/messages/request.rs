//! An Anthropic Messages request body → the call's neutral request (OpenAI-shaped messages and
//! parameters, with the conventions of `wit/types.wit`), every error naming its field as the
//! client spelled it (`messages[2].content[0].source.type`).
//!
//! The mapping (docs/dialects.md#messages):
//! - `system` (a string, or text blocks) → one system message (blocks keep `cache_control`);
//! - a user turn's `text` and `image` blocks (`base64` or `url` sources) → content parts
//!   (`image_url`, a base64 source as a `data:` URL); its `tool_result` blocks → `tool`
//!   messages, placed before the rest of the turn as OpenAI requires (`is_error: true` rides on
//!   the tool message);
//! - an assistant turn's `text` → content, `tool_use` → `tool_calls` (its `input` as the
//!   arguments text), `thinking` and `redacted_thinking` → `reasoning_details` entries
//!   (`signatures.rs`), thinking without a signature → `reasoning_content`;
//! - `max_tokens`, `temperature`, `top_p`, `top_k` as given, `stop_sequences` → `stop`,
//!   `tools` → function tools, `tool_choice` → its OpenAI value (`disable_parallel_tool_use`
//!   → `parallel_tool_calls: false`), `thinking` as given (the spelling Anthropic, DeepSeek
//!   and LiteLLM share; a provider without a thinking switch drops it), `metadata.user_id` →
//!   `user`, `output_config.format` → `response_format` (the structured-output ladder);
//!   `output_config.effort` is checked and not forwarded.
//!
//! What Anthropic's API refuses (an unknown field, a missing `max_tokens`) is refused here;
//! what it accepts but the gateway cannot carry (server tools, `document` blocks, MCP
//! servers) is a 400 naming it, never dropped silently.

use serde_json::{Map, Value, json};

use super::signatures;
use crate::error::GatewayError;
use crate::pipeline::{ChatRequest, Ingress};
use crate::proxy::neutral::{body_object, content_value, refuse_unknown, take_model, take_stream};

/// The top-level fields a Messages request may carry.
const KNOWN_FIELDS: [&str; 14] = [
    "model",
    "messages",
    "max_tokens",
    "system",
    "stop_sequences",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "thinking",
    "metadata",
    "output_config",
];

/// Fields Anthropic accepts that only tune Anthropic's own service, accepted and not
/// forwarded: `service_tier` (capacity class) and `context_management` (server-side edits
/// that clear old thinking or tool results from the context — Claude Code sends them on
/// every request; without them the whole context is sent, which only costs tokens).
const IGNORED_FIELDS: [&str; 2] = ["service_tier", "context_management"];

fn invalid(param: impl Into<String>, message: impl Into<String>) -> GatewayError {
    GatewayError::invalid(param, message)
}

/// Parse and map a Messages body.
///
/// Errors: invalid JSON, a missing or mistyped field, an unknown field, a block type the
/// gateway cannot carry → `InvalidRequest` naming the field.
pub(crate) fn parse(body: &[u8]) -> Result<ChatRequest, GatewayError> {
    let mut map = body_object(body)?;
    refuse_unknown(&map, &KNOWN_FIELDS, &IGNORED_FIELDS)?;
    let model = take_model(&mut map)?;
    let max_tokens = match map.remove("max_tokens") {
        Some(v) if v.as_u64().is_some_and(|n| n >= 1) => v,
        Some(_) => return Err(invalid("max_tokens", "`max_tokens` must be an integer ≥ 1")),
        None => return Err(invalid("max_tokens", "`max_tokens` is required")),
    };
    let stream = take_stream(&mut map)?;
    let mut messages = Vec::new();
    if let Some(system) = map.remove("system")
        && let Some(m) = system_message(system)?
    {
        messages.push(m);
    }
    let turns = match map.remove("messages") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => return Err(invalid("messages", "`messages` must not be empty")),
        Some(_) => return Err(invalid("messages", "`messages` must be an array")),
        None => return Err(invalid("messages", "`messages` is required")),
    };
    for (i, turn) in turns.into_iter().enumerate() {
        turn_messages(turn, i, &mut messages)?;
    }
    let mut overlay = Map::new();
    overlay.insert("max_tokens".into(), max_tokens);
    for key in ["temperature", "top_p", "top_k"] {
        match map.remove(key) {
            None | Some(Value::Null) => {}
            Some(v) if v.as_f64().is_some_and(f64::is_finite) => {
                overlay.insert(key.into(), v);
            }
            Some(_) => return Err(invalid(key, format!("`{key}` must be a finite number"))),
        }
    }
    match map.remove("stop_sequences") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
            if !a.is_empty() {
                overlay.insert("stop".into(), Value::Array(a));
            }
        }
        Some(_) => {
            return Err(invalid(
                "stop_sequences",
                "`stop_sequences` must be an array of strings",
            ));
        }
    }
    let has_tools = match map.remove("tools") {
        None | Some(Value::Null) => false,
        Some(Value::Array(tools)) => {
            let tools = tools
                .into_iter()
                .enumerate()
                .map(|(i, t)| function_tool(t, i))
                .collect::<Result<Vec<_>, _>>()?;
            let any = !tools.is_empty();
            if any {
                overlay.insert("tools".into(), Value::Array(tools));
            }
            any
        }
        Some(_) => return Err(invalid("tools", "`tools` must be an array")),
    };
    if let Some(choice) = map.remove("tool_choice").filter(|v| !v.is_null()) {
        tool_choice(choice, has_tools, &mut overlay)?;
    }
    if let Some(config) = map.remove("output_config").filter(|v| !v.is_null()) {
        output_config(config, &mut overlay)?;
    }
    if let Some(thinking) = map.remove("thinking").filter(|v| !v.is_null()) {
        check_thinking(&thinking)?;
        overlay.insert("thinking".into(), thinking);
    }
    if let Some(metadata) = map.remove("metadata").filter(|v| !v.is_null()) {
        let Value::Object(mut m) = metadata else {
            return Err(invalid("metadata", "`metadata` must be an object"));
        };
        match m.remove("user_id") {
            None | Some(Value::Null) => {}
            Some(Value::String(u)) => {
                overlay.insert("user".into(), Value::String(u));
            }
            Some(_) => {
                return Err(invalid(
                    "metadata.user_id",
                    "`metadata.user_id` must be a string",
                ));
            }
        }
        if let Some(k) = m.keys().next() {
            return Err(invalid(
                format!("metadata.{k}"),
                format!("`metadata.{k}`: unknown field (only `user_id` is defined)"),
            ));
        }
    }
    let mut req = ChatRequest::new(model, messages);
    req.overlay = overlay;
    req.stream = stream;
    // A Messages stream always ends with its usage (`message_delta`).
    req.include_usage = stream;
    req.ingress = Ingress::Messages;
    req.validate()?;
    Ok(req)
}

/// `system`: a string or an array of text blocks → one system message (`None` when empty).
fn system_message(system: Value) -> Result<Option<Value>, GatewayError> {
    match system {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        Value::String(s) => Ok(Some(json!({"role": "system", "content": s}))),
        Value::Array(blocks) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (j, b) in blocks.into_iter().enumerate() {
                let at = format!("system[{j}]");
                let mut b = object(b, &at)?;
                match block_type(&b, &at)?.as_str() {
                    "text" => parts.push(text_part(&mut b, &at)?),
                    other => {
                        return Err(invalid(
                            format!("{at}.type"),
                            format!("`{at}.type` must be `text`, got `{other}`"),
                        ));
                    }
                }
            }
            Ok((!parts.is_empty())
                .then(|| json!({"role": "system", "content": content_value(parts)})))
        }
        _ => Err(invalid(
            "system",
            "`system` must be a string or an array of text blocks",
        )),
    }
}

fn object(v: Value, at: &str) -> Result<Map<String, Value>, GatewayError> {
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(invalid(at, format!("`{at}` must be an object"))),
    }
}

fn block_type(b: &Map<String, Value>, at: &str) -> Result<String, GatewayError> {
    match b.get("type") {
        Some(Value::String(t)) => Ok(t.clone()),
        _ => Err(invalid(
            format!("{at}.type"),
            format!("`{at}.type` must be a string"),
        )),
    }
}

fn string_field(b: &mut Map<String, Value>, key: &str, at: &str) -> Result<String, GatewayError> {
    match b.remove(key) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(invalid(
            format!("{at}.{key}"),
            format!("`{at}.{key}` must be a string"),
        )),
    }
}

/// A `cache_control` carried onto the neutral part (`{"type": "ephemeral", "ttl"?}`).
fn carry_cache_control(
    b: &mut Map<String, Value>,
    part: &mut Map<String, Value>,
    at: &str,
) -> Result<(), GatewayError> {
    match b.remove("cache_control") {
        None | Some(Value::Null) => Ok(()),
        Some(c @ Value::Object(_)) => {
            part.insert("cache_control".into(), c);
            Ok(())
        }
        Some(_) => Err(invalid(
            format!("{at}.cache_control"),
            format!("`{at}.cache_control` must be an object"),
        )),
    }
}

/// A text block → `{"type": "text", "text", "cache_control"?}`. `citations` (Anthropic's
/// answer-side annotations, which a client may hand back) have no neutral spelling: they are
/// not carried, and the text is.
fn text_part(b: &mut Map<String, Value>, at: &str) -> Result<Value, GatewayError> {
    let text = string_field(b, "text", at)?;
    let mut part = Map::new();
    part.insert("type".into(), Value::from("text"));
    part.insert("text".into(), Value::String(text));
    carry_cache_control(b, &mut part, at)?;
    Ok(Value::Object(part))
}

/// An image block → `{"type": "image_url", "image_url": {"url"}}`.
fn image_part(b: &mut Map<String, Value>, at: &str) -> Result<Value, GatewayError> {
    let source_at = format!("{at}.source");
    let mut source = match b.remove("source") {
        Some(s) => object(s, &source_at)?,
        None => {
            return Err(invalid(&source_at, format!("`{source_at}` is required")));
        }
    };
    let url = match block_type(&source, &source_at)?.as_str() {
        "base64" => {
            let media = string_field(&mut source, "media_type", &source_at)?;
            let data = string_field(&mut source, "data", &source_at)?;
            format!("data:{media};base64,{data}")
        }
        "url" => string_field(&mut source, "url", &source_at)?,
        other => {
            return Err(invalid(
                format!("{source_at}.type"),
                format!("`{source_at}.type` must be `base64` or `url`, got `{other}`"),
            ));
        }
    };
    let mut part = Map::new();
    part.insert("type".into(), Value::from("image_url"));
    part.insert("image_url".into(), json!({ "url": url }));
    carry_cache_control(b, &mut part, at)?;
    Ok(Value::Object(part))
}

/// The neutral messages of one turn, appended to `out`.
fn turn_messages(turn: Value, i: usize, out: &mut Vec<Value>) -> Result<(), GatewayError> {
    let at = format!("messages[{i}]");
    let mut turn = object(turn, &at)?;
    let role = string_field(&mut turn, "role", &at)?;
    let content = turn.remove("content");
    if let Some(k) = turn.keys().next() {
        return Err(invalid(
            format!("{at}.{k}"),
            format!("`{at}.{k}`: unknown field"),
        ));
    }
    let blocks = match content {
        Some(Value::String(s)) => {
            out.push(json!({"role": role_name(&role, &at)?, "content": s}));
            return Ok(());
        }
        Some(Value::Array(blocks)) => blocks,
        _ => {
            return Err(invalid(
                format!("{at}.content"),
                format!("`{at}.content` must be a string or an array of blocks"),
            ));
        }
    };
    match role_name(&role, &at)? {
        "user" => user_turn(blocks, &at, out),
        "system" => system_turn(blocks, &at, out),
        _ => assistant_turn(blocks, &at, out),
    }
}

/// A turn's role: `user`, `assistant`, or `system` (an instruction in the middle of the
/// conversation, Anthropic's `mid-conversation-system` beta, which Claude Code sends).
fn role_name(role: &str, at: &str) -> Result<&'static str, GatewayError> {
    match role {
        "user" => Ok("user"),
        "assistant" => Ok("assistant"),
        "system" => Ok("system"),
        other => Err(invalid(
            format!("{at}.role"),
            format!("`{at}.role` must be `user`, `assistant` or `system`, got `{other}`"),
        )),
    }
}

/// A system turn in the conversation: its text blocks as one system message in place.
fn system_turn(blocks: Vec<Value>, at: &str, out: &mut Vec<Value>) -> Result<(), GatewayError> {
    let mut parts = Vec::with_capacity(blocks.len());
    for (j, b) in blocks.into_iter().enumerate() {
        let at = format!("{at}.content[{j}]");
        let mut b = object(b, &at)?;
        match block_type(&b, &at)?.as_str() {
            "text" => parts.push(text_part(&mut b, &at)?),
            other => return Err(unsupported_block(&at, other, "system")),
        }
    }
    if !parts.is_empty() {
        out.push(json!({"role": "system", "content": content_value(parts)}));
    }
    Ok(())
}

fn unsupported_block(at: &str, ty: &str, role: &str) -> GatewayError {
    invalid(
        format!("{at}.type"),
        format!("`{at}.type`: `{ty}` blocks are not supported in a {role} turn by this gateway"),
    )
}

fn user_turn(blocks: Vec<Value>, at: &str, out: &mut Vec<Value>) -> Result<(), GatewayError> {
    let mut parts = Vec::new();
    for (j, b) in blocks.into_iter().enumerate() {
        let at = format!("{at}.content[{j}]");
        let mut b = object(b, &at)?;
        match block_type(&b, &at)?.as_str() {
            "text" => parts.push(text_part(&mut b, &at)?),
            "image" => parts.push(image_part(&mut b, &at)?),
            "tool_result" => out.push(tool_message(&mut b, &at)?),
            other => return Err(unsupported_block(&at, other, "user")),
        }
    }
    if !parts.is_empty() {
        out.push(json!({"role": "user", "content": content_value(parts)}));
    }
    Ok(())
}

/// A `tool_result` block → `{"role": "tool", "tool_call_id", "content", "is_error"?}`.
fn tool_message(b: &mut Map<String, Value>, at: &str) -> Result<Value, GatewayError> {
    let id = string_field(b, "tool_use_id", at)?;
    let content = match b.remove("content") {
        None | Some(Value::Null) => Value::from(""),
        Some(Value::String(s)) => Value::String(s),
        Some(Value::Array(blocks)) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (k, inner) in blocks.into_iter().enumerate() {
                let at = format!("{at}.content[{k}]");
                let mut inner = object(inner, &at)?;
                match block_type(&inner, &at)?.as_str() {
                    "text" => parts.push(text_part(&mut inner, &at)?),
                    "image" => parts.push(image_part(&mut inner, &at)?),
                    other => return Err(unsupported_block(&at, other, "tool_result")),
                }
            }
            Value::Array(parts)
        }
        Some(_) => {
            return Err(invalid(
                format!("{at}.content"),
                format!("`{at}.content` must be a string or an array of blocks"),
            ));
        }
    };
    let mut m = Map::new();
    m.insert("role".into(), Value::from("tool"));
    m.insert("tool_call_id".into(), Value::String(id));
    m.insert("content".into(), content);
    match b.remove("is_error") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            m.insert("is_error".into(), Value::Bool(true));
        }
        Some(_) => {
            return Err(invalid(
                format!("{at}.is_error"),
                format!("`{at}.is_error` must be a boolean"),
            ));
        }
    }
    Ok(Value::Object(m))
}

fn assistant_turn(blocks: Vec<Value>, at: &str, out: &mut Vec<Value>) -> Result<(), GatewayError> {
    let mut parts = Vec::new();
    let mut tool_calls = Vec::new();
    let mut details = Vec::new();
    let mut unsigned = String::new();
    for (j, b) in blocks.into_iter().enumerate() {
        let at = format!("{at}.content[{j}]");
        let mut b = object(b, &at)?;
        match block_type(&b, &at)?.as_str() {
            "text" => parts.push(text_part(&mut b, &at)?),
            "tool_use" => {
                let id = string_field(&mut b, "id", &at)?;
                let name = string_field(&mut b, "name", &at)?;
                let input = match b.remove("input") {
                    // The gateway's wrapping of arguments that were not a JSON object
                    // (`answer.rs`): the model's text goes back as it wrote it.
                    Some(Value::Object(m))
                        if m.len() == 1 && m.get("_raw").is_some_and(Value::is_string) =>
                    {
                        m.get("_raw")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    }
                    Some(v @ Value::Object(_)) => v.to_string(),
                    _ => {
                        return Err(invalid(
                            format!("{at}.input"),
                            format!("`{at}.input` must be an object"),
                        ));
                    }
                };
                tool_calls.push(json!({
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": input},
                }));
            }
            "thinking" => {
                let text = string_field(&mut b, "thinking", &at)?;
                let signature = match b.remove("signature") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s,
                    Some(_) => {
                        return Err(invalid(
                            format!("{at}.signature"),
                            format!("`{at}.signature` must be a string"),
                        ));
                    }
                };
                if signature.is_empty() {
                    // Reasoning an unsigned source (DeepSeek, Qwen) produced: its spelling.
                    unsigned.push_str(&text);
                } else {
                    details.push(signatures::thinking_entry(&text, &signature, details.len()));
                }
            }
            "redacted_thinking" => {
                let data = string_field(&mut b, "data", &at)?;
                details.push(signatures::redacted_entry(&data, details.len()));
            }
            other => return Err(unsupported_block(&at, other, "assistant")),
        }
    }
    let mut m = Map::new();
    m.insert("role".into(), Value::from("assistant"));
    let content = if parts.is_empty() {
        Value::Null
    } else {
        content_value(parts)
    };
    m.insert("content".into(), content);
    if !unsigned.is_empty() {
        m.insert("reasoning_content".into(), Value::String(unsigned));
    }
    if !details.is_empty() {
        m.insert("reasoning_details".into(), Value::Array(details));
    }
    if !tool_calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    out.push(Value::Object(m));
    Ok(())
}

/// A custom tool → an OpenAI function tool (`cache_control` carried on the tool).
fn function_tool(t: Value, i: usize) -> Result<Value, GatewayError> {
    let at = format!("tools[{i}]");
    let mut t = object(t, &at)?;
    match t.remove("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(ty)) if ty == "custom" => {}
        Some(Value::String(ty)) => {
            return Err(invalid(
                format!("{at}.type"),
                format!(
                    "`{at}.type`: `{ty}` is a server tool, which this gateway cannot run; only custom tools are supported"
                ),
            ));
        }
        Some(_) => {
            return Err(invalid(
                format!("{at}.type"),
                format!("`{at}.type` must be a string"),
            ));
        }
    }
    let name = string_field(&mut t, "name", &at)?;
    let schema = match t.remove("input_schema") {
        Some(v @ Value::Object(_)) => v,
        _ => {
            return Err(invalid(
                format!("{at}.input_schema"),
                format!("`{at}.input_schema` must be an object"),
            ));
        }
    };
    let mut function = Map::new();
    function.insert("name".into(), Value::String(name));
    match t.remove("description") {
        None | Some(Value::Null) => {}
        Some(Value::String(d)) => {
            function.insert("description".into(), Value::String(d));
        }
        Some(_) => {
            return Err(invalid(
                format!("{at}.description"),
                format!("`{at}.description` must be a string"),
            ));
        }
    }
    function.insert("parameters".into(), schema);
    let mut tool = Map::new();
    tool.insert("type".into(), Value::from("function"));
    tool.insert("function".into(), Value::Object(function));
    carry_cache_control(&mut t, &mut tool, &at)?;
    if let Some(k) = t.keys().next() {
        return Err(invalid(
            format!("{at}.{k}"),
            format!("`{at}.{k}`: unknown field"),
        ));
    }
    Ok(Value::Object(tool))
}

/// `tool_choice` → OpenAI's: `auto` → `"auto"`, `any` → `"required"`, `none` → `"none"`,
/// `tool` → the named function; `disable_parallel_tool_use: true` →
/// `parallel_tool_calls: false`.
fn tool_choice(
    choice: Value,
    has_tools: bool,
    overlay: &mut Map<String, Value>,
) -> Result<(), GatewayError> {
    let mut c = object(choice, "tool_choice")?;
    let value = match block_type(&c, "tool_choice")?.as_str() {
        "auto" => Value::from("auto"),
        "any" => Value::from("required"),
        "none" => Value::from("none"),
        "tool" => {
            let name = string_field(&mut c, "name", "tool_choice")?;
            json!({"type": "function", "function": {"name": name}})
        }
        other => {
            return Err(invalid(
                "tool_choice.type",
                format!(
                    "`tool_choice.type` must be `auto`, `any`, `tool` or `none`, got `{other}`"
                ),
            ));
        }
    };
    if !has_tools {
        // Anthropic accepts a choice without tools; so does the gateway, sending neither.
        return Ok(());
    }
    overlay.insert("tool_choice".into(), value);
    match c.get("disable_parallel_tool_use") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            overlay.insert("parallel_tool_calls".into(), Value::Bool(false));
        }
        Some(_) => {
            return Err(invalid(
                "tool_choice.disable_parallel_tool_use",
                "`tool_choice.disable_parallel_tool_use` must be a boolean",
            ));
        }
    }
    Ok(())
}

/// `output_config`: `format` (`{"type": "json_schema", "schema"}`) → `response_format`, so the
/// answer goes through the structured-output ladder like any JSON-schema call; `effort`
/// (`low` … `max`) is checked and not forwarded: OpenAI's nearest key, `reasoning_effort`, is
/// refused by its non-reasoning models, and Claude Code sends an effort on every request —
/// how hard a source thinks is its `ENABLE_THINKING` / `THINKING_BUDGET` and the client's
/// `thinking`.
fn output_config(config: Value, overlay: &mut Map<String, Value>) -> Result<(), GatewayError> {
    let mut c = object(config, "output_config")?;
    match c.remove("effort") {
        None | Some(Value::Null) => {}
        Some(Value::String(e)) if matches!(e.as_str(), "low" | "medium" | "high" | "max") => {}
        Some(_) => {
            return Err(invalid(
                "output_config.effort",
                "`output_config.effort` must be `low`, `medium`, `high` or `max`",
            ));
        }
    }
    match c.remove("format") {
        None | Some(Value::Null) => {}
        Some(f) => {
            let mut f = object(f, "output_config.format")?;
            match f.remove("type") {
                Some(Value::String(t)) if t == "json_schema" => {}
                _ => {
                    return Err(invalid(
                        "output_config.format.type",
                        "`output_config.format.type` must be `json_schema`",
                    ));
                }
            }
            let schema = match f.remove("schema") {
                Some(s @ Value::Object(_)) => s,
                _ => {
                    return Err(invalid(
                        "output_config.format.schema",
                        "`output_config.format.schema` must be an object",
                    ));
                }
            };
            overlay.insert(
                "response_format".into(),
                json!({"type": "json_schema",
                       "json_schema": {"name": "output", "schema": schema, "strict": true}}),
            );
        }
    }
    if let Some(k) = c.keys().next() {
        return Err(invalid(
            format!("output_config.{k}"),
            format!("`output_config.{k}`: unknown field"),
        ));
    }
    Ok(())
}

/// `thinking`: `{"type": "enabled", "budget_tokens": n ≥ 1024}`, `{"type": "disabled"}` or
/// `{"type": "adaptive"}`.
fn check_thinking(t: &Value) -> Result<(), GatewayError> {
    let ty = t.get("type").and_then(Value::as_str);
    match ty {
        Some("enabled") => match t.get("budget_tokens").and_then(Value::as_u64) {
            Some(n) if n >= 1024 => Ok(()),
            _ => Err(invalid(
                "thinking.budget_tokens",
                "`thinking.budget_tokens` must be an integer ≥ 1024",
            )),
        },
        Some("disabled" | "adaptive") => Ok(()),
        _ => Err(invalid(
            "thinking.type",
            "`thinking.type` must be `enabled`, `disabled` or `adaptive`",
        )),
    }
}
