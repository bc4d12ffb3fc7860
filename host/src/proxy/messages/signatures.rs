//! Reasoning that must go back upstream, between Anthropic's blocks and the neutral
//! `reasoning_details` entries (`pipeline/reasoning.rs`).
//!
//! An entry in Anthropic's own format (`anthropic-claude-v1`) is a `thinking` block with its
//! `signature`, or a `redacted_thinking` block with its `data`, byte for byte. An entry of
//! another format — a Gemini `thoughtSignature` when an Anthropic client's scope failed over to
//! a Gemini source — has no Anthropic block of its own, yet the client must hand it back or the
//! next turn loses it. It travels inside the opaque field as `pgw1.` followed by the
//! unpadded base64url of `{"format", "signature" | "data", "id"?}`: the Anthropic SDK and
//! Claude Code carry those fields verbatim without reading them, and the gateway, seeing the
//! prefix come back, restores the entry. A real Anthropic signature never starts with `pgw1.`
//! (they are base64 of a protobuf), and a wrapped entry only ever reaches a provider as the
//! entry it was, so no upstream sees the wrapping.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};

/// Anthropic's `format` name (OpenRouter's).
pub(crate) const ANTHROPIC_FORMAT: &str = "anthropic-claude-v1";

/// The prefix of a wrapped entry of another format.
const WRAPPED: &str = "pgw1.";

/// One reasoning block of an answer, as Anthropic writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Block {
    /// `{"type": "thinking", "thinking", "signature"}`.
    Thinking { text: String, signature: String },
    /// `{"type": "redacted_thinking", "data"}`.
    Redacted { data: String },
}

fn wrap(fields: Map<String, Value>) -> String {
    format!(
        "{WRAPPED}{}",
        URL_SAFE_NO_PAD.encode(Value::Object(fields).to_string())
    )
}

/// A wrapped entry's fields, when `opaque` is one.
fn unwrap(opaque: &str) -> Option<Map<String, Value>> {
    let b64 = opaque.strip_prefix(WRAPPED)?;
    let bytes = URL_SAFE_NO_PAD.decode(b64).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(m) if m.get("format").is_some_and(Value::is_string) => Some(m),
        _ => None,
    }
}

fn str_of<'a>(e: &'a Value, key: &str) -> &'a str {
    e.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The Anthropic block of one `reasoning_details` entry; `None` for an entry of an unknown
/// type (the host writes none).
pub(crate) fn block(entry: &Value) -> Option<Block> {
    let format = str_of(entry, "format");
    match str_of(entry, "type") {
        "reasoning.text" => {
            let text = str_of(entry, "text").to_string();
            let signature = str_of(entry, "signature");
            let signature = if format == ANTHROPIC_FORMAT {
                signature.to_string()
            } else {
                let mut m = Map::new();
                m.insert("format".into(), Value::from(format));
                m.insert("signature".into(), Value::from(signature));
                wrap(m)
            };
            Some(Block::Thinking { text, signature })
        }
        "reasoning.encrypted" => {
            let data = str_of(entry, "data");
            if format == ANTHROPIC_FORMAT && entry.get("id").is_none() {
                return Some(Block::Redacted {
                    data: data.to_string(),
                });
            }
            let mut m = Map::new();
            m.insert("format".into(), Value::from(format));
            m.insert("data".into(), Value::from(data));
            if let Some(id) = entry.get("id").filter(|v| v.is_string()) {
                m.insert("id".into(), id.clone());
            }
            Some(Block::Redacted { data: wrap(m) })
        }
        _ => None,
    }
}

/// The entry of a handed-back `thinking` block (a non-empty signature).
pub(crate) fn thinking_entry(text: &str, signature: &str, index: usize) -> Value {
    let (format, signature) = match unwrap(signature) {
        Some(m) => (
            m.get("format")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            m.get("signature")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        ),
        None => (ANTHROPIC_FORMAT.to_string(), signature.to_string()),
    };
    let mut e = Map::new();
    e.insert("type".into(), Value::from("reasoning.text"));
    e.insert("text".into(), Value::from(text));
    e.insert("signature".into(), Value::from(signature));
    e.insert("format".into(), Value::from(format));
    e.insert("index".into(), Value::from(index));
    Value::Object(e)
}

/// The entry of a handed-back `redacted_thinking` block.
pub(crate) fn redacted_entry(data: &str, index: usize) -> Value {
    let mut e = Map::new();
    e.insert("type".into(), Value::from("reasoning.encrypted"));
    match unwrap(data) {
        Some(m) => {
            e.insert(
                "data".into(),
                m.get("data").cloned().unwrap_or(Value::from("")),
            );
            if let Some(id) = m.get("id") {
                e.insert("id".into(), id.clone());
            }
            e.insert(
                "format".into(),
                m.get("format").cloned().unwrap_or_default(),
            );
        }
        None => {
            e.insert("data".into(), Value::from(data));
            e.insert("format".into(), Value::from(ANTHROPIC_FORMAT));
        }
    }
    e.insert("index".into(), Value::from(index));
    Value::Object(e)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn anthropic_entries_are_blocks_byte_for_byte() {
        let e = json!({"type": "reasoning.text", "text": "Let me think", "signature": "EqQBCgIYAh",
            "format": ANTHROPIC_FORMAT, "index": 0});
        let b = block(&e).unwrap();
        assert_eq!(
            b,
            Block::Thinking {
                text: "Let me think".into(),
                signature: "EqQBCgIYAh".into()
            }
        );
        assert_eq!(thinking_entry("Let me think", "EqQBCgIYAh", 0), e);
        let r = json!({"type": "reasoning.encrypted", "data": "EmwKAhgB", "format": ANTHROPIC_FORMAT, "index": 1});
        assert_eq!(
            block(&r).unwrap(),
            Block::Redacted {
                data: "EmwKAhgB".into()
            }
        );
        assert_eq!(redacted_entry("EmwKAhgB", 1), r);
    }

    #[test]
    fn entries_of_another_format_round_trip_wrapped() {
        let e = json!({"type": "reasoning.encrypted", "data": "CiIBVKhc", "id": "call_7",
            "format": "google-gemini-v1", "index": 2});
        let Some(Block::Redacted { data }) = block(&e) else {
            panic!("not redacted")
        };
        assert!(data.starts_with("pgw1."), "{data}");
        assert_eq!(redacted_entry(&data, 2), e);
        let t = json!({"type": "reasoning.text", "text": "hm", "signature": "sig",
            "format": "google-gemini-v1", "index": 0});
        let Some(Block::Thinking { signature, .. }) = block(&t) else {
            panic!("not thinking")
        };
        assert_eq!(thinking_entry("hm", &signature, 0), t);
        // Something that merely looks wrapped stays Anthropic's.
        assert_eq!(
            redacted_entry("pgw1.!!", 0)["format"],
            json!(ANTHROPIC_FORMAT)
        );
    }
}
