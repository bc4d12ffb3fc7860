//! An OpenAI Responses request body → the call's neutral request (OpenAI Chat-shaped messages
//! and parameters, with the conventions of `wit/types.wit`), every error naming its field as
//! the client spelled it (`input[2].content[0].image_url`).
//!
//! The mapping (docs/dialects.md#responses):
//! - `instructions` → a system message first; `input` as a string → one user message;
//! - `input` items: `message` (role `user`, `system`, `developer` → `system`, `assistant`)
//!   with `input_text` / `input_image` (user) or `output_text` / `refusal` (assistant) parts;
//!   `function_call` → the assistant message's `tool_calls`; `function_call_output` → a `tool`
//!   message; `reasoning` → the assistant message's `reasoning_details` (decoded from
//!   `encrypted_content`, `reasoning.rs`) and `reasoning_content` (its unsigned summary text).
//!   Consecutive assistant-side items (reasoning, assistant messages, function calls) are one
//!   assistant turn, as a Responses answer lists them;
//! - `tools` (function tools) → function tools, `tool_choice` → its Chat value, `text.format`
//!   → `response_format`, `text.verbosity` → `verbosity`, `reasoning.effort` →
//!   `reasoning_effort`, `max_output_tokens` → `max_tokens`, `temperature`, `top_p`,
//!   `parallel_tool_calls`, `user` (or `safety_identifier`) as given.
//!
//! What needs a response store or a tool the gateway does not run is a 400 naming the field:
//! `previous_response_id`, `conversation`, `store: true`, `background: true`, `prompt`,
//! `item_reference` items, built-in tools. An unknown field is a 400 too.

use serde_json::{Map, Value, json};

use super::Echo;
use super::reasoning;
use crate::error::GatewayError;
use crate::pipeline::{ChatRequest, Ingress};
use crate::proxy::neutral::{body_object, content_value, refuse_unknown, take_model, take_stream};

/// The top-level fields a Responses request may carry (some only with a value the gateway
/// can honour).
const KNOWN_FIELDS: [&str; 27] = [
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "text",
    "reasoning",
    "max_output_tokens",
    "temperature",
    "top_p",
    "parallel_tool_calls",
    "user",
    "safety_identifier",
    "metadata",
    "stream",
    "stream_options",
    "store",
    "include",
    "truncation",
    "top_logprobs",
    "max_tool_calls",
    "background",
    "previous_response_id",
    "conversation",
    "prompt",
    "service_tier",
    "prompt_cache_key",
];

/// Accepted and not forwarded: they tune OpenAI's own service and change nothing about the
/// answer.
const IGNORED_FIELDS: [&str; 2] = ["service_tier", "prompt_cache_key"];

fn invalid(param: impl Into<String>, message: impl Into<String>) -> GatewayError {
    GatewayError::invalid(param, message)
}

fn no_store(field: &str, what: &str) -> GatewayError {
    invalid(
        field,
        format!(
            "`{field}`: {what}; this gateway stores no responses (send the whole conversation in `input`)"
        ),
    )
}

