//! The provider world's guest calls in the host's (0.2) types, once per contract version:
//! [`ProviderCalls`] is implemented by the 0.2 bindings (straight through) and by the 0.1
//! bindings (arguments and answers converted by `v0_1.rs`). `provider.rs` makes every call
//! through it, so nothing else knows which version a component speaks.

use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::bindings::{v0_1, v0_2};
use super::schedule::GuestFuture;
use super::state::HostState;
use super::v0_1::Migrate;
use super::wire::{
    ArchiveFetch, BuildError, ChatRequest, ClassifiedError, Delta, EmbeddingRequest,
    EmbeddingResponse, Header, HttpRequest, ImageInfo, LayoutDocument, OcrOperation, PluginInfo,
    SourceInfo, SseEvent, UploadRequest,
};

/// One answer of a guest call that returns a `result`.
type Answer<T, E> = Result<T, E>;

/// The calls of the provider world (see `wit/provider.wit` for what each means). Each
/// returns the guest call's future; an `Err` of the future is a trap.
pub(crate) trait ProviderCalls: Send + Sync {
    fn describe<'a>(&'a self, s: &'a mut Store<HostState>) -> GuestFuture<'a, PluginInfo>;
    fn build_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        req: &'a ChatRequest,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Answer<HttpRequest, BuildError>>;
    fn parse_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<Vec<Delta>, ClassifiedError>>;
    fn classify_error<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        status: u16,
        headers: &'a [Header],
        body: &'a [u8],
    ) -> GuestFuture<'a, ClassifiedError>;
    fn build_embedding_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        req: &'a EmbeddingRequest,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Answer<HttpRequest, BuildError>>;
    fn parse_embedding_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<EmbeddingResponse, ClassifiedError>>;
    fn build_ocr_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        op: OcrOperation,
        image: &'a ImageInfo,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Answer<UploadRequest, BuildError>>;
    fn parse_text_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<String, ClassifiedError>>;
    fn parse_layout_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<ArchiveFetch, ClassifiedError>>;
    fn parse_layout_document<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        member: &'a [u8],
    ) -> GuestFuture<'a, Answer<LayoutDocument, ClassifiedError>>;
    fn health_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Option<HttpRequest>>;
    fn stream_parser_new<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, ResourceAny>;
    fn stream_parser_parse<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        parser: ResourceAny,
        events: &'a [SseEvent],
    ) -> GuestFuture<'a, Answer<Vec<Delta>, ClassifiedError>>;
    fn stream_parser_finish<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        parser: ResourceAny,
    ) -> GuestFuture<'a, Vec<Delta>>;
}

impl ProviderCalls for v0_2::provider::Provider {
    fn describe<'a>(&'a self, s: &'a mut Store<HostState>) -> GuestFuture<'a, PluginInfo> {
        Box::pin(self.polygateway_plugin_chat_provider().call_describe(s))
    }
    fn build_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        req: &'a ChatRequest,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Answer<HttpRequest, BuildError>> {
        Box::pin(
            self.polygateway_plugin_chat_provider()
                .call_build_request(s, req, source),
        )
    }
    fn parse_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<Vec<Delta>, ClassifiedError>> {
        Box::pin(
            self.polygateway_plugin_chat_provider()
                .call_parse_response(s, body),
        )
    }
    fn classify_error<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        status: u16,
        headers: &'a [Header],
        body: &'a [u8],
    ) -> GuestFuture<'a, ClassifiedError> {
        Box::pin(
            self.polygateway_plugin_chat_provider()
                .call_classify_error(s, status, headers, body),
        )
    }
    fn build_embedding_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        req: &'a EmbeddingRequest,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Answer<HttpRequest, BuildError>> {
        Box::pin(
            self.polygateway_plugin_embedding_provider()
                .call_build_embedding_request(s, req, source),
        )
    }
    fn parse_embedding_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<EmbeddingResponse, ClassifiedError>> {
        Box::pin(
            self.polygateway_plugin_embedding_provider()
                .call_parse_embedding_response(s, body),
        )
    }
    fn build_ocr_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        op: OcrOperation,
        image: &'a ImageInfo,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Answer<UploadRequest, BuildError>> {
        Box::pin(
            self.polygateway_plugin_ocr_provider()
                .call_build_ocr_request(s, op, image, source),
        )
    }
    fn parse_text_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<String, ClassifiedError>> {
        Box::pin(
            self.polygateway_plugin_ocr_provider()
                .call_parse_text_response(s, body),
        )
    }
    fn parse_layout_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<ArchiveFetch, ClassifiedError>> {
        Box::pin(
            self.polygateway_plugin_ocr_provider()
                .call_parse_layout_response(s, body),
        )
    }
    fn parse_layout_document<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        member: &'a [u8],
    ) -> GuestFuture<'a, Answer<LayoutDocument, ClassifiedError>> {
        Box::pin(
            self.polygateway_plugin_ocr_provider()
                .call_parse_layout_document(s, member),
        )
    }
    fn health_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Option<HttpRequest>> {
        Box::pin(
            self.polygateway_plugin_ocr_provider()
                .call_health_request(s, source),
        )
    }
    fn stream_parser_new<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, ResourceAny> {
        Box::pin(async move {
            self.polygateway_plugin_chat_provider()
                .stream_parser()
                .call_constructor(s, source)
                .await
        })
    }
    fn stream_parser_parse<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        parser: ResourceAny,
        events: &'a [SseEvent],
    ) -> GuestFuture<'a, Answer<Vec<Delta>, ClassifiedError>> {
        Box::pin(async move {
            self.polygateway_plugin_chat_provider()
                .stream_parser()
                .call_parse(s, parser, events)
                .await
        })
    }
    fn stream_parser_finish<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        parser: ResourceAny,
    ) -> GuestFuture<'a, Vec<Delta>> {
        Box::pin(async move {
            self.polygateway_plugin_chat_provider()
                .stream_parser()
                .call_finish(s, parser)
                .await
        })
    }
}

