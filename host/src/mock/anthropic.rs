//! The mock's Anthropic Messages API (`POST /v1/messages`, base URL
//! [`super::MockUpstream::anthropic_base_url`]): a scripted step as Anthropic's wire format —
//! a `message` object, or the streamed events `message_start`, `ping`,
//! `content_block_start` / `content_block_delta` (`thinking_delta`, `signature_delta`,
//! `text_delta`, `input_json_delta`) / `content_block_stop`, `message_delta`, `message_stop`
//! — as Anthropic documents them. The step's `reasoning` is a thinking block signed with
//! [`thinking_signature`]; `redacted_thinking`, `tool_calls`, `cached_tokens` (cache reads),
//! `cache_write_tokens`, `stream_error` and the cut, stall and delay faults apply. A request
//! without `x-api-key` is a 401 and one without `anthropic-version` a 400, in Anthropic's error
//! shape; a non-2xx step answers that shape with the error type of its status.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;

use super::chat::with_headers;
use super::script::{Step, split_text};
use super::server::{HitGuard, MockState, request_hit};

/// The signature the mock gives a thinking block of text `thinking`: the base64 of
/// SHA-256(`"mock-thinking:" + thinking`) (opaque to the gateway, checkable by tests).
pub fn thinking_signature(thinking: &str) -> String {
    mock_signature("mock-thinking:", thinking)
}

