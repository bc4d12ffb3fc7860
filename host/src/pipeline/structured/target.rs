//! What a call asks for: its OpenAI `response_format` read into a [`Target`] — the JSON
//! Schema compiled once per call with the `jsonschema` crate — and the host-side validation
//! of a repaired answer against it (the ladder's "validate" step).

use serde_json::{Map, Value};

use crate::error::GatewayError;
use crate::plugin::JsonTarget;

/// The name a target gets when the caller gave none (or asked for `json_object`).
const DEFAULT_NAME: &str = "response";

/// How many validation errors a failure keeps (for the re-ask's feedback and the 422 body;
/// the first three, docs/structured-output.md#re-ask).
pub(crate) const MAX_ERRORS: usize = 3;

/// Longest validation error message kept, in characters (docs/structured-output.md#re-ask).
pub(crate) const MAX_ERROR_CHARS: usize = 200;

/// The JSON a structured call must answer with.
pub(crate) struct Target {
    /// As the strategy component sees it.
    pub wire: JsonTarget,
    /// The compiled schema; `None` for `json_object` (any JSON object).
    validator: Option<jsonschema::Validator>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.wire.name)
            .field("schema", &self.validator.is_some())
            .finish()
    }
}

impl Target {
    /// The target of a request's overlay: `Ok(None)` when it asks for no JSON (no
    /// `response_format`, `null`, or `{"type": "text"}`); a 400 naming the field when the
    /// `response_format` is malformed or its schema does not compile.
    pub(crate) fn from_overlay(overlay: &Map<String, Value>) -> Result<Option<Self>, GatewayError> {
        let rf = match overlay.get("response_format") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(o)) => o,
            Some(_) => {
                return Err(GatewayError::invalid(
                    "response_format",
                    "`response_format` must be an object",
                ));
            }
        };
        match rf.get("type").and_then(Value::as_str) {
            Some("text") => Ok(None),
            Some("json_object") => Ok(Some(Self {
                wire: JsonTarget {
                    name: DEFAULT_NAME.to_string(),
                    schema_json: None,
                    strict: false,
                },
                validator: None,
            })),
            Some("json_schema") => Self::json_schema(rf.get("json_schema")).map(Some),
            _ => Err(GatewayError::invalid(
                "response_format.type",
                "`response_format.type` must be `text`, `json_object` or `json_schema`",
            )),
        }
    }

    fn json_schema(spec: Option<&Value>) -> Result<Self, GatewayError> {
        let Some(Value::Object(spec)) = spec else {
            return Err(GatewayError::invalid(
                "response_format.json_schema",
                "`response_format.json_schema` must be an object with a `schema`",
            ));
        };
        let name = match spec.get("name") {
            None | Some(Value::Null) => DEFAULT_NAME.to_string(),
            Some(Value::String(n)) if valid_name(n) => n.clone(),
            Some(_) => {
                return Err(GatewayError::invalid(
                    "response_format.json_schema.name",
                    "`response_format.json_schema.name` must match ^[A-Za-z0-9_-]{1,64}$",
                ));
            }
        };
        let strict = match spec.get("strict") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(GatewayError::invalid(
                    "response_format.json_schema.strict",
                    "`response_format.json_schema.strict` must be a boolean",
                ));
            }
        };
        let param = "response_format.json_schema.schema";
        let schema = match spec.get("schema") {
            Some(s @ Value::Object(_)) => s,
            _ => {
                return Err(GatewayError::invalid(
                    param,
                    format!("`{param}` must be a JSON Schema object"),
                ));
            }
        };
        let validator = jsonschema::validator_for(schema).map_err(|e| {
            GatewayError::invalid(param, format!("`{param}` is not a usable JSON Schema: {e}"))
        })?;
        Ok(Self {
            wire: JsonTarget {
                name,
                schema_json: Some(schema.to_string()),
                strict,
            },
            validator: Some(validator),
        })
    }

    /// The ladder's "validate" step: the first [`MAX_ERRORS`] ways `value` fails the schema
    /// (each `"<JSON pointer>: <message>"`, at most [`MAX_ERROR_CHARS`] characters), empty
    /// when it conforms. Without a schema, the value must be a JSON object.
    pub(crate) fn validate(&self, value: &Value) -> Vec<String> {
        let Some(v) = &self.validator else {
            return match value {
                Value::Object(_) => Vec::new(),
                other => vec![truncate(format!(
                    "/: {} is not a JSON object",
                    kind_of(other)
                ))],
            };
        };
        v.iter_errors(value)
            .take(MAX_ERRORS)
            .map(|e| {
                let path = e.instance_path.to_string();
                let path = if path.is_empty() { "/" } else { path.as_str() };
                truncate(format!("{path}: {e}"))
            })
            .collect()
    }
}

