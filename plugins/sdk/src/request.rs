//! Building OpenAI chat-completions requests: the JSON body (protected keys, merges of
//! `EXTRA_BODY` and the client's overlay, prefill) and the HTTP request around it.
//!
//! Client JSON is carried verbatim ([`RawValue`]): messages, tools and JSON schemas keep their
//! key order and number spelling, which matters (a schema's property order is the order a
//! model writes the fields in). Only the body's top-level keys are re-ordered (sorted).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::{AuthScheme, Header, HttpRequest};

/// Body keys owned by the contract: neither `EXTRA_BODY` nor the client's overlay may set them.
///
/// # Example
/// ```
/// assert!(polygateway_plugin_sdk::request::PROTECTED_KEYS.contains(&"stream_options"));
/// ```
pub const PROTECTED_KEYS: [&str; 4] = ["model", "messages", "stream", "stream_options"];

/// Overlay keys that are request conventions of the contract (`wit/types.wit`), not body
/// keys of the OpenAI API: the client's `thinking` (Anthropic's object, `{"type": "enabled",
/// "budget_tokens"?}` / `adaptive` / `disabled`) is never merged into the body verbatim — an
/// OpenAI-compatible API without that key refuses it. A provider whose API has a thinking
/// switch reads it with [`client_thinking`] in [`crate::Provider::add_body_fields`].
pub const CONVENTION_KEYS: [&str; 1] = ["thinking"];

/// The client's thinking request (the overlay's `thinking`, see [`CONVENTION_KEYS`]): `Some(true)`
/// for `enabled` or `adaptive`, `Some(false)` for `disabled`, `None` when absent or of
/// another shape.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::request::client_thinking;
///
/// assert_eq!(client_thinking(r#"{"thinking":{"type":"adaptive"}}"#), Some(true));
/// assert_eq!(client_thinking(r#"{"thinking":{"type":"disabled"}}"#), Some(false));
/// assert_eq!(client_thinking(r#"{"temperature":1}"#), None);
/// ```
pub fn client_thinking(overlay_json: &str) -> Option<bool> {
    #[derive(serde::Deserialize)]
    struct Overlay<'a> {
        #[serde(borrow)]
        thinking: Option<&'a RawValue>,
    }
    let o: Overlay<'_> = serde_json::from_str(overlay_json).ok()?;
    let t: Value = serde_json::from_str(o.thinking?.get()).ok()?;
    match t.get("type")?.as_str()? {
        "enabled" | "adaptive" => Some(true),
        "disabled" => Some(false),
        _ => None,
    }
}

/// Which of the contract's message extensions (`wit/types.wit`) a body keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extensions {
    /// `reasoning_details` on assistant messages, `cache_control` on content parts and tools,
    /// `is_error` on tool messages (an API that reads them: OpenRouter).
    pub gateway: bool,
    /// `reasoning_content` on assistant messages (DeepSeek's and Qwen's spelling).
    pub reasoning_content: bool,
}

/// Which of `keys` (at most 32) occur in `json` as a quoted string, `"key"`: bit `i` is set
/// when `json.contains(&format!("\"{}\"", keys[i]))` would be true. One pass over the
/// quotes instead of one substring search per key: each `str::contains` builds a two-way
/// searcher first, and the four per message were 7 % of the guest instructions of a short
/// non-streamed call (74.1k → 69.1k per call, `host/src/bench/instructions.py`;
/// docs/benchmark-history.md).
pub(crate) fn quoted_keys(json: &str, keys: &[&str]) -> u32 {
    debug_assert!(keys.len() <= 32, "quoted_keys answers for at most 32 keys");
    let bytes = json.as_bytes();
    let mut found = 0u32;
    let mut from = 0;
    while let Some(quote) = bytes
        .get(from..)
        .and_then(|b| b.iter().position(|&c| c == b'"'))
    {
        let after = from + quote + 1;
        let rest = bytes.get(after..).unwrap_or_default();
        for (i, key) in keys.iter().enumerate().take(32) {
            // The closing quote first: one byte that rules out nearly every other key
            // without a call to compare the bytes (a `memcmp` per quote and key was 8 % of
            // `build-request` natively; `examples/hot_paths.rs`).
            if rest.get(key.len()) == Some(&b'"') && rest.starts_with(key.as_bytes()) {
                found |= 1 << i;
            }
        }
        from = after;
    }
    found
}

