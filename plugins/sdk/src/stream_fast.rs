//! The typed fast paths of [`crate::ChatStreamParser`] and [`crate::parse_chat_response`]: the
//! common shape — an object with `model`, `choices[].delta` (a chunk) or `choices[].message`
//! (a whole response) with role, content, reasoning and refusal, `finish_reason`, the
//! pass-through fields `system_fingerprint`, `service_tier`, `logprobs` and `function_call`
//! borrowed raw, `usage` (read by [`usage_from_text`]), no other key, and no `error` or
//! `tool_calls` — read into borrowed typed structs instead of a `serde_json::Value` tree (no
//! map, key or string allocations). Anything else, including a field of an unexpected type,
//! an array where an object belongs, or a duplicate key, is declined and the caller falls
//! back to the `Value` path, so the deltas are always exactly the ones that path would give
//! for a text it accepts. (One difference remains: `id`, `object`, `created` and the raw pass-through
//! fields are skipped or passed on without the checks the `Value` parser makes — a number out
//! of `f64`'s range, a lone surrogate escape — so a chunk carrying such a value there is taken
//! here where that path would refuse it.)

use std::borrow::Cow;

use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::fields::{Obj, finish_reason_from_str, usage_from_text};
use crate::passthrough::{self, ObjectText};
use crate::{Delta, ThinkSplitter};

// Every key is named (`deny_unknown_fields`): a field the fast path does not know is one it
// could not pass through, so such a chunk is declined to the `Value` path, which carries it.
// The pass-through fields it does know are borrowed raw (`null` reads as absent).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Chunk<'a> {
    // The gateway writes its own; named only so that they are not unknown.
    #[serde(rename = "id")]
    _id: Option<IgnoredAny>,
    #[serde(rename = "object")]
    _object: Option<IgnoredAny>,
    #[serde(rename = "created")]
    _created: Option<IgnoredAny>,
    #[serde(borrow)]
    model: Option<Text<'a>>,
    #[serde(borrow)]
    choices: Option<Choices<'a>>,
    error: Option<IgnoredAny>,
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
    #[serde(borrow)]
    service_tier: Option<&'a RawValue>,
    #[serde(borrow)]
    system_fingerprint: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Choice<'a> {
    #[serde(default)]
    index: Index,
    #[serde(borrow)]
    delta: Option<Obj<Body<'a>>>,
    #[serde(borrow)]
    message: Option<Obj<Body<'a>>>,
    #[serde(borrow)]
    finish_reason: Option<Text<'a>>,
    #[serde(borrow)]
    logprobs: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body<'a> {
    #[serde(borrow)]
    role: Option<Text<'a>>,
    #[serde(borrow)]
    content: Option<Text<'a>>,
    #[serde(borrow)]
    reasoning_content: Option<Text<'a>>,
    #[serde(borrow)]
    reasoning: Option<Text<'a>>,
    #[serde(borrow)]
    refusal: Option<Text<'a>>,
    tool_calls: Option<IgnoredAny>,
    #[serde(borrow)]
    function_call: Option<&'a RawValue>,
}

/// The passthrough delta of a chunk or response the fast path took (keys in sorted order at
/// each level, as the `Value` path writes them), or `None` when it carries nothing.
fn fast_passthrough(
    chunk: &Chunk<'_>,
    choice: Option<&Choice<'_>>,
    body: Option<&Body<'_>>,
) -> Option<Delta> {
    let choice_raw = choice.and_then(|c| c.logprobs);
    let message_raw = body.and_then(|b| b.function_call);
    if chunk.service_tier.is_none()
        && chunk.system_fingerprint.is_none()
        && choice_raw.is_none()
        && message_raw.is_none()
    {
        return None;
    }
    let mut response = ObjectText::default();
    if let Some(v) = chunk.service_tier {
        response.push("service_tier", v);
    }
    if let Some(v) = chunk.system_fingerprint {
        response.push("system_fingerprint", v);
    }
    let mut choice_fields = ObjectText::default();
    if let Some(v) = choice_raw {
        choice_fields.push("logprobs", v);
    }
    let mut message = ObjectText::default();
    if let Some(v) = message_raw {
        message.push("function_call", v);
    }
    passthrough::delta_of(response, choice_fields, message)
}

