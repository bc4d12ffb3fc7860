//! The mock's MonkeyOCR endpoints. A scenario's OCR base URL is `http://<addr>/sc/<name>`
//! (the `default` scenario's is `http://<addr>`); under it:
//!
//! - `POST /ocr/text`, multipart with an upload part `file` → `{"content": <text>}`: the
//!   step's `content`, or `Recognised text of <N> bytes` (N: the upload's size) when the step
//!   keeps the chat default content.
//! - `POST /parse`, multipart `file` → `{"success": true, "message": "Parsing completed",
//!   "download_url": "/static/<id>.zip"}`, relative to the base URL, or absolute
//!   (`http://<addr>/sc/<name>/static/<id>.zip`) when the step says `absolute_url`. The
//!   archive is built then (from the step's `layout`, see [`Layout`](super::Layout) and
//!   `fixtures/README.md`) and kept by the scenario; `<id>` is `<stem>_parsed_<n>`.
//! - `GET /static/<file>` → that archive (`application/zip`), or 404 `{"detail":"Not Found"}`.
//! - `GET /health` → `{"status":"healthy"}` (200), or `{"status":"unhealthy"}` with the status
//!   set by `PUT /_mock/scenarios/<name>/health` `{"status": 503}`.
//!
//! `/ocr/text` and `/parse` consume a step; downloads and health probes do not. An error step
//! answers FastAPI-style `{"detail": "mock error <status>"}` (or its `body`); a request that is
//! not multipart or has no upload part `file` (a part with a file name, as FastAPI's
//! `UploadFile` requires) is a 400 `{"detail": …}` that consumes no step. Every request is a
//! hit with its `path`; uploads record `multipart: {fields: {name: text}, files: [{field,
//! file_name, content_type, size, sha256}]}`.

use std::collections::BTreeMap;
use std::io::{Cursor, Write};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{DefaultBodyLimit, Multipart, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::chat::with_headers;
use super::script::{DEFAULT_CONTENT, Layout, Step};
use super::server::{MockState, request_hit};

/// `layout_good.json`: the `_middle.json` of the `good` layout.
pub const LAYOUT_GOOD_MIDDLE_JSON: &str = include_str!("fixtures/layout_good.json");
/// `layout_bad_box.json`: the `_middle.json` of the `bad_box` layout.
pub const LAYOUT_BAD_BOX_MIDDLE_JSON: &str = include_str!("fixtures/layout_bad_box.json");
/// `layout.md`: the markdown every layout but `not_zip` carries.
pub const LAYOUT_MARKDOWN: &str = include_str!("fixtures/layout.md");
/// The `_middle.json` of the `bad_json` layout (a truncated document).
pub const LAYOUT_BAD_JSON_MIDDLE: &str = "{\"pdf_info\": [{\"page_idx\": 0, \"page_size\": [612, ";
/// The bytes of the `not_zip` layout.
pub const NOT_ZIP_BYTES: &[u8] = b"not a zip archive\n";
/// The figure image of the `good` and `bad_box` archives (`<id>/images/fig1.jpg`): a JPEG
/// start and end marker around a comment.
const FIGURE_JPEG: &[u8] = b"\xff\xd8\xff\xfe\x00\x06mock\xff\xd9";

/// The largest upload the OCR endpoints take.
const MAX_UPLOAD_BYTES: usize = 64 * 1024 * 1024;

/// The OCR routes, for the `default` scenario at the root and for every scenario under
/// `/sc/<name>`.
pub(super) fn routes() -> Router<Arc<MockState>> {
    let limit = || DefaultBodyLimit::max(MAX_UPLOAD_BYTES);
    Router::new()
        .route("/ocr/text", post(default_text).layer(limit()))
        .route("/sc/{name}/ocr/text", post(scenario_text).layer(limit()))
        .route("/parse", post(default_parse).layer(limit()))
        .route("/sc/{name}/parse", post(scenario_parse).layer(limit()))
        .route("/static/{file}", get(default_static))
        .route("/sc/{name}/static/{file}", get(scenario_static))
        .route("/health", get(default_health))
        .route("/sc/{name}/health", get(scenario_health))
}

/// The path prefix of scenario `name` (empty for `default`).
fn prefix(name: &str) -> String {
    if name == "default" {
        String::new()
    } else {
        format!("/sc/{name}")
    }
}

#[derive(Clone, Copy)]
enum Op {
    Text,
    Parse,
}

async fn default_text(
    State(state): State<Arc<MockState>>,
    headers: HeaderMap,
    mp: Result<Multipart, MultipartRejection>,
) -> Response {
    upload(state, "default".into(), Op::Text, headers, mp).await
}

async fn scenario_text(
    State(state): State<Arc<MockState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    mp: Result<Multipart, MultipartRejection>,
) -> Response {
    upload(state, name, Op::Text, headers, mp).await
}

async fn default_parse(
    State(state): State<Arc<MockState>>,
    headers: HeaderMap,
    mp: Result<Multipart, MultipartRejection>,
) -> Response {
    upload(state, "default".into(), Op::Parse, headers, mp).await
}

async fn scenario_parse(
    State(state): State<Arc<MockState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    mp: Result<Multipart, MultipartRejection>,
) -> Response {
    upload(state, name, Op::Parse, headers, mp).await
}

/// One part of a multipart request that carried a file name.
struct FilePart {
    field: String,
    file_name: String,
    content_type: Option<String>,
    bytes: Bytes,
}

/// A read multipart request.
#[derive(Default)]
struct Upload {
    fields: BTreeMap<String, String>,
    files: Vec<FilePart>,
}

impl Upload {
    fn to_json(&self) -> Value {
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| {
                json!({
                    "field": f.field,
                    "file_name": f.file_name,
                    "content_type": f.content_type,
                    "size": f.bytes.len(),
                    "sha256": hex::encode(Sha256::digest(&f.bytes)),
                })
            })
            .collect();
        json!({"fields": self.fields, "files": files})
    }
}

