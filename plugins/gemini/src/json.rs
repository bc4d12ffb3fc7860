//! Small JSON helpers shared by the request and answer sides: raw values kept verbatim,
//! compaction of a raw JSON text, JSON-object texts parsed into top-level maps,
//! and the error messages that name a contract field.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON object's top-level keys with their values kept verbatim (key order of the values'
/// insides and number spelling preserved; the top level itself is sorted).
pub type RawObject = BTreeMap<String, Box<RawValue>>;

/// Serialize a value into a raw JSON value. Serializing the plain data of this crate cannot
/// fail (string keys, no custom serializers); `null` is the unreachable fallback.
///
/// # Example
/// ```text
/// assert_eq!(gemini::json::raw(&serde_json::json!({"a": 1})).get(), r#"{"a":1}"#);
/// ```
pub fn raw<T: serde::Serialize + ?Sized>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// The text of a valid JSON value with every whitespace outside strings removed: key order
/// and number spelling stay as the upstream wrote them.
///
/// # Example
/// ```text
/// assert_eq!(gemini::json::compact("{ \"a\" : [1, 2.50],\n \"b\": \"x y\" }"),
///            r#"{"a":[1,2.50],"b":"x y"}"#);
/// ```
pub fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
    out
}

/// Parse the text of a JSON object into its top-level keys (values verbatim). Empty or
/// whitespace-only text counts as `{}`.
///
/// Errors: invalid JSON or not an object → a message naming `field`.
///
/// # Example
/// ```text
/// let o = gemini::json::parse_object("overlay-json", r#"{"b": [1], "a": 2}"#).unwrap();
/// assert_eq!(o.keys().collect::<Vec<_>>(), ["a", "b"]);
/// assert!(gemini::json::parse_object("overlay-json", "  ").unwrap().is_empty());
/// assert_eq!(gemini::json::parse_object("overlay-json", "[1]").unwrap_err(),
///            "overlay-json: expected a JSON object");
/// ```
pub fn parse_object(field: &str, text: &str) -> Result<RawObject, String> {
    if text.trim().is_empty() {
        return Ok(RawObject::new());
    }
    serde_json::from_str(text).map_err(|e| json_error(field, "a JSON object", &e))
}

/// The message for JSON that failed to parse as `expected`: a type mismatch says what was
/// expected, anything else is invalid JSON (with serde_json's line and column).
pub fn json_error(field: &str, expected: &str, e: &serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Data => format!("{field}: expected {expected}"),
        _ => format!("{field}: invalid JSON: {e}"),
    }
}

/// The first `max` characters of `text`, with `…` when cut.
pub fn quote(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", text.get(..cut).unwrap_or_default()),
        None => text.to_owned(),
    }
}

/// The camelCase spelling of a snake_case key (`generation_config` → `generationConfig`);
/// other keys are returned unchanged. Google's JSON parser accepts both spellings of every
/// field, so the body must not carry both.
///
/// # Example
/// ```text
/// assert_eq!(gemini::json::camel_case("safety_settings"), "safetySettings");
/// assert_eq!(gemini::json::camel_case("topK"), "topK");
/// ```
pub fn camel_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' && !out.is_empty() {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A map of raw values as JSON bytes (keys in sorted order).
pub fn object_bytes(object: &RawObject) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    for (i, (key, value)) in object.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(Value::from(key.as_str()).to_string().as_bytes());
        out.push(b':');
        out.extend_from_slice(value.get().as_bytes());
    }
    out.push(b'}');
    out
}
