//! `POST /v1/embeddings` (OpenAI shape): `input` a string or an array of strings,
//! `encoding_format` `float` (default) or `base64` (little-endian f32, as OpenAI sends it),
//! `dimensions`; the `x-pgw-*` call headers; then `Gateway::embed`.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::AppState;
use super::call_headers::{call_options, set};
use super::errors::{error_response, plain_error};
use crate::error::GatewayError;
use crate::pipeline::{EmbeddingRequest, EmbeddingResponse};

/// How vectors are written in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Float,
    Base64,
}

/// Parse an OpenAI embeddings body. Errors name the field at fault.
fn parse_body(bytes: &[u8]) -> Result<(EmbeddingRequest, Encoding), GatewayError> {
    let body: Map<String, Value> = match serde_json::from_slice(bytes) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            return Err(GatewayError::invalid(
                "body",
                "the body must be a JSON object",
            ));
        }
        Err(e) => return Err(GatewayError::invalid("body", format!("invalid JSON: {e}"))),
    };
    for key in body.keys() {
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
    let model = match body.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        _ => {
            return Err(GatewayError::invalid(
                "model",
                "`model` must be a non-empty string",
            ));
        }
    };
    let input = match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) => out.push(s.clone()),
                    _ => {
                        return Err(GatewayError::invalid(
                            "input",
                            format!(
                                "`input[{i}]` must be a string (token arrays are not supported)"
                            ),
                        ));
                    }
                }
            }
            out
        }
        _ => {
            return Err(GatewayError::invalid(
                "input",
                "`input` must be a string or an array of strings",
            ));
        }
    };
    let encoding = match body.get("encoding_format") {
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
    let dimensions = match body.get("dimensions") {
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
    let mut req = EmbeddingRequest::new(model, input);
    req.dimensions = dimensions;
    req.validate()?;
    Ok((req, encoding))
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
    if let Err(e) = super::auth::check(&state.api_keys, &headers, peer) {
        let (status, ty, message) = e.into_gateway_error();
        return plain_error(status, ty, &message);
    }
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
    let model = req.model.clone();
    match state.gateway.embed(req).await {
        Ok(r) => {
            let mut resp = axum::Json(answer_json(&model, &r, encoding)).into_response();
            set(&mut resp, "x-pgw-call-id", &r.call_id);
            set(&mut resp, "x-pgw-attempts", r.attempts);
            set(&mut resp, "x-pgw-upstream-batches", r.upstream_batches);
            set(&mut resp, "x-pgw-cached-inputs", r.cached_inputs);
            set(&mut resp, "x-pgw-usage-source", r.usage_source.as_str());
            set(&mut resp, "x-pgw-cache-hit", r.upstream_batches == 0);
            if let Some(s) = &r.source_name {
                set(&mut resp, "x-pgw-source", s);
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
            err(r#"{"model":"e","input":[1]}"#),
            (
                Some("input".into()),
                "`input[0]` must be a string (token arrays are not supported)".into()
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
            (vec!["hi".to_string()], Some(4), Encoding::Base64)
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
