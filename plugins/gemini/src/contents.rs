//! The OpenAI `messages` array as Gemini `contents` and `systemInstruction`.
//!
//! | OpenAI message | Gemini |
//! | --- | --- |
//! | `system`, `developer` | text parts of `systemInstruction` (in order) |
//! | `user` | a `user` turn: `text` parts; `image_url` data URLs → `inlineData {mimeType, data}`, `http(s)` URLs → `fileData {fileUri, mimeType?}` (the MIME type from a known file extension, else left out) |
//! | `assistant` | a `model` turn: thought parts and signatures from `reasoning_details` (see [`crate::signatures`]), `text` parts, one `functionCall {name, args, id}` per `tool_calls` entry (`args` is the parsed `arguments`, `{}` when empty) |
//! | `tool` | a `functionResponse {name, response, id}` part in a `user` turn: `name` is the function of the `tool_call_id` in the nearest earlier assistant `tool_calls`; `response` is the content when it is a JSON object, else `{"result": <content text>}` |
//! | `function` (legacy) | the same, `name` from the message, no `id` |
//!
//! Consecutive turns of one role are merged into one `Content` (so parallel tool results
//! share one `user` turn). Empty text is dropped, and so is a turn left without parts.
//! `cache_control` on parts and `name` on messages are ignored (Gemini caches implicitly), and
//! so is an assistant's `reasoning_content` (unsigned text, which Gemini does not read back).
//!
//! Errors name the message: a message that is not an object with a known `role`, a
//! malformed data URL, `arguments` that are not a JSON object, a `tool_call_id` no earlier
//! assistant message issued → `invalid-request`; content part types Gemini could take but
//! this provider does not map (`input_audio`, `file`, …) → `unsupported`.

use std::collections::HashMap;

use polygateway_plugin_sdk::BuildError;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::REASONING_FORMAT;
use crate::json::raw;
use crate::signatures;

/// One Gemini `Content`: a role and its parts.
#[derive(Debug, Clone, Serialize)]
pub struct Content {
    /// `user` or `model`.
    pub role: &'static str,
    /// The parts, in order.
    pub parts: Vec<Part>,
}

/// The `systemInstruction` content (parts only).
#[derive(Debug, Clone, Serialize)]
pub struct SystemInstruction {
    /// Text parts.
    pub parts: Vec<Part>,
}

/// One Gemini `Part`; exactly one data field is set (plus `thought` / `thoughtSignature`).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `true` on a thought (reasoning) part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    /// Inline bytes (base64).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<InlineData>,
    /// A file by URI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_data: Option<FileData>,
    /// A call the model made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCall>,
    /// The result of a call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_response: Option<FunctionResponse>,
    /// The opaque signature Gemini attached to this part, handed back verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
}

/// `inlineData`: a MIME type and base64 data.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InlineData {
    /// IANA media type, e.g. `image/png`.
    pub mime_type: String,
    /// Base64 of the bytes, as the data URL carried it.
    pub data: String,
}

/// `fileData`: a URI and, when known, its MIME type.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileData {
    /// The URL as the client gave it.
    pub file_uri: String,
    /// The media type inferred from the URL's file extension.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// `functionCall`: name, arguments as a JSON object, and the call id.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionCall {
    /// The function's name.
    pub name: String,
    /// The arguments object, verbatim from the client's `arguments` text.
    pub args: Box<RawValue>,
    /// The OpenAI tool call id (Gemini echoes it in the matching `functionResponse`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// `functionResponse`: the function's name, its result object, and the call id.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionResponse {
    /// The function's name.
    pub name: String,
    /// The result as a JSON object.
    pub response: Box<RawValue>,
    /// The `tool_call_id` this answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// Whether this is a thought part.
    pub fn is_thought(&self) -> bool {
        self.thought == Some(true)
    }
}

/// The converted conversation.
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    /// Text parts of the system and developer messages, in order.
    pub system: Vec<Part>,
    /// The turns.
    pub contents: Vec<Content>,
}

impl Conversation {
    /// Append parts to the conversation under `role`, merging into the last turn when it has
    /// the same role. No parts, no turn.
    fn push(&mut self, role: &'static str, parts: Vec<Part>) {
        if parts.is_empty() {
            return;
        }
        match self.contents.last_mut() {
            Some(last) if last.role == role => last.parts.extend(parts),
            _ => self.contents.push(Content { role, parts }),
        }
    }
}

