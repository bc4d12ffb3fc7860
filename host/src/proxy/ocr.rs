//! `POST /v1/ocr/text` and `POST /v1/ocr/layout`: client auth, the body limit
//! (`PGW_MAX_BODY_BYTES`, 413), the `x-pgw-*` headers, then `Gateway::recognize_text` /
//! `Gateway::parse_layout`. The body is `multipart/form-data` (a file part `file` or `image`
//! and a text field `model`) or JSON `{"model", "image": <base64>, "file_name"?}`. Also the
//! 5-second cache of the OCR health probes that `/healthz` reports.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, DefaultBodyLimit, FromRequest, Multipart, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::AppState;
use super::call_headers::{call_options, names, set};
use super::errors::{error_response, plain_error};
use crate::error::GatewayError;
use crate::pipeline::{Gateway, OcrHealth, OcrRequest, OcrUsage};

/// How long `/healthz` reuses OCR probe results (load-balancer probes must not hammer the
/// OCR services).
pub(crate) const HEALTH_TTL: Duration = Duration::from_secs(5);

/// The OCR routes. The body limit is enforced by the handlers (413), so axum's default
/// limit for the multipart extractor is lifted.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/ocr/text",
            post(ocr_text).layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/v1/ocr/layout",
            post(ocr_layout).layer(DefaultBodyLimit::disable()),
        )
}

/// The last OCR probe results and when they were taken.
#[derive(Default)]
pub(crate) struct HealthCache {
    slot: std::sync::Mutex<Option<(Instant, OcrHealth)>>,
    refreshing: std::sync::atomic::AtomicBool,
}

impl HealthCache {
    /// The probe results and their age in seconds. Only the very first call waits for the
    /// probes (at most their 2 s timeout); afterwards `/healthz` never waits on an OCR
    /// service: results older than [`HEALTH_TTL`] are served as they are while one
    /// background task refreshes them.
    pub(crate) async fn get(self: &Arc<Self>, gateway: &Gateway) -> (OcrHealth, f64) {
        let last = self.slot.lock().ok().and_then(|s| s.clone());
        match last {
            None => {
                let h = gateway.check_ocr_health().await;
                self.put(h.clone());
                (h, 0.0)
            }
            Some((at, h)) => {
                if at.elapsed() >= HEALTH_TTL
                    && !self
                        .refreshing
                        .swap(true, std::sync::atomic::Ordering::AcqRel)
                {
                    let me = self.clone();
                    let gateway = gateway.clone();
                    tokio::spawn(async move {
                        let h = gateway.check_ocr_health().await;
                        me.put(h);
                        me.refreshing
                            .store(false, std::sync::atomic::Ordering::Release);
                    });
                }
                (h, at.elapsed().as_secs_f64())
            }
        }
    }

    fn put(&self, h: OcrHealth) {
        if let Ok(mut slot) = self.slot.lock() {
            *slot = Some((Instant::now(), h));
        }
    }
}

fn usage_json(u: &OcrUsage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    })
}

fn answer(body: Value, call_id: &str, source: &str, attempts: u32) -> Response {
    let mut resp = axum::Json(body).into_response();
    set(&mut resp, names::CALL_ID, call_id);
    set(&mut resp, names::SOURCE, source);
    set(&mut resp, names::ATTEMPTS, attempts);
    // OCR usage is measured: zero tokens is a fact, not unknown.
    set(&mut resp, names::USAGE_SOURCE, "measured");
    resp
}

pub(crate) async fn ocr_text(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    let req = match read_request(&state, peer, req).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let alias = req.model.clone();
    match state.gateway.recognize_text(req).await {
        Ok(r) => answer(
            json!({
                "object": "ocr.text",
                "model": alias,
                "text": r.text,
                "usage": usage_json(&r.usage),
                "source": r.source_name,
            }),
            &r.call_id,
            &r.source_name,
            r.attempts,
        ),
        Err(e) => error_response(&e),
    }
}

pub(crate) async fn ocr_layout(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    let req = match read_request(&state, peer, req).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let alias = req.model.clone();
    match state.gateway.parse_layout(req).await {
        Ok(r) => answer(
            json!({
                "object": "ocr.layout",
                "model": alias,
                "elements": r.elements,
                "page_sizes": r.page_sizes,
                "dropped_boxes": r.dropped_boxes,
                "usage": usage_json(&r.usage),
                "source": r.source_name,
            }),
            &r.call_id,
            &r.source_name,
            r.attempts,
        ),
        Err(e) => error_response(&e),
    }
}

/// Auth, body limit, headers and body of an OCR request; an error answer otherwise.
async fn read_request(
    state: &AppState,
    peer: SocketAddr,
    req: Request,
) -> Result<OcrRequest, Response> {
    let principal = match state.caller(req.headers(), peer) {
        Ok(p) => p,
        Err(e) => {
            let (status, ty, message) = e.into_gateway_error();
            return Err(plain_error(status, ty, &message));
        }
    };
    let mut options = call_options(req.headers()).map_err(|e| error_response(&e))?;
    options.identify(principal);
    let content_type = req
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, state.max_body_bytes)
        .await
        .map_err(|_| {
            plain_error(
                413,
                "request_too_large",
                &format!(
                    "request body exceeds PGW_MAX_BODY_BYTES ({} bytes)",
                    state.max_body_bytes
                ),
            )
        })?;
    let mut parsed = if content_type.starts_with("multipart/form-data") {
        let req = Request::from_parts(parts, Body::from(bytes));
        from_multipart(req, state).await
    } else if content_type.starts_with("application/json") {
        from_json(&bytes)
    } else {
        Err(GatewayError::invalid(
            "content-type",
            "the body must be multipart/form-data (parts `file` and `model`) or application/json \
             ({\"model\", \"image\": <base64>})",
        ))
    }
    .map_err(|e| error_response(&e))?;
    parsed.options = options;
    Ok(parsed)
}