/// Parse and map a Responses body; the echo holds the fields the Response object repeats.
///
/// Errors: invalid JSON, a missing or mistyped field, an unknown field, a field or item that
/// needs a response store or a built-in tool → `InvalidRequest` naming the field.
pub(crate) fn parse(body: &[u8]) -> Result<(ChatRequest, Echo), GatewayError> {
    let mut map = body_object(body)?;
    refuse_unknown(&map, &KNOWN_FIELDS, &[])?;
    refuse_stateful(&mut map)?;
    for k in IGNORED_FIELDS {
        map.remove(k);
    }
    let model = take_model(&mut map)?;
    let stream = take_stream(&mut map)?;
    match map.remove("stream_options") {
        None | Some(Value::Null) => {}
        // `include_obfuscation` only pads events against side channels: nothing to carry.
        Some(Value::Object(_)) if stream => {}
        Some(Value::Object(_)) => {
            return Err(invalid(
                "stream_options",
                "`stream_options` is only allowed when `stream` is true",
            ));
        }
        Some(_) => {
            return Err(invalid(
                "stream_options",
                "`stream_options` must be an object",
            ));
        }
    }
    check_include(map.remove("include"))?;
    check_unsupported_values(&mut map)?;

    let mut echo = Map::new();
    let mut messages = Vec::new();
    match map.remove("instructions") {
        None | Some(Value::Null) => {
            echo.insert("instructions".into(), Value::Null);
        }
        Some(Value::String(s)) => {
            if !s.is_empty() {
                messages.push(json!({"role": "system", "content": s}));
            }
            echo.insert("instructions".into(), Value::String(s));
        }
        Some(_) => return Err(invalid("instructions", "`instructions` must be a string")),
    }
    match map.remove("input") {
        Some(Value::String(s)) => messages.push(json!({"role": "user", "content": s})),
        Some(Value::Array(items)) => input_items(items, &mut messages)?,
        Some(_) => {
            return Err(invalid(
                "input",
                "`input` must be a string or an array of items",
            ));
        }
        None => return Err(invalid("input", "`input` is required")),
    }
    if messages.is_empty() {
        return Err(invalid("input", "`input` must not be empty"));
    }

    let mut overlay = Map::new();
    match map.remove("max_output_tokens") {
        None | Some(Value::Null) => {
            echo.insert("max_output_tokens".into(), Value::Null);
        }
        Some(v) if v.as_u64().is_some_and(|n| n >= 1) => {
            overlay.insert("max_tokens".into(), v.clone());
            echo.insert("max_output_tokens".into(), v);
        }
        Some(_) => {
            return Err(invalid(
                "max_output_tokens",
                "`max_output_tokens` must be an integer ≥ 1",
            ));
        }
    }
    for key in ["temperature", "top_p"] {
        match map.remove(key) {
            None | Some(Value::Null) => {
                echo.insert(key.into(), Value::Null);
            }
            Some(v) if v.as_f64().is_some_and(f64::is_finite) => {
                overlay.insert(key.into(), v.clone());
                echo.insert(key.into(), v);
            }
            Some(_) => return Err(invalid(key, format!("`{key}` must be a finite number"))),
        }
    }
    let tools = match map.remove("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(invalid("tools", "`tools` must be an array")),
    };
    let neutral_tools = tools
        .iter()
        .enumerate()
        .map(|(i, t)| function_tool(t, i))
        .collect::<Result<Vec<_>, _>>()?;
    let has_tools = !neutral_tools.is_empty();
    if has_tools {
        overlay.insert("tools".into(), Value::Array(neutral_tools));
    }
    echo.insert("tools".into(), Value::Array(tools));
    match map.remove("tool_choice") {
        None | Some(Value::Null) => {
            echo.insert("tool_choice".into(), Value::from("auto"));
        }
        Some(choice) => {
            let neutral = tool_choice(&choice)?;
            // OpenAI's Chat API refuses a choice without tools; so the gateway sends neither.
            if has_tools {
                overlay.insert("tool_choice".into(), neutral);
            }
            echo.insert("tool_choice".into(), choice);
        }
    }
    match map.remove("parallel_tool_calls") {
        None | Some(Value::Null) => {
            echo.insert("parallel_tool_calls".into(), Value::Bool(true));
        }
        Some(Value::Bool(b)) => {
            if has_tools {
                overlay.insert("parallel_tool_calls".into(), Value::Bool(b));
            }
            echo.insert("parallel_tool_calls".into(), Value::Bool(b));
        }
        Some(_) => {
            return Err(invalid(
                "parallel_tool_calls",
                "`parallel_tool_calls` must be a boolean",
            ));
        }
    }
    let text = match map.remove("text") {
        None | Some(Value::Null) => json!({"format": {"type": "text"}}),
        Some(t) => {
            text_config(&t, &mut overlay)?;
            t
        }
    };
    echo.insert("text".into(), text);
    let reasoning_echo = match map.remove("reasoning") {
        None | Some(Value::Null) => json!({"effort": null, "summary": null}),
        Some(r) => {
            reasoning_config(&r, &mut overlay)?;
            r
        }
    };
    echo.insert("reasoning".into(), reasoning_echo);
    let mut user = None;
    for key in ["user", "safety_identifier"] {
        match map.remove(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(u)) => {
                // `safety_identifier` is OpenAI's newer name for the same caller id.
                if key == "user" || user.is_none() {
                    user = Some(u);
                }
            }
            Some(_) => return Err(invalid(key, format!("`{key}` must be a string"))),
        }
    }
    if let Some(u) = &user {
        overlay.insert("user".into(), Value::String(u.clone()));
    }
    echo.insert("user".into(), user.map_or(Value::Null, Value::String));
    let metadata = match map.remove("metadata") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => {
            check_metadata(&m)?;
            m
        }
        Some(_) => return Err(invalid("metadata", "`metadata` must be an object")),
    };
    echo.insert("metadata".into(), Value::Object(metadata));
    // Every field was consumed or refused above; a key left here is a bug of this function.
    debug_assert!(map.is_empty(), "unmapped fields: {map:?}");

    let mut req = ChatRequest::new(model, messages);
    req.overlay = overlay;
    req.stream = stream;
    // A Responses stream always ends with its usage (`response.completed`).
    req.include_usage = stream;
    req.ingress = Ingress::Responses;
    req.validate()?;
    Ok((req, Echo { fields: echo }))
}

