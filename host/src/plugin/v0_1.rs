//! Contract 0.1 at the boundary: conversions between the frozen 0.1 bindings
//! (`wit-frozen/0.1.0/`) and the current 0.2 types the host works in. A 0.1 component keeps
//! its exact 0.1 ABI; only values cross this module.
//!
//! What differs (everything else is the same record generated twice):
//! - 0.2 → 0.1 drops what 0.1 cannot carry: `source-info.max-tokens` and
//!   `thinking-budget-tokens` (a 0.1 provider never honoured them), and maps the capability
//!   `reasoning-blocks` to `reasoning-field` for a 0.1 strategy (both are a reasoning channel
//!   apart from the content).
//! - 0.1 → 0.2 fills what 0.1 never reports: `usage.cache-write-tokens` is none ("not
//!   reported"), and a 0.1 provider never emits the reasoning signature deltas.

use super::bindings::{v0_1, v0_2};

/// A value of one contract version's type as the other version's type.
pub(crate) trait Migrate<T> {
    fn migrate(self) -> T;
}

macro_rules! same {
    ($($t:ty),*) => {
        $(impl Migrate<$t> for $t {
            fn migrate(self) -> $t {
                self
            }
        })*
    };
}
same!(String, bool, u8, u16, u32, u64, f32, f64);

impl<A: Migrate<B>, B> Migrate<Vec<B>> for Vec<A> {
    fn migrate(self) -> Vec<B> {
        self.into_iter().map(Migrate::migrate).collect()
    }
}

impl<A: Migrate<B>, B> Migrate<Option<B>> for Option<A> {
    fn migrate(self) -> Option<B> {
        self.map(Migrate::migrate)
    }
}

impl<A: Migrate<B>, B, E: Migrate<F>, F> Migrate<Result<B, F>> for Result<A, E> {
    fn migrate(self) -> Result<B, F> {
        self.map(Migrate::migrate).map_err(Migrate::migrate)
    }
}

/// A record whose fields are the same in both versions.
macro_rules! record {
    ($from:ty => $to:ty { $($field:ident),* $(,)? }) => {
        impl Migrate<$to> for $from {
            fn migrate(self) -> $to {
                type To = $to;
                To { $($field: self.$field.migrate()),* }
            }
        }
    };
}

/// A variant or enum whose cases are the same in both versions.
macro_rules! variant {
    ($from:ty => $to:ty { $($case:ident $(($x:ident))?),* $(,)? }) => {
        impl Migrate<$to> for $from {
            fn migrate(self) -> $to {
                type From = $from;
                type To = $to;
                match self {
                    $(From::$case $(($x))? => To::$case $(($x.migrate()))?),*
                }
            }
        }
    };
}

mod provider {
    use super::{Migrate, v0_1, v0_2};
    use v0_1::provider::exports::polygateway::plugin::{
        embedding_provider as emb1, ocr_provider as ocr1,
    };
    use v0_1::provider::polygateway::plugin::types as t1;
    use v0_2::provider::exports::polygateway::plugin::{
        embedding_provider as emb2, ocr_provider as ocr2,
    };
    use v0_2::provider::polygateway::plugin::types as t2;

    // 0.1 → 0.2: what a 0.1 provider answers.
    record!(t1::PluginInfo => t2::PluginInfo { name, contract_version, capabilities });
    record!(t1::Capabilities => t2::Capabilities {
        chat, streaming, native_json_schema, thinking, prefill_continuation, embedding, ocr, audio,
    });
    variant!(t1::ThinkingStyle => t2::ThinkingStyle { None, ReasoningField, InlineTags });
    record!(t1::HttpRequest => t2::HttpRequest { method, path, headers, body, auth });
    record!(t1::Header => t2::Header { name, value });
    variant!(t1::AuthScheme => t2::AuthScheme { None, Bearer, Header(h) });
    variant!(t1::BuildError => t2::BuildError { InvalidRequest(m), Unsupported(m) });
    variant!(t1::FinishReason => t2::FinishReason {
        Stop, Length, ToolCalls, ContentFilter, FunctionCall, Other(s),
    });
    record!(t1::ToolCallDelta => t2::ToolCallDelta { index, id, name, arguments });
    record!(t1::Passthrough => t2::Passthrough { response_json, choice_json, message_json });
    variant!(t1::Delta => t2::Delta {
        Role(r), Content(c), Reasoning(r), Refusal(r), ToolCall(t), Finish(f), Usage(u),
        Model(m), Done, Passthrough(p),
    });
    variant!(t1::ErrorClass => t2::ErrorClass {
        Transient, SourceDead, RequestRejected, ResultInvalid,
    });
    record!(t1::ClassifiedError => t2::ClassifiedError { class, message, code, retry_after_ms });
    record!(emb1::EmbeddingResponse => emb2::EmbeddingResponse { vectors, usage, model });
    record!(emb1::EmbeddingUsage => emb2::EmbeddingUsage { prompt_tokens, total_tokens });
    record!(ocr1::UploadRequest => ocr2::UploadRequest { path, headers, auth, file_field, fields });
    record!(ocr1::ArchiveFetch => ocr2::ArchiveFetch { url, member_suffix });
    record!(ocr1::LayoutDocument => ocr2::LayoutDocument { elements, pages });
    record!(ocr1::LayoutElement => ocr2::LayoutElement { kind, text, bbox, page_index });
    record!(ocr1::Bbox => ocr2::Bbox { x0, y0, x1, y1 });
    record!(ocr1::PageSize => ocr2::PageSize { page_index, width, height });

