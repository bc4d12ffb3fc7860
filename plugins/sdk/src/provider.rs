//! The [`Provider`] trait — an OpenAI-compatible provider described by a name, capabilities
//! and a few hooks — and its blanket implementation of the generated WIT exports.

use std::cell::RefCell;
use std::marker::PhantomData;

use crate::request::{
    ChatBody, chat_completions_request, messages_array, prefill_message, push_message,
};
use crate::{
    ArchiveFetch, BuildError, CONTRACT_VERSION, Capabilities, ChatRequest, ChatStreamParser,
    ClassifiedError, Delta, EmbeddingGuest, EmbeddingInputs, EmbeddingRequest, EmbeddingResponse,
    ErrorClass, Guest, GuestStreamParser, Header, HttpRequest, ImageInfo, LayoutDocument, OcrGuest,
    OcrOperation, PluginInfo, SourceInfo, SseEvent, ThinkingStyle, UploadRequest,
    classify_http_error, openai_embedding_request, parse_chat_response, parse_openai_embeddings,
};

/// An OpenAI-compatible provider. Every method has a default that speaks plain OpenAI chat
/// completions; a provider sets [`Provider::NAME`] and [`Provider::CAPABILITIES`] and
/// overrides only what differs. Any `P: Provider` implements the WIT exports ([`Guest`]), so
/// a component is exported with `polygateway_plugin_sdk::export_provider!(P);`.
///
/// All methods are pure functions of their arguments (the contract forbids clocks, I/O and
/// global state).
///
/// # The WIT functions, and what the host does with each answer
///
/// Units: token counts are model tokens, times are milliseconds (`-ms`), bodies are bytes,
/// JSON travels as UTF-8 text. Every call runs under the host's time budget
/// (`PGW_PLUGIN_TIMEOUT_MS`, default 1000 ms) and memory cap (`PGW_PLUGIN_MEMORY_MB`,
/// default 64 MiB per instance). A trap — a panic (`panic = "abort"` makes it one), an
/// exhausted budget, the memory cap — is never an answer: it fails that one call with HTTP
/// 502 `plugin_fault`, is not counted against the source's breaker, and the instance is
/// discarded. Return typed errors instead.
///
/// | WIT function | trait method | answer → what the host does |
/// | --- | --- | --- |
/// | `describe() -> plugin-info` | [`Provider::describe`] | called once at load; a contract version the host does not support refuses the component, naming both versions |
/// | `build-request(req, source)` | [`Provider::build_request`] | `ok(http-request)`: sent, with the credential added per its `auth-scheme` (the plugin never sees the key); `err(invalid-request)`: HTTP 400, no other source tried; `err(unsupported)`: the next source is tried |
/// | `parse-response(body)` | [`Provider::parse_response`] | `ok(deltas)` of a complete 2xx body, ending with `done`; `err(classified-error)`: the attempt failed with that class |
/// | `classify-error(status, headers, body)` | [`Provider::classify_error`] | the class decides: `transient` (back off, retry, maybe fail over; counts for the breaker), `source-dead` (switch source at once, open its breaker), `request-rejected` (HTTP 400, no retry), `result-invalid` (no failover, breaker success); `retry-after-ms` is a hint in ms the host combines with `Retry-After` (taking the larger); `body` is at most 64 KiB and may be empty, HTML or not UTF-8 |
/// | `stream-parser` constructor, `parse(events)`, `finish()` | [`Provider::stream_parser`], [`ChatStreamParser`] | one parser per streamed attempt; `parse` gets batches of SSE events (comments and keep-alives never arrive) and returns their deltas in order, `err` ends the attempt with that class; `finish` flushes what is still held at the end of the stream |
///
/// Check a component against the contract with `polygateway plugin check FILE.wasm` (the
/// conformance kit; its cases are the JSON files under `tests/fixtures/conformance/`).
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::request::ChatBody;
/// use polygateway_plugin_sdk::{
///     BuildError, Capabilities, ChatRequest, Provider, SourceInfo, ThinkingStyle,
/// };
///
/// struct Acme;
///
/// impl Provider for Acme {
///     const NAME: &'static str = "acme";
///     const CAPABILITIES: Capabilities = Capabilities {
///         streaming: true,
///         native_json_schema: false,
///         thinking: ThinkingStyle::None,
///         prefill_continuation: false,
///         chat: true,
///         embedding: false,
///         ocr: false,
///         audio: false,
///     };
///
///     fn add_body_fields(_: &ChatRequest, s: &SourceInfo, body: &mut ChatBody)
///         -> Result<(), BuildError> {
///         if s.enable_thinking == Some(true) {
///             body.insert("reasoning", &serde_json::json!({"effort": "high"}));
///         }
///         Ok(())
///     }
/// }
/// // In the component crate (wasm32 only):
/// // polygateway_plugin_sdk::export_provider!(Acme);
///
/// let info = Acme::describe();
/// assert_eq!((info.name.as_str(), info.contract_version.as_str()), ("acme", "0.2.0"));
/// ```
pub trait Provider: 'static {
    /// Short stable name returned by `describe`, e.g. `openai`.
    ///
    /// # Example
    /// See the trait's example.
    const NAME: &'static str;

    /// What the provider can do; the host routes on these.
    ///
    /// # Example
    /// See the trait's example.
    const CAPABILITIES: Capabilities;

    /// The key set to `true` on the prefill assistant message (DeepSeek `prefix`, Qwen
    /// `partial`); only used when `CAPABILITIES.prefill_continuation`.
    ///
    /// # Example
    /// `const PREFILL_FLAG: Option<&'static str> = Some("prefix");`
    const PREFILL_FLAG: Option<&'static str> = None;

    /// Run content (streamed and not) through a [`crate::ThinkSplitter`], for models that
    /// inline `<think>…</think>` reasoning in their answer.
    ///
    /// # Example
    /// `const SPLIT_INLINE_THINK: bool = true;`
    const SPLIT_INLINE_THINK: bool = false;

    /// Whether the upstream takes token-id arrays as embedding input (OpenAI's
    /// `input: [[15339], [1917, 3]]`); only read when `CAPABILITIES.embedding`. Off by
    /// default: many OpenAI-compatible embedding servers take text only, and a provider that
    /// says nothing gets token batches answered `unsupported`, so the host sends them to a
    /// source that takes them (or answers 400 naming `input`) instead of an upstream that
    /// would refuse them. The `openai` component sets it.
    ///
    /// # Example
    /// `const EMBEDDING_TOKEN_INPUT: bool = true;`
    const EMBEDDING_TOKEN_INPUT: bool = false;

    /// Whether the body keeps the contract's message extensions (`wit/types.wit`):
    /// `reasoning_details` on assistant messages, `cache_control` on content parts and
    /// tools, `is_error` on tool messages. Off by default: OpenAI's API refuses unknown message
    /// properties, and a client of another dialect (Claude Code puts `cache_control` on every
    /// request) must not make every turn a 400. An API that reads them (OpenRouter) sets it.
    /// `reasoning_content` is kept when `CAPABILITIES.thinking` is not `none` (DeepSeek's and
    /// Qwen's own field) and removed otherwise.
    ///
    /// # Example
    /// `const MESSAGE_EXTENSIONS: bool = true;`
    const MESSAGE_EXTENSIONS: bool = false;

    /// `describe`: name, [`CONTRACT_VERSION`] and capabilities.
    ///
    /// # Example
    /// See the trait's example.
    fn describe() -> PluginInfo {
        PluginInfo {
            name: Self::NAME.to_owned(),
            contract_version: CONTRACT_VERSION.to_owned(),
            capabilities: Self::CAPABILITIES,
        }
    }

    /// Hook: add the provider's own body fields (e.g. a thinking switch from
    /// `source.enable_thinking`). Runs after the contract's keys are set and before
    /// `EXTRA_BODY` and the overlay are merged, so both may override what it sets.
    /// The default adds nothing.
    ///
    /// # Example
    /// See the trait's example.
    fn add_body_fields(
        req: &ChatRequest,
        source: &SourceInfo,
        body: &mut ChatBody,
    ) -> Result<(), BuildError> {
        let _ = (req, source, body);
        Ok(())
    }

    /// Hook: the assistant message that carries `req.prefill`. The default is
    /// [`prefill_message`] with [`Provider::PREFILL_FLAG`] when `CAPABILITIES` declares
    /// `prefill_continuation`, else `Err(unsupported)` (the host tries another source).
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::{BuildError, Capabilities, Provider, ThinkingStyle};
    ///
    /// struct NoPrefill;
    /// impl Provider for NoPrefill {
    ///     const NAME: &'static str = "x";
    ///     const CAPABILITIES: Capabilities = Capabilities { streaming: true,
    ///         native_json_schema: true, thinking: ThinkingStyle::None,
    ///         prefill_continuation: false, chat: true, embedding: false, ocr: false,
    ///         audio: false };
    /// }
    /// assert!(matches!(NoPrefill::prefill("abc"), Err(BuildError::Unsupported(_))));
    /// ```
    fn prefill(text: &str) -> Result<Box<serde_json::value::RawValue>, BuildError> {
        if Self::CAPABILITIES.prefill_continuation {
            Ok(prefill_message(text, Self::PREFILL_FLAG))
        } else {
            Err(BuildError::Unsupported(format!(
                "provider `{}` cannot continue a prefilled answer",
                Self::NAME
            )))
        }
    }

    /// `build-request`: `POST /chat/completions` with a JSON body built as: the contract's
    /// keys ([`ChatBody::new`], messages + prefill message), then
    /// [`Provider::add_body_fields`], then `source.extra-body-json`, then `req.overlay-json`
    /// (later wins; protected keys are never overridden, and the overlay's convention keys —
    /// `thinking` — are left to `add_body_fields`, see
    /// [`crate::request::CONVENTION_KEYS`]); the message extensions the provider does not
    /// keep are removed ([`Provider::MESSAGE_EXTENSIONS`]); then `max_tokens` from
    /// `source.max-tokens` when none of those set `max_tokens` or `max_completion_tokens`.
    /// Bearer auth.
    ///
    /// Errors: `req.stream` when `CAPABILITIES.streaming` is false → `unsupported`; bad
    /// `messages-json` or `overlay-json` → `invalid-request` naming the field;
    /// a bad `extra-body-json` (a source misconfiguration the host should have refused) →
    /// `unsupported`, so another source is tried; prefill without support → `unsupported`.
    ///
    /// # Example
    /// ```
    /// # use polygateway_plugin_sdk::{Capabilities, Provider, ThinkingStyle};
    /// # struct Acme;
    /// # impl Provider for Acme { const NAME: &'static str = "acme";
    /// #   const CAPABILITIES: Capabilities = Capabilities { streaming: true,
    /// #     native_json_schema: false, thinking: ThinkingStyle::None,
    /// #     prefill_continuation: false, chat: true, embedding: false, ocr: false,
    /// #     audio: false }; }
    /// use polygateway_plugin_sdk::{BuildError, ChatRequest, SourceInfo};
    ///
    /// let source = SourceInfo { model: "m".into(), base_url: "https://x/v1".into(),
    ///     enable_thinking: None, extra_body_json: "{}".into(),
    ///     max_tokens: None, thinking_budget_tokens: None };
    /// let req = ChatRequest { messages_json: "[]".into(), overlay_json: "7".into(),
    ///     stream: false, prefill: None };
    /// let err = Acme::build_request(&req, &source).unwrap_err();
    /// assert_eq!(err, BuildError::InvalidRequest("overlay-json: expected a JSON object".into()));
    /// ```
    fn build_request(req: &ChatRequest, source: &SourceInfo) -> Result<HttpRequest, BuildError> {
        if req.stream && !Self::CAPABILITIES.streaming {
            return Err(BuildError::Unsupported(format!(
                "provider `{}` cannot stream",
                Self::NAME
            )));
        }
        let invalid = |e: crate::request::JsonFieldError| BuildError::InvalidRequest(e.to_string());
        let keep = crate::request::Extensions {
            gateway: Self::MESSAGE_EXTENSIONS,
            reasoning_content: Self::CAPABILITIES.thinking != ThinkingStyle::None,
        };
        let mut messages = messages_array(&req.messages_json, keep).map_err(invalid)?;
        if let Some(text) = &req.prefill {
            push_message(&mut messages, &Self::prefill(text)?);
        }
        let mut body = ChatBody::with_messages_array(&source.model, messages, req.stream);
        Self::add_body_fields(req, source, &mut body)?;
        body.merge_object("extra-body-json", &source.extra_body_json)
            .map_err(|e| BuildError::Unsupported(e.to_string()))?;
        body.merge_overlay(&req.overlay_json).map_err(invalid)?;
        if !Self::MESSAGE_EXTENSIONS
            && let Some(tools) = body
                .get("tools")
                .and_then(crate::request::tools_without_cache_control)
        {
            body.insert("tools", &tools);
        }
        // `MAX_TOKENS` is the source's default cap: only when neither the client nor
        // `EXTRA_BODY` set one (OpenAI refuses both spellings at once).
        if let Some(cap) = source.max_tokens
            && body.get("max_tokens").is_none()
            && body.get("max_completion_tokens").is_none()
        {
            body.insert("max_tokens", &serde_json::Value::from(cap));
        }
        Ok(chat_completions_request(&body))
    }

    /// `parse-response`: [`parse_chat_response`] with [`Provider::SPLIT_INLINE_THINK`].
    ///
    /// # Example
    /// See [`parse_chat_response`].
    fn parse_response(body: &[u8]) -> Result<Vec<Delta>, ClassifiedError> {
        parse_chat_response(body, Self::SPLIT_INLINE_THINK)
    }

    /// `classify-error`: [`classify_http_error`].
    ///
    /// # Example
    /// See [`classify_http_error`].
    fn classify_error(status: u16, headers: &[Header], body: &[u8]) -> ClassifiedError {
        classify_http_error(status, headers, body)
    }

    /// `build-embedding-request`: when `CAPABILITIES.embedding`,
    /// [`crate::openai_embedding_request`] (OpenAI `POST /embeddings`); else `unsupported`.
    /// A batch of token-id arrays is `unsupported` unless [`Provider::EMBEDDING_TOKEN_INPUT`].
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::{
    ///     BuildError, Capabilities, EmbeddingInputs, EmbeddingRequest, Provider, SourceInfo,
    ///     ThinkingStyle,
    /// };
    ///
    /// struct TextOnly;
    /// impl Provider for TextOnly {
    ///     const NAME: &'static str = "text-only";
    ///     const CAPABILITIES: Capabilities = Capabilities {
    ///         streaming: false, native_json_schema: false, thinking: ThinkingStyle::None,
    ///         prefill_continuation: false, chat: false, embedding: true, ocr: false,
    ///         audio: false,
    ///     };
    /// }
    /// let source = SourceInfo { model: "m".into(), base_url: "http://e".into(),
    ///     enable_thinking: None, extra_body_json: "{}".into(),
    ///     max_tokens: None, thinking_budget_tokens: None };
    /// let tokens = EmbeddingRequest {
    ///     inputs: EmbeddingInputs::Tokens(vec![vec![15339]]), dimensions: None,
    /// };
    /// assert!(matches!(TextOnly::build_embedding_request(&tokens, &source),
    ///     Err(BuildError::Unsupported(_))));
    /// let texts = EmbeddingRequest {
    ///     inputs: EmbeddingInputs::Texts(vec!["hello".into()]), dimensions: None,
    /// };
    /// assert!(TextOnly::build_embedding_request(&texts, &source).is_ok());
    /// ```
    fn build_embedding_request(
        req: &EmbeddingRequest,
        source: &SourceInfo,
    ) -> Result<HttpRequest, BuildError> {
        if !Self::CAPABILITIES.embedding {
            return Err(BuildError::Unsupported(format!(
                "provider `{}` does not serve embeddings",
                Self::NAME
            )));
        }
        if matches!(req.inputs, EmbeddingInputs::Tokens(_)) && !Self::EMBEDDING_TOKEN_INPUT {
            return Err(BuildError::Unsupported(format!(
                "provider `{}` takes text inputs only, not token-id arrays",
                Self::NAME
            )));
        }
        openai_embedding_request(req, source)
    }

    /// `parse-embedding-response`: [`crate::parse_openai_embeddings`].
    ///
    /// # Example
    /// See [`crate::parse_openai_embeddings`].
    fn parse_embedding_response(body: &[u8]) -> Result<EmbeddingResponse, ClassifiedError> {
        parse_openai_embeddings(body)
    }

    /// `build-ocr-request`: the default serves no OCR (`unsupported`); an OCR provider
    /// (declaring `CAPABILITIES.ocr`) overrides this and the three `parse_*` OCR hooks.
    ///
    /// # Example
    /// See the `monkeyocr` component (`plugins/monkeyocr`).
    fn build_ocr_request(
        op: OcrOperation,
        image: &ImageInfo,
        source: &SourceInfo,
    ) -> Result<UploadRequest, BuildError> {
        let _ = (image, source);
        Err(BuildError::Unsupported(format!(
            "provider `{}` does not serve OCR ({op:?})",
            Self::NAME
        )))
    }

    /// `parse-text-response`: the default is `result-invalid` (never called on a provider
    /// whose `build_ocr_request` is unsupported).
    ///
    /// # Example
    /// See the `monkeyocr` component.
    fn parse_text_response(body: &[u8]) -> Result<String, ClassifiedError> {
        let _ = body;
        Err(no_ocr(Self::NAME))
    }

    /// `parse-layout-response`: the default is `result-invalid`.
    ///
    /// # Example
    /// See the `monkeyocr` component.
    fn parse_layout_response(body: &[u8]) -> Result<ArchiveFetch, ClassifiedError> {
        let _ = body;
        Err(no_ocr(Self::NAME))
    }

    /// `parse-layout-document`: the default is `result-invalid`.
    ///
    /// # Example
    /// See the `monkeyocr` component.
    fn parse_layout_document(member: &[u8]) -> Result<LayoutDocument, ClassifiedError> {
        let _ = member;
        Err(no_ocr(Self::NAME))
    }

    /// `health-request`: the OCR health probe; the default has none.
    ///
    /// # Example
    /// See the `monkeyocr` component.
    fn health_request(source: &SourceInfo) -> Option<HttpRequest> {
        let _ = source;
        None
    }

    /// The stream parser for one attempt: a [`ChatStreamParser`] with
    /// [`Provider::SPLIT_INLINE_THINK`].
    ///
    /// # Example
    /// See [`ChatStreamParser`].
    fn stream_parser(source: &SourceInfo) -> ChatStreamParser {
        let _ = source;
        ChatStreamParser::new(Self::SPLIT_INLINE_THINK)
    }
}

