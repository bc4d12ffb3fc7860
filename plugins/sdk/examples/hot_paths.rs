//! The SDK's hot paths run natively in a loop, for a native profile of what a provider
//! component built on the SDK's OpenAI-compatible defaults does per call: callgrind cannot
//! name the guest's JIT code inside the gateway, but it names this (README, "Benchmark").
//!
//! ```sh
//! # The components' release profile strips symbols; keep them for the profiler.
//! CARGO_PROFILE_RELEASE_STRIP=false CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
//!   cargo build --release --manifest-path plugins/Cargo.toml -p polygateway-plugin-sdk --example hot_paths
//! valgrind --tool=callgrind plugins/target/release/examples/hot_paths build 2000
//! ```
//!
//! Modes: `build` (`build-request` of the benchmark's request), `parse` (`parse-response` of
//! the benchmark upstream's answer), `stream` (a stream parser over a 64-chunk answer, one
//! event per call), `stream-read` (the same answer in one call, as the gateway parses a burst
//! that arrived in one read). The second argument is the number of rounds (default 1000).

use polygateway_plugin_sdk::{
    Capabilities, ChatRequest, ChatStreamParser, Provider, SourceInfo, SseEvent, ThinkingStyle,
};

/// The `openai` component's whole source: the SDK's defaults.
struct OpenAi;

impl Provider for OpenAi {
    const NAME: &'static str = "openai";
    const CAPABILITIES: Capabilities = Capabilities {
        streaming: true,
        native_json_schema: true,
        thinking: ThinkingStyle::None,
        prefill_continuation: false,
        chat: true,
        embedding: false,
        ocr: false,
        audio: false,
    };
}

/// The benchmark upstream's non-streamed answer.
const ANSWER: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the benchmark upstream."},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":6,"total_tokens":14}}"#;

/// One chunk of the benchmark upstream's streamed answer.
fn chunk(delta: &str, finish: &str) -> String {
    format!(
        r#"{{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
    )
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "build".to_owned());
    let rounds: usize = match args.next() {
        Some(n) => n.parse().map_err(|e| format!("rounds `{n}`: {e}"))?,
        None => 1000,
    };
    let source = SourceInfo {
        model: "bench-model".into(),
        base_url: "http://127.0.0.1:9/v1".into(),
        enable_thinking: None,
        extra_body_json: "{}".into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    };
    let request = ChatRequest {
        messages_json: r#"[{"role":"user","content":"benchmark question"}]"#.into(),
        overlay_json: "{}".into(),
        stream: false,
        prefill: None,
    };
    let mut events = vec![chunk(r#"{"role":"assistant","content":""}"#, "null")];
    events.extend((0..64).map(|i| chunk(&format!(r#"{{"content":"tok{i} "}}"#), "null")));
    events.push(chunk("{}", r#""stop""#));
    events.push(r#"{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":64,"total_tokens":72}}"#.to_owned());
    events.push("[DONE]".to_owned());
    let events: Vec<SseEvent> = events
        .into_iter()
        .map(|data| SseEvent { event: None, data })
        .collect();
    for _ in 0..rounds {
        match mode.as_str() {
            "build" => {
                let http =
                    OpenAi::build_request(&request, &source).map_err(|e| format!("{e:?}"))?;
                std::hint::black_box(http);
            }
            "parse" => {
                let deltas =
                    OpenAi::parse_response(ANSWER.as_bytes()).map_err(|e| format!("{e:?}"))?;
                std::hint::black_box(deltas);
            }
            "stream" => {
                let mut parser = ChatStreamParser::new(false);
                for event in &events {
                    let deltas = parser
                        .parse(std::slice::from_ref(event))
                        .map_err(|e| format!("{e:?}"))?;
                    std::hint::black_box(deltas);
                }
                std::hint::black_box(parser.finish());
            }
            "stream-read" => {
                let mut parser = ChatStreamParser::new(false);
                let deltas = parser.parse(&events).map_err(|e| format!("{e:?}"))?;
                std::hint::black_box(deltas);
                std::hint::black_box(parser.finish());
            }
            other => {
                return Err(format!(
                    "mode `{other}`: expected build, parse, stream or stream-read"
                ));
            }
        }
    }
    Ok(())
}