/// Remove the extensions `keep` does not keep from one message, in place. A message without
/// any of them is returned untouched (its bytes verbatim); one with them is rewritten.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::request::{Extensions, parse_messages, strip_extensions};
///
/// let mut msgs = parse_messages(r#"[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},
///     {"role":"tool","tool_call_id":"t","content":"boom","is_error":true}]"#).unwrap();
/// let none = Extensions { gateway: false, reasoning_content: false };
/// for m in &mut msgs { strip_extensions(m, none); }
/// assert_eq!(msgs[0].get(), r#"{"content":[{"text":"hi","type":"text"}],"role":"user"}"#);
/// assert_eq!(msgs[1].get(), r#"{"content":"boom","role":"tool","tool_call_id":"t"}"#);
/// ```
pub fn strip_extensions(message: &mut Box<RawValue>, keep: Extensions) {
    if let Some(stripped) = stripped(message.get(), keep) {
        *message = stripped;
    }
}

/// One message's text without the extensions `keep` does not keep, or `None` when it has
/// none of them (or is not an object): then its text is used verbatim.
fn stripped(text: &str, keep: Extensions) -> Option<Box<RawValue>> {
    if keep.gateway && keep.reasoning_content {
        return None;
    }
    let found = quoted_keys(
        text,
        &[
            "cache_control",
            "reasoning_details",
            "is_error",
            "reasoning_content",
        ],
    );
    let gateway = !keep.gateway && found & 0b0111 != 0;
    let reasoning = !keep.reasoning_content && found & 0b1000 != 0;
    if !gateway && !reasoning {
        return None;
    }
    let Ok(Value::Object(mut m)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    if gateway {
        m.remove("reasoning_details");
        m.remove("is_error");
        if let Some(Value::Array(parts)) = m.get_mut("content") {
            for p in parts {
                if let Value::Object(p) = p {
                    p.remove("cache_control");
                }
            }
        }
    }
    if reasoning {
        m.remove("reasoning_content");
    }
    Some(raw(&Value::Object(m)))
}

/// The body's `messages` array from `chat-request.messages-json`: each message verbatim
/// unless it carries extensions `keep` does not keep ([`strip_extensions`]). What
/// [`parse_messages`] and [`strip_extensions`] per message give, serialized as one array —
/// without an allocation per message: the messages are read borrowed and copied once, into
/// the array's text. [`push_message`] appends another (a prefill message).
///
/// Errors: invalid JSON or not an array → [`JsonFieldError`] naming `messages-json`.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::request::{Extensions, messages_array, prefill_message, push_message};
///
/// let none = Extensions { gateway: false, reasoning_content: false };
/// let text = r#"[{"role":"user","content":"hi"}, {"role":"tool","content":"x","is_error":true}]"#;
/// let mut array = messages_array(text, none).unwrap();
/// push_message(&mut array, &prefill_message("Once", None));
/// assert_eq!(array, r#"[{"role":"user","content":"hi"},{"content":"x","role":"tool"},{"content":"Once","role":"assistant"}]"#);
/// assert!(messages_array("{}", none).is_err());
/// ```
pub fn messages_array(messages_json: &str, keep: Extensions) -> Result<String, JsonFieldError> {
    let messages: Vec<&RawValue> = serde_json::from_str(messages_json)
        .map_err(|e| json_error("messages-json", "a JSON array of messages", &e))?;
    let messages = messages.iter().map(|m| match stripped(m.get(), keep) {
        Some(rewritten) => Cow::Owned(String::from(Box::<str>::from(rewritten))),
        None => Cow::Borrowed(m.get()),
    });
    Ok(array_text(messages, messages_json.len()))
}

/// The JSON array of `items` (each a JSON text), in a buffer of `capacity` bytes to start.
fn array_text<'a>(items: impl Iterator<Item = Cow<'a, str>>, capacity: usize) -> String {
    let mut out = String::with_capacity(capacity);
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&item);
    }
    out.push(']');
    out
}

/// Append `message` to an array [`messages_array`] wrote (a JSON array's text: `[`, the
/// messages, `]`; any other text gives invalid JSON).
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::request::{prefill_message, push_message};
///
/// let mut array = String::from("[]");
/// push_message(&mut array, &prefill_message("a", None));
/// assert_eq!(array, r#"[{"content":"a","role":"assistant"}]"#);
/// ```
pub fn push_message(array: &mut String, message: &RawValue) {
    if array.ends_with(']') {
        array.pop();
    }
    if array.len() > 1 {
        array.push(',');
    }
    array.push_str(message.get());
    array.push(']');
}