impl<P: Provider> Guest for P {
    type StreamParser = ProviderStreamParser<P>;

    fn describe() -> PluginInfo {
        <P as Provider>::describe()
    }

    fn build_request(req: ChatRequest, source: SourceInfo) -> Result<HttpRequest, BuildError> {
        <P as Provider>::build_request(&req, &source)
    }

    fn parse_response(body: Vec<u8>) -> Result<Vec<Delta>, ClassifiedError> {
        <P as Provider>::parse_response(&body)
    }

    fn classify_error(status: u16, headers: Vec<Header>, body: Vec<u8>) -> ClassifiedError {
        <P as Provider>::classify_error(status, &headers, &body)
    }
}

impl<P: Provider> EmbeddingGuest for P {
    fn build_embedding_request(
        req: EmbeddingRequest,
        source: SourceInfo,
    ) -> Result<HttpRequest, BuildError> {
        <P as Provider>::build_embedding_request(&req, &source)
    }

    fn parse_embedding_response(body: Vec<u8>) -> Result<EmbeddingResponse, ClassifiedError> {
        <P as Provider>::parse_embedding_response(&body)
    }
}

impl<P: Provider> OcrGuest for P {
    fn build_ocr_request(
        op: OcrOperation,
        image: ImageInfo,
        source: SourceInfo,
    ) -> Result<UploadRequest, BuildError> {
        <P as Provider>::build_ocr_request(op, &image, &source)
    }

