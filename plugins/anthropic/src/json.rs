//! JSON text helpers: reading client and upstream JSON lazily as borrowed raw values (so
//! verbatim fields — schemas, signatures, tool inputs — keep their exact bytes), and writing
//! JSON objects and arrays piece by piece from already-encoded values.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

/// A JSON object whose values are still raw JSON text borrowed from the input.
pub(crate) type RawObject<'a> = BTreeMap<String, &'a RawValue>;

/// Parse `text` as a JSON object of raw values; `None` when it is not one.
pub(crate) fn object(text: &str) -> Option<RawObject<'_>> {
    serde_json::from_str(text).ok()
}

/// Parse `text` as a JSON array of raw values; `None` when it is not one.
pub(crate) fn array(text: &str) -> Option<Vec<&RawValue>> {
    serde_json::from_str(text).ok()
}

/// The value of `key`, unless absent or `null`.
pub(crate) fn field<'a>(obj: &RawObject<'a>, key: &str) -> Option<&'a RawValue> {
    obj.get(key).copied().filter(|v| v.get() != "null")
}

/// The decoded string value of `key`, when it is a JSON string (possibly empty).
pub(crate) fn string_field(obj: &RawObject<'_>, key: &str) -> Option<String> {
    field(obj, key).and_then(|v| serde_json::from_str::<String>(v.get()).ok())
}

/// The decoded string value of `key`, when it is a non-empty JSON string.
pub(crate) fn text_field(obj: &RawObject<'_>, key: &str) -> Option<String> {
    string_field(obj, key).filter(|s| !s.is_empty())
}

/// The raw JSON text of `key` when it is a JSON string (for verbatim copies), else `None`.
pub(crate) fn raw_string<'a>(obj: &RawObject<'a>, key: &str) -> Option<&'a str> {
    field(obj, key)
        .map(RawValue::get)
        .filter(|t| t.starts_with('"'))
}

/// Whether a raw JSON string literal is the empty string.
pub(crate) fn is_empty_string(raw: &str) -> bool {
    raw == "\"\""
}

/// The JSON kind of a raw value, by its first character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    String,
    Array,
    Object,
    Other,
}

/// The kind of `raw` (raw values never start with whitespace).
pub(crate) fn kind(raw: &RawValue) -> Kind {
    match raw.get().as_bytes().first() {
        Some(b'"') => Kind::String,
        Some(b'[') => Kind::Array,
        Some(b'{') => Kind::Object,
        _ => Kind::Other,
    }
}

/// A string as a JSON string literal.
pub(crate) fn string(s: &str) -> String {
    // Serializing a `str` cannot fail; the fallback only keeps this total.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

/// JSON text with the whitespace between tokens removed (strings untouched), keeping key
/// order and number spelling.
pub(crate) fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// A JSON object under construction, written key by key from encoded values.
#[derive(Debug, Default)]
pub(crate) struct Obj {
    buf: String,
}

impl Obj {
    /// An empty object.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Add `key` with an already-encoded JSON value.
    pub(crate) fn raw(mut self, key: &str, json: &str) -> Self {
        self.buf.push(if self.buf.is_empty() { '{' } else { ',' });
        self.buf.push_str(&string(key));
        self.buf.push(':');
        self.buf.push_str(json);
        self
    }

    /// Add `key` with an already-encoded JSON value, when there is one.
    pub(crate) fn opt(self, key: &str, json: Option<&str>) -> Self {
        match json {
            Some(j) => self.raw(key, j),
            None => self,
        }
    }

    /// Add `key` with a string value.
    pub(crate) fn str(self, key: &str, value: &str) -> Self {
        self.raw(key, &string(value))
    }

    /// The object's JSON text.
    pub(crate) fn build(mut self) -> String {
        if self.buf.is_empty() {
            self.buf.push('{');
        }
        self.buf.push('}');
        self.buf
    }
}

/// A JSON array of already-encoded values.
pub(crate) fn list<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::from("[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item.as_ref());
    }
    out.push(']');
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn builds_objects_and_lists() {
        let o = Obj::new()
            .str("type", "text")
            .raw("n", "1")
            .opt("x", None)
            .build();
        assert_eq!(o, r#"{"type":"text","n":1}"#);
        assert_eq!(Obj::new().build(), "{}");
        assert_eq!(list(&["1", "\"a\""]), r#"[1,"a"]"#);
        assert_eq!(list::<&str>(&[]), "[]");
    }

    #[test]
    fn compacts_outside_strings_only() {
        assert_eq!(
            compact("{ \"a b\" : [1, 2.50],\n \"c\":\"x\\\" y\" }"),
            r#"{"a b":[1,2.50],"c":"x\" y"}"#
        );
    }

    #[test]
    fn reads_fields_lazily() {
        let obj = object(r#"{"a":"x","b":null,"c":"","d":7}"#).unwrap();
        assert_eq!(text_field(&obj, "a").as_deref(), Some("x"));
        assert!(field(&obj, "b").is_none());
        assert_eq!(text_field(&obj, "c"), None);
        assert_eq!(string_field(&obj, "c").as_deref(), Some(""));
        assert_eq!(raw_string(&obj, "d"), None);
        assert_eq!(kind(field(&obj, "d").unwrap()), Kind::Other);
        assert!(object("[1]").is_none());
    }
}