/// The fields that need a response store, a conversation or background runs: refused,
/// naming the field. `store` defaults to true in OpenAI's API, but the official SDKs send it
/// only when asked: an absent `store` is a stateless call and accepted, an explicit `true` is
/// refused (the client would expect to fetch the response later).
fn refuse_stateful(map: &mut Map<String, Value>) -> Result<(), GatewayError> {
    match map.remove("previous_response_id") {
        None | Some(Value::Null) => {}
        Some(_) => {
            return Err(no_store(
                "previous_response_id",
                "continuing a stored response is not supported",
            ));
        }
    }
    match map.remove("conversation") {
        None | Some(Value::Null) => {}
        Some(_) => return Err(no_store("conversation", "conversations are not supported")),
    }
    match map.remove("store") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            return Err(no_store(
                "store",
                "`true` is not supported (send `store: false` or leave it out)",
            ));
        }
        Some(_) => return Err(invalid("store", "`store` must be a boolean")),
    }
    match map.remove("background") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            return Err(no_store(
                "background",
                "background responses are not supported",
            ));
        }
        Some(_) => return Err(invalid("background", "`background` must be a boolean")),
    }
    match map.remove("prompt") {
        None | Some(Value::Null) => {}
        Some(_) => {
            return Err(invalid(
                "prompt",
                "`prompt`: stored prompt templates are not supported by this gateway (send `instructions` and `input`)",
            ));
        }
    }
    Ok(())
}

/// `include`: only `reasoning.encrypted_content`, which every answer with reasoning to hand
/// back carries anyway (the gateway is stateless).
fn check_include(include: Option<Value>) -> Result<(), GatewayError> {
    match include {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(a)) => {
            for (i, v) in a.iter().enumerate() {
                match v.as_str() {
                    Some("reasoning.encrypted_content") => {}
                    Some(other) => {
                        return Err(invalid(
                            format!("include[{i}]"),
                            format!(
                                "`include[{i}]`: `{other}` is not supported by this gateway (only `reasoning.encrypted_content`)"
                            ),
                        ));
                    }
                    None => {
                        return Err(invalid(
                            format!("include[{i}]"),
                            format!("`include[{i}]` must be a string"),
                        ));
                    }
                }
            }
            Ok(())
        }
        Some(_) => Err(invalid("include", "`include` must be an array of strings")),
    }
}