/// A choice's `index` as written: missing (counts as 0), or a value (only the integer 0
/// is 0; `null` is not).
#[derive(Default)]
struct Index(Option<Value>);

impl<'de> Deserialize<'de> for Index {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(|v| Index(Some(v)))
    }
}

impl Index {
    fn is_zero(&self) -> bool {
        self.0.as_ref().is_none_or(|v| v.as_u64() == Some(0))
    }
}

/// A non-empty string field.
fn text<'s>(s: &'s Option<Text<'_>>) -> Option<&'s str> {
    s.as_ref().map(|t| &*t.0).filter(|s| !s.is_empty())
}

/// A JSON string, borrowed from the input when it has no escape. (`#[serde(borrow)]` makes a
/// `Cow<str>` field borrow, but not one inside an `Option`: `Option<Cow<str>>` allocated every
/// string — the model name and the text of every chunk.) Reads what `String` reads: a JSON
/// string, anything else is an error.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_string(Visit)
    }
}

/// A `choices` array read for its first choice whose index is 0 (what the parsers use),
/// every element still read and checked as a [`Choice`], without collecting them (a `Vec` of
/// choices was an allocation per chunk).
struct Choices<'a> {
    zero: Option<Choice<'a>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Choices<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Choices<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Choices<'de>, A::Error> {
                let mut zero = None;
                while let Some(choice) = seq.next_element::<Obj<Choice<'de>>>()? {
                    if zero.is_none() && choice.0.index.is_zero() {
                        zero = Some(choice.0);
                    }
                }
                Ok(Choices { zero })
            }
        }
        d.deserialize_seq(Visit)
    }
}

/// Parse `data` (a chunk's JSON) if it has the common shape, appending its deltas to `out`
/// and returning `true`; otherwise leave `out` and `model_seen` untouched and return `false`.
pub(crate) fn parse_common(
    data: &str,
    model_seen: &mut bool,
    think: Option<&mut ThinkSplitter>,
    out: &mut Vec<Delta>,
) -> bool {
    let Ok(chunk) = serde_json::from_str::<Obj<Chunk<'_>>>(data) else {
        return false;
    };
    if chunk.error.is_some() {
        return false;
    }
    let Some(choice) = common_choice(&chunk, |c| c.delta.as_deref()) else {
        return false;
    };
    // The last chunk of a stream carries usage (`stream_options.include_usage`): read typed
    // when common, else through the Value path, as a whole response's.
    let usage = match chunk.usage {
        Some(raw) => match usage_from_text(raw.get()) {
            Ok(usage) => usage,
            Err(_) => return false,
        },
        None => None,
    };
    if !*model_seen && let Some(model) = text(&chunk.model) {
        *model_seen = true;
        out.push(Delta::Model(model.to_owned()));
    }
    out.extend(fast_passthrough(
        &chunk,
        choice,
        choice.and_then(|c| c.delta.as_deref()),
    ));
    if let Some(choice) = choice {
        push_common(choice, choice.delta.as_deref(), think, out);
    }
    if let Some(usage) = usage {
        out.push(Delta::Usage(usage));
    }
    true
}

