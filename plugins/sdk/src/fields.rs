//! Reading OpenAI chat JSON fields into the contract's typed values: finish reasons, usage,
//! tool-call fragments, and the choice the gateway uses (index 0). Lenient by design: a field
//! of an unexpected type is treated as absent, never as an error.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Visitor};
use serde_json::Value;

use crate::{FinishReason, ToolCallDelta, Usage};

/// Map an OpenAI `finish_reason` to [`FinishReason`]; unknown values are kept verbatim in
/// [`FinishReason::Other`].
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{finish_reason_from_str, FinishReason};
///
/// assert_eq!(finish_reason_from_str("tool_calls"), FinishReason::ToolCalls);
/// assert_eq!(finish_reason_from_str("insufficient_system_resource"),
///            FinishReason::Other("insufficient_system_resource".into()));
/// ```
pub fn finish_reason_from_str(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        "function_call" => FinishReason::FunctionCall,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Read an OpenAI `usage` object (token counts).
///
/// `prompt_tokens` and `completion_tokens` default to 0 when absent, but at least one of them
/// must be a number, else the object is not usage and `None` is returned (so an empty or null
/// `usage` never overrides a real one). `cached_prompt_tokens` is
/// `prompt_tokens_details.cached_tokens`, else DeepSeek's `prompt_cache_hit_tokens`, else
/// `None` (not reported); `reasoning_tokens` is `completion_tokens_details.reasoning_tokens`,
/// else `None`. Integral floats are accepted; negative or fractional numbers count as absent.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{usage_from_json, Usage};
/// use serde_json::json;
///
/// let u = usage_from_json(&json!({
///     "prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27,
///     "prompt_tokens_details": {"cached_tokens": 16}
/// }));
/// assert_eq!(u, Some(Usage { prompt_tokens: 20, completion_tokens: 7,
///                            cached_prompt_tokens: Some(16), reasoning_tokens: None,
///                            cache_write_tokens: None }));
/// assert_eq!(usage_from_json(&json!(null)), None);
/// ```
pub fn usage_from_json(usage: &Value) -> Option<Usage> {
    let prompt = count(usage.get("prompt_tokens"));
    let completion = count(usage.get("completion_tokens"));
    if prompt.is_none() && completion.is_none() {
        return None;
    }
    // `get` twice, not `pointer`: a JSON pointer allocates a string per segment.
    let cached = count(
        usage
            .get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens")),
    )
    .or_else(|| count(usage.get("prompt_cache_hit_tokens")));
    Some(Usage {
        prompt_tokens: prompt.unwrap_or(0),
        completion_tokens: completion.unwrap_or(0),
        cached_prompt_tokens: cached,
        reasoning_tokens: count(
            usage
                .get("completion_tokens_details")
                .and_then(|d| d.get("reasoning_tokens")),
        ),
        // OpenAI-compatible APIs cache implicitly and report no cache writes.
        cache_write_tokens: None,
    })
}

/// A struct read only from a JSON object: a derived struct also reads an array (its fields
/// by position), where the `Value` path finds no object (no chunk, choice, message or usage).
pub(crate) struct Obj<T>(pub(crate) T);

impl<T> std::ops::Deref for Obj<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Visit<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// The common form of a `usage` object (OpenAI's and DeepSeek's keys), read typed where the
/// chat fast paths read a chunk or a response (`stream_fast.rs`), in the same pass. Every key
/// is named and every count typed, so nothing is skipped unchecked: a key not named here, a
/// repeated key, a count that is not a non-negative integer, a details value that is neither
/// `null` nor an object of the common form, or an array where an object belongs fails the
/// read, and the fast path declines the whole text to the `Value` path, which answers every
/// odd form. What a read that succeeds answers ([`UsageWire::usage`]) is what
/// [`usage_from_json`] answers for the same object (tested on every form below).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageWire {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    #[serde(rename = "total_tokens")]
    _total_tokens: Option<u64>,
    prompt_cache_hit_tokens: Option<u64>,
    #[serde(rename = "prompt_cache_miss_tokens")]
    _prompt_cache_miss_tokens: Option<u64>,
    prompt_tokens_details: Option<Obj<UsageDetailsWire>>,
    completion_tokens_details: Option<Obj<UsageDetailsWire>>,
}

/// `prompt_tokens_details` / `completion_tokens_details` with OpenAI's keys, all counts.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageDetailsWire {
    cached_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
    #[serde(rename = "audio_tokens")]
    _audio_tokens: Option<u64>,
    #[serde(rename = "accepted_prediction_tokens")]
    _accepted_prediction_tokens: Option<u64>,
    #[serde(rename = "rejected_prediction_tokens")]
    _rejected_prediction_tokens: Option<u64>,
}

impl UsageWire {
    /// The same answer [`usage_from_json`] gives for the same object.
    pub(crate) fn usage(&self) -> Option<Usage> {
        if self.prompt_tokens.is_none() && self.completion_tokens.is_none() {
            return None;
        }
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens);
        Some(Usage {
            prompt_tokens: self.prompt_tokens.unwrap_or(0),
            completion_tokens: self.completion_tokens.unwrap_or(0),
            cached_prompt_tokens: cached,
            reasoning_tokens: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens),
            cache_write_tokens: None,
        })
    }
}