/// The overlay's `tools` without `cache_control` on each tool (an API without prompt-cache
/// breakpoints), or `None` when there is nothing to remove.
pub(crate) fn tools_without_cache_control(tools: &str) -> Option<Value> {
    if !tools.contains("\"cache_control\"") {
        return None;
    }
    let mut v: Value = serde_json::from_str(tools).ok()?;
    for t in v.as_array_mut()? {
        if let Value::Object(t) = t {
            t.remove("cache_control");
        }
    }
    Some(v)
}

/// The path of the OpenAI chat-completions endpoint, appended to the source's base URL.
///
/// # Example
/// ```
/// let url = format!("{}{}", "https://api.openai.com/v1",
///                   polygateway_plugin_sdk::request::CHAT_COMPLETIONS_PATH);
/// assert_eq!(url, "https://api.openai.com/v1/chat/completions");
/// ```
pub const CHAT_COMPLETIONS_PATH: &str = "/chat/completions";

/// A JSON text that is not what it should be; the message names the field.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::request::parse_messages;
///
/// let err = parse_messages("{}").unwrap_err();
/// assert_eq!(err.to_string(), "messages-json: expected a JSON array of messages");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonFieldError {
    /// The contract field at fault, e.g. `messages-json`.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

impl std::fmt::Display for JsonFieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for JsonFieldError {}

/// Parse `chat-request.messages-json`: a JSON array; each message is kept verbatim.
///
/// Errors: invalid JSON or not an array → [`JsonFieldError`] naming `messages-json`.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::request::parse_messages;
///
/// let msgs = parse_messages(r#"[{"role":"user","content":"hi"}]"#).unwrap();
/// assert_eq!(msgs.len(), 1);
/// assert_eq!(msgs[0].get(), r#"{"role":"user","content":"hi"}"#);
/// assert!(parse_messages("[{").is_err());
/// ```
pub fn parse_messages(messages_json: &str) -> Result<Vec<Box<RawValue>>, JsonFieldError> {
    serde_json::from_str(messages_json)
        .map_err(|e| json_error("messages-json", "a JSON array of messages", &e))
}

/// The assistant message that carries a prefill (partial answer to continue):
/// `{"role":"assistant","content":<prefill>}`, plus `<flag>: true` when a flag is given
/// (DeepSeek's `prefix`, Qwen's `partial`).
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::request::prefill_message;
///
/// let m = prefill_message("Once upon", Some("prefix"));
/// assert_eq!(m.get(), r#"{"content":"Once upon","prefix":true,"role":"assistant"}"#);
/// ```
pub fn prefill_message(prefill: &str, flag: Option<&str>) -> Box<RawValue> {
    let mut msg = serde_json::Map::new();
    msg.insert("role".into(), Value::from("assistant"));
    msg.insert("content".into(), Value::from(prefill));
    if let Some(flag) = flag {
        msg.insert(flag.into(), Value::Bool(true));
    }
    raw(&Value::Object(msg))
}

/// A chat-completions request body under construction: top-level keys to JSON values.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::request::{parse_messages, ChatBody};
/// use serde_json::json;
///
/// let messages = parse_messages(r#"[{"role":"user","content":"hi"}]"#).unwrap();
/// let mut body = ChatBody::new("gpt-4o", messages, true);
/// body.insert("thinking", &json!({"type": "enabled"}));
/// body.merge_object("overlay-json", r#"{"temperature":0.2,"model":"evil"}"#).unwrap();
/// let v: serde_json::Value = serde_json::from_slice(&body.to_bytes()).unwrap();
/// assert_eq!(v["model"], "gpt-4o");
/// assert_eq!(v["stream_options"], json!({"include_usage": true}));
/// assert_eq!(v["temperature"], 0.2);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ChatBody {
    /// Top-level key → the JSON text of its value: serialized here, read as a raw value, or
    /// (`messages`) the array [`ChatBody::with_messages_array`]'s caller gives, so it is stored
    /// as text, not re-checked; the contract's own keys and constant values are borrowed, not
    /// allocated.
    fields: BTreeMap<Cow<'static, str>, Cow<'static, str>>,
}

