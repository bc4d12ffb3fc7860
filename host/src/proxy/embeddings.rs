//! `POST /v1/embeddings` (OpenAI shape): `input` a string, an array of strings, an array of
//! token ids (one input) or an array of token-id arrays,
//! `encoding_format` `float` (default) or `base64` (little-endian f32, as OpenAI sends it),
//! `dimensions`; the `x-pgw-*` call headers; then `Gateway::embed`.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};

use super::AppState;
use super::call_headers::{call_options, names, set, trace_parent};
use super::errors::{error_response, plain_error};
use crate::error::GatewayError;
use crate::pipeline::{EmbeddingInput, EmbeddingRequest, EmbeddingResponse};

/// How vectors are written in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Float,
    Base64,
}

/// The body's fields. `input` is read by [`WireInput`] straight into its final vectors, so
/// a body of many small token arrays never becomes a JSON tree; unknown fields were refused
/// before this is parsed.
#[derive(Deserialize)]
struct WireBody {
    model: Option<Value>,
    input: Option<WireInput>,
    encoding_format: Option<Value>,
    dimensions: Option<Value>,
    #[allow(dead_code)]
    user: Option<IgnoredAny>,
}

/// The number of inputs of a valid embeddings body (for `crate::fuzzing`).
pub(crate) fn input_count(bytes: &[u8]) -> Result<usize, GatewayError> {
    parse_body(bytes).map(|(req, _)| req.input.len())
}

/// Parse an OpenAI embeddings body. Errors name the field at fault.
fn parse_body(bytes: &[u8]) -> Result<(EmbeddingRequest, Encoding), GatewayError> {
    if let Err(e) = serde_json::from_slice::<IgnoredAny>(bytes) {
        return Err(GatewayError::invalid("body", format!("invalid JSON: {e}")));
    }
    let Ok(keys) = serde_json::from_slice::<BTreeMap<String, IgnoredAny>>(bytes) else {
        return Err(GatewayError::invalid(
            "body",
            "the body must be a JSON object",
        ));
    };
    for key in keys.keys() {
        if !matches!(
            key.as_str(),
            "model" | "input" | "encoding_format" | "dimensions" | "user"
        ) {
            return Err(GatewayError::invalid(
                key,
                format!("unknown field `{key}` for embeddings"),
            ));
        }
    }
    let body: WireBody =
        serde_json::from_slice(bytes).map_err(|e| GatewayError::invalid("body", e.to_string()))?;
    let model = match body.model {
        Some(Value::String(m)) if !m.is_empty() => m,
        _ => {
            return Err(GatewayError::invalid(
                "model",
                "`model` must be a non-empty string",
            ));
        }
    };
    let input = match body.input {
        Some(WireInput::Parsed(input)) => input,
        Some(WireInput::Invalid(message)) => return Err(GatewayError::invalid("input", message)),
        None => return Err(GatewayError::invalid("input", INPUT_SHAPES)),
    };
    let encoding = match &body.encoding_format {
        None | Some(Value::Null) => Encoding::Float,
        Some(Value::String(s)) if s == "float" => Encoding::Float,
        Some(Value::String(s)) if s == "base64" => Encoding::Base64,
        Some(other) => {
            return Err(GatewayError::invalid(
                "encoding_format",
                format!("`encoding_format` must be \"float\" or \"base64\", got {other}"),
            ));
        }
    };
    let dimensions = match &body.dimensions {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|d| u32::try_from(d).ok()) {
            Some(d) if d > 0 => Some(d),
            _ => {
                return Err(GatewayError::invalid(
                    "dimensions",
                    format!("`dimensions` must be a positive integer, got {v}"),
                ));
            }
        },
    };
    let mut req = EmbeddingRequest::of(model, input);
    req.dimensions = dimensions;
    req.validate()?;
    Ok((req, encoding))
}

/// What `input` may be, for the error of any other shape.
const INPUT_SHAPES: &str = "`input` must be a string, an array of strings, an array of token ids \
     or an array of token-id arrays";

