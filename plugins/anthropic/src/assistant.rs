//! What an assistant message brings back upstream besides its text: its
//! `reasoning_details` of Anthropic's own format as `thinking` / `redacted_thinking` blocks
//! (byte-exact), and its `tool_calls` as `tool_use` blocks.

use polygateway_plugin_sdk::BuildError;
use serde_json::value::RawValue;

use crate::content::invalid;
use crate::json::{self, Kind, Obj};

/// The `format` of Anthropic's reasoning blocks in `reasoning_details` and in the
/// reasoning deltas (OpenRouter's name).
pub const REASONING_FORMAT: &str = "anthropic-claude-v1";

/// The `thinking` and `redacted_thinking` blocks of an assistant message's
/// `reasoning_details`, in order: `reasoning.text` entries of [`REASONING_FORMAT`] with a
/// signature → `{"type":"thinking","thinking","signature"}`, `reasoning.encrypted` entries →
/// `{"type":"redacted_thinking","data"}`, the strings copied as the client sent them. Entries
/// of another format, unsigned text (Anthropic refuses unsigned thinking) and anything
/// malformed are dropped without error: the history may hold another provider's reasoning
/// after a failover.
pub(crate) fn thinking_blocks(details: Option<&RawValue>) -> Vec<String> {
    let Some(items) = details.and_then(|d| json::array(d.get())) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let entry = json::object(item.get())?;
            if json::string_field(&entry, "format").as_deref() != Some(REASONING_FORMAT) {
                return None;
            }
            match json::string_field(&entry, "type")?.as_str() {
                "reasoning.text" => {
                    let signature = json::raw_string(&entry, "signature")
                        .filter(|s| !json::is_empty_string(s))?;
                    let text = json::raw_string(&entry, "text").unwrap_or("\"\"");
                    Some(
                        Obj::new()
                            .str("type", "thinking")
                            .raw("thinking", text)
                            .raw("signature", signature)
                            .build(),
                    )
                }
                "reasoning.encrypted" => {
                    let data =
                        json::raw_string(&entry, "data").filter(|s| !json::is_empty_string(s))?;
                    Some(
                        Obj::new()
                            .str("type", "redacted_thinking")
                            .raw("data", data)
                            .build(),
                    )
                }
                _ => None,
            }
        })
        .collect()
}

/// The `tool_use` blocks of an assistant message's `tool_calls` (`at` names the message):
/// `{"type":"tool_use","id","name","input"}` with `input` the parsed `function.arguments`
/// (verbatim JSON text; empty arguments → `{}`).
///
/// Errors: `tool_calls` not an array, a call without a string `id` or `function.name`, or
/// arguments that are not a JSON object → `invalid-request` naming the call.
pub(crate) fn tool_use_blocks(
    tool_calls: Option<&RawValue>,
    at: &str,
) -> Result<Vec<String>, BuildError> {
    let Some(tool_calls) = tool_calls else {
        return Ok(Vec::new());
    };
    let calls = json::array(tool_calls.get())
        .ok_or_else(|| invalid(&format!("{at}.tool_calls"), "expected an array"))?;
    let mut out = Vec::with_capacity(calls.len());
    for (k, call) in calls.iter().enumerate() {
        let at = format!("{at}.tool_calls[{k}]");
        let call = json::object(call.get()).ok_or_else(|| invalid(&at, "expected an object"))?;
        let id = json::raw_string(&call, "id")
            .filter(|s| !json::is_empty_string(s))
            .ok_or_else(|| invalid(&at, "a tool call needs a string `id`"))?;
        let function = json::field(&call, "function")
            .and_then(|f| json::object(f.get()))
            .ok_or_else(|| invalid(&at, "a tool call needs a `function` object"))?;
        let name = json::raw_string(&function, "name")
            .filter(|s| !json::is_empty_string(s))
            .ok_or_else(|| invalid(&at, "a tool call needs a string `function.name`"))?;
        let arguments = json::string_field(&function, "arguments").unwrap_or_default();
        let input = if arguments.trim().is_empty() {
            "{}".to_owned()
        } else {
            let raw = serde_json::from_str::<&RawValue>(&arguments)
                .ok()
                .filter(|r| json::kind(r) == Kind::Object)
                .ok_or_else(|| {
                    invalid(
                        &format!("{at}.function.arguments"),
                        "expected the text of a JSON object",
                    )
                })?;
            raw.get().to_owned()
        };
        out.push(
            Obj::new()
                .str("type", "tool_use")
                .raw("id", id)
                .raw("name", name)
                .raw("input", &input)
                .build(),
        );
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn keeps_only_own_signed_entries() {
        let details = raw(
            r#"[{"type":"reasoning.text","text":"a","signature":null,"format":"anthropic-claude-v1"},
                {"type":"reasoning.text","text":"b","signature":"s","format":"google-gemini-v1"},
                {"type":"reasoning.encrypted","data":"","format":"anthropic-claude-v1"},
                {"type":"reasoning.summary","summary":"x","format":"anthropic-claude-v1"},
                7]"#,
        );
        assert!(thinking_blocks(Some(&details)).is_empty());
        assert!(thinking_blocks(Some(&raw("{}"))).is_empty());
    }

    #[test]
    fn tool_call_arguments_must_be_an_object() {
        let calls = |args: &str| {
            raw(&format!(
                r#"[{{"id":"c","type":"function","function":{{"name":"f","arguments":{}}}}}]"#,
                json::string(args)
            ))
        };
        assert_eq!(
            tool_use_blocks(Some(&calls("")), "messages[1]").unwrap(),
            vec![r#"{"type":"tool_use","id":"c","name":"f","input":{}}"#.to_owned()]
        );
        for bad in ["[1]", "{\"a\":", "3"] {
            let err = tool_use_blocks(Some(&calls(bad)), "messages[1]").unwrap_err();
            assert_eq!(
                err,
                BuildError::InvalidRequest(
                    "messages-json: messages[1].tool_calls[0].function.arguments: expected the text of a JSON object".into()
                )
            );
        }
    }
}