/// The base64 of SHA-256(`tag` + `text`): the mock's opaque, reproducible signatures.
pub(super) fn mock_signature(tag: &str, text: &str) -> String {
    use base64::Engine as _;
    let digest = Sha256::digest(format!("{tag}{text}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// Anthropic's error `type` for an HTTP status.
pub fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

pub(super) async fn default_messages(
    State(state): State<Arc<MockState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    messages(state, "default".into(), headers, body).await
}

pub(super) async fn scenario_messages(
    State(state): State<Arc<MockState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    messages(state, name, headers, body).await
}

async fn messages(
    state: Arc<MockState>,
    name: String,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = if name == "default" {
        "/v1/messages".to_string()
    } else {
        format!("/sc/{name}/v1/messages")
    };
    let mut hit = request_hit(&path, &headers);
    hit["body"] = req.clone();
    let (step, guard) = state.record(&name, hit, true);
    if !headers.contains_key("x-api-key") {
        guard.complete();
        let body = error_body("authentication_error", "x-api-key header is required");
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    }
    if !headers.contains_key("anthropic-version") {
        guard.complete();
        let body = error_body(
            "invalid_request_error",
            "anthropic-version: header is required",
        );
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    respond(step, &req, guard).await
}

/// Words of the request's text (system and messages): the mock's input token count.
fn input_tokens(req: &Value) -> u64 {
    fn words(v: &Value) -> u64 {
        match v {
            Value::String(s) => s.split_whitespace().count() as u64,
            Value::Array(a) => a.iter().map(words).sum(),
            Value::Object(o) => o.get("text").map_or(0, words) + o.get("content").map_or(0, words),
            _ => 0,
        }
    }
    req.get("system").map_or(0, words) + req.get("messages").map_or(0, words)
}

/// The content blocks of the answer, in order.
fn blocks(step: &Step) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(r) = &step.reasoning {
        out.push(json!({"type": "thinking", "thinking": r, "signature": thinking_signature(r)}));
    }
    if let Some(d) = &step.redacted_thinking {
        out.push(json!({"type": "redacted_thinking", "data": d}));
    }
    if !step.content.is_empty() {
        out.push(json!({"type": "text", "text": step.content}));
    }
    for t in &step.tool_calls {
        out.push(json!({"type": "tool_use", "id": t.id, "name": t.name, "input": t.arguments}));
    }
    out
}

fn usage(step: &Step, req: &Value, output: u64) -> Value {
    json!({
        "input_tokens": input_tokens(req),
        "cache_creation_input_tokens": step.cache_write_tokens.unwrap_or(0),
        "cache_read_input_tokens": step.cached_tokens.unwrap_or(0),
        "output_tokens": output,
    })
}

fn output_tokens(step: &Step) -> u64 {
    let words = |s: &str| s.split_whitespace().count() as u64;
    words(&step.content) + step.reasoning.as_deref().map_or(0, words) + step.tool_calls.len() as u64
}

async fn respond(step: Step, req: &Value, guard: HitGuard) -> Response {
    let status = StatusCode::from_u16(step.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if step.first_token_delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(step.first_token_delay_ms)).await;
    }
    if !status.is_success() {
        let body = step.body.clone().unwrap_or_else(|| {
            error_body(
                error_type(step.status),
                &format!("mock error {}", step.status),
            )
            .to_string()
        });
        guard.complete();
        let resp = (status, [("content-type", "application/json")], body).into_response();
        return with_headers(resp, &step);
    }
    let model = req
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("claude-mock")
        .to_string();
    let stop_reason = if step.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if !stream {
        if let Some(b) = &step.body {
            guard.complete();
            let resp = (status, [("content-type", "application/json")], b.clone());
            return with_headers(resp.into_response(), &step);
        }
        let body = json!({
            "id": "msg_mock01", "type": "message", "role": "assistant", "model": model,
            "content": blocks(&step), "stop_reason": stop_reason, "stop_sequence": null,
            "usage": usage(&step, req, output_tokens(&step)),
        });
        guard.complete();
        return with_headers(axum::Json(body).into_response(), &step);
    }
    let nl = if step.crlf { "\r\n" } else { "\n" };
    let frame = move |event: &str, data: &Value| {
        Bytes::from(format!("event: {event}{nl}data: {data}{nl}{nl}"))
    };
    let mut start_usage = usage(&step, req, 1);
    let final_output = output_tokens(&step);
    let text_pieces = split_text(&step.content, step.chunks);
    let extra_headers = step.headers.clone();
    let body = async_stream::stream! {
        let sleep = |ms: u64| tokio::time::sleep(Duration::from_millis(ms));
        if let Some(events) = &step.events {
            for e in events {
                let raw = if e.starts_with("event:") { format!("{e}{nl}{nl}") } else { format!("data: {e}{nl}{nl}") };
                yield Ok::<Bytes, std::io::Error>(Bytes::from(raw));
                if step.inter_chunk_delay_ms > 0 { sleep(step.inter_chunk_delay_ms).await; }
            }
            guard.complete();
            return;
        }
        start_usage["output_tokens"] = json!(1);
        yield Ok(frame("message_start", &json!({"type": "message_start", "message": {
            "id": "msg_mock01", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage}})));
        yield Ok(frame("ping", &json!({"type": "ping"})));
        let mut index = 0u32;
        if let Some(r) = &step.reasoning {
            yield Ok(frame("content_block_start", &json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "thinking", "thinking": ""}})));
            for piece in split_text(r, 0) {
                yield Ok(frame("content_block_delta", &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "thinking_delta", "thinking": piece}})));
                if step.inter_chunk_delay_ms > 0 { sleep(step.inter_chunk_delay_ms).await; }
            }
            yield Ok(frame("content_block_delta", &json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "signature_delta", "signature": thinking_signature(r)}})));
            yield Ok(frame("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
            index += 1;
        }
        if let Some(d) = &step.redacted_thinking {
            yield Ok(frame("content_block_start", &json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "redacted_thinking", "data": d}})));
            yield Ok(frame("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
            index += 1;
        }
        if !text_pieces.is_empty() {
            yield Ok(frame("content_block_start", &json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "text", "text": ""}})));
        }
        for (i, p) in text_pieces.iter().enumerate() {
            if step.cut_after_chunks == Some(i) {
                yield Err(std::io::Error::other("mock: connection cut"));
                return;
            }
            if step.stall_after_chunks == Some(i) {
                std::future::pending::<()>().await;
            }
            if step.keepalive {
                yield Ok(frame("ping", &json!({"type": "ping"})));
            }
            yield Ok(frame("content_block_delta", &json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": p}})));
            if step.inter_chunk_delay_ms > 0 { sleep(step.inter_chunk_delay_ms).await; }
        }
        if step.cut_after_chunks == Some(text_pieces.len()) {
            yield Err(std::io::Error::other("mock: connection cut"));
            return;
        }
        if step.stall_after_chunks == Some(text_pieces.len()) {
            std::future::pending::<()>().await;
        }
        if let Some(kind) = &step.stream_error {
            yield Ok(frame("error", &error_body(kind, "mock error event")));
            guard.complete();
            return;
        }
        if !text_pieces.is_empty() {
            yield Ok(frame("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
            index += 1;
        }
        for t in &step.tool_calls {
            yield Ok(frame("content_block_start", &json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": t.id, "name": t.name, "input": {}}})));
            let args = t.arguments.to_string();
            let mid = args.char_indices().nth(args.chars().count() / 2).map_or(0, |(i, _)| i);
            for part in [&args[..mid], &args[mid..]] {
                yield Ok(frame("content_block_delta", &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": part}})));
            }
            yield Ok(frame("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
            index += 1;
        }
        yield Ok(frame("message_delta", &json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": final_output}})));
        if !step.missing_done {
            yield Ok(frame("message_stop", &json!({"type": "message_stop"})));
        }
        guard.complete();
    };
    let resp = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
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