    impl Migrate<t2::Usage> for t1::Usage {
        fn migrate(self) -> t2::Usage {
            t2::Usage {
                prompt_tokens: self.prompt_tokens,
                completion_tokens: self.completion_tokens,
                cached_prompt_tokens: self.cached_prompt_tokens,
                reasoning_tokens: self.reasoning_tokens,
                cache_write_tokens: None,
            }
        }
    }

    // 0.2 → 0.1: what the host passes a 0.1 provider.
    record!(t2::ChatRequest => t1::ChatRequest { messages_json, overlay_json, stream, prefill });
    record!(t2::Header => t1::Header { name, value });
    record!(t2::SseEvent => t1::SseEvent { event, data });
    record!(emb2::EmbeddingRequest => emb1::EmbeddingRequest { inputs, dimensions });
    variant!(emb2::EmbeddingInputs => emb1::EmbeddingInputs { Texts(t), Tokens(t) });
    variant!(ocr2::OcrOperation => ocr1::OcrOperation { Text, Layout });
    record!(ocr2::ImageInfo => ocr1::ImageInfo { size_bytes, media_type, file_name });

    impl Migrate<t1::SourceInfo> for t2::SourceInfo {
        fn migrate(self) -> t1::SourceInfo {
            t1::SourceInfo {
                model: self.model,
                base_url: self.base_url,
                enable_thinking: self.enable_thinking,
                extra_body_json: self.extra_body_json,
            }
        }
    }
}

mod selector {
    use super::{Migrate, v0_1, v0_2};
    use v0_1::selector::exports::polygateway::plugin::source_selector as s1;
    use v0_2::selector::exports::polygateway::plugin::source_selector as s2;

    record!(s1::SelectorInfo => s2::SelectorInfo { name, contract_version });
    record!(s2::Candidate => s1::Candidate {
        index, name, weight, in_flight, success_ewma, latency_ewma_ms, available,
        cooldown_remaining_ms, previous,
    });
}

mod strategy {
    use super::{Migrate, v0_1, v0_2};
    use v0_1::strategy::exports::polygateway::plugin::structured_strategy as s1;
    use v0_1::strategy::polygateway::plugin::types as t1;
    use v0_2::strategy::exports::polygateway::plugin::structured_strategy as s2;
    use v0_2::strategy::polygateway::plugin::types as t2;

    record!(s1::StrategyInfo => s2::StrategyInfo { name, contract_version });
    record!(s2::JsonTarget => s1::JsonTarget { name, schema_json, strict });
    record!(t2::Capabilities => t1::Capabilities {
        chat, streaming, native_json_schema, thinking, prefill_continuation, embedding, ocr, audio,
    });
    record!(s1::Preparation => s2::Preparation { response_format, instructions });
    variant!(s1::ResponseFormat => s2::ResponseFormat { JsonObject, JsonSchema(s) });
    record!(s1::NativeSchema => s2::NativeSchema { name, schema_json, strict });
    variant!(s1::RepairError => s2::RepairError { Empty, Unrecoverable(m) });

    impl Migrate<t1::ThinkingStyle> for t2::ThinkingStyle {
        fn migrate(self) -> t1::ThinkingStyle {
            match self {
                t2::ThinkingStyle::None => t1::ThinkingStyle::None,
                t2::ThinkingStyle::ReasoningField | t2::ThinkingStyle::ReasoningBlocks => {
                    t1::ThinkingStyle::ReasoningField
                }
                t2::ThinkingStyle::InlineTags => t1::ThinkingStyle::InlineTags,
            }
        }
    }
}
