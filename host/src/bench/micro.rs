//! Plugin cost: the same provider logic (the guest SDK's OpenAI-compatible defaults) called
//! as a wasm component through the host runtime, and compiled natively into this binary.
//! Per request (`build-request`, instance checkout included, as the gateway does per attempt),
//! per SSE chunk (`stream-parser.parse` of one event), and per streamed attempt (checkout,
//! `build-request`, the parser, the benchmark upstream's whole answer parsed in one call —
//! it arrives in one read, which the gateway parses at once — `finish`, the parser
//! dropped): the plugin's whole share of one streamed call. The
//! per-event figures, which the components are compared by, are medians of rounds.

use std::time::Instant;

use polygateway_plugin_sdk as sdk;

use crate::config::FirstParty;
use crate::plugin::{
    PluginChatRequest, PluginEngine, PluginLimits, ProviderComponent, SourceInfo, SseEvent,
    StreamParser, builtin_provider_bytes,
};
use crate::transport::SseFramer;

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

/// Nanoseconds per operation. Also the JSON `bench-micro` prints, which `bench --server-bin`
/// reads back from the build under test.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Micro {
    pub request_wasm_ns: f64,
    pub request_native_ns: f64,
    pub chunk_wasm_ns: f64,
    pub chunk_native_ns: f64,
    /// One whole streamed attempt of `attempt_events` SSE events, as wasm and natively.
    pub attempt_wasm_ns: f64,
    pub attempt_native_ns: f64,
    /// SSE events of that attempt (the benchmark upstream's answer: role, chunks, finish,
    /// usage, `[DONE]`).
    pub attempt_events: usize,
    /// The anthropic component (another protocol, its own code): `build-request` and one
    /// `content_block_delta` text event, as wasm and natively.
    pub anthropic_request_wasm_ns: f64,
    pub anthropic_request_native_ns: f64,
    pub anthropic_event_wasm_ns: f64,
    pub anthropic_event_native_ns: f64,
    /// The gemini component: `build-request` and one streamed text chunk.
    pub gemini_request_wasm_ns: f64,
    pub gemini_request_native_ns: f64,
    pub gemini_event_wasm_ns: f64,
    pub gemini_event_native_ns: f64,
    /// One anthropic / gemini event as wasm over one openai chunk as wasm: the median of
    /// [`INTERLEAVED_ROUNDS`] rounds that time the three parsers one right after the other,
    /// so that the machine's drift between separate measurements does not pass for a
    /// difference of the components (issue target ≤ 1.5).
    pub anthropic_vs_openai_event: f64,
    pub gemini_vs_openai_event: f64,
}

/// Iterations of each measurement in a `bench` run.
pub const ITERS: u32 = 20_000;

/// How many interleaved rounds the per-event ratios are the median of.
pub const INTERLEAVED_ROUNDS: u32 = 15;

/// A wasm stream parser with the one event it is timed on.
struct Timed<'a> {
    parser: &'a mut StreamParser,
    event: &'a [SseEvent],
}

/// The median over [`INTERLEAVED_ROUNDS`] rounds of `iters / rounds` parses each of the
/// openai parser and then each other parser: each other parser's time over the openai one's.
///
/// Errors: a parse that fails.
fn interleaved(
    iters: u32,
    openai: &mut Timed<'_>,
    others: &mut [Timed<'_>],
) -> Result<Vec<f64>, String> {
    let per_round = (iters / INTERLEAVED_ROUNDS).max(1);
    let time = |t: &mut Timed<'_>| -> Result<f64, String> {
        let start = Instant::now();
        for _ in 0..per_round {
            let d = t.parser.parse(t.event).map_err(|e| e.to_string())?;
            std::hint::black_box(d.map_err(|e| format!("{e:?}"))?);
        }
        Ok(start.elapsed().as_nanos() as f64)
    };
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); others.len()];
    for _ in 0..INTERLEAVED_ROUNDS {
        let base = time(openai)?.max(1.0);
        for (i, t) in others.iter_mut().enumerate() {
            let r = time(t)? / base;
            if let Some(v) = ratios.get_mut(i) {
                v.push(r);
            }
        }
    }
    Ok(ratios
        .iter()
        .map(|v| super::median(v).unwrap_or(f64::NAN))
        .collect())
}

