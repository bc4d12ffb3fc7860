//! Replays the golden SSE transcripts (`tests/fixtures/golden/`) through the SDK's stream
//! parser, configured as each case's provider configures it, in every batching.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use polygateway_plugin_sdk::ChatStreamParser;
use polygateway_plugin_sdk::golden::check_transcript;
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/golden")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).unwrap()
}

/// How each provider component configures the SDK parser (mirrors the provider crates,
/// which replay the same files through their real `Provider` impls).
fn split_think(provider: &str) -> bool {
    match provider {
        "openai" | "deepseek" => false,
        "qwen" => true,
        other => panic!("unknown provider {other}"),
    }
}

#[test]
fn golden_cases_replay_exactly_in_any_batching() {
    let cases: Value = serde_json::from_str(&read("cases.json")).unwrap();
    let cases = cases.as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let provider = case["provider"].as_str().unwrap();
        let split = split_think(provider);
        let result = check_transcript(
            || ChatStreamParser::new(split),
            &read(&format!("{name}.sse")),
            &read(&format!("{name}.expected.json")),
        );
        assert_eq!(result, Ok(()), "case {name} ({provider})");
    }
}

#[test]
fn golden_sse_files_are_upstream_framed() {
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("sse") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("data: [DONE]\n\n"), "{path:?}");
        for block in text.trim_end().split("\n\n") {
            assert!(
                block.starts_with("data: ") || block.starts_with(':'),
                "{path:?}: {block}"
            );
        }
    }
}

#[test]
fn a_wrong_expectation_is_caught() {
    let sse = read("openai_usage_chunk.sse");
    let mut expected: Value =
        serde_json::from_str(&read("openai_usage_chunk.expected.json")).unwrap();
    expected.as_array_mut().unwrap().pop();
    let err = check_transcript(|| ChatStreamParser::new(false), &sse, &expected.to_string());
    assert!(err.is_err());
}
