//! What of a call's text is stored: messages with binary parts replaced by their digest
//! (reference §7.8, VT R12: no base64 blobs in the ledger) and every text part capped by
//! `PGW_TELEMETRY_TEXT_CAP` (reference issue 12). Only new values are built — the request
//! sent upstream and the cache key never see the cap.

use serde_json::{Map, Value};
use sha2::Digest;

/// `sha256:<hex>` of `bytes`: the stored stand-in of a binary part.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

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

/// One content part: `text` capped; inline image, audio and file data replaced by their
/// digest (remote image URLs are kept: they are references, not payloads).
fn stored_part(p: &Value, cap: Option<usize>) -> Value {
    let mut p = p.clone();
    let ty = p.get("type").and_then(Value::as_str).unwrap_or_default();
    match ty {
        "text" => {
            if let Some(Value::String(t)) = p.get_mut("text") {
                *t = cap_text(t, cap);
            }
        }
        "image_url" => {
            if let Some(Value::String(url)) = p.pointer_mut("/image_url/url")
                && url.starts_with("data:")
            {
                *url = digest(url.as_bytes());
            }
        }
        "input_audio" => {
            if let Some(Value::String(d)) = p.pointer_mut("/input_audio/data") {
                *d = digest(d.as_bytes());
            }
        }
        "file" => {
            if let Some(Value::String(d)) = p.pointer_mut("/file/file_data") {
                *d = digest(d.as_bytes());
            }
        }
        _ => {}
    }
    p
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
    fn binary_parts_are_digested_and_text_capped_without_touching_the_input() {
        let url = "data:image/png;base64,iVBORw0KGgo=";
        let messages = vec![
            json!({"role": "system", "content": "abcdef"}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "describe this picture"},
                {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
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
                    {"type": "image_url", "image_url": {"url": digest(url.as_bytes()), "detail": "low"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                    {"type": "input_audio", "input_audio": {"data": digest(b"AAAA"), "format": "wav"}},
                ]},
            ])
        );
    }
}
