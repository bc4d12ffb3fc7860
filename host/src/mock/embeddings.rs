//! The mock's OpenAI-shaped embeddings endpoint (`POST /sc/<name>/v1/embeddings`, or
//! `/v1/embeddings` for `default`) and its deterministic vectors ([`embedding_vector`]).
//!
//! A request `{model, input: string | [string], dimensions?, encoding_format?}` is answered
//! `{"object":"list","data":[{"object":"embedding","index":i,"embedding":…}],"model":<model>,
//! "usage":{"prompt_tokens":P,"total_tokens":P}}`, where P sums each input's
//! whitespace-separated word count (at least 1 per input). Vectors have 8 dimensions unless the
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

use super::script::Step;
use super::server::{MockState, request_hit, with_headers};

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
    let inputs: Vec<&str> = match req.get("input") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().ok_or("input: every item must be a string"))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("input: a string or an array of strings".into()),
        None => return Err("input: required".into()),
    };
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
        .map(|(i, text)| {
            let v = embedding_vector(text, dims);
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
        let p: u64 = inputs.iter().map(|t| embedding_tokens(t)).sum();
        body["usage"] = json!({"prompt_tokens": p, "total_tokens": p});
    }
    Ok(body)
}