/// Convert the parsed messages (see the module documentation).
///
/// Errors: see the module documentation; every message names `messages[i]`.
pub fn convert(messages: &[Value]) -> Result<Conversation, BuildError> {
    let mut out = Conversation::default();
    // Tool call id → function name, from the assistant messages seen so far (a later
    // assistant message overrides an earlier one: the nearest earlier wins).
    let mut calls: HashMap<String, String> = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).ok_or_else(|| {
            invalid(format!(
                "messages[{i}]: expected an object with a string `role`"
            ))
        })?;
        match role {
            "system" | "developer" => out.system.extend(text_parts(i, message, false)?),
            "user" => {
                let parts = user_parts(i, message)?;
                out.push("user", parts);
            }
            "assistant" => {
                let parts = assistant_parts(i, message, &mut calls)?;
                out.push("model", parts);
            }
            "tool" => {
                let id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        invalid(format!(
                            "messages[{i}]: a tool message needs a `tool_call_id`"
                        ))
                    })?;
                let name = calls.get(id).cloned().ok_or_else(|| {
                    invalid(format!(
                        "messages[{i}]: tool_call_id `{id}` matches no tool call of an earlier assistant message"
                    ))
                })?;
                let part = function_response(i, message, name, Some(id.to_owned()))?;
                out.push("user", vec![part]);
            }
            "function" => {
                let name = message
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| {
                        invalid(format!("messages[{i}]: a function message needs a `name`"))
                    })?;
                let part = function_response(i, message, name.to_owned(), None)?;
                out.push("user", vec![part]);
            }
            other => {
                return Err(invalid(format!(
                    "messages[{i}]: role `{other}` is not supported"
                )));
            }
        }
    }
    Ok(out)
}

/// The text parts of a message's `content` (a string, an array of `text` parts, or null).
/// `refusal` parts count as text when `allow_refusal` (an assistant's own words).
fn text_parts(i: usize, message: &Value, allow_refusal: bool) -> Result<Vec<Part>, BuildError> {
    let mut parts = Vec::new();
    match message.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => push_text(&mut parts, s),
        Some(Value::Array(items)) => {
            for (j, item) in items.iter().enumerate() {
                match part_type(item) {
                    Some("text") => push_text(&mut parts, field_str(item, "text")),
                    Some("refusal") if allow_refusal => {
                        push_text(&mut parts, field_str(item, "refusal"));
                    }
                    other => return Err(unsupported_part(i, j, other)),
                }
            }
        }
        Some(_) => return Err(bad_content(i)),
    }
    Ok(parts)
}

/// The parts of a user message: text and images.
fn user_parts(i: usize, message: &Value) -> Result<Vec<Part>, BuildError> {
    let mut parts = Vec::new();
    match message.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => push_text(&mut parts, s),
        Some(Value::Array(items)) => {
            for (j, item) in items.iter().enumerate() {
                match part_type(item) {
                    Some("text") => push_text(&mut parts, field_str(item, "text")),
                    Some("image_url") => parts.push(image_part(i, j, item)?),
                    other => return Err(unsupported_part(i, j, other)),
                }
            }
        }
        Some(_) => return Err(bad_content(i)),
    }
    Ok(parts)
}

/// An `image_url` part: a base64 data URL → `inlineData`, an http(s) URL → `fileData`.
fn image_part(i: usize, j: usize, item: &Value) -> Result<Part, BuildError> {
    let url = match item.get("image_url") {
        Some(Value::String(url)) => url.as_str(),
        Some(obj) => field_str(obj, "url"),
        None => "",
    };
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    if lower.starts_with("data:") {
        let (mime_type, data) = data_url(url).ok_or_else(|| {
            invalid(format!(
                "messages[{i}].content[{j}]: malformed data URL (expected data:<media type>;base64,<data>)"
            ))
        })?;
        return Ok(Part {
            inline_data: Some(InlineData { mime_type, data }),
            ..Part::default()
        });
    }
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Ok(Part {
            file_data: Some(FileData {
                file_uri: url.to_owned(),
                mime_type: mime_from_extension(url).map(str::to_owned),
            }),
            ..Part::default()
        });
    }
    Err(invalid(format!(
        "messages[{i}].content[{j}]: image_url must be a base64 data URL or an http(s) URL"
    )))
}

/// `data:<type>/<subtype>[;params];base64,<data>` → (media type, data). The media type is
/// the text before the first `;`, which must contain a `/`; the data must be non-empty.
fn data_url(url: &str) -> Option<(String, String)> {
    let rest = url.get(5..)?;
    let (meta, data) = rest.split_once(',')?;
    let meta_lower = meta.to_ascii_lowercase();
    if !meta_lower.ends_with(";base64") || data.trim().is_empty() {
        return None;
    }
    let mime = meta.split(';').next()?.trim();
    let (kind, sub) = mime.split_once('/')?;
    if kind.is_empty() || sub.is_empty() || mime.contains(char::is_whitespace) {
        return None;
    }
    Some((mime.to_owned(), data.trim().to_owned()))
}

