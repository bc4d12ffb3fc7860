//! The client's OpenAI parameters (`overlay-json`) as Gemini request fields.
//!
//! | OpenAI | Gemini |
//! | --- | --- |
//! | `temperature`, `top_p`, `presence_penalty`, `frequency_penalty` | `generationConfig.temperature`, `topP`, `presencePenalty`, `frequencyPenalty` (numbers verbatim) |
//! | `top_k` (a common extension) | `generationConfig.topK` |
//! | `max_completion_tokens`, else `max_tokens` | `generationConfig.maxOutputTokens` |
//! | `stop` (a string or an array) | `generationConfig.stopSequences` |
//! | `seed` | `generationConfig.seed` |
//! | `n` | `generationConfig.candidateCount: 1`; any other `n` → `invalid-request` (the contract carries one choice) |
//! | `response_format` `json_object` | `generationConfig.responseMimeType: "application/json"` |
//! | `response_format` `json_schema` | the same plus `generationConfig.responseJsonSchema`: the schema verbatim |
//! | `tools` (`type: function`) | `tools: [{functionDeclarations: [{name, description?, parametersJsonSchema?}]}]`, the parameters schema verbatim |
//! | `tool_choice` | `toolConfig.functionCallingConfig`: `auto` → `AUTO`, `none` → `NONE`, `required` → `ANY`, a named function → `ANY` + `allowedFunctionNames: [name]` |
//!
//! Why `parametersJsonSchema` and `responseJsonSchema` rather than `parameters` and
//! `responseSchema`: the latter take Google's OpenAPI-3.0 `Schema` subset (no
//! `additionalProperties`, no `type` arrays, no `$ref`/`$defs`…), so an OpenAI schema would
//! have to be rewritten and would lose meaning; the Gemini API reference documents the
//! `…JsonSchema` fields as taking JSON Schema itself ("While the full JSON Schema may be sent,
//! not all features are supported"; mutually exclusive with `parameters` / `responseSchema`),
//! and Google's own SDK forwards them unchanged. So the client's schema goes through
//! byte for byte (its property order, which Gemini follows, included).
//!
//! `null` values count as absent. Every other key (`user`, `parallel_tool_calls`,
//! `logit_bias`, `logprobs`, `metadata`, `store`, `reasoning_effort`, …) has no Gemini
//! counterpart here and is ignored. A value of the wrong type → `invalid-request` naming
//! `overlay-json: <key>`; a tool type other than `function` → `unsupported`.

use polygateway_plugin_sdk::BuildError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::json::{RawObject, raw};

/// The Gemini fields built from the overlay.
#[derive(Debug, Default)]
pub struct Params {
    /// `generationConfig` keys (camelCase) and their values.
    pub generation: RawObject,
    /// `tools`, when the client sent any function.
    pub tools: Option<Box<RawValue>>,
    /// `toolConfig`, when the client sent a `tool_choice`.
    pub tool_config: Option<Box<RawValue>>,
}

