//! The `unwrap-parameters` structured-output strategy (`unwrap_parameters.wasm`): an example
//! of provider-variant normalisation (docs/structured-output.md#variant-normalisation).
//!
//! **The variant.** Models trained for tool calling often answer a "reply in this JSON
//! shape" prompt as if they were calling a function named after the shape: the wanted
//! object comes back wrapped in a tool-call envelope —
//! `{"name": "person", "parameters": {"name": "Ada", "age": 36}}` (Llama 3.x's JSON
//! tool-call format), or `{"name": "person", "arguments": {…}}` / `"arguments": "{…}"`
//! (OpenAI's function-call shape, arguments as an object or as JSON text).
//!
//! **The rule.** After the usual repair ([`repair_json_text`]), an answer that is an object
//! with exactly two members — `name` (a string) and `parameters` or `arguments` (an object,
//! or a string holding a JSON object) — is replaced by the wrapped object, unless the
//! target's schema itself declares that member among its top-level `properties` (then the
//! envelope is what the caller wants). A target without a schema (`json_object`) is never
//! unwrapped: nothing says which shape is meant. The wrapped object's text is kept as the
//! model wrote it. `prepare` asks in the prompt, like `json-repair`.

use polygateway_plugin_sdk::{
    Capabilities, JsonTarget, Preparation, RepairError, Strategy, instructions_for,
    repair_json_text,
};
use serde_json::Value;
use serde_json::value::RawValue;

/// The members that wrap the wanted object in a tool-call envelope.
const WRAPPERS: [&str; 2] = ["parameters", "arguments"];

/// `json-repair`, then the tool-call envelope unwrapped.
pub struct UnwrapParameters;

impl Strategy for UnwrapParameters {
    const NAME: &'static str = "unwrap-parameters";

    fn prepare(target: &JsonTarget, _provider: &Capabilities) -> Preparation {
        Preparation {
            response_format: None,
            instructions: Some(instructions_for(target)),
        }
    }

    fn repair(raw: &str, target: &JsonTarget) -> Result<String, RepairError> {
        let json = repair_json_text(raw)?;
        Ok(unwrap_envelope(&json, target).unwrap_or(json))
    }
}

polygateway_plugin_sdk::export_strategy!(UnwrapParameters);

/// The wrapped object's JSON text when `json` is a tool-call envelope the target does not
/// ask for; `None` to keep `json` as it is.
fn unwrap_envelope(json: &str, target: &JsonTarget) -> Option<String> {
    let schema: Value = serde_json::from_str(target.schema_json.as_deref()?).ok()?;
    let members: serde_json::Map<String, Value> = serde_json::from_str(json).ok()?;
    if members.len() != 2 || !members.get("name").is_some_and(Value::is_string) {
        return None;
    }
    let wrapper = WRAPPERS.into_iter().find(|w| members.contains_key(*w))?;
    let declared = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key(wrapper));
    if declared {
        return None;
    }
    // Re-read the envelope without re-serialising, so the wrapped text keeps its order.
    let raw: std::collections::BTreeMap<String, Box<RawValue>> = serde_json::from_str(json).ok()?;
    let inner = raw.get(wrapper)?.get().trim();
    match members.get(wrapper)? {
        Value::Object(_) => Some(inner.to_string()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(_)) => Some(text.trim().to_string()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn target(schema: Option<&str>) -> JsonTarget {
        JsonTarget {
            name: "person".into(),
            schema_json: schema.map(str::to_string),
            strict: false,
        }
    }

    const PERSON: &str =
        r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}}}"#;

    #[test]
    fn unwraps_a_parameters_envelope() {
        let raw = r#"{"name": "person", "parameters": {"name": "Ada", "age": 36}}"#;
        assert_eq!(
            UnwrapParameters::repair(raw, &target(Some(PERSON))).unwrap(),
            r#"{"name": "Ada", "age": 36}"#
        );
    }

    #[test]
    fn unwraps_arguments_given_as_json_text_even_in_a_fence() {
        let raw =
            "```json\n{\"name\": \"person\", \"arguments\": \"{\\\"name\\\": \\\"Ada\\\"}\"}\n```";
        assert_eq!(
            UnwrapParameters::repair(raw, &target(Some(PERSON))).unwrap(),
            r#"{"name": "Ada"}"#
        );
    }

    #[test]
    fn keeps_what_the_schema_asks_for_or_what_is_no_envelope() {
        let wants_envelope = r#"{"type":"object","properties":{"name":{},"parameters":{}}}"#;
        let raw = r#"{"name": "f", "parameters": {"x": 1}}"#;
        assert_eq!(
            UnwrapParameters::repair(raw, &target(Some(wants_envelope))).unwrap(),
            raw
        );
        // No schema: nothing says which shape is meant.
        assert_eq!(UnwrapParameters::repair(raw, &target(None)).unwrap(), raw);
        // A third member, a non-string name, or a scalar payload: not an envelope.
        for raw in [
            r#"{"name": "f", "parameters": {"x": 1}, "id": 3}"#,
            r#"{"name": 1, "parameters": {"x": 1}}"#,
            r#"{"name": "f", "arguments": "not json"}"#,
            r#"{"name": "Ada", "age": 36}"#,
        ] {
            assert_eq!(
                UnwrapParameters::repair(raw, &target(Some(PERSON))).unwrap(),
                raw
            );
        }
    }
}
