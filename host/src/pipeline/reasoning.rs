//! The reasoning a provider needs back on a later turn, in the shape clients already send
//! to other gateways: the message's `reasoning_details` array (OpenRouter's convention, which
//! LiteLLM also accepts). Built from the contract's `reasoning-signature` and
//! `reasoning-encrypted` deltas (`wit/types.wit`): a signature closes the reasoning text
//! streamed since the previous detail into one `reasoning.text` entry; an encrypted block is
//! a `reasoning.encrypted` entry. Entries are numbered by `index` in answer order.
//!
//! The host never reads a signature or payload: they are opaque strings, carried byte-exact
//! to the client and, when the client hands them back in `messages`, to the provider (which
//! keeps only its own `format`).

use serde_json::{Map, Value};

use crate::plugin::{EncryptedReasoning, ReasoningSignature};

/// The `reasoning_details` of one answer, built delta by delta.
#[derive(Debug, Default, Clone)]
pub struct ReasoningDetails {
    /// The entries so far, in order.
    entries: Vec<Value>,
    /// Where, in the answer's reasoning text, the block the next signature closes begins
    /// (a byte offset).
    block_start: usize,
}

impl ReasoningDetails {
    /// A signature closes the block `reasoning[block_start..]` (`reasoning` is the answer's
    /// whole reasoning text so far).
    pub fn sign(&mut self, reasoning: &str, s: &ReasoningSignature) {
        let text = reasoning.get(self.block_start..).unwrap_or_default();
        self.block_start = reasoning.len();
        let entry = text_entry(text, s, self.entries.len());
        self.entries.push(entry);
    }

    /// An encrypted block; it also closes the current text block, unsigned.
    pub fn encrypted(&mut self, reasoning: &str, e: &EncryptedReasoning) {
        self.block_start = reasoning.len();
        let entry = encrypted_entry(e, self.entries.len());
        self.entries.push(entry);
    }

    /// The entries, in order (empty when the answer had none).
    pub fn entries(&self) -> &[Value] {
        &self.entries
    }

    /// The entries, taken.
    pub fn into_entries(self) -> Vec<Value> {
        self.entries
    }
}

/// `{"type": "reasoning.text", "text", "signature", "format", "index"}`.
pub fn text_entry(text: &str, s: &ReasoningSignature, index: usize) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::from("reasoning.text"));
    m.insert("text".into(), Value::from(text));
    m.insert("signature".into(), Value::from(s.signature.as_str()));
    m.insert("format".into(), Value::from(s.format.as_str()));
    m.insert("index".into(), Value::from(index));
    Value::Object(m)
}

/// `{"type": "reasoning.encrypted", "data", "id"?, "format", "index"}`.
pub fn encrypted_entry(e: &EncryptedReasoning, index: usize) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::from("reasoning.encrypted"));
    m.insert("data".into(), Value::from(e.data.as_str()));
    if let Some(id) = &e.id {
        m.insert("id".into(), Value::from(id.as_str()));
    }
    m.insert("format".into(), Value::from(e.format.as_str()));
    m.insert("index".into(), Value::from(index));
    Value::Object(m)
}

