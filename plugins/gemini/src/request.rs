//! `build-request`: the HTTP request of one chat attempt.
//!
//! `POST /v1beta/models/{MODEL}:generateContent`, or `…:streamGenerateContent?alt=sse` when
//! streaming (see [`crate::path`]), `content-type: application/json`, the key in
//! `x-goog-api-key`. The body's top-level keys are sorted; it is built as:
//!
//! 1. `EXTRA_BODY`'s keys (snake_case keys spelled camelCase, since Google reads both
//!    spellings of a field), except the protected `contents`, `systemInstruction` and `model`
//!    (the model is the path's: an EXTRA_BODY `model` never changes which model is called,
//!    and is left out of the body);
//! 2. the client's parameters ([`crate::params`]) over them: `tools`, `toolConfig`, and
//!    `generationConfig`, which is merged one level deep — the provider's default
//!    (`thinkingConfig` from `ENABLE_THINKING`), then `EXTRA_BODY`'s `generationConfig`
//!    keys, then the client's (later wins);
//! 3. `generationConfig.maxOutputTokens` from `MAX_TOKENS` when nobody set one;
//! 4. `contents` and `systemInstruction` from the messages ([`crate::contents`]).
//!
//! `ENABLE_THINKING`: true → `thinkingConfig: {includeThoughts: true, thinkingBudget:
//! THINKING_BUDGET, or -1 (dynamic)}`; false → `thinkingConfig: {thinkingBudget: 0}` (which the
//! Pro models refuse: they cannot stop thinking); unset → nothing.
//!
//! Errors: a prefill → `unsupported` (no prefill continuation); bad `messages-json` or
//! `overlay-json` → `invalid-request` naming the field; a bad `extra-body-json` (a source
//! misconfiguration the host should have refused) → `unsupported`, so another source is tried.

use polygateway_plugin_sdk::{
    AuthScheme, BuildError, ChatRequest, Header, HttpRequest, SourceInfo,
};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::contents::{self, SystemInstruction};
use crate::json::{RawObject, camel_case, json_error, object_bytes, parse_object, raw};
use crate::{params, path};

/// The header that carries the source's key (the host sets its value).
pub const API_KEY_HEADER: &str = "x-goog-api-key";

/// Top-level body keys `EXTRA_BODY` can never set (camelCase; snake_case spellings are
/// normalised first).
pub const PROTECTED_KEYS: [&str; 3] = ["contents", "systemInstruction", "model"];

/// Build the request (see the module documentation).
pub fn build_request(req: &ChatRequest, source: &SourceInfo) -> Result<HttpRequest, BuildError> {
    if req.prefill.is_some() {
        return Err(BuildError::Unsupported(format!(
            "provider `{}` cannot continue a prefilled answer",
            crate::NAME
        )));
    }
    let segment = path::model_segment(&source.model)?;
    let messages: Vec<Value> = serde_json::from_str(&req.messages_json).map_err(|e| {
        BuildError::InvalidRequest(json_error("messages-json", "a JSON array of messages", &e))
    })?;
    let conversation = contents::convert(&messages)?;
    let overlay =
        parse_object("overlay-json", &req.overlay_json).map_err(BuildError::InvalidRequest)?;
    let client = params::from_overlay(&overlay)?;
    let extra = parse_object("extra-body-json", &source.extra_body_json)
        .map_err(BuildError::Unsupported)?;

    let mut body = RawObject::new();
    let mut generation = thinking_config(source);
    for (key, value) in extra {
        let key = camel_case(&key);
        if PROTECTED_KEYS.contains(&key.as_str()) {
            continue;
        }
        if key == "generationConfig" {
            let config = parse_object("extra-body-json: generationConfig", value.get())
                .map_err(BuildError::Unsupported)?;
            generation.extend(config.into_iter().map(|(k, v)| (camel_case(&k), v)));
        } else {
            body.insert(key, value);
        }
    }
    generation.extend(client.generation);
    if let Some(cap) = source.max_tokens
        && !generation.contains_key("maxOutputTokens")
    {
        generation.insert("maxOutputTokens".into(), raw(&cap));
    }
    if !generation.is_empty() {
        body.insert("generationConfig".into(), raw_object(&generation));
    }
    if let Some(tools) = client.tools {
        body.insert("tools".into(), tools);
    }
    if let Some(config) = client.tool_config {
        body.insert("toolConfig".into(), config);
    }
    body.insert("contents".into(), raw(&conversation.contents));
    if !conversation.system.is_empty() {
        body.insert(
            "systemInstruction".into(),
            raw(&SystemInstruction {
                parts: conversation.system,
            }),
        );
    }
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path: path::chat_path(&segment, req.stream),
        headers: vec![Header {
            name: "content-type".to_owned(),
            value: "application/json".to_owned(),
        }],
        body: object_bytes(&body),
        auth: AuthScheme::Header(API_KEY_HEADER.to_owned()),
    })
}

/// The provider's default `generationConfig`: the `thinkingConfig` of `ENABLE_THINKING`.
fn thinking_config(source: &SourceInfo) -> RawObject {
    let mut generation = RawObject::new();
    let config = match source.enable_thinking {
        Some(true) => {
            let budget = source.thinking_budget_tokens.map_or(-1, i64::from);
            serde_json::json!({ "includeThoughts": true, "thinkingBudget": budget })
        }
        Some(false) => serde_json::json!({ "thinkingBudget": 0 }),
        None => return generation,
    };
    generation.insert("thinkingConfig".into(), raw(&config));
    generation
}

/// A map of raw values as one raw JSON object.
fn raw_object(object: &RawObject) -> Box<RawValue> {
    let bytes = object_bytes(object);
    String::from_utf8(bytes)
        .ok()
        .and_then(|text| RawValue::from_string(text).ok())
        .unwrap_or_else(|| raw(&serde_json::Map::new()))
}