    fn parse_text_response(body: Vec<u8>) -> Result<String, ClassifiedError> {
        <P as Provider>::parse_text_response(&body)
    }

    fn parse_layout_response(body: Vec<u8>) -> Result<ArchiveFetch, ClassifiedError> {
        <P as Provider>::parse_layout_response(&body)
    }

    fn parse_layout_document(member: Vec<u8>) -> Result<LayoutDocument, ClassifiedError> {
        <P as Provider>::parse_layout_document(&member)
    }

    fn health_request(source: SourceInfo) -> Option<HttpRequest> {
        <P as Provider>::health_request(&source)
    }
}

fn no_ocr(name: &str) -> ClassifiedError {
    ClassifiedError {
        class: ErrorClass::ResultInvalid,
        message: format!("provider `{name}` does not serve OCR"),
        code: None,
        retry_after_ms: None,
    }
}

/// The `stream-parser` resource of a [`Provider`]: its [`Provider::stream_parser`] state
/// behind a `RefCell` (the WIT methods take `&self`).
///
/// # Example
/// ```
/// # use polygateway_plugin_sdk::{Capabilities, Provider, ThinkingStyle};
/// # struct Acme;
/// # impl Provider for Acme { const NAME: &'static str = "acme";
/// #   const CAPABILITIES: Capabilities = Capabilities { streaming: true,
/// #     native_json_schema: false, thinking: ThinkingStyle::None,
/// #     prefill_continuation: false, chat: true, embedding: false, ocr: false,
/// #     audio: false }; }
/// use polygateway_plugin_sdk::{Delta, GuestStreamParser, ProviderStreamParser, SourceInfo, SseEvent};
///
/// let source = SourceInfo { model: "m".into(), base_url: "https://x/v1".into(),
///     enable_thinking: None, extra_body_json: "{}".into(),
///     max_tokens: None, thinking_budget_tokens: None };
/// let parser = <ProviderStreamParser<Acme> as GuestStreamParser>::new(source);
/// let out = parser.parse(vec![SseEvent { event: None, data: "[DONE]".into() }]).unwrap();
/// assert_eq!(out, vec![Delta::Done]);
/// ```
#[derive(Debug)]
pub struct ProviderStreamParser<P> {
    state: RefCell<ChatStreamParser>,
    provider: PhantomData<fn() -> P>,
}

impl<P: Provider> GuestStreamParser for ProviderStreamParser<P> {
    fn new(source: SourceInfo) -> Self {
        Self {
            state: RefCell::new(P::stream_parser(&source)),
            provider: PhantomData,
        }
    }

    fn parse(&self, events: Vec<SseEvent>) -> Result<Vec<Delta>, ClassifiedError> {
        self.state
            .try_borrow_mut()
            .map_err(|_| reentered())?
            .parse(&events)
    }

    fn finish(&self) -> Vec<Delta> {
        self.state
            .try_borrow_mut()
            .map(|mut s| s.finish())
            .unwrap_or_default()
    }
}

/// Unreachable in a single-threaded component (the host never re-enters an instance), but
/// an error rather than a panic all the same.
fn reentered() -> ClassifiedError {
    ClassifiedError {
        class: ErrorClass::Transient,
        message: "stream parser re-entered".to_owned(),
        code: None,
        retry_after_ms: None,
    }
}
