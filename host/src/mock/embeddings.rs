//! The mock's OpenAI-shaped embeddings endpoint (`POST /sc/<name>/v1/embeddings`, or
//! `/v1/embeddings` for `default`) and its deterministic vectors ([`embedding_vector`]).
//!
//! A request `{model, input, dimensions?, encoding_format?}` — `input` a string, an array of
//! strings, an array of token ids (one input) or an array of token-id arrays, as OpenAI takes
//! it — is answered
//! `{"object":"list","data":[{"object":"embedding","index":i,"embedding":…}],"model":<model>,
//! "usage":{"prompt_tokens":P,"total_tokens":P}}`, where P sums each text input's
//! whitespace-separated word count (at least 1 per input) and each token input's id count.
//! A token input's vector is [`token_embedding_vector`]. Each hit records the parsed `body`
//! and the exact bytes (`raw_body`). Vectors have 8 dimensions unless the
//! request's `dimensions` (or the step's `embedding_dims`, which wins) says otherwise;
//! `encoding_format: "base64"` sends each vector as the base64 of its little-endian f32 bytes.
//! The step's `drop_vectors`, `shuffle` and `embedding_usage` shape the answer; `status`,
//! `headers`, `body` and `first_token_delay_ms` act as for chat. A malformed request is a 400
//! OpenAI error (`type: invalid_request_error`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::chat::with_headers;
use super::script::Step;
use super::server::{MockState, request_hit};

/// Dimensions when neither the request nor the step says.
pub const DEFAULT_EMBEDDING_DIMS: usize = 8;

/// The largest `dimensions` a request may ask for (a step's `embedding_dims` is not capped
/// by this, only by [`MAX_FORCED_DIMS`]).
const MAX_REQUEST_DIMS: usize = 16_384;

/// The largest dimension a step may force (keeps a typo from allocating gigabytes).
const MAX_FORCED_DIMS: usize = 1 << 20;

/// The mock's vector for `text`: component `i` is `(b - 128) / 256`, where `b` is byte
/// `i % 32` of `sha256(text ‖ (i / 32) as u32 little-endian)`. Every component is a multiple
/// of 1/256 in `[-0.5, 0.5)`, exact in f32 and f64, and its JSON text (serde_json's shortest
/// representation) is its exact decimal value, so it round-trips bit for bit.
pub fn embedding_vector(text: &str, dims: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(dims);
    let mut block: u32 = 0;
    while out.len() < dims {
        let mut hasher = Sha256::new();
        hasher.update(text.as_bytes());
        hasher.update(block.to_le_bytes());
        for b in hasher.finalize() {
            if out.len() == dims {
                break;
            }
            out.push((f32::from(b) - 128.0) / 256.0);
        }
        block = block.wrapping_add(1);
    }
    out
}

/// The base64 of a vector's little-endian f32 bytes (OpenAI's `encoding_format: "base64"`).
pub fn embedding_base64(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The mock's token count of one input: its whitespace-separated words, at least 1.
pub fn embedding_tokens(text: &str) -> u64 {
    (text.split_whitespace().count() as u64).max(1)
}

/// The mock's vector for an input of token ids: [`embedding_vector`] of the text
/// `"tokens:"` followed by the ids in decimal, comma-separated (`tokens:15339,1917`). No
/// text input that a test would send looks like that, so the vector of the ids `[1, 2]`
/// differs from that of the text `"[1,2]"` (a cache that mixed them up shows).
pub fn token_embedding_vector(ids: &[u32], dims: usize) -> Vec<f32> {
    let listed: Vec<String> = ids.iter().map(u32::to_string).collect();
    embedding_vector(&format!("tokens:{}", listed.join(",")), dims)
}

/// One input of a request: a text or token ids.
enum Input<'a> {
    Text(&'a str),
    Tokens(Vec<u32>),
}

impl Input<'_> {
    fn vector(&self, dims: usize) -> Vec<f32> {
        match self {
            Input::Text(t) => embedding_vector(t, dims),
            Input::Tokens(ids) => token_embedding_vector(ids, dims),
        }
    }

    /// Words of a text; ids of a token input (exactly what it costs at OpenAI).
    fn tokens(&self) -> u64 {
        match self {
            Input::Text(t) => embedding_tokens(t),
            Input::Tokens(ids) => ids.len() as u64,
        }
    }
}

