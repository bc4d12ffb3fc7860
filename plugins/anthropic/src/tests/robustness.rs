//! Garbage in, typed answers out: no input a client or an upstream controls may panic.

use polygateway_plugin_sdk::{
    ChatRequest, EmbeddingGuest, EmbeddingInputs, EmbeddingRequest, Guest, GuestStreamParser,
    OcrGuest, OcrOperation,
};

use super::{Anthropic, AnthropicStreamParser, ev, source, thinking_source};

/// Pieces of JSON-ish text to combine into garbage.
const PIECES: [&str; 24] = [
    "",
    " ",
    "{",
    "}",
    "[",
    "]",
    "null",
    "\"",
    "\\",
    "\"x\"",
    "1e999",
    "-0",
    "[[[[[[",
    "{\"role\":\"user\"}",
    "{\"role\":\"assistant\",\"tool_calls\":[{}]}",
    "{\"type\":\"content_block_start\",\"index\":-1,\"content_block\":{\"type\":\"tool_use\"}}",
    "{\"type\":\"content_block_delta\",\"index\":18446744073709551616,\"delta\":{}}",
    "{\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":18446744073709551615,\"cache_read_input_tokens\":18446744073709551615}}}",
    "{\"content\":[{\"type\":\"tool_use\",\"input\":\"\\ud800\"}]}",
    "\u{0}",
    "é",
    "🚀",
    "{\"reasoning_details\":[{\"format\":\"anthropic-claude-v1\"}]}",
    "{\"image_url\":{\"url\":\"data:\"}}",
];

fn garbage() -> Vec<String> {
    let mut out = Vec::new();
    for a in PIECES {
        for b in PIECES {
            out.push(format!("{a}{b}"));
            out.push(format!("[{a}{b}]"));
            out.push(format!("[{{\"role\":\"user\",\"content\":[{a}{b}]}}]"));
        }
    }
    out.push("[".repeat(100_000));
    out.push(format!("{{\"content\":{}", "[".repeat(10_000)));
    out
}

#[test]
fn build_request_never_panics() {
    for text in garbage() {
        for src in [source(), thinking_source(Some(2048))] {
            let req = ChatRequest {
                messages_json: text.clone(),
                overlay_json: text.clone(),
                stream: true,
                prefill: Some(text.clone()),
            };
            let _ = <Anthropic as Guest>::build_request(req, src.clone());
            let req = ChatRequest {
                messages_json: "[]".into(),
                overlay_json: text.clone(),
                stream: false,
                prefill: None,
            };
            let _ = <Anthropic as Guest>::build_request(req, src);
        }
    }
}

#[test]
fn parsers_and_classifier_never_panic() {
    for text in garbage() {
        let _ = <Anthropic as Guest>::parse_response(text.clone().into_bytes());
        let _ = <Anthropic as Guest>::classify_error(500, Vec::new(), text.clone().into_bytes());
        let parser = <AnthropicStreamParser as GuestStreamParser>::new(source());
        for name in ["", "error", "message_start", "content_block_delta", "ping"] {
            let _ = parser.parse(vec![ev(name, &text)]);
        }
        let _ = parser.finish();
    }
    let _ = <Anthropic as Guest>::parse_response(vec![0xff; 64]);
    let _ = <Anthropic as Guest>::classify_error(0, Vec::new(), vec![0xff; 64]);
}

#[test]
fn embedding_and_ocr_are_not_served() {
    let req = EmbeddingRequest {
        inputs: EmbeddingInputs::Texts(vec!["x".into()]),
        dimensions: None,
    };
    assert!(<Anthropic as EmbeddingGuest>::build_embedding_request(req, source()).is_err());
    assert!(<Anthropic as EmbeddingGuest>::parse_embedding_response(b"{}".to_vec()).is_err());
    let image = polygateway_plugin_sdk::ImageInfo {
        size_bytes: 1,
        media_type: "image/png".into(),
        file_name: "a.png".into(),
    };
    assert!(
        <Anthropic as OcrGuest>::build_ocr_request(OcrOperation::Text, image, source()).is_err()
    );
    assert!(<Anthropic as OcrGuest>::parse_text_response(Vec::new()).is_err());
    assert!(<Anthropic as OcrGuest>::parse_layout_response(Vec::new()).is_err());
    assert!(<Anthropic as OcrGuest>::parse_layout_document(Vec::new()).is_err());
    assert!(<Anthropic as OcrGuest>::health_request(source()).is_none());
}