/// OpenAI's rule for `json_schema.name`.
fn valid_name(n: &str) -> bool {
    (1..=64).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// At most [`MAX_ERROR_CHARS`] characters, with `…` where it was cut.
pub(crate) fn truncate(s: String) -> String {
    match s.char_indices().nth(MAX_ERROR_CHARS) {
        None => s,
        Some((cut, _)) => format!("{}…", &s[..cut]),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    fn target(rf: Value) -> Result<Option<Target>, GatewayError> {
        let mut overlay = Map::new();
        overlay.insert("response_format".into(), rf);
        Target::from_overlay(&overlay)
    }

    fn param(r: Result<Option<Target>, GatewayError>) -> String {
        match r {
            Err(GatewayError::InvalidRequest { param, .. }) => param.unwrap(),
            other => panic!("{other:?}"),
        }
    }

    const PERSON: &str = r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"required":["name","age"],"additionalProperties":false}"#;

    #[test]
    fn text_and_absent_formats_ask_for_no_json() {
        assert!(Target::from_overlay(&Map::new()).unwrap().is_none());
        assert!(target(json!(null)).unwrap().is_none());
        assert!(target(json!({"type": "text"})).unwrap().is_none());
    }

    #[test]
    fn reads_a_json_schema_format() {
        let schema: Value = serde_json::from_str(PERSON).unwrap();
        let t = target(json!({"type": "json_schema",
            "json_schema": {"name": "person", "strict": true, "schema": schema}}))
        .unwrap()
        .unwrap();
        assert_eq!(t.wire.name, "person");
        assert!(t.wire.strict);
        let back: Value = serde_json::from_str(t.wire.schema_json.as_deref().unwrap()).unwrap();
        assert_eq!(back, schema);
        assert!(t.validate(&json!({"name": "Ada", "age": 36})).is_empty());
        let errors = t.validate(&json!({"name": "Ada", "age": "old", "x": 1}));
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors.iter().any(|e| e.starts_with("/age: ")), "{errors:?}");
        assert!(t.validate(&json!([1]))[0].starts_with("/: "));
    }

    #[test]
    fn json_object_wants_an_object() {
        let t = target(json!({"type": "json_object"})).unwrap().unwrap();
        assert_eq!(
            (t.wire.name.as_str(), t.wire.schema_json.as_deref()),
            ("response", None)
        );
        assert!(t.validate(&json!({})).is_empty());
        assert_eq!(
            t.validate(&json!([1])),
            ["/: an array is not a JSON object"]
        );
    }

    #[test]
    fn malformed_formats_name_the_field() {
        assert_eq!(param(target(json!("json"))), "response_format");
        assert_eq!(
            param(target(json!({"type": "yaml"}))),
            "response_format.type"
        );
        assert_eq!(
            param(target(json!({"type": "json_schema"}))),
            "response_format.json_schema"
        );
        assert_eq!(
            param(target(
                json!({"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}})
            )),
            "response_format.json_schema.name"
        );
        assert_eq!(
            param(target(
                json!({"type": "json_schema", "json_schema": {"schema": {}, "strict": "yes"}})
            )),
            "response_format.json_schema.strict"
        );
        assert_eq!(
            param(target(
                json!({"type": "json_schema", "json_schema": {"schema": true}})
            )),
            "response_format.json_schema.schema"
        );
        assert_eq!(
            param(target(
                json!({"type": "json_schema", "json_schema": {"schema": {"type": 5}}})
            )),
            "response_format.json_schema.schema"
        );
    }

    #[test]
    fn long_errors_are_cut() {
        let s = truncate("é".repeat(300));
        assert_eq!(s.chars().count(), MAX_ERROR_CHARS + 1);
        assert!(s.ends_with('…'));
        assert_eq!(truncate("short".into()), "short");
    }
}