/// `input` as read from the body: the inputs, or why the value is not one of OpenAI's four
/// shapes (a string; an array of strings; an array of integers, one input of token ids; an
/// array of integer arrays, one input each). Token ids must be integers in `0..=u32::MAX`.
/// A bad value is not a deserialisation error, so the 400 names `input` (and the element).
enum WireInput {
    Parsed(EmbeddingInput),
    Invalid(String),
}

impl<'de> Deserialize<'de> for WireInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(InputVisitor)
    }
}

struct InputVisitor;

impl<'de> Visitor<'de> for InputVisitor {
    type Value = WireInput;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(INPUT_SHAPES)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<WireInput, E> {
        Ok(WireInput::Parsed(EmbeddingInput::Texts(vec![s.to_owned()])))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<WireInput, E> {
        Ok(WireInput::Parsed(EmbeddingInput::Texts(vec![s])))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<WireInput, E> {
        Ok(WireInput::Invalid(INPUT_SHAPES.into()))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<WireInput, E> {
        Ok(WireInput::Invalid(INPUT_SHAPES.into()))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<WireInput, E> {
        Ok(WireInput::Invalid(INPUT_SHAPES.into()))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<WireInput, E> {
        Ok(WireInput::Invalid(INPUT_SHAPES.into()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireInput, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(WireInput::Invalid(INPUT_SHAPES.into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WireInput, A::Error> {
        /// The array's kind, set by its first element.
        enum Kind {
            Texts(Vec<String>),
            Ids(Vec<u32>),
            Arrays(Vec<Vec<u32>>),
        }
        let mut kind: Option<Kind> = None;
        let mut i = 0usize;
        let problem = loop {
            let Some(item) = seq.next_element::<Item>()? else {
                break None;
            };
            let problem = match (&mut kind, item) {
                (_, Item::Bad { at, what }) => Some(match at {
                    Some(j) => format!("`input[{i}][{j}]` {what}"),
                    None => format!("`input[{i}]` {what}"),
                }),
                (None, Item::Text(t)) => {
                    kind = Some(Kind::Texts(vec![t]));
                    None
                }
                (None, Item::Id(id)) => {
                    kind = Some(Kind::Ids(vec![id]));
                    None
                }
                (None, Item::Ids(ids)) => {
                    kind = Some(Kind::Arrays(vec![ids]));
                    None
                }
                (Some(Kind::Texts(v)), Item::Text(t)) => {
                    v.push(t);
                    None
                }
                (Some(Kind::Ids(v)), Item::Id(id)) => {
                    v.push(id);
                    None
                }
                (Some(Kind::Arrays(v)), Item::Ids(ids)) => {
                    v.push(ids);
                    None
                }
                (Some(k), _) => Some(format!(
                    "`input[{i}]` must be {} like `input[0]` (one array never mixes kinds)",
                    match k {
                        Kind::Texts(_) => "a string",
                        Kind::Ids(_) => "an integer token id",
                        Kind::Arrays(_) => "an array of token ids",
                    }
                )),
            };
            if problem.is_some() {
                break problem;
            }
            i += 1;
        };
        if let Some(message) = problem {
            // The rest of the array is skipped, not parsed.
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(WireInput::Invalid(message));
        }
        Ok(WireInput::Parsed(match kind {
            None => EmbeddingInput::Texts(Vec::new()),
            Some(Kind::Texts(v)) => EmbeddingInput::Texts(v),
            // An array of integers is one input.
            Some(Kind::Ids(v)) => EmbeddingInput::Tokens(vec![v]),
            Some(Kind::Arrays(v)) => EmbeddingInput::Tokens(v),
        }))
    }
}

/// One element of an `input` array: a text, a token id, an array of token ids, or why it is
/// none of them (`at`: the position of the bad id inside an array of ids).
enum Item {
    Text(String),
    Id(u32),
    Ids(Vec<u32>),
    Bad { at: Option<usize>, what: String },
}

impl Item {
    fn bad(what: impl Into<String>) -> Self {
        Item::Bad {
            at: None,
            what: what.into(),
        }
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ItemVisitor)
    }
}

struct ItemVisitor;

impl<'de> Visitor<'de> for ItemVisitor {
    type Value = Item;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string, a token id or an array of token ids")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Item, E> {
        Ok(Item::Text(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Item, E> {
        Ok(Item::Text(s))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Item, E> {
        Ok(match u32::try_from(v) {
            Ok(id) => Item::Id(id),
            Err(_) => Item::bad(format!("is {v}: a token id is at most {}", u32::MAX)),
        })
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Item, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Ok(Item::bad(format!("is {v}: a token id is never negative"))),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Item, E> {
        Ok(Item::bad(format!("is {v}: a token id is an integer")))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Item, E> {
        Ok(Item::bad(format!(
            "is {v}: it must be a string, a token id or an array of token ids"
        )))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Item, E> {
        Ok(Item::bad(
            "is null: it must be a string, a token id or an array of token ids",
        ))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Item::bad(
            "is an object: it must be a string, a token id or an array of token ids",
        ))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item, A::Error> {
        let mut ids = Vec::new();
        let mut j = 0usize;
        while let Some(item) = seq.next_element::<Item>()? {
            let what = match item {
                Item::Id(id) => {
                    ids.push(id);
                    j += 1;
                    continue;
                }
                Item::Bad { what, .. } => what,
                Item::Text(_) => "is a string: an array of token ids holds integers only".into(),
                Item::Ids(_) => "is an array: token-id arrays do not nest".into(),
            };
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Item::Bad { at: Some(j), what });
        }
        Ok(Item::Ids(ids))
    }
}

/// The OpenAI answer body.
fn answer_json(model: &str, r: &EmbeddingResponse, encoding: Encoding) -> Value {
    let data: Vec<Value> = r
        .vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = match encoding {
                Encoding::Float => json!(v),
                Encoding::Base64 => {
                    let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
                    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
                }
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    json!({
        "object": "list",
        "data": data,
        "model": model,
        // Unknown usage is null, never an invented number.
        "usage": r.usage.map(|u| json!({
            "prompt_tokens": u.prompt_tokens,
            "total_tokens": u.total_tokens,
        })),
    })
}

pub(crate) async fn embeddings(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let principal = match state.caller(&headers, peer) {
        Ok(p) => p,
        Err(e) => {
            let (status, ty, message) = e.into_gateway_error();
            return plain_error(status, ty, &message);
        }
    };
    let Ok(bytes) = axum::body::to_bytes(body, state.max_body_bytes).await else {
        return plain_error(
            413,
            "request_too_large",
            &format!(
                "request body exceeds PGW_MAX_BODY_BYTES ({} bytes)",
                state.max_body_bytes
            ),
        );
    };
    let (mut req, encoding) = match parse_body(&bytes) {
        Ok(r) => r,
        Err(e) => return error_response(&e),
    };
    req.options = match call_options(&headers) {
        Ok(o) => o,
        Err(e) => return error_response(&e),
    };
    req.options.identify(principal);
    if state.gateway.traces_enabled() {
        req.options.trace_parent = trace_parent(&headers);
    }
    let model = req.model.clone();
    match state.gateway.embed(req).await {
        Ok(r) => {
            let mut resp = axum::Json(answer_json(&model, &r, encoding)).into_response();
            set(&mut resp, names::CALL_ID, &r.call_id);
            set(&mut resp, names::ATTEMPTS, r.attempts);
            set(&mut resp, names::UPSTREAM_BATCHES, r.upstream_batches);
            set(&mut resp, names::CACHED_INPUTS, r.cached_inputs);
            set(&mut resp, names::USAGE_SOURCE, r.usage_source.as_str());
            set(&mut resp, names::CACHE_HIT, r.upstream_batches == 0);
            if let Some(s) = &r.source_name {
                set(&mut resp, names::SOURCE, s);
            }
            resp
        }
        Err(e) => error_response(&e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_checked_field_by_field() {
        let err = |b: &str| match parse_body(b.as_bytes()) {
            Err(GatewayError::InvalidRequest { param, message }) => (param, message),
            other => panic!("expected a 400, got {other:?}"),
        };
        assert_eq!(
            err(r#"{"model":"e","input":[[1],[]]}"#),
            (
                Some("input".into()),
                "`input[1]` is an empty token array".into()
            )
        );
        assert_eq!(
            err(r#"{"model":"e","input":"a","dimensions":0}"#).0,
            Some("dimensions".into())
        );
        assert_eq!(
            err(r#"{"model":"e","input":"a","encoding_format":"hex"}"#).0,
            Some("encoding_format".into())
        );
        assert_eq!(
            err(r#"{"model":"e","input":"a","temperature":1}"#).0,
            Some("temperature".into())
        );
        assert_eq!(err(r#"{"model":"e","input":[]}"#).0, Some("input".into()));
        assert_eq!(
            err(r#"{"model":"e","input":["a",""]}"#).1,
            "`input[1]` is an empty string"
        );
        assert_eq!(err(r#"{"input":"a"}"#).0, Some("model".into()));
        let (req, enc) =
            parse_body(br#"{"model":"e","input":"hi","encoding_format":"base64","dimensions":4}"#)
                .unwrap();
        assert_eq!(
            (req.input, req.dimensions, enc),
            (
                EmbeddingInput::Texts(vec!["hi".to_string()]),
                Some(4),
                Encoding::Base64
            )
        );
    }

    #[test]
    fn input_takes_the_four_openai_shapes() {
        let input = |b: &str| parse_body(b.as_bytes()).unwrap().0.input;
        let texts = |t: &[&str]| EmbeddingInput::Texts(t.iter().map(|s| s.to_string()).collect());
        assert_eq!(input(r#"{"model":"e","input":"a b"}"#), texts(&["a b"]));
        assert_eq!(
            input(r#"{"model":"e","input":["a","b"]}"#),
            texts(&["a", "b"])
        );
        // An array of integers is one input of token ids, not one input per id.
        assert_eq!(
            input(r#"{"model":"e","input":[15339,1917]}"#),
            EmbeddingInput::Tokens(vec![vec![15339, 1917]])
        );
        assert_eq!(
            input(r#"{"model":"e","input":[[15339],[1917,3],[0,4294967295]]}"#),
            EmbeddingInput::Tokens(vec![vec![15339], vec![1917, 3], vec![0, u32::MAX]])
        );
    }

    #[test]
    fn bad_token_inputs_are_400s_naming_input_and_the_element() {
        let err = |b: &str| match parse_body(b.as_bytes()) {
            Err(GatewayError::InvalidRequest { param, message }) => {
                assert_eq!(param.as_deref(), Some("input"), "{b}: {message}");
                message
            }
            other => panic!("expected a 400 for {b}, got {other:?}"),
        };
        let cases = [
            (r#"[]"#, "`input` must not be empty"),
            (r#"[[]]"#, "`input[0]` is an empty token array"),
            (
                r#"[[1],[2,-3]]"#,
                "`input[1][1]` is -3: a token id is never negative",
            ),
            (
                r#"[1,4294967296]"#,
                "`input[1]` is 4294967296: a token id is at most 4294967295",
            ),
            (
                r#"[[1.5]]"#,
                "`input[0][0]` is 1.5: a token id is an integer",
            ),
            (r#"[1e3]"#, "`input[0]` is 1000: a token id is an integer"),
            (
                r#"[[1,"a"]]"#,
                "`input[0][1]` is a string: an array of token ids holds integers only",
            ),
            (
                r#"[[[1]]]"#,
                "`input[0][0]` is an array: token-id arrays do not nest",
            ),
            (
                r#"["a",[1]]"#,
                "`input[1]` must be a string like `input[0]` (one array never mixes kinds)",
            ),
            (
                r#"[1,[2]]"#,
                "`input[1]` must be an integer token id like `input[0]` (one array never mixes kinds)",
            ),
            (
                r#"[[1],2]"#,
                "`input[1]` must be an array of token ids like `input[0]` (one array never mixes kinds)",
            ),
            (
                r#"[null]"#,
                "`input[0]` is null: it must be a string, a token id or an array of token ids",
            ),
            (
                r#"[{"a":1}]"#,
                "`input[0]` is an object: it must be a string, a token id or an array of token ids",
            ),
            (r#"7"#, INPUT_SHAPES),
            (r#"{"text":"a"}"#, INPUT_SHAPES),
            (r#"null"#, INPUT_SHAPES),
        ];
        for (input, want) in cases {
            assert_eq!(
                err(&format!(r#"{{"model":"e","input":{input}}}"#)),
                want,
                "{input}"
            );
        }
        // The body's other problems still name their field, wherever `input` is.
        let e = parse_body(br#"{"input":[[1]],"model":"e","dimensions":-1}"#).unwrap_err();
        assert!(
            matches!(e, GatewayError::InvalidRequest { param: Some(p), .. } if p == "dimensions")
        );
        let e = parse_body(br#"{"model":"e","input":[[1]] "#).unwrap_err();
        assert!(matches!(e, GatewayError::InvalidRequest { param: Some(p), .. } if p == "body"));
        let e = parse_body(br#"[1]"#).unwrap_err();
        assert!(matches!(e, GatewayError::InvalidRequest { param: Some(p), .. } if p == "body"));
    }

    /// A 1 MiB body of the smallest token arrays (262 000 inputs; parsing is linear, so the
    /// 8 MiB default of `PGW_MAX_BODY_BYTES` costs 8 times this) parses in bounded time into
    /// its final vectors; the memory it holds is bounded by a small multiple of the body (one
    /// `Vec<u32>` per input, no JSON tree of the input).
    #[test]
    fn a_large_body_of_tiny_token_arrays_parses_in_bounded_time_and_memory() {
        let n = 1024 * 1024 / 4 - 16;
        let mut body = String::with_capacity(n * 4 + 32);
        body.push_str(r#"{"model":"e","input":["#);
        for i in 0..n {
            if i > 0 {
                body.push(',');
            }
            body.push_str("[7]");
        }
        body.push_str("]}");
        assert!(body.len() <= 1024 * 1024);
        let started = std::time::Instant::now();
        let (req, _) = parse_body(body.as_bytes()).unwrap();
        let took = started.elapsed();
        // A debug build on a loaded, shared 2-core VM: the bound leaves room for that.
        assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
        let EmbeddingInput::Tokens(t) = &req.input else {
            panic!("token input expected");
        };
        assert_eq!(t.len(), n);
        let held: usize = std::mem::size_of_val(t.as_slice())
            + t.iter().map(|ids| ids.capacity() * 4).sum::<usize>();
        assert!(
            held <= 12 * body.len(),
            "{held} bytes held for a {} byte body",
            body.len()
        );
    }

    #[test]
    fn base64_is_little_endian_f32() {
        let r = EmbeddingResponse {
            call_id: "c".into(),
            scope: "EMB".into(),
            vectors: vec![vec![1.0, -0.5]],
            usage: None,
            usage_source: crate::UsageSource::Unavailable,
            model: None,
            source_name: None,
            upstream_batches: 1,
            cached_inputs: 0,
            attempts: 1,
            latency_ms: 0,
        };
        let v = answer_json("emb", &r, Encoding::Base64);
        assert_eq!(v["data"][0]["embedding"], "AACAPwAAAL8=");
        assert_eq!(v["usage"], Value::Null);
        assert_eq!(
            answer_json("emb", &r, Encoding::Float)["data"][0]["embedding"],
            json!([1.0, -0.5])
        );
    }
}
