//! The Gemini provider component (`gemini.wasm`): Google's Gemini API
//! (`BASE_URL` `https://generativelanguage.googleapis.com`, no version in it) spoken natively —
//! `generateContent`, `streamGenerateContent?alt=sse` and `batchEmbedContents` under `/v1beta` —
//! with the key in `x-goog-api-key` (the host adds it).
//!
//! The SDK's [`polygateway_plugin_sdk::Provider`] is OpenAI-shaped, so [`Gemini`] implements
//! the generated WIT traits ([`Guest`], [`EmbeddingGuest`], [`OcrGuest`]) itself. What each
//! module owns:
//!
//! - [`request`] — `build-request`: the path, headers and the JSON body, whose pieces come
//!   from [`contents`] (the OpenAI messages as Gemini `contents` + `systemInstruction`),
//!   [`signatures`] (handing `reasoning_details` back as `thoughtSignature`s) and [`params`]
//!   (the client's OpenAI parameters as `generationConfig`, `tools`, `toolConfig`);
//! - [`answer`] — one `GenerateContentResponse` (a whole answer, or one SSE chunk) → deltas;
//!   [`stream`] is the `stream-parser` built on it;
//! - [`errors`] — `classify-error` and the error objects that arrive inside a 200;
//! - [`embedding`] — `batchEmbedContents`;
//! - [`path`] and [`json`] — model path segments and small JSON helpers; [`lenient`] —
//!   answer fields read as one expected type without a `serde_json::Value`.
//!
//! OCR is not served: `build-ocr-request` answers `unsupported`, the parse functions
//! `result-invalid` (never called), and there is no health probe.

use std::cell::RefCell;

use polygateway_plugin_sdk::{
    ArchiveFetch, BuildError, CONTRACT_VERSION, Capabilities, ChatRequest, ClassifiedError, Delta,
    EmbeddingGuest, EmbeddingRequest, EmbeddingResponse, ErrorClass, Guest, GuestStreamParser,
    Header, HttpRequest, ImageInfo, LayoutDocument, OcrGuest, OcrOperation, PluginInfo, SourceInfo,
    SseEvent, ThinkingStyle, UploadRequest,
};

pub mod answer;
pub mod contents;
pub mod embedding;
pub mod errors;
pub mod json;
pub mod lenient;
pub mod params;
pub mod path;
pub mod request;
pub mod signatures;
pub mod stream;

/// The name `describe` reports (also the `.wasm` file stem).
pub const NAME: &str = "gemini";

/// The `format` of every reasoning signature and encrypted block this provider emits, and
/// the only one it hands back upstream (OpenRouter's name for Gemini's `thoughtSignature`).
pub const REASONING_FORMAT: &str = "google-gemini-v1";

/// What the component declares: chat with streaming, native JSON schema
/// (`responseJsonSchema`), reasoning blocks (thought parts and signatures), embeddings; no
/// prefill continuation, OCR or audio.
pub const CAPABILITIES: Capabilities = Capabilities {
    chat: true,
    streaming: true,
    native_json_schema: true,
    thinking: ThinkingStyle::ReasoningBlocks,
    prefill_continuation: false,
    embedding: true,
    ocr: false,
    audio: false,
};

/// The Gemini API provider (see the crate documentation).
pub struct Gemini;

impl Guest for Gemini {
    type StreamParser = GeminiStreamParser;

    fn describe() -> PluginInfo {
        PluginInfo {
            name: NAME.to_owned(),
            contract_version: CONTRACT_VERSION.to_owned(),
            capabilities: CAPABILITIES,
        }
    }

    fn build_request(req: ChatRequest, source: SourceInfo) -> Result<HttpRequest, BuildError> {
        request::build_request(&req, &source)
    }

    fn parse_response(body: Vec<u8>) -> Result<Vec<Delta>, ClassifiedError> {
        answer::parse_response(&body)
    }

    fn classify_error(status: u16, headers: Vec<Header>, body: Vec<u8>) -> ClassifiedError {
        errors::classify_error(status, &headers, &body)
    }
}

impl EmbeddingGuest for Gemini {
    fn build_embedding_request(
        req: EmbeddingRequest,
        source: SourceInfo,
    ) -> Result<HttpRequest, BuildError> {
        embedding::build_embedding_request(&req, &source)
    }

    fn parse_embedding_response(body: Vec<u8>) -> Result<EmbeddingResponse, ClassifiedError> {
        embedding::parse_embedding_response(&body)
    }
}

impl OcrGuest for Gemini {
    fn build_ocr_request(
        op: OcrOperation,
        _image: ImageInfo,
        _source: SourceInfo,
    ) -> Result<UploadRequest, BuildError> {
        Err(BuildError::Unsupported(format!(
            "provider `{NAME}` does not serve OCR ({op:?})"
        )))
    }

    fn parse_text_response(_body: Vec<u8>) -> Result<String, ClassifiedError> {
        Err(no_ocr())
    }

    fn parse_layout_response(_body: Vec<u8>) -> Result<ArchiveFetch, ClassifiedError> {
        Err(no_ocr())
    }

    fn parse_layout_document(_member: Vec<u8>) -> Result<LayoutDocument, ClassifiedError> {
        Err(no_ocr())
    }

    fn health_request(_source: SourceInfo) -> Option<HttpRequest> {
        None
    }
}

/// The answer of the OCR parse functions, which the host never calls on a provider whose
/// `build-ocr-request` is unsupported.
fn no_ocr() -> ClassifiedError {
    ClassifiedError {
        class: ErrorClass::ResultInvalid,
        message: format!("provider `{NAME}` does not serve OCR"),
        code: None,
        retry_after_ms: None,
    }
}

/// The `stream-parser` resource: a [`stream::StreamParser`] behind a `RefCell` (the WIT
/// methods take `&self`).
#[derive(Debug)]
pub struct GeminiStreamParser {
    state: RefCell<stream::StreamParser>,
}

impl GuestStreamParser for GeminiStreamParser {
    fn new(_source: SourceInfo) -> Self {
        Self {
            state: RefCell::new(stream::StreamParser::new()),
        }
    }

    fn parse(&self, events: Vec<SseEvent>) -> Result<Vec<Delta>, ClassifiedError> {
        match self.state.try_borrow_mut() {
            Ok(mut parser) => parser.parse(&events),
            Err(_) => Err(ClassifiedError {
                class: ErrorClass::Transient,
                message: "stream parser re-entered".to_owned(),
                code: None,
                retry_after_ms: None,
            }),
        }
    }

    fn finish(&self) -> Vec<Delta> {
        self.state
            .try_borrow_mut()
            .map(|mut parser| parser.finish())
            .unwrap_or_default()
    }
}

// The export glue only on the component target: the host also links this crate natively (as
// an rlib, for the bench), where the WIT export symbols would not link into the cdylib.
#[cfg(target_arch = "wasm32")]
polygateway_plugin_sdk::export_provider!(Gemini);

#[cfg(test)]
mod tests;
