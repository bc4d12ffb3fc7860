//! The Anthropic provider component (`anthropic.wasm`): Claude through the Messages API
//! (`POST /v1/messages`, `anthropic-version: 2023-06-01`, the key in `x-api-key`), chat and
//! streaming, reasoning as signed `thinking` blocks handed back on later turns
//! (`reasoning-blocks`), prefill continuation, no embeddings and no OCR.
//!
//! The SDK's [`polygateway_plugin_sdk::Provider`] trait speaks OpenAI chat completions, so
//! this component implements the generated WIT exports directly:
//! [`request`] builds the body, [`response`] and [`stream`] read answers, [`errors`]
//! classifies failures.

use std::cell::RefCell;

use polygateway_plugin_sdk::{
    ArchiveFetch, BuildError, CONTRACT_VERSION, Capabilities, ChatRequest, ClassifiedError, Delta,
    EmbeddingGuest, EmbeddingRequest, EmbeddingResponse, ErrorClass, Guest, GuestStreamParser,
    Header, HttpRequest, ImageInfo, LayoutDocument, OcrGuest, OcrOperation, PluginInfo, SourceInfo,
    SseEvent, ThinkingStyle, UploadRequest,
};

mod assistant;
mod blocks;
mod content;
pub mod errors;
mod fields;
mod json;
mod messages;
mod overlay;
pub mod request;
pub mod response;
pub mod stream;
mod tools;

pub use assistant::REASONING_FORMAT;
pub use stream::MessageStream;

/// The provider's `describe` name.
pub const NAME: &str = "anthropic";

/// What the component serves: chat and streaming, reasoning blocks, prefill continuation
/// (Anthropic continues a final assistant message; refused while thinking is on). No native
/// JSON schema, embeddings, OCR or audio.
pub const CAPABILITIES: Capabilities = Capabilities {
    chat: true,
    streaming: true,
    native_json_schema: false,
    thinking: ThinkingStyle::ReasoningBlocks,
    prefill_continuation: true,
    embedding: false,
    ocr: false,
    audio: false,
};

/// Claude through Anthropic's Messages API (`BASE_URL` `https://api.anthropic.com`).
pub struct Anthropic;

impl Guest for Anthropic {
    type StreamParser = AnthropicStreamParser;

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
        response::parse_response(&body)
    }

    fn classify_error(status: u16, headers: Vec<Header>, body: Vec<u8>) -> ClassifiedError {
        errors::classify_http(status, &headers, &body)
    }
}

/// The `stream-parser` resource: a [`MessageStream`] behind a `RefCell` (the WIT methods
/// take `&self`).
#[derive(Debug)]
pub struct AnthropicStreamParser {
    state: RefCell<MessageStream>,
}

impl GuestStreamParser for AnthropicStreamParser {
    fn new(source: SourceInfo) -> Self {
        // The stream reads the same for every source.
        let _ = source;
        Self {
            state: RefCell::new(MessageStream::new()),
        }
    }

    fn parse(&self, events: Vec<SseEvent>) -> Result<Vec<Delta>, ClassifiedError> {
        self.state
            .try_borrow_mut()
            .map_err(|_| not_served("stream parser re-entered", ErrorClass::Transient))?
            .parse(&events)
    }

    fn finish(&self) -> Vec<Delta> {
        self.state
            .try_borrow_mut()
            .map(|mut s| s.finish())
            .unwrap_or_default()
    }
}

impl EmbeddingGuest for Anthropic {
    fn build_embedding_request(
        req: EmbeddingRequest,
        source: SourceInfo,
    ) -> Result<HttpRequest, BuildError> {
        let _ = (req, source);
        Err(BuildError::Unsupported(
            "provider `anthropic` does not serve embeddings".to_owned(),
        ))
    }

    fn parse_embedding_response(body: Vec<u8>) -> Result<EmbeddingResponse, ClassifiedError> {
        let _ = body;
        Err(not_served(
            "provider `anthropic` does not serve embeddings",
            ErrorClass::ResultInvalid,
        ))
    }
}

impl OcrGuest for Anthropic {
    fn build_ocr_request(
        op: OcrOperation,
        image: ImageInfo,
        source: SourceInfo,
    ) -> Result<UploadRequest, BuildError> {
        let _ = (image, source);
        Err(BuildError::Unsupported(format!(
            "provider `anthropic` does not serve OCR ({op:?})"
        )))
    }

    fn parse_text_response(body: Vec<u8>) -> Result<String, ClassifiedError> {
        let _ = body;
        Err(no_ocr())
    }

    fn parse_layout_response(body: Vec<u8>) -> Result<ArchiveFetch, ClassifiedError> {
        let _ = body;
        Err(no_ocr())
    }

    fn parse_layout_document(member: Vec<u8>) -> Result<LayoutDocument, ClassifiedError> {
        let _ = member;
        Err(no_ocr())
    }

    fn health_request(source: SourceInfo) -> Option<HttpRequest> {
        let _ = source;
        None
    }
}

fn no_ocr() -> ClassifiedError {
    not_served(
        "provider `anthropic` does not serve OCR",
        ErrorClass::ResultInvalid,
    )
}

fn not_served(message: &str, class: ErrorClass) -> ClassifiedError {
    ClassifiedError {
        class,
        message: message.to_owned(),
        code: None,
        retry_after_ms: None,
    }
}

// The export glue only on the component target: the host also links this crate natively (as
// an rlib, for the bench), where the WIT export symbols would not link into the cdylib.
#[cfg(target_arch = "wasm32")]
polygateway_plugin_sdk::export_provider!(Anthropic);

#[cfg(test)]
mod tests;
