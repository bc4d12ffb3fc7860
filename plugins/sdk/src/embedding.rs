//! OpenAI-compatible embeddings (`POST /embeddings`): the request of one batch and the parse
//! of its answer into vectors in input order.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;

use crate::classify::{classify_error_object, collapse_and_cap};
use crate::{
    AuthScheme, BuildError, ClassifiedError, EmbeddingInputs, EmbeddingRequest, EmbeddingResponse,
    EmbeddingUsage, ErrorClass, Header, HttpRequest, SourceInfo,
};

/// The path of the OpenAI embeddings endpoint, appended to the source's base URL.
///
/// # Example
/// ```
/// assert_eq!(polygateway_plugin_sdk::EMBEDDINGS_PATH, "/embeddings");
/// ```
pub const EMBEDDINGS_PATH: &str = "/embeddings";

/// `POST /embeddings` with `{"model", "input", "encoding_format": "float"}` and `dimensions`
/// when asked; bearer auth. `input` is always an array, so the answer has one shape: the
/// texts (`["a", "b"]`), or one array of token ids per input (`[[15339], [1917, 3]]`, as
/// OpenAI takes them; the ids are sent as given).
///
/// Errors: an empty batch → `invalid-request` (the host never sends one).
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{
///     EmbeddingInputs, EmbeddingRequest, SourceInfo, openai_embedding_request,
/// };
///
/// let source = SourceInfo { model: "text-embedding-3-small".into(),
///     base_url: "https://api.openai.com/v1".into(), enable_thinking: None,
///     extra_body_json: "{}".into(), max_tokens: None, thinking_budget_tokens: None };
/// let req = EmbeddingRequest {
///     inputs: EmbeddingInputs::Texts(vec!["a".into(), "b".into()]),
///     dimensions: Some(8),
/// };
/// let http = openai_embedding_request(&req, &source).unwrap();
/// assert_eq!(http.path, "/embeddings");
/// assert_eq!(http.body, br#"{"dimensions":8,"encoding_format":"float","input":["a","b"],"model":"text-embedding-3-small"}"#);
///
/// let req = EmbeddingRequest {
///     inputs: EmbeddingInputs::Tokens(vec![vec![15339], vec![1917, 3]]),
///     dimensions: None,
/// };
/// let http = openai_embedding_request(&req, &source).unwrap();
/// assert_eq!(http.body, br#"{"encoding_format":"float","input":[[15339],[1917,3]],"model":"text-embedding-3-small"}"#);
/// ```
pub fn openai_embedding_request(
    req: &EmbeddingRequest,
    source: &SourceInfo,
) -> Result<HttpRequest, BuildError> {
    let input = match &req.inputs {
        EmbeddingInputs::Texts(texts) if !texts.is_empty() => Value::from(texts.clone()),
        EmbeddingInputs::Tokens(arrays) if !arrays.is_empty() => Value::Array(
            arrays
                .iter()
                .map(|ids| Value::from(ids.as_slice()))
                .collect(),
        ),
        _ => {
            return Err(BuildError::InvalidRequest(
                "inputs: an embedding batch needs at least one input".to_owned(),
            ));
        }
    };
    let mut body = serde_json::Map::new();
    body.insert("model".into(), Value::from(source.model.as_str()));
    body.insert("input".into(), input);
    body.insert("encoding_format".into(), Value::from("float"));
    if let Some(d) = req.dimensions {
        body.insert("dimensions".into(), Value::from(d));
    }
    // serde_json's map is sorted (no `preserve_order`), so the bytes are canonical.
    let body = serde_json::to_vec(&Value::Object(body)).unwrap_or_default();
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path: EMBEDDINGS_PATH.to_owned(),
        headers: vec![Header {
            name: "content-type".to_owned(),
            value: "application/json".to_owned(),
        }],
        body,
        auth: AuthScheme::Bearer,
    })
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
struct Item {
    index: Option<u64>,
    embedding: Embedding,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Embedding {
    Floats(Vec<f32>),
    Base64(String),
}

/// Parse a 2xx OpenAI embeddings answer: `data[*].embedding` (float arrays, or base64 of
/// little-endian f32 as with `encoding_format: base64`) ordered by `index` (position when
/// absent), `usage.prompt_tokens` / `total_tokens` (total defaults to prompt), `model`.
///
/// Errors: an `error` object → classified by [`classify_error_object`]; a body that is not
/// the expected JSON → `transient` ("malformed embeddings body: …"); an index out of range or
/// repeated, or base64 that is not whole f32s → `result-invalid`.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::parse_openai_embeddings;
///
/// let body = br#"{"data":[{"index":1,"embedding":[0.5,1]},{"index":0,"embedding":[0.25,2]}],
///   "model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}"#;
/// let r = parse_openai_embeddings(body).unwrap();
/// assert_eq!(r.vectors, vec![vec![0.25, 2.0], vec![0.5, 1.0]]);
/// assert_eq!(r.usage.map(|u| u.prompt_tokens), Some(3));
/// ```
pub fn parse_openai_embeddings(body: &[u8]) -> Result<EmbeddingResponse, ClassifiedError> {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => return Err(malformed(body, "not a JSON object")),
    };
    if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
        return Err(classify_error_object(error));
    }
    let answer: Answer =
        serde_json::from_value(value).map_err(|e| malformed(body, &e.to_string()))?;
    let n = answer.data.len();
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; n];
    for (pos, item) in answer.data.into_iter().enumerate() {
        let index = item
            .index
            .map_or(pos, |i| usize::try_from(i).unwrap_or(usize::MAX));
        let slot = vectors.get_mut(index).ok_or_else(|| {
            invalid(format!(
                "embedding index {index} is out of range for {n} vectors"
            ))
        })?;
        if slot.is_some() {
            return Err(invalid(format!("embedding index {index} appears twice")));
        }
        *slot = Some(match item.embedding {
            Embedding::Floats(v) => v,
            Embedding::Base64(s) => decode_base64_f32(&s)?,
        });
    }
    let usage = answer.usage.as_ref().and_then(|u| {
        let prompt = u.get("prompt_tokens")?.as_u64()?;
        let total = u
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(prompt);
        Some(EmbeddingUsage {
            prompt_tokens: prompt,
            total_tokens: total,
        })
    });
    Ok(EmbeddingResponse {
        // Every slot is filled: n items, n distinct indices below n.
        vectors: vectors.into_iter().map(Option::unwrap_or_default).collect(),
        usage,
        model: answer.model.filter(|m| !m.is_empty()),
    })
}

