//! The mock's Google Gemini API (base URL [`super::MockUpstream::gemini_base_url`]):
//! `POST /v1beta/models/{model}:generateContent`, `…:streamGenerateContent?alt=sse` and
//! `…:batchEmbedContents`, in Gemini's wire format — a `GenerateContentResponse`
//! (`candidates[0].content.parts`, `finishReason`, `usageMetadata`, `modelVersion`,
//! `responseId`), streamed as one `data:` chunk per piece with the last one carrying
//! `finishReason` and `usageMetadata` (no `[DONE]`). The step's `reasoning` is a
//! `thought: true` part; the first `functionCall` part (or, without tool calls, the text part
//! after a thought) carries [`thought_signature`]; `cached_tokens` is
//! `cachedContentTokenCount`, reasoning words `thoughtsTokenCount`; `finish_reason`,
//! `stream_error`, `retry_delay` and the cut, stall and delay faults apply. A request without
//! `x-goog-api-key` is a 403 `PERMISSION_DENIED`; a non-2xx step answers
//! `{"error": {code, message, status}}` with the status of its code.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::chat::with_headers;
use super::embeddings::embedding_vector;
use super::script::{Step, split_text};
use super::server::{HitGuard, MockState, request_hit};

/// The `thoughtSignature` the mock attaches for an answer whose reasoning (or, without
/// reasoning, whose text) is `text`: the base64 of SHA-256(`"mock-thought:" + text`).
pub fn thought_signature(text: &str) -> String {
    super::anthropic::mock_signature("mock-thought:", text)
}

/// Google's canonical error `status` for an HTTP code.
pub fn error_status(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

fn error_body(code: u16, status: &str, retry_delay: Option<&str>) -> Value {
    let mut e = json!({"code": code, "message": format!("mock error {code}"), "status": status});
    if let Some(d) = retry_delay {
        e["details"] =
            json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": d}]);
    }
    json!({ "error": e })
}

pub(super) async fn default_models(
    State(state): State<Arc<MockState>>,
    Path(action): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    models(state, "default".into(), action, headers, body).await
}

pub(super) async fn scenario_models(
    State(state): State<Arc<MockState>>,
    Path((name, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    models(state, name, action, headers, body).await
}

async fn models(
    state: Arc<MockState>,
    name: String,
    action: String,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let prefix = match name.as_str() {
        "default" => String::new(),
        n => format!("/sc/{n}"),
    };
    let mut hit = request_hit(&format!("{prefix}/v1beta/models/{action}"), &headers);
    hit["body"] = req.clone();
    let (step, guard) = state.record(&name, hit, true);
    if !headers.contains_key("x-goog-api-key") {
        guard.complete();
        let body = json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
            "message": "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}});
        return (StatusCode::FORBIDDEN, axum::Json(body)).into_response();
    }
    let Some((model, method)) = action.rsplit_once(':') else {
        guard.complete();
        let body = error_body(404, "NOT_FOUND", None);
        return (StatusCode::NOT_FOUND, axum::Json(body)).into_response();
    };
    let model = model.to_string();
    match method {
        "generateContent" => respond(step, &req, &model, false, guard).await,
        "streamGenerateContent" => respond(step, &req, &model, true, guard).await,
        "batchEmbedContents" => embed(step, &req, guard),
        _ => {
            guard.complete();
            let body = error_body(404, "NOT_FOUND", None);
            (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
        }
    }
}

fn failure(step: &Step) -> Option<Response> {
    let status = StatusCode::from_u16(step.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_success() {
        return None;
    }
    let body = step.body.clone().unwrap_or_else(|| {
        error_body(
            step.status,
            error_status(step.status),
            step.retry_delay.as_deref(),
        )
        .to_string()
    });
    let resp = (status, [("content-type", "application/json")], body).into_response();
    Some(with_headers(resp, step))
}

fn embed(step: Step, req: &Value, guard: HitGuard) -> Response {
    guard.complete();
    if let Some(r) = failure(&step) {
        return r;
    }
    let embeddings: Vec<Value> = req
        .get("requests")
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    let text = r
                        .pointer("/content/parts/0/text")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let dims = r
                        .get("outputDimensionality")
                        .and_then(Value::as_u64)
                        .map_or(super::DEFAULT_EMBEDDING_DIMS, |d| d as usize);
                    json!({ "values": embedding_vector(text, step.embedding_dims.unwrap_or(dims)) })
                })
                .collect()
        })
        .unwrap_or_default();
    with_headers(
        axum::Json(json!({ "embeddings": embeddings })).into_response(),
        &step,
    )
}

/// Words of the request's text (`systemInstruction` and `contents`).
fn prompt_tokens(req: &Value) -> u64 {
    fn words(v: &Value) -> u64 {
        match v {
            Value::Array(a) => a.iter().map(words).sum(),
            Value::Object(o) => {
                o.get("text")
                    .and_then(Value::as_str)
                    .map_or(0, |t| t.split_whitespace().count() as u64)
                    + o.get("parts").map_or(0, words)
            }
            _ => 0,
        }
    }
    req.get("systemInstruction").map_or(0, words) + req.get("contents").map_or(0, words)
}

fn usage(step: &Step, req: &Value) -> Value {
    let words = |s: &str| s.split_whitespace().count() as u64;
    let prompt = prompt_tokens(req) + step.cached_tokens.unwrap_or(0);
    let candidates = words(&step.content) + step.tool_calls.len() as u64;
    let thoughts = step.reasoning.as_deref().map(words);
    let mut u = json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thoughts.unwrap_or(0),
    });
    if let Some(c) = step.cached_tokens {
        u["cachedContentTokenCount"] = json!(c);
    }
    if let Some(t) = thoughts {
        u["thoughtsTokenCount"] = json!(t);
    }
    u
}

