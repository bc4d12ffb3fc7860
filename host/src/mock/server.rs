//! The mock upstream's HTTP server (axum): the routes, the per-scenario state (script,
//! hits, OCR archives, health status), the chat route, the script and hit-inspection
//! endpoints, and the hit guard. Chat answers are built in `chat.rs`, embeddings in
//! `embeddings.rs`, MonkeyOCR in `ocr.rs`.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::chat::respond;
use super::script::{Script, Step};
use super::{anthropic, embeddings, gemini, ocr};

/// Most hits a scenario keeps: the oldest are dropped past it (and counted), so a mock
/// under a load test or a long demo holds a bounded log (a hit, with its headers and body
/// as JSON, is a few KiB) while a test still sees every request it made.
pub(super) const MAX_HITS_KEPT: usize = 10_000;

#[derive(Default)]
pub(super) struct Scenario {
    script: Script,
    next: usize,
    /// The latest hits since the scenario was last scripted, at most [`MAX_HITS_KEPT`];
    /// hit number `n` (counted from the scenario's first request, never reset) is at
    /// `n - first`.
    hits: VecDeque<Value>,
    /// The number of the hit at the front of `hits`: a hit's number stays its own across
    /// evictions and scripts, so a request still in flight marks its own hit or none.
    first: usize,
    /// Hits dropped from the front of `hits` since the scenario was last scripted.
    dropped: usize,
    /// OCR `/parse` answers so far (numbers the archives).
    pub(super) parses: usize,
    /// OCR archives by file name (`<id>.zip`), served at `static/<file>`.
    pub(super) archives: HashMap<String, Bytes>,
    /// The status of `GET health` (`None`: 200).
    pub(super) health: Option<u16>,
}

impl Scenario {
    /// Run `script` from its first step, with an empty hit log.
    fn restart(&mut self, script: Script) {
        self.script = script;
        self.next = 0;
        self.first += self.hits.len();
        self.hits.clear();
        self.dropped = 0;
    }

    /// Hit number `n`, unless it was dropped or the scenario was scripted since.
    fn hit_mut(&mut self, n: usize) -> Option<&mut Value> {
        n.checked_sub(self.first).and_then(|i| self.hits.get_mut(i))
    }
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
                if sc.hits.len() == MAX_HITS_KEPT {
                    sc.hits.pop_front();
                    sc.first += 1;
                    sc.dropped += 1;
                }
                sc.hits.push_back(hit);
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
                (step, sc.first + sc.hits.len() - 1)
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

    /// The base URL of a scenario as an Anthropic source (no `/v1`: the Messages API is
    /// `POST {base}/v1/messages`, as at `https://api.anthropic.com`).
    pub fn anthropic_base_url(&self, scenario: &str) -> String {
        format!("http://{}/sc/{scenario}", self.addr)
    }

    /// The base URL of a scenario as a Gemini source (no version: the API is
    /// `{base}/v1beta/models/{model}:…`, as at `https://generativelanguage.googleapis.com`).
    pub fn gemini_base_url(&self, scenario: &str) -> String {
        format!("http://{}/sc/{scenario}", self.addr)
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
        .route("/v1beta/models/{action}", post(gemini::default_models))
        .route(
            "/sc/{name}/v1beta/models/{action}",
            post(gemini::scenario_models),
        )
        .route("/v1/messages", post(anthropic::default_messages))
        .route("/sc/{name}/v1/messages", post(anthropic::scenario_messages))
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
        map.entry(name).or_default().restart(script);
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn hits(State(state): State<Arc<MockState>>, Path(name): Path<String>) -> Response {
    let (hits, dropped) = state
        .scenarios
        .lock()
        .map(|m| {
            m.get(&name)
                .map(|s| (s.hits.clone(), s.dropped))
                .unwrap_or_default()
        })
        .unwrap_or_default();
    // `count` is every request since the scenario was last scripted; `hits` the latest
    // `MAX_HITS_KEPT` of them.
    axum::Json(json!({ "count": dropped + hits.len(), "dropped": dropped, "hits": hits }))
        .into_response()
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
    /// The hit's number in its scenario (see [`Scenario::hits`]).
    idx: usize,
    completed: bool,
}

impl HitGuard {
    fn mark(&mut self, key: &str) {
        if let Ok(mut map) = self.state.scenarios.lock()
            && let Some(hit) = map
                .get_mut(&self.scenario)
                .and_then(|sc| sc.hit_mut(self.idx))
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
                .and_then(|sc| sc.hit_mut(self.idx))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_scenario_keeps_its_latest_hits_and_counts_the_dropped_ones() {
        let state = Arc::new(MockState {
            started: Instant::now(),
            addr: SocketAddr::from(([127, 0, 0, 1], 9)),
            scenarios: Mutex::default(),
        });
        let total = MAX_HITS_KEPT + 3;
        let mut guards: Vec<Option<HitGuard>> = (0..total)
            .map(|n| Some(state.record("s", json!({ "n": n }), true).1))
            .collect();
        // The guard of a dropped hit marks nothing; those of kept hits mark their own.
        if let Some(g) = guards[0].take() {
            g.complete();
        }
        if let Some(g) = guards[total - 1].take() {
            g.complete();
        }
        drop(guards[5].take());

        let resp = hits(State(state.clone()), Path("s".into())).await;
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("hits body");
        let v: Value = serde_json::from_slice(&body).expect("hits JSON");
        assert_eq!(v["count"], json!(total));
        assert_eq!(v["dropped"], json!(3));
        let kept = v["hits"].as_array().expect("hits array");
        assert_eq!(kept.len(), MAX_HITS_KEPT);
        assert_eq!(kept[0]["n"], json!(3), "the oldest kept hit");
        assert_eq!(kept[MAX_HITS_KEPT - 1]["n"], json!(total - 1));
        assert_eq!(kept[0].get("completed"), None);
        assert_eq!(kept[2]["n"], json!(5));
        assert_eq!(kept[2]["cancelled"], json!(true));
        assert_eq!(kept[MAX_HITS_KEPT - 1]["completed"], json!(true));
        let marked = kept
            .iter()
            .filter(|h| h.get("completed").is_some() || h.get("cancelled").is_some())
            .count();
        assert_eq!(marked, 2);

        // A new script starts the log again; a request from before it marks nothing new.
        if let Some(sc) = state.scenarios.lock().expect("lock").get_mut("s") {
            sc.restart(Script::default());
        }
        let (_, fresh) = state.record("s", json!({ "n": "fresh" }), true);
        if let Some(g) = guards[total - 2].take() {
            g.complete();
        }
        drop(guards);
        let map = state.scenarios.lock().expect("lock");
        let sc = map.get("s").expect("scenario");
        assert_eq!(sc.hits.len(), 1);
        assert_eq!(
            sc.hits[0].get("completed"),
            None,
            "an old request marked a new hit"
        );
        assert_eq!(sc.hits[0].get("cancelled"), None);
        drop(map);
        fresh.complete();
        let map = state.scenarios.lock().expect("lock");
        assert_eq!(map["s"].hits[0]["completed"], json!(true));
    }
}