/// One Anthropic `text_delta` event, as the Messages API streams it (after its block's
/// `content_block_start`).
const ANTHROPIC_START: &str =
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
const ANTHROPIC_EVENT: &str =
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tok1 "}}"#;

const CHUNK: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{"index":0,"delta":{"content":"tok1 "},"finish_reason":null}]}"#;

/// One Gemini `streamGenerateContent` chunk of text.
const GEMINI_EVENT: &str = r#"{"candidates":[{"content":{"parts":[{"text":"tok1 "}],"role":"model"},"index":0}],"modelVersion":"bench-model","responseId":"bench"}"#;

/// How many rounds a per-event figure is the median of: one round disturbed by the machine
/// (an interrupt storm, another process's burst) does not move it.
const ROUNDS: u32 = 5;

/// Nanoseconds per call of `one`: the median of [`ROUNDS`] rounds of `iters / ROUNDS` calls
/// (at least one each).
///
/// Errors: the first error `one` returns.
fn median_ns(iters: u32, mut one: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    let per_round = (iters / ROUNDS).max(1);
    let mut rounds = Vec::with_capacity(ROUNDS as usize);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for _ in 0..per_round {
            one()?;
        }
        rounds.push(t.elapsed().as_nanos() as f64 / f64::from(per_round));
    }
    Ok(super::median(&rounds).unwrap_or(f64::NAN))
}

/// A provider measured against its own native build: which component, and its native
/// `build-request` and stream parser.
struct Protocol<N> {
    component: FirstParty,
    /// The event opening the measured events' context, if the protocol has one.
    start: Option<(&'static str, &'static str)>,
    event: (Option<&'static str>, &'static str),
    native_request:
        fn(sdk::ChatRequest, sdk::SourceInfo) -> Result<sdk::HttpRequest, sdk::BuildError>,
    native_parser: fn(sdk::SourceInfo) -> N,
}

/// Nanoseconds per `build-request` and per text event of a non-OpenAI component, as wasm
/// (through the host runtime, instance checkout included for the request) and natively:
/// `[request wasm, request native, event wasm, event native]`.
fn protocol<N: sdk::GuestStreamParser>(
    engine: &PluginEngine,
    iters: u32,
    p: &Protocol<N>,
    reqs: (
        &PluginChatRequest,
        &SourceInfo,
        &sdk::ChatRequest,
        &sdk::SourceInfo,
    ),
) -> Result<([f64; 4], StreamParser, SseEvent), String> {
    let (preq, info, nreq, ninfo) = reqs;
    let component = ProviderComponent::load(
        engine,
        &format!("builtin:{}", p.component.name()),
        builtin_provider_bytes(p.component),
    )
    .map_err(|e| e.to_string())?;
    let per = |t: Instant| t.elapsed().as_nanos() as f64 / f64::from(iters);
    let t = Instant::now();
    for _ in 0..iters {
        let mut inst = component.instance().map_err(|e| e.to_string())?;
        let r = inst.build_request(preq, info).map_err(|e| e.to_string())?;
        std::hint::black_box(r.map_err(|e| format!("{e:?}"))?);
    }
    let request_wasm = per(t);
    let t = Instant::now();
    for _ in 0..iters {
        let r = (p.native_request)(nreq.clone(), ninfo.clone());
        std::hint::black_box(r.map_err(|e| format!("{e:?}"))?);
    }
    let request_native = per(t);
    let wasm_event = |(event, data): (Option<&str>, &str)| SseEvent {
        event: event.map(str::to_string),
        data: data.into(),
    };
    let native_event = |(event, data): (Option<&str>, &str)| sdk::SseEvent {
        event: event.map(str::to_string),
        data: data.into(),
    };
    let mut parser = component
        .instance()
        .and_then(|i| i.into_stream_parser(info))
        .map_err(|e| e.to_string())?;
    let nparser = (p.native_parser)(ninfo.clone());
    if let Some((event, data)) = p.start {
        let _ = parser
            .parse(&[wasm_event((Some(event), data))])
            .map_err(|e| e.to_string())?;
        let _ = nparser.parse(vec![native_event((Some(event), data))]);
    }
    let events = [wasm_event(p.event)];
    let event_wasm = median_ns(iters, || {
        let d = parser.parse(&events).map_err(|e| e.to_string())?;
        std::hint::black_box(d.map_err(|e| format!("{e:?}"))?);
        Ok(())
    })?;
    let event_native = median_ns(iters, || {
        // The guest gets its events as an owned list too (the ABI copies them in).
        let d = nparser.parse(vec![native_event(p.event)]);
        std::hint::black_box(d.map_err(|e| format!("{e:?}"))?);
        Ok(())
    })?;
    let [event] = events;
    Ok((
        [request_wasm, request_native, event_wasm, event_native],
        parser,
        event,
    ))
}