/// Fields accepted only with the value that asks for nothing: `truncation: "disabled"` (the
/// gateway never drops input), `top_logprobs: 0`, `max_tool_calls: null` (it runs no tools).
fn check_unsupported_values(map: &mut Map<String, Value>) -> Result<(), GatewayError> {
    match map.remove("truncation") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "disabled" => {}
        Some(_) => {
            return Err(invalid(
                "truncation",
                "`truncation`: only `disabled` is supported (the gateway never drops input)",
            ));
        }
    }
    match map.remove("top_logprobs") {
        None | Some(Value::Null) => {}
        Some(v) if v.as_u64() == Some(0) => {}
        Some(_) => {
            return Err(invalid(
                "top_logprobs",
                "`top_logprobs`: log probabilities are not supported by this gateway",
            ));
        }
    }
    match map.remove("max_tool_calls") {
        None | Some(Value::Null) => {}
        Some(_) => {
            return Err(invalid(
                "max_tool_calls",
                "`max_tool_calls` applies to built-in tools, which this gateway does not run",
            ));
        }
    }
    Ok(())
}

/// OpenAI's metadata rules: at most 16 string values, keys ≤ 64 and values ≤ 512 characters.
fn check_metadata(m: &Map<String, Value>) -> Result<(), GatewayError> {
    if m.len() > 16 {
        return Err(invalid("metadata", "`metadata` has more than 16 keys"));
    }
    for (k, v) in m {
        if k.chars().count() > 64 {
            return Err(invalid(
                format!("metadata.{k}"),
                "a `metadata` key must be at most 64 characters",
            ));
        }
        match v {
            Value::String(s) if s.chars().count() <= 512 => {}
            _ => {
                return Err(invalid(
                    format!("metadata.{k}"),
                    format!("`metadata.{k}` must be a string of at most 512 characters"),
                ));
            }
        }
    }
    Ok(())
}

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, GatewayError> {
    v.as_object()
        .ok_or_else(|| invalid(at, format!("`{at}` must be an object")))
}

fn str_field<'a>(m: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a str, GatewayError> {
    match m.get(key) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(invalid(
            format!("{at}.{key}"),
            format!("`{at}.{key}` must be a string"),
        )),
    }
}

/// A key of `m` not in `known`, as a 400 naming it.
fn only_known(m: &Map<String, Value>, known: &[&str], at: &str) -> Result<(), GatewayError> {
    match m.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(invalid(
            format!("{at}.{k}"),
            format!("`{at}.{k}`: unknown or unsupported field"),
        )),
    }
}

/// A function tool → `{"type": "function", "function": {name, description?, parameters,
/// strict?}}`; any other type (built-in tools the gateway cannot run) is refused.
fn function_tool(t: &Value, i: usize) -> Result<Value, GatewayError> {
    let at = format!("tools[{i}]");
    let t = object(t, &at)?;
    match t.get("type") {
        Some(Value::String(ty)) if ty == "function" => {}
        Some(Value::String(ty)) => {
            return Err(invalid(
                format!("{at}.type"),
                format!(
                    "`{at}.type`: `{ty}` tools are not supported by this gateway (it runs no tools); only `function` tools"
                ),
            ));
        }
        _ => {
            return Err(invalid(
                format!("{at}.type"),
                format!("`{at}.type` must be a string"),
            ));
        }
    }
    only_known(
        t,
        &["type", "name", "description", "parameters", "strict"],
        &at,
    )?;
    let mut function = Map::new();
    function.insert("name".into(), Value::from(str_field(t, "name", &at)?));
    match t.get("description") {
        None | Some(Value::Null) => {}
        Some(Value::String(d)) => {
            function.insert("description".into(), Value::from(d.as_str()));
        }
        Some(_) => {
            return Err(invalid(
                format!("{at}.description"),
                format!("`{at}.description` must be a string"),
            ));
        }
    }
    match t.get("parameters") {
        // OpenAI allows a function without parameters; Chat wants an object schema.
        None | Some(Value::Null) => {
            function.insert(
                "parameters".into(),
                json!({"type": "object", "properties": {}}),
            );
        }
        Some(p @ Value::Object(_)) => {
            function.insert("parameters".into(), p.clone());
        }
        Some(_) => {
            return Err(invalid(
                format!("{at}.parameters"),
                format!("`{at}.parameters` must be an object"),
            ));
        }
    }
    match t.get("strict") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => {
            function.insert("strict".into(), Value::Bool(*b));
        }
        Some(_) => {
            return Err(invalid(
                format!("{at}.strict"),
                format!("`{at}.strict` must be a boolean"),
            ));
        }
    }
    Ok(json!({"type": "function", "function": function}))
}

