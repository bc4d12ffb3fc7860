//! The reasoning a provider needs back on the next turn, in a Responses reasoning item's
//! `encrypted_content`.
//!
//! The neutral answer carries it as `reasoning_details` entries (`pipeline/reasoning.rs`):
//! signed text blocks and opaque blocks of any provider's format. A Responses client hands
//! a reasoning item back verbatim and never reads `encrypted_content`, so the item's entries
//! travel there as `pgw1.` followed by the unpadded base64url of their JSON array, each entry
//! whole (`type`, `text`, `signature`, `data`, `id`, `format`, `index`). Coming back, the
//! prefix tells the gateway's encoding from anything else (an OpenAI-issued
//! `encrypted_content` is refused, naming the field: no upstream of the gateway could read
//! it), and the entries are restored byte for byte. The same prefix as the Anthropic
//! dialect's wrapped signatures (`proxy/messages/signatures.rs`), one encoding version for
//! both.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

/// The prefix of the gateway's encoding.
const PREFIX: &str = "pgw1.";

/// `encrypted_content` of these entries; `None` when there are none.
pub(crate) fn encode(entries: &[Value]) -> Option<String> {
    if entries.is_empty() {
        return None;
    }
    let json = serde_json::to_vec(entries).unwrap_or_default();
    Some(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(json)))
}

/// The entries of an `encrypted_content` the gateway issued; `None` for anything else.
pub(crate) fn decode(s: &str) -> Option<Vec<Value>> {
    let b64 = s.strip_prefix(PREFIX)?;
    let bytes = URL_SAFE_NO_PAD.decode(b64).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Array(entries) if entries.iter().all(is_entry) => Some(entries),
        _ => None,
    }
}

/// An entry the host writes: an object with a string `type` and `format`.
fn is_entry(e: &Value) -> bool {
    e.get("type").is_some_and(Value::is_string) && e.get("format").is_some_and(Value::is_string)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn entries_round_trip_byte_for_byte() {
        let entries = vec![
            json!({"type": "reasoning.text", "text": "Let me think ✓", "signature": "EqQBCgIYAh+/=",
                   "format": "anthropic-claude-v1", "index": 0}),
            json!({"type": "reasoning.encrypted", "data": "CiIBVKhc", "id": "call_7",
                   "format": "google-gemini-v1", "index": 1}),
        ];
        let enc = encode(&entries).unwrap();
        assert!(enc.starts_with("pgw1."), "{enc}");
        assert!(
            enc[5..]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{enc}"
        );
        assert_eq!(decode(&enc).unwrap(), entries);
        assert_eq!(encode(&[]), None);
    }

    #[test]
    fn only_the_gateways_encoding_decodes() {
        // An OpenAI-issued payload, a damaged one, a wrapped non-array, entries without format.
        assert_eq!(decode("gAAAAABoISQ24OyVRYbk"), None);
        assert_eq!(decode("pgw1.!!"), None);
        assert_eq!(
            decode(&format!("pgw1.{}", URL_SAFE_NO_PAD.encode("{}"))),
            None
        );
        assert_eq!(
            decode(&format!(
                "pgw1.{}",
                URL_SAFE_NO_PAD.encode(r#"[{"type":"reasoning.text"}]"#)
            )),
            None
        );
    }
}
