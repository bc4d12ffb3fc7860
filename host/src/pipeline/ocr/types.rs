//! The public request and answer types of OCR calls (`Gateway::recognize_text`,
//! `Gateway::parse_layout`).

use bytes::Bytes;

use crate::error::GatewayError;
use crate::telemetry::UsageSource;

use super::super::options::CallOptions;

/// Largest image an OCR call takes (64 MiB): more is a 400 before any upstream call.
pub const MAX_IMAGE_BYTES: usize = 64 * 1024 * 1024;

/// One OCR call: an image (or PDF) for the scope aliased `model`.
#[derive(Debug, Clone, PartialEq)]
pub struct OcrRequest {
    /// A scope alias, as for chat; the scope's OCR-capable sources serve the call.
    pub model: String,
    /// The image bytes (PNG, JPEG, PDF, …; the media type is sniffed from them). Never
    /// stored: telemetry keeps their SHA-256 and length.
    pub image: Bytes,
    /// The file name sent with the upload (default `image.<ext>` by the sniffed type).
    pub file_name: Option<String>,
    /// Tracing links, caller dimensions and the deadline (cache controls are ignored: OCR
    /// answers are not cached).
    pub options: CallOptions,
}

impl OcrRequest {
    /// A request for `image` in the scope aliased `model`, with no options.
    pub fn new(model: impl Into<String>, image: impl Into<Bytes>) -> Self {
        Self {
            model: model.into(),
            image: image.into(),
            file_name: None,
            options: CallOptions::default(),
        }
    }

    /// Check the request: a non-empty image of at most [`MAX_IMAGE_BYTES`], a file name (if
    /// any) of 1–255 characters without control characters or path separators.
    ///
    /// Errors: [`GatewayError::InvalidRequest`] naming `image` or `file_name`.
    pub fn validate(&self) -> Result<(), GatewayError> {
        if self.image.is_empty() {
            return Err(GatewayError::invalid("image", "`image` must not be empty"));
        }
        if self.image.len() > MAX_IMAGE_BYTES {
            return Err(GatewayError::invalid(
                "image",
                format!(
                    "`image` has {} bytes, more than the {MAX_IMAGE_BYTES} an OCR call takes",
                    self.image.len()
                ),
            ));
        }
        if let Some(n) = &self.file_name
            && (n.is_empty()
                || n.chars().count() > 255
                || n.chars().any(|c| c.is_control() || c == '/' || c == '\\'))
        {
            return Err(GatewayError::invalid(
                "file_name",
                "`file_name` must be 1–255 characters without control characters, `/` or `\\`",
            ));
        }
        Ok(())
    }
}

/// Token usage of an OCR call: always measured zero (an OCR service bills no tokens; zero is
/// a fact, not an unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct OcrUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub usage_source: UsageSource,
}

impl OcrUsage {
    /// Zero tokens, measured.
    pub const ZERO: OcrUsage = OcrUsage {
        prompt_tokens: 0,
        completion_tokens: 0,
        usage_source: UsageSource::Measured,
    };
}

/// The answer of `recognize_text`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OcrTextResult {
    /// The logical call id (the terminal telemetry row's id, `x-pgw-call-id`).
    pub call_id: String,
    pub scope: String,
    /// The recognised text ("" when the image has none).
    pub text: String,
    /// The source that answered.
    pub source_name: String,
    /// That source's configured `MODEL`.
    pub model: String,
    /// Milliseconds from the call's start to its end.
    pub latency_ms: u64,
    /// Attempts made, failed ones included.
    pub attempts: u32,
    pub usage: OcrUsage,
}

/// One layout element (a paragraph block), in reading order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OcrElement {
    /// The service's block type, verbatim (`text`, `title`, `table`, `image`, …).
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
    /// `[x0, y0, x1, y1]` in page coordinates (the units of the page sizes, PDF points for
    /// MonkeyOCR): top-left then bottom-right; always finite with x0 < x1 and y0 < y1.
    pub bbox: [f64; 4],
    /// Zero-based page index.
    pub page_index: u32,
}

/// The size of one page, in the units of the boxes (finite, > 0).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct OcrPageSize {
    pub page_index: u32,
    pub width: f64,
    pub height: f64,
}

/// The answer of `parse_layout`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OcrLayoutResult {
    /// The logical call id (the terminal telemetry row's id, `x-pgw-call-id`).
    pub call_id: String,
    pub scope: String,
    pub elements: Vec<OcrElement>,
    pub page_sizes: Vec<OcrPageSize>,
    /// Elements dropped by the numeric defence (a non-finite, reversed or zero-area box).
    pub dropped_boxes: u32,
    /// The source that answered.
    pub source_name: String,
    /// That source's configured `MODEL`.
    pub model: String,
    /// Milliseconds from the call's start to its end.
    pub latency_ms: u64,
    /// Attempts made, failed ones included.
    pub attempts: u32,
    pub usage: OcrUsage,
}