/// `tool_choice`: `none` / `auto` / `required` as given, `{"type": "function", "name"}` → the
/// named function; a built-in tool type or `allowed_tools` is refused.
fn tool_choice(choice: &Value) -> Result<Value, GatewayError> {
    match choice {
        Value::String(s) if matches!(s.as_str(), "none" | "auto" | "required") => {
            Ok(choice.clone())
        }
        Value::String(s) => Err(invalid(
            "tool_choice",
            format!("`tool_choice` must be `none`, `auto`, `required` or a function, got `{s}`"),
        )),
        Value::Object(c) => match c.get("type").and_then(Value::as_str) {
            Some("function") => {
                only_known(c, &["type", "name"], "tool_choice")?;
                let name = str_field(c, "name", "tool_choice")?;
                Ok(json!({"type": "function", "function": {"name": name}}))
            }
            Some(other) => Err(invalid(
                "tool_choice.type",
                format!(
                    "`tool_choice.type`: `{other}` is not supported by this gateway (only `function`)"
                ),
            )),
            None => Err(invalid(
                "tool_choice.type",
                "`tool_choice.type` must be a string",
            )),
        },
        _ => Err(invalid(
            "tool_choice",
            "`tool_choice` must be a string or an object",
        )),
    }
}

/// `text`: `format` (`text`, `json_object`, `json_schema`) → `response_format`, so the call
/// takes the structured-output ladder; `verbosity` → `verbosity` (Chat's spelling).
fn text_config(t: &Value, overlay: &mut Map<String, Value>) -> Result<(), GatewayError> {
    let t = object(t, "text")?;
    only_known(t, &["format", "verbosity"], "text")?;
    match t.get("verbosity") {
        None | Some(Value::Null) => {}
        Some(v @ Value::String(s)) if matches!(s.as_str(), "low" | "medium" | "high") => {
            overlay.insert("verbosity".into(), v.clone());
        }
        Some(_) => {
            return Err(invalid(
                "text.verbosity",
                "`text.verbosity` must be `low`, `medium` or `high`",
            ));
        }
    }
    let Some(format) = t.get("format").filter(|f| !f.is_null()) else {
        return Ok(());
    };
    let f = object(format, "text.format")?;
    match f.get("type").and_then(Value::as_str) {
        Some("text") => {
            only_known(f, &["type"], "text.format")?;
        }
        Some("json_object") => {
            only_known(f, &["type"], "text.format")?;
            overlay.insert("response_format".into(), json!({"type": "json_object"}));
        }
        Some("json_schema") => {
            only_known(
                f,
                &["type", "name", "schema", "strict", "description"],
                "text.format",
            )?;
            let mut js = Map::new();
            js.insert(
                "name".into(),
                Value::from(str_field(f, "name", "text.format")?),
            );
            match f.get("schema") {
                Some(s @ Value::Object(_)) => {
                    js.insert("schema".into(), s.clone());
                }
                _ => {
                    return Err(invalid(
                        "text.format.schema",
                        "`text.format.schema` must be an object",
                    ));
                }
            }
            match f.get("strict") {
                None | Some(Value::Null) => {}
                Some(Value::Bool(b)) => {
                    js.insert("strict".into(), Value::Bool(*b));
                }
                Some(_) => {
                    return Err(invalid(
                        "text.format.strict",
                        "`text.format.strict` must be a boolean",
                    ));
                }
            }
            match f.get("description") {
                None | Some(Value::Null) => {}
                Some(d @ Value::String(_)) => {
                    js.insert("description".into(), d.clone());
                }
                Some(_) => {
                    return Err(invalid(
                        "text.format.description",
                        "`text.format.description` must be a string",
                    ));
                }
            }
            overlay.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": js}),
            );
        }
        _ => {
            return Err(invalid(
                "text.format.type",
                "`text.format.type` must be `text`, `json_object` or `json_schema`",
            ));
        }
    }
    Ok(())
}

