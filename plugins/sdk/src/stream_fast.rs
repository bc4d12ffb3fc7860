//! The fast path of [`crate::ChatStreamParser`]: the common chunk shape — an object with
//! `model`, `choices[].delta` (role, content, reasoning), `finish_reason`, and no `error`,
//! `usage` or `tool_calls` — read into borrowed typed structs instead of a
//! `serde_json::Value` tree (no map, key or string allocations). Anything else, including a
//! field of an unexpected type or a duplicate key, is declined and the caller falls back to
//! the `Value` path, so the deltas are always exactly the ones that path would give.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::fields::finish_reason_from_str;
use crate::{Delta, ThinkSplitter};

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow)]
    choices: Option<Vec<Choice<'a>>>,
    error: Option<IgnoredAny>,
    usage: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: Index,
    #[serde(borrow)]
    delta: Option<Body<'a>>,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reasoning: Option<Cow<'a, str>>,
    tool_calls: Option<IgnoredAny>,
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
fn text<'s>(s: &'s Option<Cow<'_, str>>) -> Option<&'s str> {
    s.as_deref().filter(|s| !s.is_empty())
}

/// Parse `data` (a chunk's JSON) if it has the common shape, appending its deltas to `out`
/// and returning `true`; otherwise leave `out` and `model_seen` untouched and return `false`.
pub(crate) fn parse_common(
    data: &str,
    model_seen: &mut bool,
    think: Option<&mut ThinkSplitter>,
    out: &mut Vec<Delta>,
) -> bool {
    let Ok(chunk) = serde_json::from_str::<Chunk<'_>>(data) else {
        return false;
    };
    if chunk.error.is_some() || chunk.usage.is_some() {
        return false;
    }
    let choice = chunk
        .choices
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|c| c.index.is_zero());
    if choice
        .and_then(|c| c.delta.as_ref())
        .is_some_and(|b| b.tool_calls.is_some())
    {
        return false;
    }
    if !*model_seen && let Some(model) = text(&chunk.model) {
        *model_seen = true;
        out.push(Delta::Model(model.to_owned()));
    }
    let Some(choice) = choice else {
        return true;
    };
    let mut think = think;
    if let Some(body) = &choice.delta {
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
    }
    if let Some(reason) = text(&choice.finish_reason) {
        if let Some(split) = think {
            split.finish(out);
        }
        out.push(Delta::Finish(finish_reason_from_str(reason)));
    }
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
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
            // Declined: usage, errors, tool calls, odd types, duplicate keys.
            (
                r#"{"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2}}"#,
                false,
            ),
            (
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}"#,
                false,
            ),
            (r#"{"choices":[{"index":0,"delta":{"content":7}}]}"#, false),
            (r#"{"choices":{"index":0}}"#, false),
            (r#"{"model":5,"choices":[]}"#, false),
            (r#"{"choices":[{"delta":"text"}]}"#, false),
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
}
