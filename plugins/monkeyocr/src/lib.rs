//! The MonkeyOCR provider component (`monkeyocr.wasm`): OCR only (docs/ocr.md).
//!
//! - text: `POST /ocr/text`, multipart field `file` → `{"content": "…"}` → the text;
//! - layout: `POST /parse`, multipart field `file` → `{"download_url": "…"}` → the host fetches
//!   that ZIP and hands its `*_middle.json` member to [`Provider::parse_layout_document`],
//!   which turns the MinerU-style document into elements and page sizes (see [`middle`]);
//! - health: `GET /health`.
//!
//! MonkeyOCR has no authentication: every request uses [`AuthScheme::None`]. Chat and
//! embeddings are declared off and answer `unsupported`.
//!
//! # How a 2xx answer is classified
//!
//! MonkeyOCR reports a failed recognition *inside a 200*:
//! `{"success": false, "content": "", "message": "OCR task failed: …"}` (an image it cannot
//! read, an unsupported file type). So, for both upload answers, in this order:
//!
//! 1. a body that is not a JSON object (garbage, HTML from a proxy, empty) → `transient`: a
//!    broken service or something in front of it, worth a retry elsewhere;
//! 2. `"success": false` (the JSON boolean) → `result-invalid`, with the service's `message`
//!    (else its FastAPI `detail`, else a fixed text): the service is up and said no to this
//!    input — a bad image is not a bad service (no failover, breaker success);
//! 3. the expected field (`content` for text, `download_url` for layout) as a string → the
//!    answer (`""` is a legitimate empty text; an empty or blank `download_url` is not);
//! 4. anything else — a FastAPI error shape `{"detail": …}` in a 2xx, a missing or mistyped
//!    field → `transient`: a service that answers 2xx without an answer is misbehaving.
//!
//! A non-2xx answer goes through the SDK's [`classify_http_error`]; a FastAPI `detail` then
//! becomes the message.

use polygateway_plugin_sdk::{
    ArchiveFetch, AuthScheme, BuildError, Capabilities, ChatRequest, ClassifiedError, ErrorClass,
    Header, HttpRequest, ImageInfo, LayoutDocument, OcrOperation, Provider, SourceInfo,
    ThinkingStyle, UploadRequest, classify_http_error,
};
use serde_json::{Map, Value};

pub mod middle;

/// The text-recognition endpoint.
pub const TEXT_PATH: &str = "/ocr/text";
/// The layout-parsing endpoint.
pub const LAYOUT_PATH: &str = "/parse";
/// The health endpoint probed by [`Provider::health_request`].
pub const HEALTH_PATH: &str = "/health";
/// The multipart form field carrying the image.
pub const FILE_FIELD: &str = "file";
/// The suffix of the archive member holding the layout document.
pub const MIDDLE_JSON_SUFFIX: &str = "_middle.json";
/// The most characters of an upstream message kept in a [`ClassifiedError`]; longer ones
/// are cut and end with `…`.
pub const MAX_MESSAGE_CHARS: usize = 1024;

/// A MonkeyOCR (or MinerU-style) service: text recognition and layout parsing, no chat.
pub struct MonkeyOcr;

impl Provider for MonkeyOcr {
    const NAME: &'static str = "monkeyocr";
    const CAPABILITIES: Capabilities = Capabilities {
        chat: false,
        streaming: false,
        native_json_schema: false,
        thinking: ThinkingStyle::None,
        prefill_continuation: false,
        embedding: false,
        ocr: true,
        audio: false,
    };

    /// Chat is not served (the host never routes it here): `unsupported`.
    fn build_request(_req: &ChatRequest, _source: &SourceInfo) -> Result<HttpRequest, BuildError> {
        Err(BuildError::Unsupported(format!(
            "provider `{}` serves OCR only, not chat",
            Self::NAME
        )))
    }

    /// The SDK's status mapping; the message is FastAPI's `detail` when the body has one.
    fn classify_error(status: u16, headers: &[Header], body: &[u8]) -> ClassifiedError {
        let mut error = classify_http_error(status, headers, body);
        if let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(strip_bom(body))
            && let Some(detail) = detail_text(&object)
        {
            error.message = detail;
        }
        error
    }

    /// The upload: `POST /ocr/text` or `POST /parse`, the image in field `file`, no other
    /// fields, `accept: application/json`, no credential.
    fn build_ocr_request(
        op: OcrOperation,
        _image: &ImageInfo,
        _source: &SourceInfo,
    ) -> Result<UploadRequest, BuildError> {
        let path = match op {
            OcrOperation::Text => TEXT_PATH,
            OcrOperation::Layout => LAYOUT_PATH,
        };
        Ok(UploadRequest {
            path: path.to_owned(),
            headers: accept_json(),
            auth: AuthScheme::None,
            file_field: FILE_FIELD.to_owned(),
            fields: Vec::new(),
        })
    }