/// Token ids of one input, as OpenAI takes them: non-negative integers within u32, at least
/// one.
fn token_ids(items: &[Value], at: &str) -> Result<Vec<u32>, String> {
    if items.is_empty() {
        return Err(format!("{at}: a token array must not be empty"));
    }
    items
        .iter()
        .map(|v| {
            v.as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| format!("{at}: token ids are integers from 0 to {}", u32::MAX))
        })
        .collect()
}

/// The inputs of a request: OpenAI's four shapes of `input`.
fn inputs(req: &Value) -> Result<Vec<Input<'_>>, String> {
    let inputs = match req.get("input") {
        Some(Value::String(s)) => vec![Input::Text(s.as_str())],
        Some(Value::Array(items)) if items.first().is_some_and(Value::is_number) => {
            vec![Input::Tokens(token_ids(items, "input")?)]
        }
        Some(Value::Array(items)) if items.first().is_some_and(Value::is_array) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Array(ids) => Ok(Input::Tokens(token_ids(ids, &format!("input[{i}]"))?)),
                _ => Err(format!("input[{i}]: every item must be a token array")),
            })
            .collect::<Result<_, _>>()?,
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(Input::Text)
                    .ok_or("input: every item must be a string".to_string())
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(
                "input: a string, an array of strings, of token ids or of token arrays".into(),
            );
        }
        None => return Err("input: required".into()),
    };
    Ok(inputs)
}

pub(super) async fn default_embeddings(
    State(state): State<Arc<MockState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    embeddings(state, "default".into(), headers, body).await
}

pub(super) async fn scenario_embeddings(
    State(state): State<Arc<MockState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    embeddings(state, name, headers, body).await
}

async fn embeddings(
    state: Arc<MockState>,
    name: String,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = if name == "default" {
        "/v1/embeddings".to_string()
    } else {
        format!("/sc/{name}/v1/embeddings")
    };
    let mut hit = request_hit(&path, &headers);
    hit["body"] = req.clone();
    // The bytes as sent, for tests that check the request byte for byte.
    hit["raw_body"] = Value::String(String::from_utf8_lossy(&body).into_owned());
    let (step, guard) = state.record(&name, hit, true);
    if step.first_token_delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(step.first_token_delay_ms)).await;
    }
    let status = StatusCode::from_u16(step.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let resp = if !status.is_success() {
        let body = step.body.clone().unwrap_or_else(|| {
            json!({"error": {"message": format!("mock error {}", step.status), "type": "mock_error", "code": null}})
                .to_string()
        });
        (status, body).into_response()
    } else if let Some(b) = &step.body {
        (status, b.clone()).into_response()
    } else {
        match answer(&step, &req) {
            Ok(v) => (status, axum::Json(v)).into_response(),
            Err(msg) => (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": {"message": msg, "type": "invalid_request_error", "code": null}})),
            )
                .into_response(),
        }
    };
    guard.complete();
    with_headers(resp, &step)
}

/// The answer body for a well-formed request, or why the request is malformed.
fn answer(step: &Step, req: &Value) -> Result<Value, String> {
    let inputs = inputs(req)?;
    if inputs.is_empty() {
        return Err("input: must not be empty".into());
    }
    let dims = match (step.embedding_dims, req.get("dimensions")) {
        (Some(d), _) => d.min(MAX_FORCED_DIMS),
        (None, None | Some(Value::Null)) => DEFAULT_EMBEDDING_DIMS,
        (None, Some(v)) => match v.as_u64() {
            Some(d) if (1..=MAX_REQUEST_DIMS as u64).contains(&d) => d as usize,
            _ => {
                return Err(format!(
                    "dimensions: an integer from 1 to {MAX_REQUEST_DIMS}"
                ));
            }
        },
    };
    let base64 = match req.get("encoding_format") {
        None | Some(Value::Null) => false,
        Some(Value::String(f)) if f == "float" => false,
        Some(Value::String(f)) if f == "base64" => true,
        Some(_) => return Err("encoding_format: \"float\" or \"base64\"".into()),
    };
    let model = req
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock-embedding");
    let kept = inputs.len().saturating_sub(step.drop_vectors);
    let mut data: Vec<Value> = inputs
        .iter()
        .take(kept)
        .enumerate()
        .map(|(i, input)| {
            let v = input.vector(dims);
            let embedding = if base64 {
                json!(embedding_base64(&v))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    if step.shuffle {
        data.reverse();
    }
    let mut body = json!({"object": "list", "data": data, "model": model});
    if step.embedding_usage {
        let p: u64 = inputs.iter().map(Input::tokens).sum();
        body["usage"] = json!({"prompt_tokens": p, "total_tokens": p});
    }
    Ok(body)
}