fn decode_base64_f32(s: &str) -> Result<Vec<f32>, ClassifiedError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| invalid(format!("embedding is not valid base64: {e}")))?;
    if bytes.len() % 4 != 0 {
        return Err(invalid(format!(
            "base64 embedding of {} bytes is not whole f32 values",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn malformed(body: &[u8], why: &str) -> ClassifiedError {
    let text = collapse_and_cap(&String::from_utf8_lossy(body));
    ClassifiedError {
        class: ErrorClass::Transient,
        message: format!("malformed embeddings body ({why}): {text}"),
        code: None,
        retry_after_ms: None,
    }
}

fn invalid(message: String) -> ClassifiedError {
    ClassifiedError {
        class: ErrorClass::ResultInvalid,
        message,
        code: None,
        retry_after_ms: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn source() -> SourceInfo {
        SourceInfo {
            model: "m".into(),
            base_url: "http://x".into(),
            enable_thinking: None,
            extra_body_json: "{}".into(),
            max_tokens: None,
            thinking_budget_tokens: None,
        }
    }

    #[test]
    fn token_arrays_go_as_arrays_of_arrays_and_empty_batches_are_refused() {
        let req = |inputs| EmbeddingRequest {
            inputs,
            dimensions: None,
        };
        let body = |inputs| {
            String::from_utf8(
                openai_embedding_request(&req(inputs), &source())
                    .unwrap()
                    .body,
            )
            .unwrap()
        };
        // One input of two ids stays one array: never flattened into two inputs.
        assert_eq!(
            body(EmbeddingInputs::Tokens(vec![vec![15339, 1917]])),
            r#"{"encoding_format":"float","input":[[15339,1917]],"model":"m"}"#
        );
        assert_eq!(
            body(EmbeddingInputs::Tokens(vec![vec![u32::MAX], vec![0]])),
            r#"{"encoding_format":"float","input":[[4294967295],[0]],"model":"m"}"#
        );
        for empty in [
            EmbeddingInputs::Texts(vec![]),
            EmbeddingInputs::Tokens(vec![]),
        ] {
            assert!(matches!(
                openai_embedding_request(&req(empty), &source()),
                Err(BuildError::InvalidRequest(_))
            ));
        }
    }

    #[test]
    fn base64_vectors_decode_little_endian() {
        let raw: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
        let body = format!(r#"{{"data":[{{"index":0,"embedding":"{b64}"}}]}}"#);
        let r = parse_openai_embeddings(body.as_bytes()).unwrap();
        assert_eq!(r.vectors, vec![vec![1.5, -2.0]]);
        assert_eq!(r.usage, None);
    }

    #[test]
    fn bad_answers_are_classified() {
        let e = parse_openai_embeddings(b"<html>").unwrap_err();
        assert_eq!(e.class, ErrorClass::Transient);
        let e = parse_openai_embeddings(br#"{"data":[{"index":3,"embedding":[1]}]}"#).unwrap_err();
        assert_eq!(e.class, ErrorClass::ResultInvalid);
        assert_eq!(e.message, "embedding index 3 is out of range for 1 vectors");
        let e = parse_openai_embeddings(
            br#"{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.message, "embedding index 0 appears twice");
        let e =
            parse_openai_embeddings(br#"{"data":[{"index":0,"embedding":"AAA="}]}"#).unwrap_err();
        assert_eq!(e.class, ErrorClass::ResultInvalid);
        let e = parse_openai_embeddings(
            br#"{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
        )
        .unwrap_err();
        assert_eq!(e.message, "bad key");
    }
}