    /// `{"content": "…"}` → the text, verbatim (`""` included). See the crate docs for the
    /// error classes.
    fn parse_text_response(body: &[u8]) -> Result<String, ClassifiedError> {
        let mut object = answer_object(body, "text")?;
        if let Some(Value::String(text)) = object.get_mut("content") {
            return Ok(std::mem::take(text));
        }
        Err(no_answer(&object, "text", "content"))
    }

    /// `{"download_url": "…"}` (relative like `/static/x.zip`, or absolute) → the archive to
    /// fetch and its `_middle.json` member. The URL is passed on verbatim but for surrounding
    /// whitespace; the host resolves a relative one against the base URL.
    fn parse_layout_response(body: &[u8]) -> Result<ArchiveFetch, ClassifiedError> {
        let object = answer_object(body, "layout")?;
        match object.get("download_url") {
            Some(Value::String(url)) if !url.trim().is_empty() => Ok(ArchiveFetch {
                url: url.trim().to_owned(),
                member_suffix: MIDDLE_JSON_SUFFIX.to_owned(),
            }),
            _ => Err(no_answer(&object, "layout", "download_url")),
        }
    }

    /// See [`middle::parse_middle_json`].
    fn parse_layout_document(member: &[u8]) -> Result<LayoutDocument, ClassifiedError> {
        middle::parse_middle_json(member)
    }

    /// `GET /health`, no body, no credential.
    fn health_request(_source: &SourceInfo) -> Option<HttpRequest> {
        Some(HttpRequest {
            method: "GET".to_owned(),
            path: HEALTH_PATH.to_owned(),
            headers: accept_json(),
            body: Vec::new(),
            auth: AuthScheme::None,
        })
    }
}

polygateway_plugin_sdk::export_provider!(MonkeyOcr);

fn accept_json() -> Vec<Header> {
    vec![Header {
        name: "accept".to_owned(),
        value: "application/json".to_owned(),
    }]
}

/// A UTF-8 byte-order mark, which JSON parsers refuse and some Windows tools write.
const BOM: &[u8] = b"\xEF\xBB\xBF";

pub(crate) fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}

/// Steps 1 and 2 of the crate docs: the body as a JSON object, or `transient` (not an
/// object) / `result-invalid` (`"success": false`).
fn answer_object(body: &[u8], what: &str) -> Result<Map<String, Value>, ClassifiedError> {
    let object = match serde_json::from_slice::<Value>(strip_bom(body)) {
        Ok(Value::Object(object)) => object,
        Ok(other) => {
            return Err(error(
                ErrorClass::Transient,
                format!(
                    "OCR {what} answer is not a JSON object but {}",
                    json_kind(&other)
                ),
            ));
        }
        Err(e) => {
            return Err(error(
                ErrorClass::Transient,
                format!("OCR {what} answer is not JSON: {e}"),
            ));
        }
    };
    if object.get("success") == Some(&Value::Bool(false)) {
        let message = match object.get("message") {
            Some(Value::String(m)) if !m.trim().is_empty() => cap(m),
            _ => detail_text(&object).unwrap_or_else(|| {
                format!("the OCR service could not process this {what} request")
            }),
        };
        return Err(error(ErrorClass::ResultInvalid, message));
    }
    Ok(object)
}

/// Step 4 of the crate docs: a 2xx object without the expected field → `transient`.
fn no_answer(object: &Map<String, Value>, what: &str, field: &str) -> ClassifiedError {
    let message = match detail_text(object) {
        Some(detail) => format!("OCR {what} answer is an error in a 2xx: {detail}"),
        None => match object.get(field) {
            None | Some(Value::Null) => format!("OCR {what} answer has no `{field}`"),
            Some(Value::String(_)) => format!("OCR {what} answer has an empty `{field}`"),
            Some(other) => format!(
                "OCR {what} answer has a `{field}` that is {}, not a string",
                json_kind(other)
            ),
        },
    };
    error(ErrorClass::Transient, message)
}

/// FastAPI's `detail` (a string, or a validation-error array written as compact JSON), capped.
fn detail_text(object: &Map<String, Value>) -> Option<String> {
    match object.get("detail")? {
        Value::Null => None,
        Value::String(s) if s.trim().is_empty() => None,
        Value::String(s) => Some(cap(s)),
        other => Some(cap(&other.to_string())),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// At most [`MAX_MESSAGE_CHARS`] characters, trimmed.
pub(crate) fn cap(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", text.get(..cut).unwrap_or(text)),
    }
}

pub(crate) fn error(class: ErrorClass, message: String) -> ClassifiedError {
    ClassifiedError {
        class,
        message,
        code: None,
        retry_after_ms: None,
    }
}

#[cfg(test)]
mod tests;
