//! What of a call's text is stored: messages with non-text parts replaced by the response
//! cache's digest (`cache::digest_part`, docs/cache.md#digest — one digest function for the
//! key and the ledger, no base64 blobs stored) and every text part capped by
//! `PGW_TELEMETRY_TEXT_CAP` (docs/telemetry.md#text-cap). Only new values are built — the request
//! sent upstream and the cache key never see the cap.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

/// `text` cut to at most `cap` characters, with a marker saying how many were cut.
pub fn cap_text(text: &str, cap: Option<usize>) -> String {
    match capped_at(text, cap) {
        None => text.to_string(),
        Some(byte) => cut_text(text, byte),
    }
}

/// The messages as stored: JSON text, binary parts digested, text capped.
///
/// Written straight from the request's messages by a serializing view ([`Stored`]) instead
/// of a capped copy of the tree serialized after: the copy cloned every key and string of
/// the conversation once more per call (~5k instructions for a short chat, `instructions.py`),
/// and a text under the cap is now written from the request's own string. The bytes are the
/// copy's (keys in the same order, the same escapes), which the tests check.
pub fn stored_messages(messages: &[Value], cap: Option<usize>) -> String {
    // Serializing values whose keys are strings cannot fail; were it ever to, the copy's
    // path says the same thing.
    serde_json::to_string(&Stored::Messages(messages, cap))
        .unwrap_or_else(|_| stored_messages_copied(messages, cap))
}

/// [`stored_messages`] by way of a capped copy of the messages.
fn stored_messages_copied(messages: &[Value], cap: Option<usize>) -> String {
    let stored: Vec<Value> = messages.iter().map(|m| stored_message(m, cap)).collect();
    Value::Array(stored).to_string()
}