/// Parse a whole 2xx response `body` if it has the common shape (a `choices` array, usage
/// allowed), appending the deltas [`crate::parse_chat_response`] gives — [`Delta::Done`]
/// included — to `out` and returning `true`; otherwise leave `out` untouched and return
/// `false`.
pub(crate) fn parse_response_common(
    body: &[u8],
    think: Option<&mut ThinkSplitter>,
    out: &mut Vec<Delta>,
) -> bool {
    // UTF-8 checked once for the whole body, not once per borrowed string (`from_slice`);
    // a body that is not UTF-8 is declined, and the `Value` path refuses it.
    let Ok(body) = std::str::from_utf8(body) else {
        return false;
    };
    let Ok(response) = serde_json::from_str::<Obj<Chunk<'_>>>(body) else {
        return false;
    };
    if response.error.is_some() || response.choices.is_none() {
        return false;
    }
    let Some(choice) = common_choice(&response, |c| c.message.as_deref()) else {
        return false;
    };
    // Typed when common, else through the Value path, so every odd form reads the same.
    let usage = match response.usage {
        Some(raw) => match usage_from_text(raw.get()) {
            Ok(usage) => usage,
            Err(_) => return false,
        },
        None => None,
    };
    if let Some(model) = text(&response.model) {
        out.push(Delta::Model(model.to_owned()));
    }
    out.extend(fast_passthrough(
        &response,
        choice,
        choice.and_then(|c| c.message.as_deref()),
    ));
    let mut think = think;
    if let Some(choice) = choice {
        push_common(choice, choice.message.as_deref(), think.as_deref_mut(), out);
    }
    if let Some(split) = think {
        // A response without a finish reason still ends here.
        split.finish(out);
    }
    if let Some(usage) = usage {
        out.push(Delta::Usage(usage));
    }
    out.push(Delta::Done);
    true
}

/// Choice 0 of `chunk` when its `part` (delta or message) has no tool calls: `Some(None)`
/// when there is no choice 0, `None` (decline) when the part carries tool calls.
fn common_choice<'c, 'a>(
    chunk: &'c Chunk<'a>,
    part: impl Fn(&'c Choice<'a>) -> Option<&'c Body<'a>>,
) -> Option<Option<&'c Choice<'a>>> {
    let choice = chunk.choices.as_ref().and_then(|c| c.zero.as_ref());
    if choice
        .and_then(part)
        .is_some_and(|b| b.tool_calls.is_some())
    {
        return None;
    }
    Some(choice)
}

