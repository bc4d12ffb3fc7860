//! The mock upstream's HTTP server (axum): the routes, the per-scenario state (script,
//! hits, OCR archives, health status), chat completions, the script and hit-inspection
//! endpoints. Embeddings live in `embeddings.rs`, MonkeyOCR in `ocr.rs`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::script::{ReasoningStyle, Script, Step, split_text};
use super::{embeddings, ocr};

#[derive(Default)]
pub(super) struct Scenario {
    script: Script,
    next: usize,
    hits: Vec<Value>,
    /// OCR `/parse` answers so far (numbers the archives).
    pub(super) parses: usize,
    /// OCR archives by file name (`<id>.zip`), served at `static/<file>`.
    pub(super) archives: HashMap<String, Bytes>,
    /// The status of `GET health` (`None`: 200).
    pub(super) health: Option<u16>,
}

pub(super) struct MockState {
    started: Instant,
    /// The bound address (absolute OCR download URLs).
    pub(super) addr: SocketAddr,
    pub(super) scenarios: Mutex<HashMap<String, Scenario>>,
}

impl MockState {
    /// Record a request of scenario `name` as a hit (`hit` plus `at_ms`) and, when
    /// `consume`, take the scenario's next step (the default step otherwise).
    pub(super) fn record(
        self: &Arc<Self>,
        name: &str,
        mut hit: Value,
        consume: bool,
    ) -> (Step, HitGuard) {
        hit["at_ms"] = json!(self.started.elapsed().as_secs_f64() * 1000.0);
        let (step, idx) = match self.scenarios.lock() {
            Ok(mut map) => {
                let sc = map.entry(name.to_string()).or_default();
                sc.hits.push(hit);
                let step = if consume {
                    let step = sc
                        .script
                        .steps
                        .get(sc.next)
                        .cloned()
                        .or_else(|| sc.script.then.clone())
                        .unwrap_or_default();
                    sc.next += 1;
                    step
                } else {
                    Step::default()
                };
                (step, sc.hits.len() - 1)
            }
            Err(_) => (Step::default(), usize::MAX),
        };
        let guard = HitGuard {
            state: self.clone(),
            scenario: name.to_string(),
            idx,
            completed: false,
        };
        (step, guard)
    }
}

/// A running mock upstream.
#[derive(Debug, Clone)]
pub struct MockUpstream {
    /// The bound address.
    pub addr: SocketAddr,
}

impl MockUpstream {
    /// The base URL of a scenario, to use as a chat or embeddings source's `BASE_URL`.
    pub fn base_url(&self, scenario: &str) -> String {
        format!("http://{}/sc/{scenario}/v1", self.addr)
    }

    /// The base URL of a scenario as a MonkeyOCR source (no `/v1`): `/ocr/text`, `/parse`,
    /// `/static/<file>` and `/health` are under it.
    pub fn ocr_base_url(&self, scenario: &str) -> String {
        format!("http://{}/sc/{scenario}", self.addr)
    }
}

/// Bind `listen` (port 0 for any) and serve until the process ends. `scripts` preloads
/// scenarios.
pub async fn serve_mock(
    listen: SocketAddr,
    scripts: HashMap<String, Script>,
) -> std::io::Result<MockUpstream> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let state = Arc::new(MockState {
        started: Instant::now(),
        addr,
        scenarios: Mutex::new(
            scripts
                .into_iter()
                .map(|(k, script)| {
                    (
                        k,
                        Scenario {
                            script,
                            ..Default::default()
                        },
                    )
                })
                .collect(),
        ),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(default_chat))
        .route("/sc/{name}/v1/chat/completions", post(scenario_chat))
        .route("/v1/embeddings", post(embeddings::default_embeddings))
        .route(
            "/sc/{name}/v1/embeddings",
            post(embeddings::scenario_embeddings),
        )
        .merge(ocr::routes())
        .route("/_mock/scenarios/{name}", put(set_script))
        .route("/_mock/scenarios/{name}/hits", get(hits))
        .route("/_mock/scenarios/{name}/health", put(ocr::set_health))
        .with_state(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(MockUpstream { addr })
}

async fn set_script(
    State(state): State<Arc<MockState>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let script: Script = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad script: {e}")).into_response(),
    };
    if let Ok(mut map) = state.scenarios.lock() {
        // A new script restarts the steps and the hits; OCR archives and the health status
        // stay.
        let sc = map.entry(name).or_default();
        sc.script = script;
        sc.next = 0;
        sc.hits.clear();
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn hits(State(state): State<Arc<MockState>>, Path(name): Path<String>) -> Response {
    let hits = state
        .scenarios
        .lock()
        .map(|m| m.get(&name).map(|s| s.hits.clone()).unwrap_or_default())
        .unwrap_or_default();
    axum::Json(json!({ "count": hits.len(), "hits": hits })).into_response()
}

async fn default_chat(
    State(state): State<Arc<MockState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    chat(state, "default".into(), headers, body).await
}

async fn scenario_chat(
    State(state): State<Arc<MockState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    chat(state, name, headers, body).await
}

async fn chat(state: Arc<MockState>, name: String, headers: HeaderMap, body: Bytes) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = if name == "default" {
        "/v1/chat/completions".to_string()
    } else {
        format!("/sc/{name}/v1/chat/completions")
    };
    let mut hit = request_hit(&path, &headers);
    hit["body"] = req.clone();
    let (step, guard) = state.record(&name, hit, true);
    respond(step, &req, guard).await
}

/// The start of a hit: the request `path`, its `authorization` and every header.
pub(super) fn request_hit(path: &str, headers: &HeaderMap) -> Value {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    json!({
        "path": path,
        "authorization": auth,
        "headers": headers_json(headers),
    })
}

/// Every request header as `{name: value}` (lower-case names; repeated headers joined with
/// `, `; a non-ASCII value is kept lossily), so tests can see how a plugin's credential and
/// headers arrived.
fn headers_json(headers: &HeaderMap) -> Value {
    let mut map = serde_json::Map::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match map.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(&value);
            }
            _ => {
                map.insert(name.as_str().to_owned(), Value::String(value));
            }
        }
    }
    Value::Object(map)
}

/// Marks a hit `completed` when its answer was fully sent, or `cancelled` when the client
/// went away first (the response body was dropped).
pub(super) struct HitGuard {
    state: Arc<MockState>,
    scenario: String,
    idx: usize,
    completed: bool,
}

impl HitGuard {
    fn mark(&mut self, key: &str) {
        if let Ok(mut map) = self.state.scenarios.lock()
            && let Some(hit) = map
                .get_mut(&self.scenario)
                .and_then(|sc| sc.hits.get_mut(self.idx))
        {
            hit[key] = Value::Bool(true);
        }
    }

    pub(super) fn complete(mut self) {
        self.completed = true;
        self.mark("completed");
        let done_ms = self.state.started.elapsed().as_secs_f64() * 1000.0;
        if let Ok(mut map) = self.state.scenarios.lock()
            && let Some(hit) = map
                .get_mut(&self.scenario)
                .and_then(|sc| sc.hits.get_mut(self.idx))
        {
            hit["done_ms"] = json!(done_ms);
        }
    }
}

impl Drop for HitGuard {
    fn drop(&mut self) {
        if !self.completed {
            self.mark("cancelled");
        }
    }
}

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

async fn respond(step: Step, req: &Value, guard: HitGuard) -> Response {
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