/// A part of the stored messages, serialized as [`stored_message`] and [`stored_part`] would
/// build it, without building it.
enum Stored<'a> {
    /// The messages array.
    Messages(&'a [Value], Option<usize>),
    /// One message: an object's `content` capped (a string) or stored part by part (an
    /// array); anything else verbatim.
    Message(&'a Value, Option<usize>),
    /// A `content` array's parts.
    Parts(&'a [Value], Option<usize>),
    /// One content part: a `text` part with its `text` capped, a part without a type
    /// verbatim, any other part digested.
    Part(&'a Value, Option<usize>),
    /// A text, capped.
    Text(&'a str, Option<usize>),
}

impl Serialize for Stored<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Stored::Messages(messages, cap) => {
                let mut seq = s.serialize_seq(Some(messages.len()))?;
                for m in messages {
                    seq.serialize_element(&Stored::Message(m, cap))?;
                }
                seq.end()
            }
            Stored::Message(m, cap) => {
                let Value::Object(o) = m else {
                    return m.serialize(s);
                };
                let mut map = s.serialize_map(Some(o.len()))?;
                for (k, v) in o {
                    match (k.as_str(), v) {
                        ("content", Value::String(t)) => {
                            map.serialize_entry(k, &Stored::Text(t, cap))?
                        }
                        ("content", Value::Array(parts)) => {
                            map.serialize_entry(k, &Stored::Parts(parts, cap))?
                        }
                        _ => map.serialize_entry(k, v)?,
                    }
                }
                map.end()
            }
            Stored::Parts(parts, cap) => {
                let mut seq = s.serialize_seq(Some(parts.len()))?;
                for p in parts {
                    seq.serialize_element(&Stored::Part(p, cap))?;
                }
                seq.end()
            }
            Stored::Part(p, cap) => match (p.get("type").and_then(Value::as_str), p) {
                (Some("text"), Value::Object(o)) => {
                    let mut map = s.serialize_map(Some(o.len()))?;
                    for (k, v) in o {
                        match (k.as_str(), v) {
                            ("text", Value::String(t)) => {
                                map.serialize_entry(k, &Stored::Text(t, cap))?
                            }
                            _ => map.serialize_entry(k, v)?,
                        }
                    }
                    map.end()
                }
                (None, _) => p.serialize(s),
                _ => crate::cache::digest_part(p).serialize(s),
            },
            Stored::Text(t, cap) => match capped_at(t, cap) {
                None => s.serialize_str(t),
                Some(byte) => s.serialize_str(&cut_text(t, byte)),
            },
        }
    }
}

/// Where `text` is cut for `cap` characters (a byte offset), if it is longer.
fn capped_at(text: &str, cap: Option<usize>) -> Option<usize> {
    text.char_indices().nth(cap?).map(|(byte, _)| byte)
}

/// `text` cut at `byte`, with the marker saying how many characters were cut.
fn cut_text(text: &str, byte: usize) -> String {
    let cut = text[byte..].chars().count();
    format!("{}…[{cut} chars cut]", &text[..byte])
}

fn stored_message(m: &Value, cap: Option<usize>) -> Value {
    let Value::Object(o) = m else {
        return m.clone();
    };
    let mut out = Map::with_capacity(o.len());
    for (k, v) in o {
        let v = match (k.as_str(), v) {
            ("content", Value::String(s)) => Value::String(cap_text(s, cap)),
            ("content", Value::Array(parts)) => {
                Value::Array(parts.iter().map(|p| stored_part(p, cap)).collect())
            }
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

/// One content part: a `text` part with its text capped; any other part as the cache
/// digests it (`{"type", "sha256"}`).
fn stored_part(p: &Value, cap: Option<usize>) -> Value {
    match p.get("type").and_then(Value::as_str) {
        Some("text") => {
            let mut p = p.clone();
            if let Some(Value::String(t)) = p.get_mut("text") {
                *t = cap_text(t, cap);
            }
            p
        }
        _ => crate::cache::digest_part(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn caps_count_characters() {
        assert_eq!(cap_text("héllo", None), "héllo");
        assert_eq!(cap_text("héllo", Some(5)), "héllo");
        assert_eq!(cap_text("héllo wörld", Some(2)), "hé…[9 chars cut]");
    }

    #[test]
    fn binary_parts_are_digested_like_the_cache_key_and_text_capped_without_touching_the_input() {
        let image = json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}});
        let audio =
            json!({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}});
        let messages = vec![
            json!({"role": "system", "content": "abcdef"}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "describe this picture"},
                image.clone(),
                audio.clone(),
            ]}),
        ];
        let before = messages.clone();
        let stored: Value = serde_json::from_str(&stored_messages(&messages, Some(3))).unwrap();
        assert_eq!(messages, before);
        assert_eq!(
            stored,
            json!([
                {"role": "system", "content": "abc…[3 chars cut]"},
                {"role": "user", "content": [
                    {"type": "text", "text": "des…[18 chars cut]"},
                    crate::cache::digest_part(&image),
                    crate::cache::digest_part(&audio),
                ]},
            ])
        );
        // Without a cap the stored messages are exactly the cache's digested messages.
        let uncapped: Value = serde_json::from_str(&stored_messages(&messages, None)).unwrap();
        assert_eq!(
            uncapped,
            Value::Array(crate::cache::digest_messages(&messages))
        );
    }

    /// The serializing view writes exactly the bytes of the capped copy, for every shape a
    /// message can take: string and array content under and over the cap, escapes and
    /// non-ASCII text, text parts whose `text` is not a string, typed and untyped parts,
    /// parts that are not objects or whose type is not a string, keys that sort before
    /// `content` and `text`, tool calls, and a message that is not an object.
    #[test]
    fn the_view_writes_the_bytes_of_the_copy() {
        let messages = vec![
            json!({"role": "system", "content": "line\none \"quoted\" \u{1} tab\t é 漢字 🙂"}),
            json!({"role": "user", "name": "ann", "audio": {"id": "a1"}, "content": [
                {"type": "text", "cache_control": {"type": "ephemeral"}, "text": "describe\u{7f} this picture, please"},
                "a part that is not an object",
                {"type": 3, "text": "a type that is not a string"},
                {"type": "text", "text": 42, "extra": [1, 2.5, null]},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"no_type": true, "text": "kept as it is"},
            ]}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
            ]}),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "ok"}),
            json!("not an object"),
            json!(7),
        ];
        for cap in [None, Some(0), Some(2), Some(6), Some(1_000)] {
            assert_eq!(
                stored_messages(&messages, cap),
                stored_messages_copied(&messages, cap),
                "cap {cap:?}"
            );
        }
        assert_eq!(
            stored_messages(&messages[3..5], Some(1)),
            r#"[{"content":"o…[1 chars cut]","role":"tool","tool_call_id":"call_1"},"not an object"]"#
        );
        assert_eq!(stored_messages(&[], Some(1)), "[]");
    }
}