impl ChatBody {
    /// The contract's own body: `model`, `messages`, `stream`, and when streaming
    /// `stream_options: {"include_usage": true}` (so the last chunk reports usage).
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::request::ChatBody;
    ///
    /// let body = ChatBody::new("m", Vec::new(), false);
    /// assert_eq!(body.to_bytes(), br#"{"messages":[],"model":"m","stream":false}"#);
    /// ```
    pub fn new(model: &str, messages: Vec<Box<RawValue>>, stream: bool) -> Self {
        let capacity = 2 + messages.iter().map(|m| m.get().len() + 1).sum::<usize>();
        let array = array_text(messages.iter().map(|m| Cow::Borrowed(m.get())), capacity);
        Self::with_messages_array(model, array, stream)
    }

    /// [`ChatBody::new`] with the `messages` value given as its JSON text, as
    /// [`messages_array`] writes it (the text must be a JSON array: it is not re-checked).
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::request::ChatBody;
    ///
    /// let body = ChatBody::with_messages_array("m", r#"[{"role":"user","content":"hi"}]"#.into(), true);
    /// assert_eq!(body.to_bytes(), br#"{"messages":[{"role":"user","content":"hi"}],"model":"m","stream":true,"stream_options":{"include_usage":true}}"#);
    /// ```
    pub fn with_messages_array(model: &str, messages: String, stream: bool) -> Self {
        let mut fields = BTreeMap::new();
        fields.insert(Cow::Borrowed("model"), Cow::Owned(json_text(model)));
        fields.insert(Cow::Borrowed("messages"), Cow::Owned(messages));
        fields.insert(
            Cow::Borrowed("stream"),
            Cow::Borrowed(if stream { "true" } else { "false" }),
        );
        if stream {
            fields.insert(
                Cow::Borrowed("stream_options"),
                Cow::Borrowed(r#"{"include_usage":true}"#),
            );
        }
        Self { fields }
    }

    /// Set a top-level key (any key: this is the provider's own code speaking).
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::request::ChatBody;
    ///
    /// let mut body = ChatBody::new("m", Vec::new(), false);
    /// body.insert("enable_thinking", &serde_json::Value::Bool(true));
    /// assert_eq!(body.get("enable_thinking"), Some("true"));
    /// ```
    pub fn insert(&mut self, key: &str, value: &Value) {
        self.fields
            .insert(Cow::Owned(key.to_owned()), Cow::Owned(json_text(value)));
    }

    /// The JSON text of a top-level key, if set.
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::request::ChatBody;
    ///
    /// assert_eq!(ChatBody::new("m", Vec::new(), true).get("stream"), Some("true"));
    /// ```
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(|v| v.as_ref())
    }

    /// Merge a JSON object's top-level keys over the body (shallow: a key's whole value is
    /// replaced), skipping [`PROTECTED_KEYS`]. Values are kept verbatim. Empty or
    /// whitespace-only text counts as `{}`. Returns the protected keys that were skipped.
    ///
    /// Errors: invalid JSON or not an object → [`JsonFieldError`] naming `field`.
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::request::ChatBody;
    ///
    /// let mut body = ChatBody::new("m", Vec::new(), false);
    /// let skipped = body.merge_object("extra-body-json", r#"{"stream":true,"top_k":5}"#).unwrap();
    /// assert_eq!(skipped, vec!["stream".to_string()]);
    /// assert_eq!((body.get("stream"), body.get("top_k")), (Some("false"), Some("5")));
    /// assert!(body.merge_object("overlay-json", "[1]").is_err());
    /// ```
    pub fn merge_object(
        &mut self,
        field: &'static str,
        json: &str,
    ) -> Result<Vec<String>, JsonFieldError> {
        self.merge(field, json, &[])
    }

    /// [`ChatBody::merge_object`] for the client's overlay: the [`CONVENTION_KEYS`] are
    /// skipped too (and returned with the protected ones), so the body keeps what the
    /// provider and `EXTRA_BODY` set for them.
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::request::ChatBody;
    ///
    /// let mut body = ChatBody::new("m", Vec::new(), false);
    /// let skipped = body.merge_overlay(r#"{"thinking":{"type":"adaptive"},"top_p":1}"#).unwrap();
    /// assert_eq!(skipped, vec!["thinking".to_string()]);
    /// assert_eq!((body.get("thinking"), body.get("top_p")), (None, Some("1")));
    /// ```
    pub fn merge_overlay(&mut self, json: &str) -> Result<Vec<String>, JsonFieldError> {
        self.merge("overlay-json", json, &CONVENTION_KEYS)
    }

