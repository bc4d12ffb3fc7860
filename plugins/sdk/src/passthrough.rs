//! The fields of an upstream chunk or response that the gateway does not own (e.g.
//! `logprobs`, `system_fingerprint`, `service_tier`, a legacy `function_call`), collected
//! with the upstream's own bytes into a [`Passthrough`] delta for the host to carry through.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use crate::{Delta, Passthrough};

/// Top-level keys the gateway writes itself.
pub(crate) const RESPONSE_OWNED: &[&str] = &[
    "id", "object", "created", "model", "choices", "usage", "error",
];
/// Choice keys the gateway writes itself.
pub(crate) const CHOICE_OWNED: &[&str] = &["index", "delta", "message", "finish_reason"];
/// Delta and message keys the gateway writes itself (from typed deltas).
pub(crate) const MESSAGE_OWNED: &[&str] = &[
    "role",
    "content",
    "reasoning_content",
    "reasoning",
    "tool_calls",
    "refusal",
];

/// Appends `"key":raw` pairs to a JSON object text, opening it on the first pair.
#[derive(Default)]
pub(crate) struct ObjectText(Option<String>);

impl ObjectText {
    /// Add one field; `key` is written JSON-escaped, `value` verbatim. `null` is skipped.
    pub(crate) fn push(&mut self, key: &str, value: &RawValue) {
        if value.get() == "null" {
            return;
        }
        let s = self.0.get_or_insert_with(|| String::from("{"));
        if s.len() > 1 {
            s.push(',');
        }
        // Writing a string into a String cannot fail.
        s.push_str(&serde_json::Value::String(key.to_owned()).to_string());
        s.push(':');
        s.push_str(value.get());
    }

    /// The closed object text, or `None` when no field was added.
    pub(crate) fn finish(self) -> Option<String> {
        self.0.map(|mut s| {
            s.push('}');
            s
        })
    }
}

/// The passthrough delta of three levels' texts, or `None` when all are empty.
pub(crate) fn delta_of(
    response: ObjectText,
    choice: ObjectText,
    message: ObjectText,
) -> Option<Delta> {
    let p = Passthrough {
        response_json: response.finish(),
        choice_json: choice.finish(),
        message_json: message.finish(),
    };
    (p.response_json.is_some() || p.choice_json.is_some() || p.message_json.is_some())
        .then_some(Delta::Passthrough(p))
}

/// The not-owned fields of `map` (keys in sorted order) as an [`ObjectText`].
fn not_owned(map: &BTreeMap<String, &RawValue>, owned: &[&str]) -> ObjectText {
    let mut out = ObjectText::default();
    for (k, v) in map {
        if !owned.contains(&k.as_str()) {
            out.push(k, v);
        }
    }
    out
}

/// Whether a raw choice `index` is 0 the way [`crate::fields`]' choice 0 rule reads it:
/// missing, or a number that is the integer 0.
fn index_is_zero(choice: &BTreeMap<String, &RawValue>) -> bool {
    choice.get("index").is_none_or(|raw| {
        serde_json::from_str::<serde_json::Value>(raw.get()).is_ok_and(|v| v.as_u64() == Some(0))
    })
}

/// The passthrough delta of a chunk (`part` = `"delta"`) or a whole response (`"message"`)
/// read from its JSON text `data` (an object the caller already parsed), with every value's
/// bytes as the upstream sent them; keys in sorted order at each level. `None` when nothing
/// is left after the owned keys and `null` values.
pub(crate) fn from_text(data: &str, part: &str) -> Option<Delta> {
    let top: BTreeMap<String, &RawValue> = serde_json::from_str(data).ok()?;
    let response = not_owned(&top, RESPONSE_OWNED);
    let mut choice_fields = ObjectText::default();
    let mut message_fields = ObjectText::default();
    let choices = top
        .get("choices")
        .and_then(|raw| serde_json::from_str::<Vec<&RawValue>>(raw.get()).ok());
    // As the `Value` path reads it: the first entry that is not an object with a non-zero
    // `index` (an entry that is not an object has no fields to carry).
    let zero = choices.iter().flatten().find_map(|raw| {
        match serde_json::from_str::<BTreeMap<String, &RawValue>>(raw.get()) {
            Ok(c) => index_is_zero(&c).then_some(Some(c)),
            Err(_) => Some(None),
        }
    });
    if let Some(Some(choice)) = zero {
        choice_fields = not_owned(&choice, CHOICE_OWNED);
        if let Some(body) = choice
            .get(part)
            .and_then(|raw| serde_json::from_str::<BTreeMap<String, &RawValue>>(raw.get()).ok())
        {
            message_fields = not_owned(&body, MESSAGE_OWNED);
        }
    }
    delta_of(response, choice_fields, message_fields)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn pass(r: Option<&str>, c: Option<&str>, m: Option<&str>) -> Option<Delta> {
        Some(Delta::Passthrough(Passthrough {
            response_json: r.map(str::to_owned),
            choice_json: c.map(str::to_owned),
            message_json: m.map(str::to_owned),
        }))
    }

    /// Each level keeps its not-owned, non-null fields with the upstream's bytes.
    #[test]
    fn levels_bytes_and_owned_keys() {
        let data = r#"{"id":"x","model":"m","system_fingerprint":"fp_1","service_tier":null,"choices":[{"index":1,"logprobs":{"content":[]}},{"index":0,"delta":{"content":"a","function_call":{"name":"f"}},"logprobs":{"content":[{"token":"a","logprob":-1.9361265e-07,"bytes":[97],"top_logprobs":[]}]},"finish_reason":null}],"usage":null,"x_extra":{ "k" : 1.50 }}"#;
        assert_eq!(
            from_text(data, "delta"),
            pass(
                Some(r#"{"system_fingerprint":"fp_1","x_extra":{ "k" : 1.50 }}"#),
                Some(
                    r#"{"logprobs":{"content":[{"token":"a","logprob":-1.9361265e-07,"bytes":[97],"top_logprobs":[]}]}}"#
                ),
                Some(r#"{"function_call":{"name":"f"}}"#),
            )
        );
        // The message of a response, not its delta.
        let body = r#"{"choices":[{"message":{"role":"assistant","content":null,"refusal":"no","annotations":[]}}]}"#;
        assert_eq!(
            from_text(body, "message"),
            pass(None, None, Some(r#"{"annotations":[]}"#))
        );
        for nothing in [
            r#"{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"choices":[{"index":"0","logprobs":{}}]}"#,
            r#"{"choices":{"index":0}}"#,
            "[1]",
        ] {
            assert_eq!(from_text(nothing, "delta"), None, "{nothing}");
        }
        // Escaped keys are written escaped.
        assert_eq!(
            from_text(r#"{"a\"b":1,"choices":[]}"#, "delta"),
            pass(Some(r#"{"a\"b":1}"#), None, None)
        );
    }
}