/// `reasoning`: `effort` → `reasoning_effort`; `summary` (`auto`, `concise`, `detailed`) is
/// accepted: the answer's reasoning item carries the model's reasoning text as it came.
fn reasoning_config(r: &Value, overlay: &mut Map<String, Value>) -> Result<(), GatewayError> {
    let r = object(r, "reasoning")?;
    only_known(r, &["effort", "summary", "generate_summary"], "reasoning")?;
    match r.get("effort") {
        None | Some(Value::Null) => {}
        Some(v @ Value::String(s))
            if matches!(
                s.as_str(),
                "none" | "minimal" | "low" | "medium" | "high" | "xhigh"
            ) =>
        {
            overlay.insert("reasoning_effort".into(), v.clone());
        }
        Some(_) => {
            return Err(invalid(
                "reasoning.effort",
                "`reasoning.effort` must be `none`, `minimal`, `low`, `medium`, `high` or `xhigh`",
            ));
        }
    }
    for key in ["summary", "generate_summary"] {
        match r.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if matches!(s.as_str(), "auto" | "concise" | "detailed") => {}
            Some(_) => {
                return Err(invalid(
                    format!("reasoning.{key}"),
                    format!("`reasoning.{key}` must be `auto`, `concise` or `detailed`"),
                ));
            }
        }
    }
    Ok(())
}

/// The assistant turn being assembled from consecutive assistant-side items.
#[derive(Default)]
struct AssistantTurn {
    parts: Vec<Value>,
    refusal: String,
    tool_calls: Vec<Value>,
    details: Vec<Value>,
    unsigned: String,
    open: bool,
}

impl AssistantTurn {
    /// Close the turn into a message (nothing when no assistant item was seen).
    fn flush(&mut self, out: &mut Vec<Value>) {
        if !std::mem::take(&mut self.open) {
            return;
        }
        let t = std::mem::take(self);
        let mut m = Map::new();
        m.insert("role".into(), Value::from("assistant"));
        let content = if t.parts.is_empty() {
            Value::Null
        } else {
            content_value(t.parts)
        };
        m.insert("content".into(), content);
        if !t.refusal.is_empty() {
            m.insert("refusal".into(), Value::String(t.refusal));
        }
        if !t.unsigned.is_empty() {
            m.insert("reasoning_content".into(), Value::String(t.unsigned));
        }
        if !t.details.is_empty() {
            m.insert("reasoning_details".into(), Value::Array(t.details));
        }
        if !t.tool_calls.is_empty() {
            m.insert("tool_calls".into(), Value::Array(t.tool_calls));
        }
        out.push(Value::Object(m));
    }
}

fn item_type<'a>(m: &'a Map<String, Value>, at: &str) -> Result<&'a str, GatewayError> {
    match m.get("type") {
        // An "easy" input message has no type.
        None | Some(Value::Null) if m.contains_key("role") => Ok("message"),
        Some(Value::String(t)) => Ok(t),
        _ => Err(invalid(
            format!("{at}.type"),
            format!("`{at}.type` must be a string"),
        )),
    }
}

