//! The typed fast paths of [`crate::ChatStreamParser`] and [`crate::parse_chat_response`]: the
//! common shape — an object with `model`, `choices[].delta` (a chunk) or `choices[].message`
//! (a whole response) with role, content, reasoning and refusal, `finish_reason`, the
//! pass-through fields `system_fingerprint`, `service_tier`, `logprobs` and `function_call`
//! borrowed raw, `usage` in its common form (read typed in the same pass:
//! [`UsageWire`]), no other key, and no `error` or `tool_calls` — read into borrowed typed
//! structs instead of a `serde_json::Value` tree (no map, key or string allocations).
//! Anything else, including a field of an unexpected type, an array where an object belongs,
//! or a duplicate key, is declined and the caller falls back to the `Value` path, so the
//! deltas are always exactly the ones that path would give for a text it accepts. (One
//! difference remains: `id`, `object`, `created` and the raw pass-through fields are skipped
//! or passed on without the checks the `Value` parser makes — a number out of `f64`'s range,
//! a lone surrogate escape — so a chunk carrying such a value there is taken here where that
//! path would refuse it.)

use std::borrow::Cow;

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::fields::{Obj, UsageWire, finish_reason_from_str};
use crate::passthrough::{self, ObjectText};
use crate::{Delta, ThinkSplitter};

// Every key is named (unknown keys are refused): a field the fast path does not know is one
// it could not pass through, so such a chunk is declined to the `Value` path, which carries
// it. The pass-through fields it does know are borrowed raw (`null` reads as absent).
//
// The three levels are filled in place ([`Fill`]) rather than derived: a derived struct is
// built in the visitor's locals and moved out through every `Result` on the way up, and a
// chunk (~440 bytes, nearly all of it choice 0's two bodies) was copied that way several
// times a read — a fifth of the fast path's instructions went to `memcpy`, and in a
// component every such copy is a `memory.copy` the runtime carries out in the host.

/// A chunk's or a whole response's top-level keys, numbered as [`Chunk`]'s `fill` reads them.
struct ChunkKeys;

impl Keys for ChunkKeys {
    const NAMES: &'static [&'static str] = &[
        "id",
        "object",
        "created",
        "model",
        "choices",
        "error",
        "usage",
        "service_tier",
        "system_fingerprint",
    ];
    fn index(key: &str) -> Option<usize> {
        match key {
            "id" => Some(0),
            "object" => Some(1),
            "created" => Some(2),
            "model" => Some(3),
            "choices" => Some(4),
            "error" => Some(5),
            "usage" => Some(6),
            "service_tier" => Some(7),
            "system_fingerprint" => Some(8),
            _ => None,
        }
    }
}

/// A chunk or a whole response. `id`, `object` and `created` are read and dropped: the
/// gateway writes its own.
#[derive(Default)]
struct Chunk<'a> {
    model: Option<Text<'a>>,
    /// `None` when missing or `null`; choice 0 (if any) inside.
    choices: Option<Choices<'a>>,
    /// A non-null `error` (the fast path declines such a chunk).
    error: bool,
    /// Read typed as it is met (reading it raw, then again from its text, was 1.3k of the
    /// 8.4k instructions of a response's parse natively; `examples/hot_paths.rs`).
    usage: Option<Obj<UsageWire>>,
    service_tier: Option<&'a RawValue>,
    system_fingerprint: Option<&'a RawValue>,
}

/// A choice's keys, numbered as [`Choice`]'s `fill` reads them.
struct ChoiceKeys;