    fn merge(
        &mut self,
        field: &'static str,
        json: &str,
        also_skip: &[&str],
    ) -> Result<Vec<String>, JsonFieldError> {
        if json.trim().is_empty() {
            return Ok(Vec::new());
        }
        // The empty object (what the host sends when nothing is set) merges nothing: not
        // parsed. Only JSON's own whitespace around it (`str::trim` takes Unicode's, which
        // serde_json refuses).
        if json.trim_matches([' ', '\t', '\n', '\r']) == "{}" {
            return Ok(Vec::new());
        }
        let object: BTreeMap<String, Box<RawValue>> =
            serde_json::from_str(json).map_err(|e| json_error(field, "a JSON object", &e))?;
        let mut skipped = Vec::new();
        for (key, value) in object {
            if PROTECTED_KEYS.contains(&key.as_str()) || also_skip.contains(&key.as_str()) {
                skipped.push(key);
            } else {
                self.fields.insert(
                    Cow::Owned(key),
                    Cow::Owned(String::from(Box::<str>::from(value))),
                );
            }
        }
        Ok(skipped)
    }

    /// The body as JSON bytes.
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::request::ChatBody;
    ///
    /// assert!(ChatBody::new("m", Vec::new(), false).to_bytes().starts_with(b"{"));
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        // `"key":value,` per field and the braces; a key that needs escapes grows it once.
        let size = 2 + self
            .fields
            .iter()
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum::<usize>();
        let mut out = Vec::with_capacity(size);
        out.push(b'{');
        for (i, (key, value)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            // Writing into a `Vec` cannot fail.
            let _ = serde_json::to_writer(&mut out, key.as_ref());
            out.push(b':');
            out.extend_from_slice(value.as_bytes());
        }
        out.push(b'}');
        out
    }
}

/// The HTTP request for an OpenAI chat-completions body: `POST` [`CHAT_COMPLETIONS_PATH`],
/// `content-type: application/json`, bearer credential.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::request::{chat_completions_request, ChatBody};
/// use polygateway_plugin_sdk::AuthScheme;
///
/// let req = chat_completions_request(&ChatBody::new("m", Vec::new(), false));
/// assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/chat/completions"));
/// assert_eq!(req.auth, AuthScheme::Bearer);
/// ```
pub fn chat_completions_request(body: &ChatBody) -> HttpRequest {
    HttpRequest {
        method: "POST".into(),
        path: CHAT_COMPLETIONS_PATH.into(),
        headers: vec![Header {
            name: "content-type".into(),
            value: "application/json".into(),
        }],
        body: body.to_bytes(),
        auth: AuthScheme::Bearer,
    }
}

/// The error for JSON that failed to parse as `expected`: a type mismatch says what was
/// expected, anything else is invalid JSON (with serde_json's line and column).
fn json_error(field: &'static str, expected: &str, e: &serde_json::Error) -> JsonFieldError {
    let problem = match e.classify() {
        serde_json::error::Category::Data => format!("expected {expected}"),
        _ => format!("invalid JSON: {e}"),
    };
    JsonFieldError { field, problem }
}

/// Serialize a value into a raw JSON value. Serializing a `Value` or a list of raw values
/// cannot fail (string keys, no custom serializers); `null` is the unreachable fallback.
fn raw<T: serde::Serialize + ?Sized>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| null())
}

fn null() -> Box<RawValue> {
    RawValue::NULL.to_owned()
}