/// 0.1: arguments converted down before the call, answers converted up after it (owned
/// copies: the cost of compatibility, paid only by 0.1 components).
impl ProviderCalls for v0_1::provider::Provider {
    fn describe<'a>(&'a self, s: &'a mut Store<HostState>) -> GuestFuture<'a, PluginInfo> {
        Box::pin(async move {
            let info = self
                .polygateway_plugin_chat_provider()
                .call_describe(s)
                .await?;
            Ok(info.migrate())
        })
    }
    fn build_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        req: &'a ChatRequest,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Answer<HttpRequest, BuildError>> {
        Box::pin(async move {
            let (req, source) = (req.clone().migrate(), source.clone().migrate());
            let out = self
                .polygateway_plugin_chat_provider()
                .call_build_request(s, &req, &source)
                .await?;
            Ok(out.migrate())
        })
    }
    fn parse_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<Vec<Delta>, ClassifiedError>> {
        Box::pin(async move {
            let out = self
                .polygateway_plugin_chat_provider()
                .call_parse_response(s, body)
                .await?;
            Ok(out.migrate())
        })
    }
    fn classify_error<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        status: u16,
        headers: &'a [Header],
        body: &'a [u8],
    ) -> GuestFuture<'a, ClassifiedError> {
        Box::pin(async move {
            let headers: Vec<_> = headers.to_vec().migrate();
            let out = self
                .polygateway_plugin_chat_provider()
                .call_classify_error(s, status, &headers, body)
                .await?;
            Ok(out.migrate())
        })
    }
    fn build_embedding_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        req: &'a EmbeddingRequest,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Answer<HttpRequest, BuildError>> {
        Box::pin(async move {
            let (req, source) = (req.clone().migrate(), source.clone().migrate());
            let out = self
                .polygateway_plugin_embedding_provider()
                .call_build_embedding_request(s, &req, &source)
                .await?;
            Ok(out.migrate())
        })
    }
    fn parse_embedding_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<EmbeddingResponse, ClassifiedError>> {
        Box::pin(async move {
            let out = self
                .polygateway_plugin_embedding_provider()
                .call_parse_embedding_response(s, body)
                .await?;
            Ok(out.migrate())
        })
    }
    fn build_ocr_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        op: OcrOperation,
        image: &'a ImageInfo,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Answer<UploadRequest, BuildError>> {
        Box::pin(async move {
            let (image, source) = (image.clone().migrate(), source.clone().migrate());
            let out = self
                .polygateway_plugin_ocr_provider()
                .call_build_ocr_request(s, op.migrate(), &image, &source)
                .await?;
            Ok(out.migrate())
        })
    }
    fn parse_text_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<String, ClassifiedError>> {
        Box::pin(async move {
            let out = self
                .polygateway_plugin_ocr_provider()
                .call_parse_text_response(s, body)
                .await?;
            Ok(out.migrate())
        })
    }
    fn parse_layout_response<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        body: &'a [u8],
    ) -> GuestFuture<'a, Answer<ArchiveFetch, ClassifiedError>> {
        Box::pin(async move {
            let out = self
                .polygateway_plugin_ocr_provider()
                .call_parse_layout_response(s, body)
                .await?;
            Ok(out.migrate())
        })
    }
    fn parse_layout_document<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        member: &'a [u8],
    ) -> GuestFuture<'a, Answer<LayoutDocument, ClassifiedError>> {
        Box::pin(async move {
            let out = self
                .polygateway_plugin_ocr_provider()
                .call_parse_layout_document(s, member)
                .await?;
            Ok(out.migrate())
        })
    }
    fn health_request<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, Option<HttpRequest>> {
        Box::pin(async move {
            let source = source.clone().migrate();
            let out = self
                .polygateway_plugin_ocr_provider()
                .call_health_request(s, &source)
                .await?;
            Ok(out.migrate())
        })
    }
    fn stream_parser_new<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        source: &'a SourceInfo,
    ) -> GuestFuture<'a, ResourceAny> {
        Box::pin(async move {
            let source = source.clone().migrate();
            self.polygateway_plugin_chat_provider()
                .stream_parser()
                .call_constructor(s, &source)
                .await
        })
    }
    fn stream_parser_parse<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        parser: ResourceAny,
        events: &'a [SseEvent],
    ) -> GuestFuture<'a, Answer<Vec<Delta>, ClassifiedError>> {
        Box::pin(async move {
            let events: Vec<_> = events.to_vec().migrate();
            let out = self
                .polygateway_plugin_chat_provider()
                .stream_parser()
                .call_parse(s, parser, &events)
                .await?;
            Ok(out.migrate())
        })
    }
    fn stream_parser_finish<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        parser: ResourceAny,
    ) -> GuestFuture<'a, Vec<Delta>> {
        Box::pin(async move {
            let out = self
                .polygateway_plugin_chat_provider()
                .stream_parser()
                .call_finish(s, parser)
                .await?;
            Ok(out.migrate())
        })
    }
}