async fn read_multipart(mp: Result<Multipart, MultipartRejection>) -> Result<Upload, String> {
    let mut mp = mp.map_err(|e| format!("not a multipart/form-data request: {}", e.body_text()))?;
    let mut upload = Upload::default();
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => return Err(format!("malformed multipart body: {}", e.body_text())),
        };
        let name = field.name().unwrap_or_default().to_string();
        let file_name = field.file_name().map(str::to_string);
        let content_type = field.content_type().map(str::to_string);
        let bytes = field
            .bytes()
            .await
            .map_err(|e| format!("malformed multipart body: {}", e.body_text()))?;
        match file_name {
            Some(file_name) => upload.files.push(FilePart {
                field: name,
                file_name,
                content_type,
                bytes,
            }),
            None => {
                upload
                    .fields
                    .insert(name, String::from_utf8_lossy(&bytes).into_owned());
            }
        }
    }
    Ok(upload)
}

fn detail(status: StatusCode, detail: &str) -> Response {
    (status, axum::Json(json!({ "detail": detail }))).into_response()
}

async fn upload(
    state: Arc<MockState>,
    name: String,
    op: Op,
    headers: HeaderMap,
    mp: Result<Multipart, MultipartRejection>,
) -> Response {
    let op_path = match op {
        Op::Text => "/ocr/text",
        Op::Parse => "/parse",
    };
    let mut hit = request_hit(&format!("{}{op_path}", prefix(&name)), &headers);
    let upload = read_multipart(mp).await;
    let file_index = match &upload {
        Ok(u) => u.files.iter().position(|f| f.field == "file"),
        Err(_) => None,
    };
    let (upload, file_index) = match (upload, file_index) {
        (Ok(u), Some(i)) => (u, i),
        (upload, _) => {
            let why = match &upload {
                Err(e) => e.clone(),
                Ok(u) if u.fields.contains_key("file") => {
                    "file: expected an upload (a part with a file name), got a text field".into()
                }
                Ok(_) => "file: field required".into(),
            };
            hit["multipart"] = upload.as_ref().map_or(Value::Null, Upload::to_json);
            hit["error"] = json!(why);
            let (_, guard) = state.record(&name, hit, false);
            guard.complete();
            return detail(StatusCode::BAD_REQUEST, &why);
        }
    };
    hit["multipart"] = upload.to_json();
    let (step, guard) = state.record(&name, hit, true);
    if step.first_token_delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(step.first_token_delay_ms)).await;
    }
    let status = StatusCode::from_u16(step.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let resp = if !status.is_success() {
        match &step.body {
            Some(b) => (status, b.clone()).into_response(),
            None => detail(status, &format!("mock error {}", step.status)),
        }
    } else if let Some(b) = &step.body {
        (status, b.clone()).into_response()
    } else {
        let file = &upload.files[file_index];
        match op {
            Op::Text => {
                let content = if step.content == DEFAULT_CONTENT {
                    format!("Recognised text of {} bytes", file.bytes.len())
                } else {
                    step.content.clone()
                };
                (status, axum::Json(json!({ "content": content }))).into_response()
            }
            Op::Parse => parse_answer(&state, &name, &step, &file.file_name, status),
        }
    };
    guard.complete();
    with_headers(resp, &step)
}

/// `<stem>` of an upload's file name: without its extension, reduced to `[A-Za-z0-9_-]`,
/// `upload` when nothing is left.
fn stem(file_name: &str) -> String {
    let base = file_name.rsplit(['/', '\\']).next().unwrap_or_default();
    let base = match base.rfind('.') {
        Some(i) if i > 0 => &base[..i],
        _ => base,
    };
    let s: String = base
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    if s.is_empty() { "upload".into() } else { s }
}

