//! Garbage, wrong types, deep nesting, huge and non-UTF-8 inputs to every function: typed
//! answers, never a panic. Also `describe` and the OCR refusals.

use polygateway_plugin_sdk::{
    BuildError, ChatRequest, EmbeddingGuest, ErrorClass, Guest, ImageInfo, OcrGuest, OcrOperation,
    SseEvent, ThinkingStyle,
};

use super::source;
use crate::Gemini;
use crate::stream::StreamParser;

fn inputs() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        "",
        " ",
        "null",
        "[]",
        "[1, 2, 3]",
        "{}",
        "\"text\"",
        "garbage }{ ][",
        "{\"candidates\": 3}",
        "{\"candidates\": [null]}",
        "{\"candidates\": [{\"content\": {\"parts\": [7, null]}}]}",
        "{\"candidates\": [{\"index\": \"0\", \"content\": {\"parts\": [{\"text\": 5, \"thought\": \"yes\", \"thoughtSignature\": 9}]}, \"finishReason\": 4}]}",
        "{\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": 1, \"id\": [], \"args\": \"x\"}}]}}], \"usageMetadata\": {\"promptTokenCount\": -1, \"candidatesTokenCount\": 1e400}}",
        "{\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": 3}]}}]}",
        "{\"error\": null, \"modelVersion\": 7, \"responseId\": {}, \"promptFeedback\": []}",
        "{\"error\": \"boom\"}",
        "{\"error\": {\"status\": 5, \"details\": {\"a\": 1}, \"message\": []}}",
        "[{\"error\": {\"details\": [null, 1, {\"@type\": 3, \"retryDelay\": 4}]}}]",
        "{\"embeddings\": [{\"values\": [\"x\"]}]}",
        "<html><body>502</body></html>",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    v.push(vec![0xff, 0xfe, 0x00, 0xc3, 0x28]);
    v.push("[".repeat(100_000).into_bytes());
    v.push("{\"a\":".repeat(50_000).into_bytes());
    v.push("{\"error\":".repeat(50_000).into_bytes());
    v.push("garbage!".repeat(1 << 20).into_bytes());
    let mut huge = b"{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"".to_vec();
    huge.extend("lorem ip".repeat(1 << 20).into_bytes());
    huge.extend(b"\"}]},\"finishReason\":\"STOP\"}]}");
    v.push(huge);
    v
}

#[test]
fn garbage_never_panics() {
    for input in inputs() {
        let text = String::from_utf8_lossy(&input).into_owned();
        let _ = <Gemini as Guest>::parse_response(input.clone());
        for status in [0, 200, 302, 400, 429, 500, 999] {
            let e = <Gemini as Guest>::classify_error(status, vec![], input.clone());
            assert!(!e.message.is_empty());
        }
        let _ = <Gemini as EmbeddingGuest>::parse_embedding_response(input.clone());
        for event in [None, Some("error".to_owned()), Some("ping".to_owned())] {
            let mut parser = StreamParser::new();
            let _ = parser.parse(&[SseEvent {
                event,
                data: text.clone(),
            }]);
            let _ = parser.finish();
        }
        for (messages, overlay) in [(text.as_str(), "{}"), ("[]", text.as_str())] {
            let mut s = source();
            s.extra_body_json = text.clone();
            let req = ChatRequest {
                messages_json: messages.to_owned(),
                overlay_json: overlay.to_owned(),
                stream: true,
                prefill: None,
            };
            let _ = <Gemini as Guest>::build_request(req.clone(), source());
            let _ = <Gemini as Guest>::build_request(req, s);
        }
    }
}

#[test]
fn hostile_messages_are_typed_errors() {
    for messages in [
        r#"[{"role": "assistant", "tool_calls": 5}]"#,
        r#"[{"role": "assistant", "tool_calls": [{"function": {"name": ""}}]}]"#,
        r#"[{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 7}}]}]"#,
        r#"[{"role": "assistant", "content": 5}]"#,
        r#"[{"role": "user", "content": [{"type": "image_url"}]}]"#,
        r#"[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:"}}]}]"#,
        r#"[{"role": "tool", "content": "x"}]"#,
        r#"[{"role": "function", "content": "x"}]"#,
        r#"[{"role": 7}]"#,
    ] {
        let req = ChatRequest {
            messages_json: messages.into(),
            overlay_json: "{}".into(),
            stream: false,
            prefill: None,
        };
        assert!(
            matches!(
                <Gemini as Guest>::build_request(req, source()),
                Err(BuildError::InvalidRequest(_))
            ),
            "{messages}"
        );
    }
    // Assistant reasoning_details of every odd shape are ignored, not errors.
    let req = ChatRequest {
        messages_json: r#"[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "reasoning_details": [1, null, {"format": "google-gemini-v1"}, {"type": "reasoning.encrypted", "format": "google-gemini-v1", "data": 5}, {"type": "reasoning.text", "format": "google-gemini-v1", "signature": ""}]}, {"role": "assistant", "content": "c", "reasoning_details": "nope"}]"#.into(),
        overlay_json: "{}".into(),
        stream: false,
        prefill: None,
    };
    assert!(<Gemini as Guest>::build_request(req, source()).is_ok());
}

#[test]
fn describe_and_ocr() {
    let info = <Gemini as Guest>::describe();
    assert_eq!(
        (info.name.as_str(), info.contract_version.as_str()),
        ("gemini", "0.2.0")
    );
    let c = info.capabilities;
    assert!(c.chat && c.streaming && c.native_json_schema && c.embedding);
    assert!(!c.prefill_continuation && !c.ocr && !c.audio);
    assert_eq!(c.thinking, ThinkingStyle::ReasoningBlocks);
    let image = ImageInfo {
        size_bytes: 1,
        media_type: "image/png".into(),
        file_name: "image.png".into(),
    };
    assert!(matches!(
        <Gemini as OcrGuest>::build_ocr_request(OcrOperation::Text, image, source()),
        Err(BuildError::Unsupported(_))
    ));
    assert_eq!(
        <Gemini as OcrGuest>::parse_text_response(b"{}".to_vec())
            .unwrap_err()
            .class,
        ErrorClass::ResultInvalid
    );
    assert!(<Gemini as OcrGuest>::parse_layout_response(vec![]).is_err());
    assert!(<Gemini as OcrGuest>::parse_layout_document(vec![]).is_err());
    assert!(<Gemini as OcrGuest>::health_request(source()).is_none());
}
