//! What of a call's text is stored: messages with non-text parts replaced by the response
//! cache's digest (`cache::digest_part`, docs/cache.md#digest — one digest function for the
//! key and the ledger, no base64 blobs stored) and every text part capped by
//! `PGW_TELEMETRY_TEXT_CAP` (docs/telemetry.md#text-cap). Only new values are built — the request
//! sent upstream and the cache key never see the cap.

use serde_json::{Map, Value};

/// `text` cut to at most `cap` characters, with a marker saying how many were cut.
pub fn cap_text(text: &str, cap: Option<usize>) -> String {
    let Some(cap) = cap else {
        return text.to_string();
    };
    match text.char_indices().nth(cap) {
        None => text.to_string(),
        Some((byte, _)) => {
            let cut = text[byte..].chars().count();
            format!("{}…[{cut} chars cut]", &text[..byte])
        }
    }
}

/// The messages as stored: JSON text, binary parts digested, text capped.
pub fn stored_messages(messages: &[Value], cap: Option<usize>) -> String {
    let stored: Vec<Value> = messages.iter().map(|m| stored_message(m, cap)).collect();
    Value::Array(stored).to_string()
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
}