impl Keys for ChoiceKeys {
    const NAMES: &'static [&'static str] =
        &["index", "delta", "message", "finish_reason", "logprobs"];
    fn index(key: &str) -> Option<usize> {
        match key {
            "index" => Some(0),
            "delta" => Some(1),
            "message" => Some(2),
            "finish_reason" => Some(3),
            "logprobs" => Some(4),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Choice<'a> {
    index: Index,
    delta: Option<Body<'a>>,
    message: Option<Body<'a>>,
    finish_reason: Option<Text<'a>>,
    logprobs: Option<&'a RawValue>,
}

/// A delta's or a message's keys, numbered as [`Body`]'s `fill` reads them.
struct BodyKeys;

impl Keys for BodyKeys {
    const NAMES: &'static [&'static str] = &[
        "role",
        "content",
        "reasoning_content",
        "reasoning",
        "refusal",
        "tool_calls",
        "function_call",
    ];
    fn index(key: &str) -> Option<usize> {
        match key {
            "role" => Some(0),
            "content" => Some(1),
            "reasoning_content" => Some(2),
            "reasoning" => Some(3),
            "refusal" => Some(4),
            "tool_calls" => Some(5),
            "function_call" => Some(6),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Body<'a> {
    role: Option<Text<'a>>,
    content: Option<Text<'a>>,
    reasoning_content: Option<Text<'a>>,
    reasoning: Option<Text<'a>>,
    refusal: Option<Text<'a>>,
    /// A non-null `tool_calls` (the fast path declines such a chunk).
    tool_calls: bool,
    function_call: Option<&'a RawValue>,
}

/// A JSON object read into an existing value, key by key, as a derived
/// `#[serde(deny_unknown_fields)]` struct of `Option` fields reads it: a missing key leaves
/// its field as it was (the default), an unknown or a repeated key is an error, and so is a
/// value of another type than the field's.
trait Fill<'de>: Default {
    fn fill<A: MapAccess<'de>>(&mut self, map: A) -> Result<(), A::Error>;
}

/// Reads a JSON object (nothing else) into `self.0` through [`Fill`].
struct InPlace<'c, T>(&'c mut T);

impl<'de, T: Fill<'de>> DeserializeSeed<'de> for InPlace<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: Fill<'de>> Visitor<'de> for InPlace<'_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        self.0.fill(map)
    }
}

/// A value read in place: an object through [`Fill`], or the `choices` array.
trait ReadInPlace<'de>: Default {
    fn read<D: Deserializer<'de>>(&mut self, d: D) -> Result<(), D::Error>;
}

impl<'de, T: Fill<'de>> ReadInPlace<'de> for T {
    fn read<D: Deserializer<'de>>(&mut self, d: D) -> Result<(), D::Error> {
        InPlace(self).deserialize(d)
    }
}

/// Reads `null` (leaving `None`) or the value `T` reads into `self.0` (as `Some`, in place).
struct OptInPlace<'c, T>(&'c mut Option<T>);

impl<'de, T: ReadInPlace<'de>> DeserializeSeed<'de> for OptInPlace<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, T: ReadInPlace<'de>> Visitor<'de> for OptInPlace<'_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("null or a value")
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.0.insert(T::default()).read(d)
    }
}

/// The keys of one kind of object: `index` numbers them (a `match` on the names, which
/// compiles to a switch on the length and compares with constants; a type, not a function
/// pointer, so that the lookup is inlined — through a pointer each key was an indirect call,
/// which made the guest slower than the derived structs it replaced).
trait Keys {
    const NAMES: &'static [&'static str];
    fn index(key: &str) -> Option<usize>;
}

/// A key of an object whose keys are `K`'s: its number, or an error for any other.
struct Key<K>(PhantomData<K>);

impl<'de, K: Keys> DeserializeSeed<'de> for Key<K> {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de, K: Keys> Visitor<'de> for Key<K> {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<usize, E> {
        K::index(key).ok_or_else(|| E::unknown_field(key, K::NAMES))
    }
}

/// The next key of `map` (among `keys`), refusing one already seen (`seen`: a bit per key).
fn next_key<'de, K: Keys, A: MapAccess<'de>>(
    map: &mut A,
    seen: &mut u16,
) -> Result<Option<usize>, A::Error> {
    let Some(key) = map.next_key_seed(Key::<K>(PhantomData))? else {
        return Ok(None);
    };
    const { assert!(K::NAMES.len() <= 16, "one bit of `seen` per key") };
    let bit = 1u16 << key;
    if *seen & bit != 0 {
        return Err(de::Error::duplicate_field(K::NAMES[key]));
    }
    *seen |= bit;
    Ok(Some(key))
}

/// Reads a value that may be anything, answering whether it is not `null`.
fn non_null<'de, A: MapAccess<'de>>(map: &mut A) -> Result<bool, A::Error> {
    Ok(map.next_value::<Option<IgnoredAny>>()?.is_some())
}