fn input_items(items: Vec<Value>, out: &mut Vec<Value>) -> Result<(), GatewayError> {
    let mut turn = AssistantTurn::default();
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        let m = object(item, &at)?;
        match item_type(m, &at)? {
            "message" => {
                let role = str_field(m, "role", &at)?;
                only_known(
                    m,
                    &["type", "role", "content", "id", "status", "phase"],
                    &at,
                )?;
                if role == "assistant" {
                    turn.open = true;
                    assistant_content(m, &at, &mut turn)?;
                } else {
                    turn.flush(out);
                    out.push(input_message(m, role, &at)?);
                }
            }
            "function_call" => {
                only_known(
                    m,
                    &[
                        "type",
                        "id",
                        "call_id",
                        "name",
                        "arguments",
                        "status",
                        "namespace",
                    ],
                    &at,
                )?;
                let call_id = str_field(m, "call_id", &at)?;
                let name = str_field(m, "name", &at)?;
                let arguments = str_field(m, "arguments", &at)?;
                turn.open = true;
                turn.tool_calls.push(json!({
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }));
            }
            "function_call_output" => {
                only_known(m, &["type", "id", "call_id", "output", "status"], &at)?;
                turn.flush(out);
                let call_id = str_field(m, "call_id", &at)?;
                let content = match m.get("output") {
                    Some(Value::String(s)) => Value::from(s.as_str()),
                    Some(Value::Array(parts)) => {
                        let mut neutral = Vec::with_capacity(parts.len());
                        for (j, p) in parts.iter().enumerate() {
                            neutral.push(input_part(p, &format!("{at}.output[{j}]"))?);
                        }
                        Value::Array(neutral)
                    }
                    _ => {
                        return Err(invalid(
                            format!("{at}.output"),
                            format!("`{at}.output` must be a string or an array of parts"),
                        ));
                    }
                };
                out.push(json!({"role": "tool", "tool_call_id": call_id, "content": content}));
            }
            "reasoning" => {
                only_known(
                    m,
                    &[
                        "type",
                        "id",
                        "summary",
                        "content",
                        "encrypted_content",
                        "status",
                    ],
                    &at,
                )?;
                turn.open = true;
                reasoning_item(m, &at, &mut turn)?;
            }
            "item_reference" => {
                return Err(invalid(
                    format!("{at}.type"),
                    format!(
                        "`{at}.type`: `item_reference` needs a response store, which this gateway does not keep; hand back the item itself"
                    ),
                ));
            }
            other => {
                return Err(invalid(
                    format!("{at}.type"),
                    format!("`{at}.type`: `{other}` items are not supported by this gateway"),
                ));
            }
        }
    }
    turn.flush(out);
    Ok(())
}

/// A user, system or developer message (developer → system: every provider reads it).
fn input_message(m: &Map<String, Value>, role: &str, at: &str) -> Result<Value, GatewayError> {
    let role = match role {
        "user" => "user",
        "system" | "developer" => "system",
        other => {
            return Err(invalid(
                format!("{at}.role"),
                format!(
                    "`{at}.role` must be `user`, `assistant`, `system` or `developer`, got `{other}`"
                ),
            ));
        }
    };
    let content = match m.get("content") {
        Some(Value::String(s)) => Value::from(s.as_str()),
        Some(Value::Array(parts)) => {
            let mut neutral = Vec::with_capacity(parts.len());
            for (j, p) in parts.iter().enumerate() {
                let part = input_part(p, &format!("{at}.content[{j}]"))?;
                if role == "system" && part.get("type").and_then(Value::as_str) != Some("text") {
                    return Err(invalid(
                        format!("{at}.content[{j}].type"),
                        format!("`{at}.content[{j}].type`: a {role} message takes text only"),
                    ));
                }
                neutral.push(part);
            }
            content_value(neutral)
        }
        _ => {
            return Err(invalid(
                format!("{at}.content"),
                format!("`{at}.content` must be a string or an array of parts"),
            ));
        }
    };
    Ok(json!({"role": role, "content": content}))
}

/// An `input_text` or `input_image` part → a Chat content part.
fn input_part(p: &Value, at: &str) -> Result<Value, GatewayError> {
    let p = object(p, at)?;
    match p.get("type").and_then(Value::as_str) {
        Some("input_text") => {
            only_known(p, &["type", "text"], at)?;
            Ok(json!({"type": "text", "text": str_field(p, "text", at)?}))
        }
        Some("input_image") => {
            only_known(p, &["type", "image_url", "detail", "file_id"], at)?;
            if p.get("file_id").is_some_and(|v| !v.is_null()) {
                return Err(invalid(
                    format!("{at}.file_id"),
                    format!(
                        "`{at}.file_id`: uploaded files are not supported by this gateway (send `image_url`)"
                    ),
                ));
            }
            let url = str_field(p, "image_url", at)?;
            let mut image = Map::new();
            image.insert("url".into(), Value::from(url));
            match p.get("detail") {
                None | Some(Value::Null) => {}
                Some(d @ Value::String(s)) if matches!(s.as_str(), "auto" | "low" | "high") => {
                    image.insert("detail".into(), d.clone());
                }
                Some(_) => {
                    return Err(invalid(
                        format!("{at}.detail"),
                        format!("`{at}.detail` must be `auto`, `low` or `high`"),
                    ));
                }
            }
            Ok(json!({"type": "image_url", "image_url": image}))
        }
        Some(other) => Err(invalid(
            format!("{at}.type"),
            format!("`{at}.type`: `{other}` parts are not supported by this gateway"),
        )),
        None => Err(invalid(
            format!("{at}.type"),
            format!("`{at}.type` must be a string"),
        )),
    }
}