/// A multipart body: a file part `file` (or `image`), a text field `model`, optionally a
/// text field `file_name` (default: the file part's file name).
async fn from_multipart(req: Request, state: &AppState) -> Result<OcrRequest, GatewayError> {
    let malformed =
        |e: String| GatewayError::invalid("file", format!("malformed multipart body: {e}"));
    let mut mp = Multipart::from_request(req, state)
        .await
        .map_err(|e| malformed(e.body_text()))?;
    let mut model: Option<String> = None;
    let mut image: Option<(Bytes, Option<String>)> = None;
    let mut file_name: Option<String> = None;
    while let Some(field) = mp
        .next_field()
        .await
        .map_err(|e| malformed(e.body_text()))?
    {
        let name = field.name().unwrap_or_default().to_string();
        let part_file_name = field.file_name().map(str::to_string);
        let data = field.bytes().await.map_err(|e| malformed(e.body_text()))?;
        match name.as_str() {
            "file" | "image" => {
                if image.is_some() {
                    return Err(GatewayError::invalid(
                        name.as_str(),
                        "only one image part (`file` or `image`) is allowed",
                    ));
                }
                image = Some((data, part_file_name));
            }
            "model" | "file_name" => {
                let text = String::from_utf8(data.to_vec()).map_err(|_| {
                    GatewayError::invalid(name.as_str(), format!("`{name}` must be UTF-8 text"))
                })?;
                if name == "model" {
                    model = Some(text.trim().to_string());
                } else {
                    file_name = Some(text);
                }
            }
            _ => {}
        }
    }
    let model = model
        .filter(|m| !m.is_empty())
        .ok_or_else(|| GatewayError::invalid("model", "the text field `model` is required"))?;
    let Some((image, part_name)) = image else {
        return Err(GatewayError::invalid(
            "file",
            "a file part `file` (or `image`) with the image is required",
        ));
    };
    let mut req = OcrRequest::new(model, image);
    req.file_name = file_name.or(part_name).filter(|n| !n.is_empty());
    Ok(req)
}

/// A JSON body `{"model": "...", "image": "<base64 or data: URL>", "file_name"?: "..."}`.
fn from_json(bytes: &[u8]) -> Result<OcrRequest, GatewayError> {
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| GatewayError::invalid("body", format!("the body is not valid JSON: {e}")))?;
    let Some(obj) = v.as_object() else {
        return Err(GatewayError::invalid(
            "body",
            "the body must be a JSON object",
        ));
    };
    let model = match obj.get("model") {
        Some(Value::String(m)) if !m.trim().is_empty() => m.trim().to_string(),
        _ => {
            return Err(GatewayError::invalid(
                "model",
                "`model` must be a non-empty string",
            ));
        }
    };
    let Some(Value::String(b64)) = obj.get("image") else {
        return Err(GatewayError::invalid(
            "image",
            "`image` must be a base64 string",
        ));
    };
    // A data URL's payload is the part after the comma.
    let payload = match b64
        .strip_prefix("data:")
        .and_then(|r| r.split_once(";base64,"))
    {
        Some((_, p)) => p,
        None => b64.as_str(),
    };
    let image = base64::engine::general_purpose::STANDARD
        .decode(payload.trim())
        .map_err(|e| GatewayError::invalid("image", format!("`image` is not valid base64: {e}")))?;
    let file_name = match obj.get("file_name") {
        None | Some(Value::Null) => None,
        Some(Value::String(n)) => Some(n.clone()),
        Some(_) => {
            return Err(GatewayError::invalid(
                "file_name",
                "`file_name` must be a string",
            ));
        }
    };
    let mut req = OcrRequest::new(model, image);
    req.file_name = file_name;
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(e: GatewayError) -> Option<String> {
        match e {
            GatewayError::InvalidRequest { param, .. } => param,
            other => panic!("not invalid_request: {other}"),
        }
    }

    #[test]
    fn json_bodies_name_the_field_at_fault() {
        let ok = from_json(br#"{"model":"ocr","image":"aGVsbG8=","file_name":"a.png"}"#).unwrap();
        assert_eq!(ok.model, "ocr");
        assert_eq!(&ok.image[..], b"hello");
        assert_eq!(ok.file_name.as_deref(), Some("a.png"));
        let data_url =
            from_json(br#"{"model":"ocr","image":"data:image/png;base64,aGVsbG8="}"#).unwrap();
        assert_eq!(&data_url.image[..], b"hello");
        assert_eq!(
            param(from_json(br#"{"image":"aGVsbG8="}"#).unwrap_err()).as_deref(),
            Some("model")
        );
        assert_eq!(
            param(from_json(br#"{"model":"ocr"}"#).unwrap_err()).as_deref(),
            Some("image")
        );
        assert_eq!(
            param(from_json(br#"{"model":"ocr","image":"%%%"}"#).unwrap_err()).as_deref(),
            Some("image")
        );
        assert_eq!(
            param(from_json(br#"{"model":"ocr","image":"aGVsbG8=","file_name":3}"#).unwrap_err())
                .as_deref(),
            Some("file_name")
        );
        assert_eq!(
            param(from_json(b"[1]").unwrap_err()).as_deref(),
            Some("body")
        );
    }
}