impl<'de> Fill<'de> for Chunk<'de> {
    fn fill<A: MapAccess<'de>>(&mut self, mut map: A) -> Result<(), A::Error> {
        let mut seen = 0;
        while let Some(key) = next_key::<ChunkKeys, _>(&mut map, &mut seen)? {
            match key {
                0..=2 => {
                    map.next_value::<IgnoredAny>()?;
                }
                3 => self.model = map.next_value()?,
                4 => map.next_value_seed(OptInPlace(&mut self.choices))?,
                5 => self.error = non_null(&mut map)?,
                6 => self.usage = map.next_value()?,
                7 => self.service_tier = map.next_value()?,
                _ => self.system_fingerprint = map.next_value()?,
            }
        }
        Ok(())
    }
}

impl<'de> Fill<'de> for Choice<'de> {
    fn fill<A: MapAccess<'de>>(&mut self, mut map: A) -> Result<(), A::Error> {
        let mut seen = 0;
        while let Some(key) = next_key::<ChoiceKeys, _>(&mut map, &mut seen)? {
            match key {
                0 => self.index = Index(Some(map.next_value()?)),
                1 => map.next_value_seed(OptInPlace(&mut self.delta))?,
                2 => map.next_value_seed(OptInPlace(&mut self.message))?,
                3 => self.finish_reason = map.next_value()?,
                _ => self.logprobs = map.next_value()?,
            }
        }
        Ok(())
    }
}

impl<'de> Fill<'de> for Body<'de> {
    fn fill<A: MapAccess<'de>>(&mut self, mut map: A) -> Result<(), A::Error> {
        let mut seen = 0;
        while let Some(key) = next_key::<BodyKeys, _>(&mut map, &mut seen)? {
            match key {
                0 => self.role = map.next_value()?,
                1 => self.content = map.next_value()?,
                2 => self.reasoning_content = map.next_value()?,
                3 => self.reasoning = map.next_value()?,
                4 => self.refusal = map.next_value()?,
                5 => self.tool_calls = non_null(&mut map)?,
                _ => self.function_call = map.next_value()?,
            }
        }
        Ok(())
    }
}

/// Reads `text` (a whole JSON object, nothing after it but whitespace) into `chunk` (a
/// default one), answering `false` when it is not of the common shape. (Filled through a
/// reference: returned by value, the chunk was one more copy.)
fn read_chunk<'a>(text: &'a str, chunk: &mut Chunk<'a>) -> bool {
    let mut de = serde_json::Deserializer::from_str(text);
    InPlace(chunk).deserialize(&mut de).is_ok() && de.end().is_ok()
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
#[derive(Default)]
struct Choices<'a> {
    zero: Option<Choice<'a>>,
}

impl<'de> ReadInPlace<'de> for Choices<'de> {
    fn read<D: Deserializer<'de>>(&mut self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(ChoicesSeq(self))
    }
}

/// Reads a `choices` array into `self.0`.
struct ChoicesSeq<'c, 'a>(&'c mut Choices<'a>);