/// Build and keep the archive of a `/parse` answer, and answer its `download_url`.
fn parse_answer(
    state: &Arc<MockState>,
    name: &str,
    step: &Step,
    file_name: &str,
    status: StatusCode,
) -> Response {
    let n = match state.scenarios.lock() {
        Ok(mut map) => {
            let sc = map.entry(name.to_string()).or_default();
            sc.parses += 1;
            sc.parses
        }
        Err(_) => 0,
    };
    let id = format!("{}_parsed_{n}", stem(file_name));
    let archive = match build_archive(step.layout, &id) {
        Ok(a) => a,
        Err(e) => {
            return detail(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("mock: cannot build the archive: {e}"),
            );
        }
    };
    let file = format!("{id}.zip");
    if let Ok(mut map) = state.scenarios.lock() {
        map.entry(name.to_string())
            .or_default()
            .archives
            .insert(file.clone(), archive);
    }
    let download_url = if step.absolute_url {
        format!("http://{}{}/static/{file}", state.addr, prefix(name))
    } else {
        format!("/static/{file}")
    };
    (
        status,
        axum::Json(json!({
            "success": true,
            "message": "Parsing completed",
            "download_url": download_url,
        })),
    )
        .into_response()
}

/// The archive of `layout` for result `id` (see `fixtures/README.md`).
pub fn build_archive(layout: Layout, id: &str) -> Result<Bytes, zip::result::ZipError> {
    if layout == Layout::NotZip {
        return Ok(Bytes::from_static(NOT_ZIP_BYTES));
    }
    let middle = match layout {
        Layout::Good => Some(LAYOUT_GOOD_MIDDLE_JSON),
        Layout::BadBox => Some(LAYOUT_BAD_BOX_MIDDLE_JSON),
        Layout::BadJson => Some(LAYOUT_BAD_JSON_MIDDLE),
        Layout::NoMiddle | Layout::NotZip => None,
    };
    let image = matches!(layout, Layout::Good | Layout::BadBox);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut zw = zip::ZipWriter::new(Cursor::new(Vec::new()));
    if let Some(m) = middle {
        zw.start_file(format!("{id}/{id}_middle.json"), options)?;
        zw.write_all(m.as_bytes())?;
    }
    zw.start_file(format!("{id}/{id}.md"), options)?;
    zw.write_all(LAYOUT_MARKDOWN.as_bytes())?;
    if image {
        zw.start_file(format!("{id}/images/fig1.jpg"), options)?;
        zw.write_all(FIGURE_JPEG)?;
    }
    Ok(Bytes::from(zw.finish()?.into_inner()))
}

async fn default_static(
    State(state): State<Arc<MockState>>,
    Path(file): Path<String>,
    headers: HeaderMap,
) -> Response {
    download(state, "default".into(), file, headers)
}

async fn scenario_static(
    State(state): State<Arc<MockState>>,
    Path((name, file)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    download(state, name, file, headers)
}

fn download(state: Arc<MockState>, name: String, file: String, headers: HeaderMap) -> Response {
    let hit = request_hit(&format!("{}/static/{file}", prefix(&name)), &headers);
    let (_, guard) = state.record(&name, hit, false);
    let archive = state.scenarios.lock().ok().and_then(|map| {
        map.get(&name)
            .and_then(|sc| sc.archives.get(&file).cloned())
    });
    guard.complete();
    match archive {
        Some(bytes) => ([("content-type", "application/zip")], bytes).into_response(),
        None => detail(StatusCode::NOT_FOUND, "Not Found"),
    }
}

async fn default_health(State(state): State<Arc<MockState>>, headers: HeaderMap) -> Response {
    health(state, "default".into(), headers)
}

async fn scenario_health(
    State(state): State<Arc<MockState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    health(state, name, headers)
}

fn health(state: Arc<MockState>, name: String, headers: HeaderMap) -> Response {
    let hit = request_hit(&format!("{}/health", prefix(&name)), &headers);
    let (_, guard) = state.record(&name, hit, false);
    let code = state
        .scenarios
        .lock()
        .ok()
        .and_then(|map| map.get(&name).and_then(|sc| sc.health))
        .unwrap_or(200);
    guard.complete();
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let word = if status.is_success() {
        "healthy"
    } else {
        "unhealthy"
    };
    (status, axum::Json(json!({ "status": word }))).into_response()
}

/// `PUT /_mock/scenarios/<name>/health` `{"status": <u16>}`: the status of the scenario's
/// `GET health` from now on.
pub(super) async fn set_health(
    State(state): State<Arc<MockState>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let code = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("status").and_then(Value::as_u64))
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| StatusCode::from_u16(*c).is_ok());
    let Some(code) = code else {
        return (
            StatusCode::BAD_REQUEST,
            "bad health: expected {\"status\": <HTTP status>}",
        )
            .into_response();
    };
    if let Ok(mut map) = state.scenarios.lock() {
        map.entry(name).or_default().health = Some(code);
    }
    StatusCode::NO_CONTENT.into_response()
}