/// A value's JSON text, as [`raw`] serializes it (and with the same `null` fallback).
fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The body's bytes are what serde_json writes for the same map of raw values, keys that
    /// need escapes included.
    #[test]
    fn to_bytes_is_serde_jsons_encoding_of_the_fields() {
        let mut body = ChatBody::new("gpt-\"4o\"\u{1}é", Vec::new(), true);
        body.insert("a\\b", &serde_json::json!({"x": [1, "y"]}));
        body.insert("tab\tkey", &Value::Null);
        body.merge_object("extra-body-json", r#"{"top_k": 5, "n":1.50}"#)
            .unwrap();
        let expected: BTreeMap<&str, &RawValue> = body
            .fields
            .iter()
            .map(|(k, v)| (k.as_ref(), serde_json::from_str(v).unwrap()))
            .collect();
        assert_eq!(body.to_bytes(), serde_json::to_vec(&expected).unwrap());
        assert_eq!(body.get("model"), Some(r#""gpt-\"4o\"\u0001é""#));
        assert_eq!(body.get("n"), Some("1.50"));
        // The empty object is skipped unparsed only with JSON's whitespace around it; other
        // whitespace is still refused, as serde_json refuses it.
        assert_eq!(body.merge_overlay(" \t{}\r\n"), Ok(Vec::new()));
        for bad in ["\u{a0}{}", "{}\u{c}", "{}x"] {
            let err = body.merge_overlay(bad).unwrap_err();
            assert!(err.problem.starts_with("invalid JSON"), "{bad}: {err}");
        }
    }

    /// `messages_array` writes what parsing, stripping each message and `ChatBody::new` give.
    #[test]
    fn messages_array_is_parse_strip_and_join() {
        let texts = [
            "[]",
            " [ ] ",
            r#"[{"role":"user","content":"hi"}]"#,
            r#"[ {"role":"user", "content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]} ,
                {"role":"assistant","content":"b","reasoning_content":"r","reasoning_details":[]},
                {"role":"tool","tool_call_id":"t","content":"c","is_error":false} ]"#,
            r#"[{"role":"user","content":"say \"is_error\""}, 5, "x", null]"#,
        ];
        for text in texts {
            for (gateway, reasoning_content) in
                [(false, false), (true, false), (false, true), (true, true)]
            {
                let keep = Extensions {
                    gateway,
                    reasoning_content,
                };
                let mut parsed = parse_messages(text).unwrap();
                for m in &mut parsed {
                    strip_extensions(m, keep);
                }
                let old = ChatBody::new("m", parsed, false).to_bytes();
                let new =
                    ChatBody::with_messages_array("m", messages_array(text, keep).unwrap(), false)
                        .to_bytes();
                assert_eq!(
                    String::from_utf8(new).unwrap(),
                    String::from_utf8(old).unwrap()
                );
            }
        }
        let err = messages_array(
            "{}",
            Extensions {
                gateway: false,
                reasoning_content: false,
            },
        );
        assert_eq!(
            err.unwrap_err().to_string(),
            "messages-json: expected a JSON array of messages"
        );
    }

    /// The one-pass scan answers exactly what one `contains` per key answers, on texts
    /// built from the keys, their prefixes, escaped quotes and quotes at either end.
    #[test]
    fn quoted_keys_agrees_with_a_substring_search_per_key() {
        let keys = [
            "cache_control",
            "is_error",
            "reasoning_content",
            "reasoning",
        ];
        let pieces = [
            "\"",
            "\\\"",
            "cache_control",
            "cache_contro",
            "is_error",
            "reasoning",
            "reasoning_content",
            "_content",
            ":",
            "{",
            "}",
            "x",
            "é",
            "",
        ];
        let mut checked = 0;
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    for d in pieces {
                        let text = format!("{a}{b}{c}{d}");
                        let expected = keys.iter().enumerate().fold(0u32, |acc, (i, k)| {
                            if text.contains(&format!("\"{k}\"")) {
                                acc | 1 << i
                            } else {
                                acc
                            }
                        });
                        assert_eq!(quoted_keys(&text, &keys), expected, "{text}");
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, pieces.len().pow(4));
        assert_eq!(
            quoted_keys(r#"{"role":"tool","is_error":true,"reasoning":"r"}"#, &keys),
            0b1010
        );
        assert_eq!(quoted_keys(r#"{"text":"say \"is_error\""}"#, &keys), 0);
        // Two keys sharing the quote between them: every quote starts a candidate, even one
        // that closed a match.
        assert_eq!(quoted_keys(r#""is_error"reasoning""#, &keys), 0b1010);
        // The empty key is two quotes in a row, as `contains("\"\"")` finds it.
        assert_eq!(quoted_keys(r#"{"a":""}"#, &["", "a"]), 0b11);
        assert_eq!(quoted_keys(r#"{"a":"b"}"#, &["", "a"]), 0b10);
    }
}