/// An assistant message's content: `output_text` parts (or a string) → text parts, `refusal`
/// parts → the message's `refusal`.
fn assistant_content(
    m: &Map<String, Value>,
    at: &str,
    turn: &mut AssistantTurn,
) -> Result<(), GatewayError> {
    match m.get("content") {
        Some(Value::String(s)) => {
            turn.parts.push(json!({"type": "text", "text": s}));
            Ok(())
        }
        Some(Value::Array(parts)) => {
            for (j, p) in parts.iter().enumerate() {
                let at = format!("{at}.content[{j}]");
                let p = object(p, &at)?;
                match p.get("type").and_then(Value::as_str) {
                    Some("output_text" | "input_text") => {
                        only_known(p, &["type", "text", "annotations", "logprobs"], &at)?;
                        turn.parts
                            .push(json!({"type": "text", "text": str_field(p, "text", &at)?}));
                    }
                    Some("refusal") => {
                        only_known(p, &["type", "refusal"], &at)?;
                        turn.refusal.push_str(str_field(p, "refusal", &at)?);
                    }
                    Some(other) => {
                        return Err(invalid(
                            format!("{at}.type"),
                            format!(
                                "`{at}.type`: `{other}` parts are not supported in an assistant message"
                            ),
                        ));
                    }
                    None => {
                        return Err(invalid(
                            format!("{at}.type"),
                            format!("`{at}.type` must be a string"),
                        ));
                    }
                }
            }
            Ok(())
        }
        _ => Err(invalid(
            format!("{at}.content"),
            format!("`{at}.content` must be a string or an array of parts"),
        )),
    }
}

/// A handed-back reasoning item: its `encrypted_content` (the gateway's encoding of the
/// answer's `reasoning_details` entries) → those entries; its summary text (and any
/// `reasoning_text` content) that no signed entry holds → `reasoning_content`.
fn reasoning_item(
    m: &Map<String, Value>,
    at: &str,
    turn: &mut AssistantTurn,
) -> Result<(), GatewayError> {
    let mut text = String::new();
    for key in ["summary", "content"] {
        match m.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(parts)) => {
                for (j, p) in parts.iter().enumerate() {
                    let pat = format!("{at}.{key}[{j}]");
                    let p = object(p, &pat)?;
                    text.push_str(str_field(p, "text", &pat)?);
                }
            }
            Some(_) => {
                return Err(invalid(
                    format!("{at}.{key}"),
                    format!("`{at}.{key}` must be an array"),
                ));
            }
        }
    }
    let entries = match m.get("encrypted_content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => reasoning::decode(s).ok_or_else(|| {
            invalid(
                format!("{at}.encrypted_content"),
                format!("`{at}.encrypted_content` was not issued by this gateway"),
            )
        })?,
        Some(_) => {
            return Err(invalid(
                format!("{at}.encrypted_content"),
                format!("`{at}.encrypted_content` must be a string"),
            ));
        }
    };
    let signed: usize = entries
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("reasoning.text"))
        .map(|e| e.get("text").and_then(Value::as_str).map_or(0, str::len))
        .sum();
    if let Some(rest) = text.get(signed.min(text.len())..) {
        turn.unsigned.push_str(rest);
    }
    turn.details.extend(entries);
    Ok(())
}