/// A non-negative integer token count (integral floats accepted).
pub fn count(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64().or_else(|| {
        let f = v.as_f64()?;
        // `as` saturates; the guard keeps fractions, negatives and non-finite values out.
        (f.is_finite() && f >= 0.0 && f.fract() == 0.0).then_some(f as u64)
    })
}

/// The choice with `index` 0 (a choice without `index` counts as 0) of a chunk or response.
pub(crate) fn choice_zero(body: &Value) -> Option<&Value> {
    body.get("choices")?
        .as_array()?
        .iter()
        .find(|c| c.get("index").is_none_or(|i| i.as_u64() == Some(0)))
}

/// A string field, when present and non-empty.
pub(crate) fn text<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The reasoning text of a delta or message: `reasoning_content` (DeepSeek, Qwen), else
/// `reasoning` (OpenRouter, vLLM).
pub(crate) fn reasoning(obj: &Value) -> Option<&str> {
    text(obj, "reasoning_content").or_else(|| text(obj, "reasoning"))
}

/// The tool-call fragments of a delta or message (`tool_calls[]`). `index` is the item's
/// own `index`, else its position; empty strings count as absent; an item that carries
/// nothing but its index is skipped.
pub(crate) fn tool_calls(obj: &Value) -> impl Iterator<Item = ToolCallDelta> + '_ {
    obj.get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| calls.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter_map(|(pos, call)| {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|i| u32::try_from(i).ok())
                .or_else(|| u32::try_from(pos).ok())?;
            let function = call.get("function").unwrap_or(&Value::Null);
            let fragment = ToolCallDelta {
                index,
                id: text(call, "id").map(str::to_owned),
                name: text(function, "name").map(str::to_owned),
                arguments: text(function, "arguments").map(str::to_owned),
            };
            let empty =
                fragment.id.is_none() && fragment.name.is_none() && fragment.arguments.is_none();
            (!empty).then_some(fragment)
        })
}