/// The reasoning deltas of a whole answer (a cached or repaired answer replayed as a
/// stream): its reasoning text with each signed block's signature after that block's text,
/// and each encrypted block, in order. Unsigned text before a signed block goes with that
/// block's text (no entry records where unsigned text stood relative to an encrypted block);
/// entries of another shape (never written by the host) are skipped.
pub fn replay(reasoning: Option<&str>, entries: &[Value]) -> Vec<crate::plugin::Delta> {
    use crate::plugin::Delta;
    let reasoning = reasoning.unwrap_or_default();
    let str_of = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
    let mut out = Vec::new();
    let mut offset = 0;
    let text = |out: &mut Vec<Delta>, upto: usize, offset: &mut usize| {
        if let Some(t) = reasoning.get(*offset..upto).filter(|t| !t.is_empty()) {
            out.push(Delta::Reasoning(t.to_string()));
        }
        *offset = upto.max(*offset);
    };
    for e in entries {
        let format = str_of(e, "format").unwrap_or_default();
        match e.get("type").and_then(Value::as_str) {
            Some("reasoning.text") => {
                let block = str_of(e, "text").unwrap_or_default();
                let end = reasoning
                    .get(offset..)
                    .and_then(|rest| rest.find(&block))
                    .map_or(offset, |at| offset + at + block.len());
                text(&mut out, end, &mut offset);
                out.push(Delta::ReasoningSignature(ReasoningSignature {
                    signature: str_of(e, "signature").unwrap_or_default(),
                    format,
                }));
            }
            Some("reasoning.encrypted") => {
                out.push(Delta::ReasoningEncrypted(EncryptedReasoning {
                    data: str_of(e, "data").unwrap_or_default(),
                    id: str_of(e, "id"),
                    format,
                }));
            }
            _ => {}
        }
    }
    text(&mut out, reasoning.len(), &mut offset);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sig(s: &str) -> ReasoningSignature {
        ReasoningSignature {
            signature: s.into(),
            format: "anthropic-claude-v1".into(),
        }
    }

    #[test]
    fn a_signature_closes_the_text_since_the_previous_detail() {
        let mut d = ReasoningDetails::default();
        let mut reasoning = String::from("Let me think. ");
        d.sign(&reasoning, &sig("EqA1"));
        reasoning.push_str("More.");
        d.encrypted(
            &reasoning,
            &EncryptedReasoning {
                data: "opaque==".into(),
                id: Some("call_1".into()),
                format: "google-gemini-v1".into(),
            },
        );
        reasoning.push_str("Last");
        d.sign(&reasoning, &sig("EqB2"));
        assert_eq!(
            Value::Array(d.entries().to_vec()),
            json!([
                {"type": "reasoning.text", "text": "Let me think. ", "signature": "EqA1",
                 "format": "anthropic-claude-v1", "index": 0},
                {"type": "reasoning.encrypted", "data": "opaque==", "id": "call_1",
                 "format": "google-gemini-v1", "index": 1},
                {"type": "reasoning.text", "text": "Last", "signature": "EqB2",
                 "format": "anthropic-claude-v1", "index": 2},
            ])
        );
    }

    #[test]
    fn an_answer_replays_as_the_deltas_that_built_it() {
        use crate::plugin::{Delta, delta_to_json};
        let deltas = vec![
            Delta::Reasoning("abc".into()),
            Delta::ReasoningSignature(sig("S1")),
            Delta::Reasoning("unsigned ".into()),
            Delta::ReasoningEncrypted(EncryptedReasoning {
                data: "D".into(),
                id: None,
                format: "anthropic-claude-v1".into(),
            }),
            Delta::Reasoning("def".into()),
            Delta::ReasoningSignature(sig("S2")),
            Delta::Reasoning("tail".into()),
        ];
        let mut d = ReasoningDetails::default();
        let mut acc = String::new();
        for delta in &deltas {
            match delta {
                Delta::Reasoning(r) => acc.push_str(r),
                Delta::ReasoningSignature(s) => {
                    d.sign(&acc, s);
                }
                Delta::ReasoningEncrypted(e) => {
                    d.encrypted(&acc, e);
                }
                _ => {}
            }
        }
        let json = |v: &[Delta]| v.iter().map(delta_to_json).collect::<Vec<_>>();
        // Exact but for the unsigned text before the encrypted block: no entry records where
        // it stood, so it replays with the next block's text (the text and every entry are
        // kept; providers sign every text block, so this never meets a real answer).
        let mut expected = deltas.clone();
        expected.remove(2);
        expected[3] = Delta::Reasoning("unsigned def".into());
        assert_eq!(json(&replay(Some(&acc), d.entries())), json(&expected));
    }
}
