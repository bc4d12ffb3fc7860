//! The mock's chat answers: a scripted step turned into an OpenAI chat completion — streamed
//! as SSE chunks (reasoning in the step's style, content split into chunks, usage, `[DONE]`,
//! or the cut, stall and missing-`[DONE]` faults) or as one JSON body — with prefill-aware
//! text and usage counted from the request.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::script::{ReasoningStyle, Step, split_text};
use super::server::HitGuard;

/// A scripted stream: each of `events` as one `data:` event, then `[DONE]` unless the step
/// says `missing_done`.
fn scripted_events(step: Step, events: Vec<String>, guard: HitGuard) -> Response {
    let nl = if step.crlf { "\r\n" } else { "\n" };
    let delay = step.inter_chunk_delay_ms;
    let first = step.first_token_delay_ms;
    let missing_done = step.missing_done;
    let body = async_stream::stream! {
        if first > 0 {
            tokio::time::sleep(Duration::from_millis(first)).await;
        }
        for (i, e) in events.iter().enumerate() {
            if i > 0 && delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            yield Ok::<Bytes, std::io::Error>(Bytes::from(format!("data: {e}{nl}{nl}")));
        }
        if !missing_done {
            yield Ok(Bytes::from(format!("data: [DONE]{nl}{nl}")));
        }
        guard.complete();
    };
    let resp = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(body));
    match resp {
        Ok(r) => with_headers(r, &step),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `resp` with the step's extra headers.
pub(super) fn with_headers(mut resp: Response, step: &Step) -> Response {
    for (k, v) in &step.headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::try_from(k.as_str()),
            HeaderValue::try_from(v.as_str()),
        ) {
            resp.headers_mut().insert(n, v);
        }
    }
    resp
}

fn prompt_tokens(req: &Value) -> u64 {
    let mut n = 0u64;
    if let Some(msgs) = req.get("messages").and_then(Value::as_array) {
        for m in msgs {
            if let Some(c) = m.get("content").and_then(Value::as_str) {
                n += c.split_whitespace().count() as u64;
            }
        }
    }
    n
}

fn usage_json(step: &Step, req: &Value, completion: u64, reasoning: Option<u64>) -> Value {
    let prompt = prompt_tokens(req);
    let mut u = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    if let Some(c) = step.cached_tokens {
        u["prompt_tokens_details"] = json!({ "cached_tokens": c });
    }
    if let Some(r) = reasoning {
        u["completion_tokens_details"] = json!({ "reasoning_tokens": r });
    }
    u
}

/// A prefill-continuation request (the last message is an assistant message marked
/// `prefix: true` (DeepSeek) or `partial: true` (Qwen)): the text to continue from.
pub(crate) fn prefill_of(req: &Value) -> Option<&str> {
    let last = req.get("messages")?.as_array()?.last()?;
    let marked = last.get("prefix") == Some(&Value::Bool(true))
        || last.get("partial") == Some(&Value::Bool(true));
    if last.get("role")?.as_str()? == "assistant" && marked {
        last.get("content")?.as_str()
    } else {
        None
    }
}

/// The text to answer: the scripted content, minus a prefill it starts with (a model
/// continuing a partial answer produces only the remainder).
fn answer_text(step: &Step, req: &Value) -> String {
    match prefill_of(req) {
        Some(p) if step.content.starts_with(p) => step.content[p.len()..].to_string(),
        _ => step.content.clone(),
    }
}