/// Read the overlay (see the module documentation).
pub fn from_overlay(overlay: &RawObject) -> Result<Params, BuildError> {
    let mut p = Params::default();
    let get = |key: &str| {
        overlay
            .get(key)
            .filter(|v| v.get() != "null")
            .map(|v| v.as_ref())
    };
    for (openai, gemini) in [
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("presence_penalty", "presencePenalty"),
        ("frequency_penalty", "frequencyPenalty"),
    ] {
        if let Some(v) = get(openai) {
            if !value(openai, v)?.is_number() {
                return Err(wrong(openai, "a number"));
            }
            p.generation.insert(gemini.into(), v.to_owned());
        }
    }
    if let Some(v) = get("top_k") {
        p.generation
            .insert("topK".into(), raw(&unsigned("top_k", v)?));
    }
    let cap = match get("max_completion_tokens") {
        Some(v) => Some(unsigned("max_completion_tokens", v)?),
        None => get("max_tokens")
            .map(|v| unsigned("max_tokens", v))
            .transpose()?,
    };
    if let Some(cap) = cap {
        p.generation.insert("maxOutputTokens".into(), raw(&cap));
    }
    if let Some(v) = get("seed") {
        let seed = value("seed", v)?;
        if seed.as_i64().is_none() {
            return Err(wrong("seed", "an integer"));
        }
        p.generation.insert("seed".into(), v.to_owned());
    }
    if let Some(v) = get("n") {
        if unsigned("n", v)? != 1 {
            return Err(BuildError::InvalidRequest(
                "overlay-json: n: Gemini answers one choice per call here; n must be 1".into(),
            ));
        }
        p.generation.insert("candidateCount".into(), raw(&1));
    }
    if let Some(v) = get("stop") {
        let stops = match value("stop", v)? {
            Value::String(s) => vec![s],
            Value::Array(items) => items
                .into_iter()
                .map(|s| match s {
                    Value::String(s) => Ok(s),
                    _ => Err(wrong("stop", "a string or an array of strings")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            _ => return Err(wrong("stop", "a string or an array of strings")),
        };
        let stops: Vec<String> = stops.into_iter().filter(|s| !s.is_empty()).collect();
        if !stops.is_empty() {
            p.generation.insert("stopSequences".into(), raw(&stops));
        }
    }
    if let Some(v) = get("response_format") {
        response_format(v, &mut p.generation)?;
    }
    if let Some(v) = get("tools") {
        p.tools = tools(v)?;
    }
    if let Some(v) = get("tool_choice") {
        p.tool_config = Some(tool_choice(v)?);
    }
    Ok(p)
}

fn value(key: &str, v: &RawValue) -> Result<Value, BuildError> {
    serde_json::from_str(v.get()).map_err(|_| wrong(key, "valid JSON"))
}

fn unsigned(key: &str, v: &RawValue) -> Result<u64, BuildError> {
    value(key, v)?
        .as_u64()
        .ok_or_else(|| wrong(key, "a non-negative integer"))
}

fn wrong(key: &str, expected: &str) -> BuildError {
    BuildError::InvalidRequest(format!("overlay-json: {key}: expected {expected}"))
}

#[derive(Deserialize)]
struct ResponseFormat {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    json_schema: Option<JsonSchemaFormat>,
}

#[derive(Deserialize)]
struct JsonSchemaFormat {
    #[serde(default)]
    schema: Option<Box<RawValue>>,
}

fn response_format(v: &RawValue, generation: &mut RawObject) -> Result<(), BuildError> {
    let format: ResponseFormat = serde_json::from_str(v.get()).map_err(|_| {
        wrong(
            "response_format",
            "an object with a `type` (text, json_object or json_schema)",
        )
    })?;
    match format.kind.as_str() {
        "text" => {}
        "json_object" => {
            generation.insert("responseMimeType".into(), raw("application/json"));
        }
        "json_schema" => {
            generation.insert("responseMimeType".into(), raw("application/json"));
            if let Some(schema) = format
                .json_schema
                .and_then(|j| j.schema)
                .filter(|s| s.get() != "null")
            {
                generation.insert("responseJsonSchema".into(), schema);
            }
        }
        other => {
            return Err(BuildError::InvalidRequest(format!(
                "overlay-json: response_format: type `{other}` is not one of text, json_object, json_schema"
            )));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct ToolIn {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    function: Option<FunctionIn>,
}

#[derive(Deserialize)]
struct FunctionIn {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Box<RawValue>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionDeclaration {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters_json_schema: Option<Box<RawValue>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tool {
    function_declarations: Vec<FunctionDeclaration>,
}

fn tools(v: &RawValue) -> Result<Option<Box<RawValue>>, BuildError> {
    let items: Vec<Box<RawValue>> =
        serde_json::from_str(v.get()).map_err(|_| wrong("tools", "an array of tools"))?;
    let mut declarations = Vec::with_capacity(items.len());
    for (k, item) in items.iter().enumerate() {
        let tool: ToolIn = serde_json::from_str(item.get()).map_err(|_| {
            BuildError::InvalidRequest(format!(
                "overlay-json: tools[{k}]: expected {{\"type\": \"function\", \"function\": {{\"name\", …}}}}"
            ))
        })?;
        if let Some(kind) = tool.kind.as_deref().filter(|k| *k != "function") {
            return Err(BuildError::Unsupported(format!(
                "overlay-json: tools[{k}]: tool type `{kind}` is not supported by the gemini provider"
            )));
        }
        let function = tool
            .function
            .filter(|f| !f.name.is_empty())
            .ok_or_else(|| {
                BuildError::InvalidRequest(format!(
                    "overlay-json: tools[{k}].function: expected an object with a non-empty `name`"
                ))
            })?;
        declarations.push(FunctionDeclaration {
            name: function.name,
            description: function.description,
            parameters_json_schema: function.parameters.filter(|p| p.get() != "null"),
        });
    }
    if declarations.is_empty() {
        return Ok(None);
    }
    Ok(Some(raw(&[Tool {
        function_declarations: declarations,
    }])))
}

fn tool_choice(v: &RawValue) -> Result<Box<RawValue>, BuildError> {
    let choice = value("tool_choice", v)?;
    let bad = || {
        wrong(
            "tool_choice",
            "auto, none, required or {\"type\": \"function\", \"function\": {\"name\"}}",
        )
    };
    let config = match &choice {
        Value::String(s) => {
            let mode = match s.as_str() {
                "auto" => "AUTO",
                "none" => "NONE",
                "required" => "ANY",
                _ => return Err(bad()),
            };
            serde_json::json!({ "mode": mode })
        }
        Value::Object(_) => {
            let name = choice
                .pointer("/function/name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(bad)?;
            serde_json::json!({ "mode": "ANY", "allowedFunctionNames": [name] })
        }
        _ => return Err(bad()),
    };
    Ok(raw(&serde_json::json!({ "functionCallingConfig": config })))
}