/// The deltas of choice 0 (its `body`: delta or message), in the contract's order.
fn push_common(
    choice: &Choice<'_>,
    body: Option<&Body<'_>>,
    mut think: Option<&mut ThinkSplitter>,
    out: &mut Vec<Delta>,
) {
    if let Some(body) = body {
        if let Some(role) = text(&body.role) {
            out.push(Delta::Role(role.to_owned()));
        }
        if let Some(r) = text(&body.reasoning_content).or_else(|| text(&body.reasoning)) {
            out.push(Delta::Reasoning(r.to_owned()));
        }
        if let Some(content) = text(&body.content) {
            match think.as_deref_mut() {
                Some(split) => split.push(content, out),
                None => out.push(Delta::Content(content.to_owned())),
            }
        }
        if let Some(refusal) = text(&body.refusal) {
            out.push(Delta::Refusal(refusal.to_owned()));
        }
    }
    if let Some(reason) = text(&choice.finish_reason) {
        if let Some(split) = think {
            split.finish(out);
        }
        out.push(Delta::Finish(finish_reason_from_str(reason)));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::response::parse_chat_response_value;
    use crate::{ChatStreamParser, SseEvent};

    /// Events of every shape: for each, the parser's output (fast path or not) equals the
    /// `Value` path's, and the fast path takes exactly the common ones.
    #[test]
    fn fast_path_equals_value_path() {
        let cases: &[(&str, bool)] = &[
            (
                r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
                true,
            ),
            (
                r#"{"model":"m","choices":[{"index":0,"delta":{"content":"tok \"q\" \u00e9"}}]}"#,
                true,
            ),
            (
                r#"{"model":"","choices":[{"delta":{"reasoning_content":"why","reasoning":"other"}}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"reasoning":"r","content":null}}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":0,"delta":null,"finish_reason":"eos"}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":1,"delta":{"content":"one"}},{"index":0,"delta":{"content":"zero"}}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":null,"delta":{"content":"null index"}}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":0.0,"delta":{"content":"float index"}}]}"#,
                true,
            ),
            (r#"{"choices":[]}"#, true),
            (r#"{"choices":null,"model":"m2"}"#, true),
            (
                r#"{"error":null,"usage":null,"choices":[{"delta":{"content":"x"}}]}"#,
                true,
            ),
            // A string index is a value that is not 0: no choice, on both paths.
            (
                r#"{"choices":[{"index":"0","delta":{"content":"s"}}]}"#,
                true,
            ),
            // Pass-through fields the fast path knows, raw; `null` ones are absent.
            (
                r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_44709d6fcb","service_tier":"default","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-1.9361265e-07,"bytes":[72,105],"top_logprobs":[]}],"refusal":null},"finish_reason":null}]}"#,
                true,
            ),
            (
                r#"{"system_fingerprint":null,"service_tier":null,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":"I can't"},"logprobs":null}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"function_call":{"name":"f","arguments":"{\"a"}},"finish_reason":null}]}"#,
                true,
            ),
            // Declined: a key the fast path does not know (the Value path carries it).
            (
                r#"{"x_groq":{"id":"q"},"choices":[{"index":0,"delta":{"content":"x"}}]}"#,
                false,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"content":"x"},"content_filter_results":{}}]}"#,
                false,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"content":"x","audio":{"id":"a"}}}]}"#,
                false,
            ),
            (r#"{"choices":[{"index":0,"delta":{"refusal":5}}]}"#, false),
            // Usage, typed or (odd counts) through the Value path, after the choice's deltas.
            (
                r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8.0,"completion_tokens":"2","prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":1}}}"#,
                true,
            ),
            (r#"{"choices":[],"usage":{}}"#, true),
            (r#"{"choices":[],"usage":7}"#, true),
            (r#"{"choices":[],"usage":[8,2,null,null,null]}"#, true),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens_details":[null,5]}}"#,
                true,
            ),
            // A usage the Value parser refuses: declined, and refused on both paths.
            (
                r#"{"choices":[],"usage":{"prompt_tokens":1,"x":1e400}}"#,
                false,
            ),
            // Declined: errors, tool calls, odd types, duplicate keys.
            (
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}"#,
                false,
            ),
            (r#"{"choices":[{"index":0,"delta":{"content":7}}]}"#, false),
            (r#"{"choices":{"index":0}}"#, false),
            (r#"{"model":5,"choices":[]}"#, false),
            (r#"{"choices":[{"delta":"text"}]}"#, false),
            // Every choice is read and checked, the first at index 0 is used: a second one at
            // index 0 is ignored; a bad choice after it (unknown key, wrong type) declines.
            (
                r#"{"model":"m\u00e9\n","choices":[{"index":0,"delta":{"content":"first"}},{"index":0,"delta":{"content":"second"}}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"content":"x"}},{"index":1,"delta":{"content":"y"},"audio":{}}]}"#,
                false,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"content":"x"}},{"index":1,"delta":{"content":["y"]}}]}"#,
                false,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"content":"x"}},7]}"#,
                false,
            ),
            (r#"{"choices":"none"}"#, false),
            // Arrays where an object belongs (a derived struct reads one by position).
            (
                r#"{"choices":[[0,["assistant","hi",null,null,null,null,null],null,null,null]]}"#,
                false,
            ),
            (
                r#"{"choices":[{"index":0,"delta":["assistant","hi",null,null,null,null,null]}]}"#,
                false,
            ),
            (r#"[null,null,null,"m",[],null,null,null,null]"#, false),
            (
                r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
                false,
            ),
        ];
        for think in [false, true] {
            for (data, fast) in cases {
                let mut via_fast = Vec::new();
                let mut seen = false;
                let mut split = think.then(ThinkSplitter::new);
                let took = parse_common(data, &mut seen, split.as_mut(), &mut via_fast);
                assert_eq!(took, *fast, "{data}");
                if !took {
                    assert!(via_fast.is_empty() && !seen, "{data}");
                }
                // The parser (which uses the fast path) against the Value path alone.
                let ev = SseEvent {
                    event: None,
                    data: (*data).into(),
                };
                let mut parser = ChatStreamParser::new(think);
                let got = parser.parse(std::slice::from_ref(&ev));
                let mut slow = ChatStreamParser::new(think);
                let mut want = Vec::new();
                let want = slow.parse_event_value(&ev, &mut want).map(|()| want);
                assert_eq!(got, want, "{data}");
                if took {
                    assert_eq!(Ok(via_fast), want, "{data}");
                }
            }
        }
    }

    /// Whole responses of every shape: the parser (fast path or not) equals the `Value`
    /// path, and the fast path takes exactly the common ones.
    #[test]
    fn response_fast_path_equals_value_path() {
        let cases: &[(&str, bool)] = &[
            (
                r#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":6,"total_tokens":14}}"#,
                true,
            ),
            (
                r#"{"model":"m","choices":[{"message":{"content":"<think>why</think>answer \"q\" \u00e9","reasoning_content":null},"finish_reason":"length"}]}"#,
                true,
            ),
            (
                r#"{"model":"","choices":[{"message":{"reasoning_content":"r","reasoning":"other","content":"c"}}],"usage":{"prompt_tokens":3.0,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":1,"message":{"content":"one"}},{"index":0,"message":{"content":"zero"},"finish_reason":"eos"}],"usage":{"prompt_cache_hit_tokens":4,"completion_tokens":2}}"#,
                true,
            ),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":-1,"completion_tokens":"2"}}"#,
                true,
            ),
            (
                r#"{"error":null,"usage":null,"choices":[{"message":{"content":"x"},"finish_reason":null}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":"0","message":{"content":"s"}}]}"#,
                true,
            ),
            (r#"{"choices":[{"message":null}]}"#, true),
            (
                r#"{"id":"c","model":"m","system_fingerprint":"fp_1","service_tier":"default","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"logprobs":{"content":[{"token":"I","logprob":-3.1e-05,"bytes":[73],"top_logprobs":[]}]},"finish_reason":"stop"}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":0,"message":{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},"finish_reason":"function_call"}]}"#,
                true,
            ),
            (
                r#"{"prompt_filter_results":[],"choices":[{"index":0,"message":{"content":"x","annotations":[]},"content_filter_results":{}}]}"#,
                false,
            ),
            // Declined: errors, no choices, tool calls, odd types, duplicate keys, not JSON.
            (
                r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
                false,
            ),
            (r#"{"model":"m"}"#, false),
            (r#"{"choices":null}"#, false),
            (r#"{"choices":{"index":0}}"#, false),
            (
                r#"{"choices":[{"message":{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
                false,
            ),
            (r#"{"choices":[{"message":{"content":7}}]}"#, false),
            (
                r#"{"choices":[{"index":0,"message":[null,"hi",null,null,null,null,null]}]}"#,
                false,
            ),
            (r#"[null,null,null,"m",[[0,null,[null,"x"]]]]"#, false),
            (r#"{"model":5,"choices":[]}"#, false),
            (
                r#"{"choices":[{"message":{"content":"a","content":"b"}}]}"#,
                false,
            ),
            (r#"{"choices":[],"usage":{"prompt_tokens":1,"#, false),
            ("<html>bad gateway</html>", false),
            ("[1,2]", false),
        ];
        for think in [false, true] {
            for (body, fast) in cases {
                let mut via_fast = Vec::new();
                let mut split = think.then(ThinkSplitter::new);
                let took = parse_response_common(body.as_bytes(), split.as_mut(), &mut via_fast);
                assert_eq!(took, *fast, "{body}");
                if !took {
                    assert!(via_fast.is_empty(), "{body}");
                }
                let want = parse_chat_response_value(body.as_bytes(), think);
                assert_eq!(
                    crate::parse_chat_response(body.as_bytes(), think),
                    want,
                    "{body}"
                );
                if took {
                    assert_eq!(Ok(via_fast), want, "{body}");
                }
            }
        }
    }
}