pub(super) async fn respond(step: Step, req: &Value, guard: HitGuard) -> Response {
    let status = StatusCode::from_u16(step.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if step.first_token_delay_ms > 0 && !status.is_success() {
        tokio::time::sleep(Duration::from_millis(step.first_token_delay_ms)).await;
    }
    if !status.is_success() {
        let body = step.body.clone().unwrap_or_else(|| {
            json!({"error": {"message": format!("mock error {}", step.status), "type": "mock_error", "code": null}})
                .to_string()
        });
        guard.complete();
        return with_headers((status, body).into_response(), &step);
    }
    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if let (true, Some(events)) = (stream, step.events.clone()) {
        return scripted_events(step, events, guard);
    }
    if let Some(b) = &step.body {
        guard.complete();
        let resp = (status, b.clone()).into_response();
        let mut resp = with_headers(resp, &step);
        if serde_json::from_str::<Value>(b).is_ok()
            && !step
                .headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("content-type"))
        {
            resp.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        return resp;
    }
    let model = req
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock-model")
        .to_string();
    let content = answer_text(&step, req);
    let pieces = split_text(&content, step.chunks);
    let reasoning_pieces = step
        .reasoning
        .as_deref()
        .map(|r| split_text(r, 0))
        .unwrap_or_default();
    let reasoning_tokens = step
        .reasoning
        .as_ref()
        .map(|_| reasoning_pieces.len() as u64);
    let completion = (pieces.len() + reasoning_pieces.len()) as u64;
    if !stream {
        if step.first_token_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(step.first_token_delay_ms)).await;
        }
        let mut message = json!({"role": "assistant", "content": content});
        if let Some(r) = &step.reasoning {
            match step.reasoning_style {
                ReasoningStyle::Field => message["reasoning_content"] = json!(r),
                ReasoningStyle::ThinkTags => {
                    message["content"] = json!(format!("<think>{r}</think>{content}"))
                }
            }
        }
        let mut body = json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "created": 1_700_000_000u64,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        });
        if step.usage {
            body["usage"] = usage_json(&step, req, completion, reasoning_tokens);
        }
        guard.complete();
        return with_headers(axum::Json(body).into_response(), &step);
    }

    let nl = if step.crlf { "\r\n" } else { "\n" };
    let frame = move |v: &Value| Bytes::from(format!("data: {v}{nl}{nl}"));
    let chunk = move |delta: Value, finish: Option<&str>| {
        json!({
            "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000u64,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    };
    let usage = step
        .usage
        .then(|| usage_json(&step, req, completion, reasoning_tokens));
    let body = async_stream::stream! {
        let sleep = |ms: u64| tokio::time::sleep(Duration::from_millis(ms));
        if step.first_token_delay_ms > 0 {
            sleep(step.first_token_delay_ms).await;
        }
        let mut first = chunk(json!({"role": "assistant", "content": ""}), None);
        if step.usage_on_first_chunk && let Some(u) = &usage {
            first["usage"] = u.clone();
        }
        yield Ok::<Bytes, std::io::Error>(frame(&first));
        let think_tags = step.reasoning_style == ReasoningStyle::ThinkTags;
        if think_tags && !reasoning_pieces.is_empty() {
            yield Ok(frame(&chunk(json!({"content": "<think>"}), None)));
        }
        for r in &reasoning_pieces {
            if step.keepalive {
                yield Ok(Bytes::from(format!(": keep-alive{nl}{nl}")));
            }
            let delta = if think_tags { json!({"content": r}) } else { json!({"reasoning_content": r, "content": null}) };
            yield Ok(frame(&chunk(delta, None)));
            if step.inter_chunk_delay_ms > 0 { sleep(step.inter_chunk_delay_ms).await; }
        }
        if think_tags && !reasoning_pieces.is_empty() {
            yield Ok(frame(&chunk(json!({"content": "</think>"}), None)));
        }
        for (i, p) in pieces.iter().enumerate() {
            if step.cut_after_chunks == Some(i) {
                yield Err(std::io::Error::other("mock: connection cut"));
                return;
            }
            if step.stall_after_chunks == Some(i) {
                std::future::pending::<()>().await;
            }
            if step.keepalive {
                yield Ok(Bytes::from(format!(": keep-alive{nl}{nl}")));
            }
            yield Ok(frame(&chunk(json!({"content": p}), None)));
            if step.inter_chunk_delay_ms > 0 { sleep(step.inter_chunk_delay_ms).await; }
        }
        if step.cut_after_chunks == Some(pieces.len()) {
            yield Err(std::io::Error::other("mock: connection cut"));
            return;
        }
        if step.stall_after_chunks == Some(pieces.len()) {
            std::future::pending::<()>().await;
        }
        yield Ok(frame(&chunk(json!({}), Some("stop"))));
        if let Some(u) = &usage {
            yield Ok(frame(&json!({
                "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000u64,
                "model": chunk(json!({}), None)["model"], "choices": [], "usage": u
            })));
        }
        if !step.missing_done {
            yield Ok(Bytes::from(format!("data: [DONE]{nl}{nl}")));
        }
        guard.complete();
    };
    let resp = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(body));
    match resp {
        Ok(r) => with_headers(r, &step),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