/// The finish reason of a choice, when present and non-empty.
pub(crate) fn finish(choice: &Value) -> Option<FinishReason> {
    text(choice, "finish_reason").map(finish_reason_from_str)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finish_reasons() {
        for (s, want) in [
            ("stop", FinishReason::Stop),
            ("length", FinishReason::Length),
            ("tool_calls", FinishReason::ToolCalls),
            ("content_filter", FinishReason::ContentFilter),
            ("function_call", FinishReason::FunctionCall),
            ("eos", FinishReason::Other("eos".into())),
        ] {
            assert_eq!(finish_reason_from_str(s), want);
        }
        assert_eq!(finish(&json!({"finish_reason": null})), None);
        assert_eq!(finish(&json!({"finish_reason": ""})), None);
    }

    #[test]
    fn usage_variants() {
        let u = usage_from_json(&json!({
            "prompt_tokens": 10, "completion_tokens": 90,
            "prompt_cache_hit_tokens": 4, "prompt_cache_miss_tokens": 6,
            "completion_tokens_details": {"reasoning_tokens": 70}
        }))
        .unwrap();
        assert_eq!(u.cached_prompt_tokens, Some(4));
        assert_eq!(u.reasoning_tokens, Some(70));
        let u = usage_from_json(
            &json!({"prompt_tokens": 3.0, "prompt_tokens_details": {"cached_tokens": 0}}),
        )
        .unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cached_prompt_tokens),
            (3, 0, Some(0))
        );
        assert_eq!(usage_from_json(&json!({})), None);
        assert_eq!(
            usage_from_json(&json!({"prompt_tokens": -1, "completion_tokens": "2"})),
            None
        );
        assert_eq!(usage_from_json(&json!({"prompt_tokens": 1.5})), None);
    }

    /// Where the typed read succeeds it answers exactly what the `Value` path answers, on
    /// every form; it takes the common ones and fails on the odd ones (the fast paths then
    /// decline the text).
    #[test]
    fn the_typed_usage_answers_what_the_value_path_answers() {
        let counts = [
            "",
            "0",
            "7",
            "18446744073709551615",
            "18446744073709551616",
            "3.0",
            "1.5",
            "-1",
            "1e2",
            "\"2\"",
            "null",
            "true",
            "{}",
            "[]",
        ];
        let mut texts = vec![
            "{}".to_owned(), "null".to_owned(), "5".to_owned(), "[]".to_owned(),
            r#"{"prompt_tokens":1,"prompt_tokens":2}"#.to_owned(),
            r#"{"prompt_tokens":8,"completion_tokens":6,"total_tokens":14}"#.to_owned(),
            r#"{"prompt_tokens":8,"prompt_tokens_details":null,"completion_tokens_details":7}"#.to_owned(),
            r#"{"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2,"cached_tokens":3}}"#.to_owned(),
            // Arrays where objects belong (a derived struct would read them by position).
            "[8,2,null,null,null,null,null]".to_owned(),
            r#"{"prompt_tokens":1,"completion_tokens_details":[null,5]}"#.to_owned(),
            r#"{"prompt_tokens":1,"prompt_tokens_details":[3,null]}"#.to_owned(),
            r#"{"prompt_tokens":1,"prompt_tokens_details":"x","completion_tokens_details":0}"#.to_owned(),
            // Keys of other APIs' usage objects, and OpenAI's full form.
            r#"{"prompt_tokens":1,"input_tokens":9}"#.to_owned(),
            r#"{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_cache_hit_tokens":3,"prompt_cache_miss_tokens":16,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}"#.to_owned(),
        ];
        for a in counts {
            for b in counts {
                let field = |key: &str, v: &str| {
                    if v.is_empty() {
                        String::new()
                    } else {
                        format!(r#""{key}":{v},"#)
                    }
                };
                let body = [
                    field("prompt_tokens", a),
                    field("completion_tokens", b),
                    field("prompt_cache_hit_tokens", b),
                    format!(
                        r#""prompt_tokens_details":{{{}"audio_tokens":0}},"#,
                        field("cached_tokens", a)
                    ),
                    format!(
                        r#""completion_tokens_details":{{{}"accepted_prediction_tokens":0}},"#,
                        field("reasoning_tokens", b)
                    ),
                ]
                .concat();
                texts.push(format!("{{{}\"total_tokens\":0}}", body));
                texts.push(format!(
                    "{{{}}}",
                    field("completion_tokens", a).trim_end_matches(',')
                ));
            }
        }
        let typed_read = |text: &str| serde_json::from_str::<Obj<UsageWire>>(text);
        let mut typed = 0;
        for text in &texts {
            let value: Value = serde_json::from_str(text).unwrap();
            if let Ok(wire) = typed_read(text) {
                assert_eq!(wire.usage(), usage_from_json(&value), "{text}");
                typed += 1;
            }
        }
        // Both kinds are exercised: the common forms are read typed, the odd ones are not.
        assert!(
            typed > 20 && typed < texts.len() - 20,
            "{typed} of {}",
            texts.len()
        );
        for odd in [
            "null",
            "5",
            "[]",
            "[8,2,null,null,null,null,null]",
            r#"{"prompt_tokens":3.0,"completion_tokens":2}"#,
            r#"{"prompt_tokens":-1}"#,
            r#"{"prompt_tokens":1,"prompt_tokens":2}"#,
            r#"{"prompt_tokens":1,"completion_tokens_details":[null,5]}"#,
            r#"{"prompt_tokens":1,"input_tokens":9}"#,
        ] {
            assert!(typed_read(odd).is_err(), "{odd}");
        }
        // What the `Value` parser refuses fails the typed read too, even under a key the
        // answer ignores: the text goes to the `Value` path, which refuses it.
        for refused in [
            r#"{"prompt_tokens":1,"x":1e400}"#,
            r#"{"prompt_tokens":1,"total_tokens":1e400}"#,
            r#"{"prompt_tokens":1,"x":"\ud800"}"#,
            r#"{"prompt_tokens":1,"completion_tokens_details":{"x":1e400}}"#,
        ] {
            assert!(serde_json::from_str::<Value>(refused).is_err(), "{refused}");
            assert!(typed_read(refused).is_err(), "{refused}");
        }
        assert_eq!(
            typed_read(r#"{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":1}}"#)
                .unwrap()
                .usage(),
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                cached_prompt_tokens: None,
                reasoning_tokens: Some(1),
                cache_write_tokens: None
            })
        );
    }

    #[test]
    fn choice_zero_is_found_by_index() {
        let body = json!({"choices": [{"index": 1, "x": 1}, {"index": 0, "x": 0}]});
        assert_eq!(choice_zero(&body).unwrap()["x"], 0);
        assert_eq!(
            choice_zero(&json!({"choices": [{"x": 2}]})).unwrap()["x"],
            2
        );
        assert!(choice_zero(&json!({"choices": []})).is_none());
        assert!(choice_zero(&json!({"choices": {}})).is_none());
    }

    #[test]
    fn tool_call_fragments() {
        let delta = json!({"tool_calls": [
            {"index": 1, "id": "call_2", "type": "function", "function": {"name": "f", "arguments": ""}},
            {"function": {"arguments": "{\"a\""}},
            {"index": 3, "function": {"arguments": ""}},
            {"index": -1, "function": {"arguments": "x"}}
        ]});
        let got: Vec<_> = tool_calls(&delta).collect();
        assert_eq!(
            got,
            vec![
                ToolCallDelta {
                    index: 1,
                    id: Some("call_2".into()),
                    name: Some("f".into()),
                    arguments: None
                },
                ToolCallDelta {
                    index: 1,
                    id: None,
                    name: None,
                    arguments: Some("{\"a\"".into())
                },
                ToolCallDelta {
                    index: 3,
                    id: None,
                    name: None,
                    arguments: Some("x".into())
                },
            ]
        );
    }
}
