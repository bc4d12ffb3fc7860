//! OpenAI `tools`, `tool_choice` and `parallel_tool_calls` → Anthropic `tools` (`name`,
//! `description`, `input_schema`, `cache_control`) and `tool_choice` (`auto`, `any`, `tool`,
//! `none`, with `disable_parallel_tool_use`).

use polygateway_plugin_sdk::BuildError;
use serde_json::value::RawValue;

use crate::json::{self, Kind, Obj};

/// The schema sent for a function declared without `parameters` (Anthropic requires one).
const EMPTY_SCHEMA: &str = r#"{"type":"object","properties":{}}"#;

/// An `invalid-request` naming an overlay field.
fn invalid(at: &str, problem: &str) -> BuildError {
    BuildError::InvalidRequest(format!("overlay-json: {at}: {problem}"))
}

/// The Anthropic `tools` array of an OpenAI `tools` value; `None` when it is empty.
/// `{"type":"function","function":{name, description?, parameters?}, cache_control?}` →
/// `{name, description?, input_schema, cache_control?}` (values verbatim; no `parameters` →
/// an empty object schema). An entry that is not a function declaration (an Anthropic-native
/// tool such as a server tool) is sent as given.
///
/// Errors: not an array, or a function without a string `name` → `invalid-request`.
pub(crate) fn tools_json(tools: &RawValue) -> Result<Option<String>, BuildError> {
    let items = json::array(tools.get()).ok_or_else(|| invalid("tools", "expected an array"))?;
    let mut out = Vec::with_capacity(items.len());
    for (k, item) in items.iter().enumerate() {
        let at = format!("tools[{k}]");
        let entry = json::object(item.get()).ok_or_else(|| invalid(&at, "expected an object"))?;
        let Some(function) = json::field(&entry, "function") else {
            out.push(item.get().to_owned());
            continue;
        };
        let function = json::object(function.get())
            .ok_or_else(|| invalid(&at, "`function` must be an object"))?;
        let name = json::raw_string(&function, "name")
            .filter(|n| !json::is_empty_string(n))
            .ok_or_else(|| invalid(&at, "a function needs a string `name`"))?;
        let schema = json::field(&function, "parameters").map_or(EMPTY_SCHEMA, RawValue::get);
        out.push(
            Obj::new()
                .raw("name", name)
                .opt(
                    "description",
                    json::field(&function, "description").map(RawValue::get),
                )
                .raw("input_schema", schema)
                .opt(
                    "cache_control",
                    json::field(&entry, "cache_control").map(RawValue::get),
                )
                .build(),
        );
    }
    Ok((!out.is_empty()).then(|| json::list(&out)))
}

/// An Anthropic `tool_choice` and whether it forces a tool (`any` or `tool`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolChoice {
    /// The JSON text of the `tool_choice` object.
    pub(crate) json: String,
    /// It makes the model call a tool (Anthropic refuses that with extended thinking).
    pub(crate) forced: bool,
}

/// The Anthropic `tool_choice` for the client's `tool_choice` and `parallel_tool_calls`:
/// `"auto"` → `{"type":"auto"}`, `"none"` → `{"type":"none"}`, `"required"` →
/// `{"type":"any"}`, `{"type":"function","function":{"name"}}` → `{"type":"tool","name"}`;
/// an Anthropic-native object (`type` `auto`, `any`, `tool` or `none`) is sent as given.
/// `parallel_tool_calls: false` adds `disable_parallel_tool_use: true` (to an `auto` choice
/// when the client named none but declared tools). `None` when there is nothing to send.
///
/// Errors: any other value → `invalid-request` naming `tool_choice` or `parallel_tool_calls`.
pub(crate) fn tool_choice(
    choice: Option<&RawValue>,
    parallel: Option<&RawValue>,
    has_tools: bool,
) -> Result<Option<ToolChoice>, BuildError> {
    let serial = match parallel.map(RawValue::get) {
        None | Some("true") => false,
        Some("false") => true,
        Some(_) => return Err(invalid("parallel_tool_calls", "expected a boolean")),
    };
    let (kind, name) = match choice {
        None if serial && has_tools => ("auto", None),
        None => return Ok(None),
        Some(c) => match json::kind(c) {
            Kind::String => match serde_json::from_str::<String>(c.get()).ok().as_deref() {
                Some("auto") => ("auto", None),
                Some("none") => ("none", None),
                Some("required") => ("any", None),
                _ => {
                    return Err(invalid(
                        "tool_choice",
                        "expected \"auto\", \"none\", \"required\" or a function",
                    ));
                }
            },
            Kind::Object => return object_choice(c, serial).map(Some),
            _ => return Err(invalid("tool_choice", "expected a string or an object")),
        },
    };
    Ok(Some(choice_json(kind, name, serial)))
}

/// A `tool_choice` given as an object: an OpenAI function choice, or Anthropic-native.
fn object_choice(choice: &RawValue, serial: bool) -> Result<ToolChoice, BuildError> {
    let obj = json::object(choice.get()).ok_or_else(|| invalid("tool_choice", "invalid"))?;
    let kind = json::string_field(&obj, "type").unwrap_or_default();
    match kind.as_str() {
        "function" => {
            let name = json::field(&obj, "function")
                .and_then(|f| json::object(f.get()))
                .and_then(|f| json::raw_string(&f, "name").map(str::to_owned))
                .filter(|n| !json::is_empty_string(n))
                .ok_or_else(|| invalid("tool_choice", "a function choice needs `function.name`"))?;
            Ok(choice_json("tool", Some(&name), serial))
        }
        "auto" | "none" | "any" | "tool" => Ok(ToolChoice {
            json: choice.get().to_owned(),
            forced: matches!(kind.as_str(), "any" | "tool"),
        }),
        other => Err(invalid(
            "tool_choice",
            &format!("anthropic has no tool choice of type `{other}`"),
        )),
    }
}

/// `{"type":kind,"name"?,"disable_parallel_tool_use"?}` (`none` never gets the flag).
fn choice_json(kind: &str, raw_name: Option<&str>, serial: bool) -> ToolChoice {
    let json = Obj::new()
        .str("type", kind)
        .opt("name", raw_name)
        .opt(
            "disable_parallel_tool_use",
            (serial && kind != "none").then_some("true"),
        )
        .build();
    ToolChoice {
        json,
        forced: matches!(kind, "any" | "tool"),
    }
}
