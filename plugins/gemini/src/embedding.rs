//! Embeddings: one batch as `POST /v1beta/models/{MODEL}:batchEmbedContents` with
//! `{"requests": [{"model": "models/{MODEL}", "content": {"parts": [{"text"}]},
//! "outputDimensionality"?}, …]}` (one request per input, in order), and its answer
//! `{"embeddings": [{"values": […]}, …]}` in the same order.
//!
//! Gemini takes text only: a batch of token-id arrays is `unsupported` (the host tries a
//! source that takes them). Gemini reports no usage for embeddings, so `usage` is none, and no
//! model name. Count and dimension mismatches are the host's to judge.

use polygateway_plugin_sdk::{
    AuthScheme, BuildError, ClassifiedError, EmbeddingInputs, EmbeddingRequest, EmbeddingResponse,
    ErrorClass, Header, HttpRequest, SourceInfo,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::answer::malformed;
use crate::errors::classify_in_band;
use crate::path::{embed_path, model_name, model_segment};
use crate::request::API_KEY_HEADER;

#[derive(Serialize)]
struct Batch<'a> {
    requests: Vec<EmbedRequest<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbedRequest<'a> {
    model: &'a str,
    content: EmbedContent<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimensionality: Option<u32>,
}

#[derive(Serialize)]
struct EmbedContent<'a> {
    parts: [TextPart<'a>; 1],
}

#[derive(Serialize)]
struct TextPart<'a> {
    text: &'a str,
}

/// `build-embedding-request` (see the module documentation).
///
/// Errors: token-id inputs → `unsupported`; an empty batch → `invalid-request` (the host
/// never sends one); an empty `MODEL` → `unsupported`.
pub fn build_embedding_request(
    req: &EmbeddingRequest,
    source: &SourceInfo,
) -> Result<HttpRequest, BuildError> {
    let texts = match &req.inputs {
        EmbeddingInputs::Tokens(_) => {
            return Err(BuildError::Unsupported(format!(
                "provider `{}` takes text inputs only, not token-id arrays",
                crate::NAME
            )));
        }
        EmbeddingInputs::Texts(texts) if texts.is_empty() => {
            return Err(BuildError::InvalidRequest(
                "inputs: an embedding batch needs at least one input".to_owned(),
            ));
        }
        EmbeddingInputs::Texts(texts) => texts,
    };
    let segment = model_segment(&source.model)?;
    let model = format!("models/{}", model_name(&source.model));
    let batch = Batch {
        requests: texts
            .iter()
            .map(|text| EmbedRequest {
                model: &model,
                content: EmbedContent {
                    parts: [TextPart { text }],
                },
                output_dimensionality: req.dimensions,
            })
            .collect(),
    };
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path: embed_path(&segment),
        headers: vec![Header {
            name: "content-type".to_owned(),
            value: "application/json".to_owned(),
        }],
        body: serde_json::to_vec(&batch).unwrap_or_default(),
        auth: AuthScheme::Header(API_KEY_HEADER.to_owned()),
    })
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    embeddings: Option<Vec<Embedding>>,
}

#[derive(Deserialize)]
struct Embedding {
    #[serde(default)]
    values: Option<Vec<f32>>,
}

/// `parse-embedding-response` (see the module documentation).
///
/// Errors: an `error` object → classified; a body that is not the expected JSON →
/// `transient` ("malformed embeddings body: …"); an embedding without `values` →
/// `result-invalid`.
pub fn parse_embedding_response(body: &[u8]) -> Result<EmbeddingResponse, ClassifiedError> {
    const WHAT: &str = "malformed embeddings body";
    let bad = || malformed(WHAT, &String::from_utf8_lossy(body));
    let answer: Answer = serde_json::from_slice(body).map_err(|_| bad())?;
    if let Some(error) = answer.error.as_ref().filter(|e| e.is_object()) {
        return Err(classify_in_band(error));
    }
    let embeddings = answer.embeddings.ok_or_else(bad)?;
    let mut vectors = Vec::with_capacity(embeddings.len());
    for (i, embedding) in embeddings.into_iter().enumerate() {
        let values = embedding.values.ok_or_else(|| ClassifiedError {
            class: ErrorClass::ResultInvalid,
            message: format!("embedding {i} has no values"),
            code: None,
            retry_after_ms: None,
        })?;
        vectors.push(values);
    }
    Ok(EmbeddingResponse {
        vectors,
        usage: None,
        model: None,
    })
}