impl<'de> Visitor<'de> for ChoicesSeq<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of choices")
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        let choices = self.0;
        // Until choice 0 is found, each element is read straight into its place (and
        // cleared again when its index is not 0); after it, into a scratch choice that is
        // only checked.
        let mut rest: Option<Choice<'de>> = None;
        loop {
            if choices.zero.is_none() {
                let slot = choices.zero.insert(Choice::default());
                let read = seq.next_element_seed(InPlace(slot))?;
                if read.is_none() || !slot.index.is_zero() {
                    choices.zero = None;
                }
                if read.is_none() {
                    return Ok(());
                }
            } else {
                let slot = rest.insert(Choice::default());
                if seq.next_element_seed(InPlace(slot))?.is_none() {
                    return Ok(());
                }
            }
        }
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
    let mut chunk = Chunk::default();
    if !read_chunk(data, &mut chunk) {
        return false;
    }
    if chunk.error {
        return false;
    }
    let Some(choice) = common_choice(&chunk, |c| c.delta.as_ref()) else {
        return false;
    };
    // The last chunk of a stream carries usage (`stream_options.include_usage`).
    let usage = chunk.usage.as_ref().and_then(|u| u.usage());
    if !*model_seen && let Some(model) = text(&chunk.model) {
        *model_seen = true;
        out.push(Delta::Model(model.to_owned()));
    }
    out.extend(fast_passthrough(
        &chunk,
        choice,
        choice.and_then(|c| c.delta.as_ref()),
    ));
    if let Some(choice) = choice {
        push_common(choice, choice.delta.as_ref(), think, out);
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
    let mut response = Chunk::default();
    if !read_chunk(body, &mut response) {
        return false;
    }
    if response.error || response.choices.is_none() {
        return false;
    }
    let Some(choice) = common_choice(&response, |c| c.message.as_ref()) else {
        return false;
    };
    let usage = response.usage.as_ref().and_then(|u| u.usage());
    if let Some(model) = text(&response.model) {
        out.push(Delta::Model(model.to_owned()));
    }
    out.extend(fast_passthrough(
        &response,
        choice,
        choice.and_then(|c| c.message.as_ref()),
    ));
    let mut think = think;
    if let Some(choice) = choice {
        push_common(choice, choice.message.as_ref(), think.as_deref_mut(), out);
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
    if choice.and_then(part).is_some_and(|b| b.tool_calls) {
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
            // Usage, typed, after the choice's deltas; a usage not of the common form (odd
            // counts, not an object) declines the chunk to the Value path.
            (
                r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":1}}}"#,
                true,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8.0,"completion_tokens":"2","prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":1}}}"#,
                false,
            ),
            (r#"{"choices":[],"usage":{}}"#, true),
            (r#"{"choices":[],"usage":7}"#, false),
            (r#"{"choices":[],"usage":[8,2,null,null,null]}"#, false),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens_details":[null,5]}}"#,
                false,
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
            // A repeated key is refused even when its first value was `null`.
            (r#"{"model":null,"model":"m","choices":[]}"#, false),
            (r#"{"choices":null,"choices":[]}"#, false),
            (
                r#"{"choices":[{"index":0,"delta":null,"delta":{"content":"x"}}]}"#,
                false,
            ),
            (
                r#"{"choices":[{"index":1,"index":0,"delta":{"content":"x"}}]}"#,
                false,
            ),
            // Keys in any order (serde_json writes them sorted): the index after the delta,
            // a choice at index 1 read and dropped before the one at index 0.
            (
                r#"{"choices":[{"delta":{"content":"tok1 "},"finish_reason":null,"index":0}],"created":1700000000,"id":"chatcmpl-bench","model":"bench-model","object":"chat.completion.chunk"}"#,
                true,
            ),
            (
                r#"{"choices":[{"delta":{"content":"one","role":"assistant"},"index":1},{"delta":{"content":"zero"},"finish_reason":"stop","index":0},{"delta":{"content":"two"},"index":0}]}"#,
                true,
            ),
            // An escaped key is its decoded name; an empty object is a chunk with nothing.
            (r#"{"mod\u0065l":"m","choices":[]}"#, true),
            (r#"{}"#, true),
            // Text after the object, and elements of `choices` that are not objects (at
            // choice 0's place and after it).
            (r#"{"choices":[]} x"#, false),
            (r#"{}{}"#, false),
            (r#"{"choices":[null]}"#, false),
            (r#"{"choices":[{"index":0},[0,null]]}"#, false),
            (r#"{"choices":[{"index":0},null]}"#, false),
            // Every key has its own place in the repeat check, `null` last or not.
            (r#"{"error":{"m":1},"error":null,"choices":[]}"#, false),
            (
                r#"{"service_tier":"a","service_tier":null,"choices":[]}"#,
                false,
            ),
            (r#"{"id":"a","id":"b","choices":[]}"#, false),
            (
                r#"{"choices":[{"index":0,"logprobs":null,"logprobs":null}]}"#,
                false,
            ),
            (
                r#"{"choices":[{"index":0,"finish_reason":"stop","finish_reason":null}]}"#,
                false,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"tool_calls":null,"tool_calls":null}}]}"#,
                false,
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"function_call":null,"function_call":null}}]}"#,
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
                r#"{"model":"","choices":[{"message":{"reasoning_content":"r","reasoning":"other","content":"c"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}}"#,
                true,
            ),
            (
                r#"{"model":"","choices":[{"message":{"reasoning_content":"r","reasoning":"other","content":"c"}}],"usage":{"prompt_tokens":3.0,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}}"#,
                false,
            ),
            (
                r#"{"choices":[{"index":1,"message":{"content":"one"}},{"index":0,"message":{"content":"zero"},"finish_reason":"eos"}],"usage":{"prompt_cache_hit_tokens":4,"completion_tokens":2}}"#,
                true,
            ),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":-1,"completion_tokens":"2"}}"#,
                false,
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
            (r#"{"choices":[]} x"#, false),
            (r#"{}"#, false),
            (
                r#"{"choices":[{"message":null,"message":{"content":"x"}}]}"#,
                false,
            ),
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