/// The media type of a URL's file extension, for the few image and document types Gemini
/// reads (query and fragment ignored).
fn mime_from_extension(url: &str) -> Option<&'static str> {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "heic" => "image/heic",
        "heif" => "image/heif",
        "pdf" => "application/pdf",
        _ => return None,
    })
}

/// The parts of an assistant message: thoughts and signatures handed back, text, calls.
/// Records its tool calls' names in `calls`.
fn assistant_parts(
    i: usize,
    message: &Value,
    calls: &mut HashMap<String, String>,
) -> Result<Vec<Part>, BuildError> {
    let mut parts = text_parts(i, message, true)?;
    if let Some(tool_calls) = message.get("tool_calls").filter(|v| !v.is_null()) {
        let tool_calls = tool_calls
            .as_array()
            .ok_or_else(|| invalid(format!("messages[{i}].tool_calls: expected an array")))?;
        for (k, call) in tool_calls.iter().enumerate() {
            let function = call.get("function").unwrap_or(&Value::Null);
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| {
                    invalid(format!(
                        "messages[{i}].tool_calls[{k}].function.name: expected a non-empty string"
                    ))
                })?;
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            let args = arguments(function.get("arguments")).ok_or_else(|| {
                invalid(format!(
                    "messages[{i}].tool_calls[{k}].function.arguments: expected the text of a JSON object"
                ))
            })?;
            if let Some(id) = id {
                calls.insert(id.to_owned(), name.to_owned());
            }
            parts.push(Part {
                function_call: Some(FunctionCall {
                    name: name.to_owned(),
                    args,
                    id: id.map(str::to_owned),
                }),
                ..Part::default()
            });
        }
    } else if let Some(call) = message.get("function_call").filter(|v| v.is_object()) {
        // The legacy single `function_call` of an assistant message.
        let name = field_str(call, "name");
        if !name.is_empty() {
            let args = arguments(call.get("arguments")).ok_or_else(|| {
                invalid(format!(
                    "messages[{i}].function_call.arguments: expected the text of a JSON object"
                ))
            })?;
            parts.push(Part {
                function_call: Some(FunctionCall {
                    name: name.to_owned(),
                    args,
                    id: None,
                }),
                ..Part::default()
            });
        }
    }
    if let Some(details) = message.get("reasoning_details").and_then(Value::as_array) {
        signatures::hand_back(details, REASONING_FORMAT, &mut parts);
    }
    Ok(parts)
}

/// The `args` object of a call from OpenAI's `arguments` text: absent, null or blank → `{}`;
/// otherwise the text must be a JSON object, kept verbatim. An object given directly
/// (some clients do) is accepted too.
fn arguments(arguments: Option<&Value>) -> Option<Box<RawValue>> {
    match arguments {
        None | Some(Value::Null) => Some(raw(&serde_json::Map::new())),
        Some(Value::String(s)) if s.trim().is_empty() => Some(raw(&serde_json::Map::new())),
        Some(Value::String(s)) => {
            let value: Box<RawValue> = serde_json::from_str(s).ok()?;
            value.get().starts_with('{').then_some(value)
        }
        Some(v @ Value::Object(_)) => Some(raw(v)),
        Some(_) => None,
    }
}

/// The `functionResponse` part of a tool (or legacy function) message.
fn function_response(
    i: usize,
    message: &Value,
    name: String,
    id: Option<String>,
) -> Result<Part, BuildError> {
    let text = match message.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => {
            let mut text = String::new();
            for (j, item) in items.iter().enumerate() {
                match part_type(item) {
                    Some("text") => text.push_str(field_str(item, "text")),
                    other => return Err(unsupported_part(i, j, other)),
                }
            }
            text
        }
        Some(_) => return Err(bad_content(i)),
    };
    let response = serde_json::from_str::<Box<RawValue>>(&text)
        .ok()
        .filter(|v| v.get().starts_with('{'))
        .unwrap_or_else(|| raw(&serde_json::json!({ "result": text })));
    Ok(Part {
        function_response: Some(FunctionResponse { name, response, id }),
        ..Part::default()
    })
}

fn push_text(parts: &mut Vec<Part>, text: &str) {
    if !text.is_empty() {
        parts.push(Part::text(text));
    }
}

fn part_type(item: &Value) -> Option<&str> {
    item.get("type").and_then(Value::as_str)
}

fn field_str<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn unsupported_part(i: usize, j: usize, kind: Option<&str>) -> BuildError {
    BuildError::Unsupported(format!(
        "messages[{i}].content[{j}]: content part type `{}` is not supported by the gemini provider here",
        kind.unwrap_or("?")
    ))
}

fn bad_content(i: usize) -> BuildError {
    invalid(format!(
        "messages[{i}].content: expected a string, an array of content parts or null"
    ))
}

fn invalid(message: String) -> BuildError {
    BuildError::InvalidRequest(message)
}
