//! The upstream fields the gateway does not own (`logprobs`, `system_fingerprint`,
//! `service_tier`, a legacy `function_call`, …) on their way to the client: checked once
//! when a provider hands them over (a JSON object per level, the gateway's own keys
//! dropped), merged for a whole answer, and written into the wire objects with the
//! upstream's bytes.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::plugin::Passthrough;

/// Top-level keys of a completion or chunk the gateway writes itself.
pub(crate) const RESPONSE_OWNED: &[&str] = &[
    "id", "object", "created", "model", "choices", "usage", "error",
];
/// Keys of a choice the gateway writes itself.
pub(crate) const CHOICE_OWNED: &[&str] = &["index", "delta", "message", "finish_reason"];
/// Keys of a delta or message the gateway writes itself.
pub(crate) const MESSAGE_OWNED: &[&str] = &[
    "role",
    "content",
    "reasoning_content",
    "reasoning",
    "tool_calls",
    "refusal",
];

/// The members of one JSON object, in the order written, each value's bytes verbatim.
pub(crate) struct Members<'a>(pub Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out: Vec<(String, &'de RawValue)> = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                    if out.iter().any(|(seen, _)| *seen == k) {
                        return Err(serde::de::Error::custom(format!("duplicate key `{k}`")));
                    }
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl Members<'_> {
    /// Whether `key` is one of the members.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// Write the members as `"k":v` pairs, each preceded by a comma.
    pub(crate) fn write_each_after_comma(&self, out: &mut Vec<u8>) {
        for (k, v) in &self.0 {
            out.push(b',');
            // Writing a string into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, k);
            out.push(b':');
            out.extend_from_slice(v.get().as_bytes());
        }
    }
}

/// The members of a checked level text (see [`check`]); empty for text that is not one.
pub(crate) fn members(text: &str) -> Members<'_> {
    serde_json::from_str(text).unwrap_or(Members(Vec::new()))
}

/// Check one level of a provider's passthrough: a JSON object without duplicate keys. The
/// gateway's own keys (`owned`) and `null` values are dropped (the text is rewritten only
/// then); an object left empty becomes `None`. `Err` names what is wrong.
fn check_level(text: &mut Option<String>, level: &str, owned: &[&str]) -> Result<(), String> {
    let Some(t) = text.as_deref() else {
        return Ok(());
    };
    let m: Members<'_> = serde_json::from_str(t)
        .map_err(|e| format!("passthrough {level}-json is not a JSON object: {e}"))?;
    let keep = |(k, v): &&(String, &RawValue)| !owned.contains(&k.as_str()) && v.get() != "null";
    if m.0.iter().all(|kv| keep(&kv)) {
        if m.0.is_empty() {
            *text = None;
        }
        return Ok(());
    }
    let kept = Members(m.0.iter().filter(keep).cloned().collect());
    if kept.0.is_empty() {
        *text = None;
        return Ok(());
    }
    let mut out = Vec::with_capacity(t.len());
    kept.write_each_after_comma(&mut out);
    out[0] = b'{';
    out.push(b'}');
    *text = Some(String::from_utf8_lossy(&out).into_owned());
    Ok(())
}

/// Check a provider's passthrough delta in place (each level per [`check_level`]); `Err`
/// names the level and the problem. Returns whether anything is left to carry.
pub(crate) fn check(p: &mut Passthrough) -> Result<bool, String> {
    check_level(&mut p.response_json, "response", RESPONSE_OWNED)?;
    check_level(&mut p.choice_json, "choice", CHOICE_OWNED)?;
    check_level(&mut p.message_json, "message", MESSAGE_OWNED)?;
    Ok(p.response_json.is_some() || p.choice_json.is_some() || p.message_json.is_some())
}

/// The pass-through fields of a whole answer, each level a checked JSON object text:
/// `response` goes on the completion object, `choice` on `choices[0]`, `message` on
/// `choices[0].message`. The response cache stores them with the answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerFields {
    /// Top-level fields (e.g. `system_fingerprint`, `service_tier`).
    pub response: Option<String>,
    /// Fields of choice 0 (e.g. `logprobs`).
    pub choice: Option<String>,
    /// Fields of the message (e.g. a legacy `function_call`).
    pub message: Option<String>,
}

/// The checked passthrough deltas of one attempt, kept as given until the answer is built.
#[derive(Debug, Default, Clone)]
pub(crate) struct FieldLog {
    response: Vec<String>,
    choice: Vec<String>,
    message: Vec<String>,
}

impl FieldLog {
    /// Record one checked passthrough delta (a repeated identical response level, as
    /// `system_fingerprint` on every chunk, is kept once).
    pub(crate) fn push(&mut self, p: &Passthrough) {
        if let Some(r) = &p.response_json
            && self.response.last() != Some(r)
        {
            self.response.push(r.clone());
        }
        self.choice.extend(p.choice_json.iter().cloned());
        self.message.extend(p.message_json.iter().cloned());
    }

    /// Whether a message-level field (part of the answer itself, such as a `function_call`)
    /// was seen.
    pub(crate) fn has_message(&self) -> bool {
        !self.message.is_empty()
    }