/// Run `iters` iterations of each measurement; the attempt measurement streams the benchmark
/// upstream's answer of `chunks` chunks.
pub fn run(iters: u32, chunks: usize) -> Result<Micro, String> {
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
        max_tokens: None,
        thinking_budget_tokens: None,
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
        max_tokens: None,
        thinking_budget_tokens: None,
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
    let chunk_wasm_ns = median_ns(iters, || {
        let d = parser.parse(&event).map_err(|e| e.to_string())?;
        std::hint::black_box(d.map_err(|e| format!("{e:?}"))?);
        Ok(())
    })?;
    let nevent = [sdk::SseEvent {
        event: None,
        data: CHUNK.into(),
    }];
    let mut nparser = <NativeOpenAi as sdk::Provider>::stream_parser(&ninfo);
    let chunk_native_ns = median_ns(iters, || {
        let d = nparser.parse(&nevent);
        std::hint::black_box(d.map_err(|e| format!("{e:?}"))?);
        Ok(())
    })?;

    // The upstream's streamed answer, framed as the gateway frames it.
    let mut framer = SseFramer::new();
    let mut framed = Vec::new();
    for frame in super::upstream::stream_frames(chunks) {
        framer.push(&frame, &mut framed);
    }
    let events: Vec<SseEvent> = framed
        .iter()
        .map(|e| SseEvent {
            event: e.event.clone(),
            data: e.data.clone(),
        })
        .collect();
    let nevents: Vec<sdk::SseEvent> = framed
        .into_iter()
        .map(|e| sdk::SseEvent {
            event: e.event,
            data: e.data,
        })
        .collect();
    let attempt_iters = (iters / 20).max(1);
    let per_attempt = |t: Instant| t.elapsed().as_nanos() as f64 / f64::from(attempt_iters);
    let t = Instant::now();
    for _ in 0..attempt_iters {
        let mut inst = component.instance().map_err(|e| e.to_string())?;
        let r = inst
            .build_request(&preq, &info)
            .map_err(|e| e.to_string())?;
        std::hint::black_box(r.map_err(|e| format!("{e:?}"))?);
        let mut parser = inst.into_stream_parser(&info).map_err(|e| e.to_string())?;
        // One parse call for the whole answer, as the gateway makes for a burst that arrived
        // in one read (`transport/h1`: a read joins the chunks already received).
        let d = parser.parse(&events).map_err(|e| e.to_string())?;
        std::hint::black_box(d.map_err(|e| format!("{e:?}"))?);
        std::hint::black_box(parser.finish().map_err(|e| e.to_string())?);
    }
    let attempt_wasm_ns = per_attempt(t);
    let t = Instant::now();
    for _ in 0..attempt_iters {
        let r = <NativeOpenAi as sdk::Provider>::build_request(&nreq, &ninfo);
        std::hint::black_box(r.map_err(|e| format!("{e:?}"))?);
        let mut parser = <NativeOpenAi as sdk::Provider>::stream_parser(&ninfo);
        let d = parser.parse(&nevents);
        std::hint::black_box(d.map_err(|e| format!("{e:?}"))?);
        std::hint::black_box(parser.finish());
    }
    let attempt_native_ns = per_attempt(t);
    let (
        [
            anthropic_request_wasm_ns,
            anthropic_request_native_ns,
            anthropic_event_wasm_ns,
            anthropic_event_native_ns,
        ],
        mut anthropic_parser,
        anthropic_event,
    ) = protocol(
        &engine,
        iters,
        &Protocol {
            component: FirstParty::Anthropic,
            start: Some(("content_block_start", ANTHROPIC_START)),
            event: (Some("content_block_delta"), ANTHROPIC_EVENT),
            native_request: <anthropic::Anthropic as sdk::Guest>::build_request,
            native_parser: <anthropic::AnthropicStreamParser as sdk::GuestStreamParser>::new,
        },
        (&preq, &info, &nreq, &ninfo),
    )?;
    let (
        [
            gemini_request_wasm_ns,
            gemini_request_native_ns,
            gemini_event_wasm_ns,
            gemini_event_native_ns,
        ],
        mut gemini_parser,
        gemini_event,
    ) = protocol(
        &engine,
        iters,
        &Protocol {
            component: FirstParty::Gemini,
            start: None,
            event: (None, GEMINI_EVENT),
            native_request: <gemini::Gemini as sdk::Guest>::build_request,
            native_parser: <gemini::GeminiStreamParser as sdk::GuestStreamParser>::new,
        },
        (&preq, &info, &nreq, &ninfo),
    )?;
    let ratios = interleaved(
        iters,
        &mut Timed {
            parser: &mut parser,
            event: &event,
        },
        &mut [
            Timed {
                parser: &mut anthropic_parser,
                event: std::slice::from_ref(&anthropic_event),
            },
            Timed {
                parser: &mut gemini_parser,
                event: std::slice::from_ref(&gemini_event),
            },
        ],
    )?;
    let [anthropic_vs_openai_event, gemini_vs_openai_event] =
        [0, 1].map(|i| ratios.get(i).copied().unwrap_or(f64::NAN));
    Ok(Micro {
        request_wasm_ns,
        request_native_ns,
        chunk_wasm_ns,
        chunk_native_ns,
        attempt_wasm_ns,
        attempt_native_ns,
        attempt_events: events.len(),
        anthropic_request_wasm_ns,
        anthropic_request_native_ns,
        anthropic_event_wasm_ns,
        anthropic_event_native_ns,
        gemini_request_wasm_ns,
        gemini_request_native_ns,
        gemini_event_wasm_ns,
        gemini_event_native_ns,
        anthropic_vs_openai_event,
        gemini_vs_openai_event,
    })
}

#[cfg(test)]
mod tests {
    /// The microbenchmark runs every component's calls to completion (its numbers are for
    /// `polygateway bench` on a release build; here only that each path answers).
    #[test]
    fn every_measured_call_answers() {
        let m = super::run(3, 4).unwrap();
        assert_eq!(m.attempt_events, 8);
        for ns in [
            m.request_wasm_ns,
            m.chunk_wasm_ns,
            m.anthropic_request_wasm_ns,
            m.anthropic_event_wasm_ns,
            m.gemini_request_wasm_ns,
            m.gemini_event_wasm_ns,
            m.anthropic_vs_openai_event,
            m.gemini_vs_openai_event,
        ] {
            assert!(ns > 0.0 && ns.is_finite(), "{m:?}");
        }
    }
}
