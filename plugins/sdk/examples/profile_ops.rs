//! The SDK's OpenAI-compatible defaults run natively in a loop, for a profiler: where a
//! provider component's instructions go, without the wasm runtime around them (the same
//! code as a component runs ~1.9× these counts; host/src/bench/results/
//! instructions-twelfth-2026-12-07.txt).
//!
//! ```sh
//! # The components' release profile (opt-level "s", LTO), with symbols for the profiler.
//! CARGO_PROFILE_RELEASE_STRIP=false CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
//!   cargo build --release --manifest-path plugins/Cargo.toml -p polygateway-plugin-sdk --example profile_ops
//! valgrind --tool=callgrind plugins/target/release/examples/profile_ops response 4000
//! callgrind_annotate --inclusive=yes callgrind.out.<pid>
//! ```
//!
//! Operations: `request` (`build-request` of one user message), `response`
//! (`parse-response` of the benchmark upstream's non-streamed answer), `chunk`
//! (`stream-parser.parse` of one content chunk). Arguments: the operation, then the count
//! (default 4000).

use polygateway_plugin_sdk::{
    Capabilities, ChatRequest, Provider, SourceInfo, SseEvent, ThinkingStyle,
};

/// The openai component's provider: the SDK's defaults.
struct OpenAi;

impl Provider for OpenAi {
    const NAME: &'static str = "openai";
    const CAPABILITIES: Capabilities = Capabilities {
        streaming: true,
        native_json_schema: true,
        thinking: ThinkingStyle::None,
        prefill_continuation: false,
        chat: true,
        embedding: true,
        ocr: false,
        audio: false,
    };
}

/// One chunk of the benchmark upstream's stream (`host/src/bench/micro.rs`).
const CHUNK: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{"index":0,"delta":{"content":"tok1 "},"finish_reason":null}]}"#;
/// The benchmark upstream's non-streamed answer (`host/src/bench/upstream.rs`).
const ANSWER: &str = r#"{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"Hello from the benchmark upstream.","role":"assistant"}}],"created":1700000000,"id":"chatcmpl-bench","model":"bench-model","object":"chat.completion","usage":{"completion_tokens":6,"prompt_tokens":8,"total_tokens":14}}"#;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let op = args.next().unwrap_or_else(|| "chunk".into());
    let count: usize = match args.next() {
        Some(n) => n.parse().map_err(|e| format!("count `{n}`: {e}"))?,
        None => 4000,
    };
    let source = SourceInfo {
        model: "bench-model".into(),
        base_url: "http://127.0.0.1:1/v1".into(),
        enable_thinking: None,
        extra_body_json: "{}".into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    };
    let request = ChatRequest {
        messages_json: r#"[{"content":"benchmark question","role":"user"}]"#.into(),
        overlay_json: "{}".into(),
        stream: false,
        prefill: None,
    };
    match op.as_str() {
        "request" => {
            for _ in 0..count {
                let r = OpenAi::build_request(&request, &source);
                std::hint::black_box(r.map_err(|e| format!("{e:?}"))?);
            }
        }
        "response" => {
            for _ in 0..count {
                let r = OpenAi::parse_response(ANSWER.as_bytes());
                std::hint::black_box(r.map_err(|e| format!("{e:?}"))?);
            }
        }
        "chunk" => {
            let mut parser = OpenAi::stream_parser(&source);
            for _ in 0..count {
                let event = [SseEvent {
                    event: None,
                    data: CHUNK.into(),
                }];
                let r = parser.parse(&event);
                std::hint::black_box(r.map_err(|e| format!("{e:?}"))?);
            }
        }
        other => {
            return Err(format!(
                "unknown operation `{other}`: request, response or chunk"
            ));
        }
    }
    Ok(())
}
