//! Plugin cost: the same provider logic (the guest SDK's OpenAI-compatible defaults) called
//! as a wasm component through the host runtime, and compiled natively into this binary.
//! Per request (`build-request`, instance checkout included, as the gateway does per attempt)
//! and per SSE chunk (`stream-parser.parse` of one event).

use std::time::Instant;

use polygateway_plugin_sdk as sdk;

use crate::config::FirstParty;
use crate::plugin::{
    PluginChatRequest, PluginEngine, PluginLimits, ProviderComponent, SourceInfo, SseEvent,
    builtin_provider_bytes,
};

/// The openai component's logic, natively (its whole source is this impl).
struct NativeOpenAi;

impl sdk::Provider for NativeOpenAi {
    const NAME: &'static str = "openai";
    const CAPABILITIES: sdk::Capabilities = sdk::Capabilities {
        streaming: true,
        native_json_schema: true,
        thinking: sdk::ThinkingStyle::None,
        prefill_continuation: false,
        chat: true,
        embedding: false,
        ocr: false,
        audio: false,
    };
}

/// Nanoseconds per operation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Micro {
    pub request_wasm_ns: f64,
    pub request_native_ns: f64,
    pub chunk_wasm_ns: f64,
    pub chunk_native_ns: f64,
}

const CHUNK: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{"index":0,"delta":{"content":"tok1 "},"finish_reason":null}]}"#;

/// Run `iters` iterations of each measurement.
pub fn run(iters: u32) -> Result<Micro, String> {
    let engine = PluginEngine::new(PluginLimits::default(), None).map_err(|e| e.to_string())?;
    let component = ProviderComponent::load(
        &engine,
        "builtin:openai",
        builtin_provider_bytes(FirstParty::OpenAi),
    )
    .map_err(|e| e.to_string())?;
    let messages = r#"[{"role":"user","content":"benchmark question"}]"#;
    let preq = PluginChatRequest {
        messages_json: messages.into(),
        overlay_json: r#"{"temperature":0.2}"#.into(),
        stream: true,
        prefill: None,
    };
    let info = SourceInfo {
        model: "bench-model".into(),
        base_url: "http://127.0.0.1:1/v1".into(),
        enable_thinking: None,
        extra_body_json: "{}".into(),
    };
    let nreq = sdk::ChatRequest {
        messages_json: messages.into(),
        overlay_json: r#"{"temperature":0.2}"#.into(),
        stream: true,
        prefill: None,
    };
    let ninfo = sdk::SourceInfo {
        model: "bench-model".into(),
        base_url: "http://127.0.0.1:1/v1".into(),
        enable_thinking: None,
        extra_body_json: "{}".into(),
    };
    let per = |t: Instant| t.elapsed().as_nanos() as f64 / f64::from(iters);

    let t = Instant::now();
    for _ in 0..iters {
        let mut inst = component.instance().map_err(|e| e.to_string())?;
        let r = inst
            .build_request(&preq, &info)
            .map_err(|e| e.to_string())?;
        std::hint::black_box(r.map_err(|e| format!("{e:?}"))?);
    }
    let request_wasm_ns = per(t);
    let t = Instant::now();
    for _ in 0..iters {
        let r = <NativeOpenAi as sdk::Provider>::build_request(&nreq, &ninfo);
        std::hint::black_box(r.map_err(|e| format!("{e:?}"))?);
    }
    let request_native_ns = per(t);

    let event = [SseEvent {
        event: None,
        data: CHUNK.into(),
    }];
    let mut parser = component
        .instance()
        .and_then(|i| i.into_stream_parser(&info))
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    for _ in 0..iters {
        let d = parser.parse(&event).map_err(|e| e.to_string())?;
        std::hint::black_box(d.map_err(|e| format!("{e:?}"))?);
    }
    let chunk_wasm_ns = per(t);
    let nevent = [sdk::SseEvent {
        event: None,
        data: CHUNK.into(),
    }];
    let mut nparser = <NativeOpenAi as sdk::Provider>::stream_parser(&ninfo);
    let t = Instant::now();
    for _ in 0..iters {
        let d = nparser.parse(&nevent);
        std::hint::black_box(d.map_err(|e| format!("{e:?}"))?);
    }
    let chunk_native_ns = per(t);
    Ok(Micro {
        request_wasm_ns,
        request_native_ns,
        chunk_wasm_ns,
        chunk_native_ns,
    })
}