/// The function-call parts, the first one signed when the answer reasoned.
fn call_parts(step: &Step) -> Vec<Value> {
    step.tool_calls
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut p = json!({"functionCall": {"name": t.name, "args": t.arguments, "id": t.id}});
            if i == 0
                && let Some(r) = &step.reasoning
            {
                p["thoughtSignature"] = json!(thought_signature(r));
            }
            p
        })
        .collect()
}

fn chunk(parts: Vec<Value>, model: &str, finish: Option<&str>, usage: Option<&Value>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    let mut c =
        json!({"candidates": [candidate], "modelVersion": model, "responseId": "mock-resp-1"});
    if let Some(u) = usage {
        c["usageMetadata"] = u.clone();
    }
    c
}

async fn respond(step: Step, req: &Value, model: &str, stream: bool, guard: HitGuard) -> Response {
    if step.first_token_delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(step.first_token_delay_ms)).await;
    }
    if let Some(r) = failure(&step) {
        guard.complete();
        return r;
    }
    let finish = step.finish_reason.clone().unwrap_or_else(|| "STOP".into());
    let usage = usage(&step, req);
    let thought = step
        .reasoning
        .as_ref()
        .map(|r| json!({"text": r, "thought": true}));
    let signed_text = step.tool_calls.is_empty() && step.reasoning.is_some();
    if !stream {
        if let Some(b) = &step.body {
            guard.complete();
            let resp = (
                StatusCode::OK,
                [("content-type", "application/json")],
                b.clone(),
            );
            return with_headers(resp.into_response(), &step);
        }
        let mut parts: Vec<Value> = thought.into_iter().collect();
        if !step.content.is_empty() {
            let mut p = json!({"text": step.content});
            if signed_text && let Some(r) = &step.reasoning {
                p["thoughtSignature"] = json!(thought_signature(r));
            }
            parts.push(p);
        }
        parts.extend(call_parts(&step));
        guard.complete();
        let body = chunk(parts, model, Some(&finish), Some(&usage));
        return with_headers(axum::Json(body).into_response(), &step);
    }
    let nl = if step.crlf { "\r\n" } else { "\n" };
    let frame = move |v: &Value| Bytes::from(format!("data: {v}{nl}{nl}"));
    let pieces = split_text(&step.content, step.chunks);
    let model = model.to_string();
    let extra_headers = step.headers.clone();
    let body = async_stream::stream! {
        let sleep = |ms: u64| tokio::time::sleep(Duration::from_millis(ms));
        if let Some(events) = &step.events {
            for e in events {
                yield Ok::<Bytes, std::io::Error>(Bytes::from(format!("data: {e}{nl}{nl}")));
                if step.inter_chunk_delay_ms > 0 { sleep(step.inter_chunk_delay_ms).await; }
            }
            guard.complete();
            return;
        }
        if let Some(t) = &thought {
            yield Ok(frame(&chunk(vec![t.clone()], &model, None, None)));
        }
        for (i, p) in pieces.iter().enumerate() {
            if step.cut_after_chunks == Some(i) {
                yield Err(std::io::Error::other("mock: connection cut"));
                return;
            }
            if step.stall_after_chunks == Some(i) {
                std::future::pending::<()>().await;
            }
            let mut part = json!({"text": p});
            if i == 0 && signed_text && let Some(r) = &step.reasoning {
                part["thoughtSignature"] = json!(thought_signature(r));
            }
            yield Ok(frame(&chunk(vec![part], &model, None, None)));
            if step.inter_chunk_delay_ms > 0 { sleep(step.inter_chunk_delay_ms).await; }
        }
        if step.cut_after_chunks == Some(pieces.len()) {
            yield Err(std::io::Error::other("mock: connection cut"));
            return;
        }
        if step.stall_after_chunks == Some(pieces.len()) {
            std::future::pending::<()>().await;
        }
        if let Some(status) = &step.stream_error {
            yield Ok(frame(&json!({"error": {"code": 503, "message": "mock stream error", "status": status}})));
            guard.complete();
            return;
        }
        if !step.missing_done {
            // As Gemini ends a stream: the calls (or an empty text part), the finish reason
            // and the usage in one last chunk.
            let mut last = call_parts(&step);
            if last.is_empty() {
                last.push(json!({"text": ""}));
            }
            yield Ok(frame(&chunk(last, &model, Some(&finish), Some(&usage))));
        }
        guard.complete();
    };
    let resp = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(body));
    let headers_only = Step {
        headers: extra_headers,
        ..Step::default()
    };
    match resp {
        Ok(r) => with_headers(r, &headers_only),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