    /// The fields of the whole answer. A level given once (a non-streamed answer) is kept
    /// byte for byte; a level given per chunk is merged the way stream deltas add up: top
    /// level, the last value of each key; choice and message, strings appended, arrays
    /// concatenated, objects merged key by key, anything else the last value.
    pub(crate) fn answer(&self) -> Option<AnswerFields> {
        let f = AnswerFields {
            response: merged(&self.response, false),
            choice: merged(&self.choice, true),
            message: merged(&self.message, true),
        };
        (f.response.is_some() || f.choice.is_some() || f.message.is_some()).then_some(f)
    }
}

fn merged(texts: &[String], deep: bool) -> Option<String> {
    match texts {
        [] => None,
        [one] => Some(one.clone()),
        many => {
            let mut acc = Map::new();
            for t in many {
                if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(t) {
                    for (k, v) in m {
                        match acc.get_mut(&k) {
                            Some(old) if deep => merge_value(old, v),
                            _ => {
                                acc.insert(k, v);
                            }
                        }
                    }
                }
            }
            Some(Value::Object(acc).to_string())
        }
    }
}

/// `from` added to `into` as a stream delta adds to what came before.
fn merge_value(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::String(a), Value::String(b)) => a.push_str(&b),
        (Value::Array(a), Value::Array(b)) => a.extend(b),
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(old) => merge_value(old, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Serializes as the members of a checked level text, for `#[serde(flatten)]` into a wire
/// object; nothing for `None`.
pub(crate) struct Flat<'a>(pub Option<&'a str>);

impl Serialize for Flat<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let m = self.0.map(members).unwrap_or(Members(Vec::new()));
        let mut map = s.serialize_map(Some(m.0.len()))?;
        for (k, v) in &m.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(r: Option<&str>, c: Option<&str>, m: Option<&str>) -> Passthrough {
        Passthrough {
            response_json: r.map(str::to_owned),
            choice_json: c.map(str::to_owned),
            message_json: m.map(str::to_owned),
        }
    }

    /// Owned keys and nulls are dropped, the rest kept byte for byte; bad text is an error
    /// naming its level.
    #[test]
    fn check_drops_owned_keys_and_names_bad_levels() {
        let mut ok = p(
            Some(r#"{"system_fingerprint":"fp","id":"x","n":null}"#),
            Some(r#"{"logprobs":{"content":[{"logprob":-1.9361265e-07}]}}"#),
            Some(r#"{"content":"no"}"#),
        );
        assert_eq!(check(&mut ok), Ok(true));
        assert_eq!(
            ok.response_json.as_deref(),
            Some(r#"{"system_fingerprint":"fp"}"#)
        );
        assert_eq!(
            ok.choice_json.as_deref(),
            Some(r#"{"logprobs":{"content":[{"logprob":-1.9361265e-07}]}}"#)
        );
        assert_eq!(ok.message_json, None);
        let mut empty = p(Some("{}"), None, Some(r#"{"role":"assistant"}"#));
        assert_eq!(check(&mut empty), Ok(false));
        for (bad, level) in [
            (p(Some("[1]"), None, None), "response-json"),
            (p(None, Some(r#"{"a":1,"a":2}"#), None), "choice-json"),
            (p(None, None, Some("{")), "message-json"),
        ] {
            let mut bad = bad;
            let err = check(&mut bad).unwrap_err();
            assert!(err.contains(level), "{err}");
        }
    }

    /// One text per level stays as given; several merge as stream deltas add up.
    #[test]
    fn answer_merges_per_chunk_levels() {
        let mut log = FieldLog::default();
        log.push(&p(
            Some(r#"{"system_fingerprint":"fp"}"#),
            Some(r#"{"logprobs":{"content":[{"logprob":-1.50}]}}"#),
            None,
        ));
        let once = log.answer().unwrap();
        assert_eq!(
            once.choice.as_deref(),
            Some(r#"{"logprobs":{"content":[{"logprob":-1.50}]}}"#)
        );
        log.push(&p(
            Some(r#"{"system_fingerprint":"fp"}"#),
            Some(r#"{"logprobs":{"content":[{"logprob":-2.0}]}}"#),
            Some(r#"{"function_call":{"name":"f","arguments":""}}"#),
        ));
        log.push(&p(
            Some(r#"{"system_fingerprint":"fp2"}"#),
            None,
            Some(r#"{"function_call":{"arguments":"{\"a\":1}"}}"#),
        ));
        let all = log.answer().unwrap();
        assert_eq!(
            all.response.as_deref(),
            Some(r#"{"system_fingerprint":"fp2"}"#)
        );
        assert_eq!(
            all.choice.as_deref(),
            Some(r#"{"logprobs":{"content":[{"logprob":-1.5},{"logprob":-2.0}]}}"#)
        );
        assert_eq!(
            all.message.as_deref(),
            Some(r#"{"function_call":{"arguments":"{\"a\":1}","name":"f"}}"#)
        );
    }
}
