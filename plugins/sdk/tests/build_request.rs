//! Behaviour of `Provider::build_request` (the SDK default): body keys, merge order,
//! protected keys, verbatim client JSON, prefill, and field-naming errors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::request::ChatBody;
use polygateway_plugin_sdk::{
    AuthScheme, BuildError, Capabilities, ChatRequest, Header, Provider, SourceInfo, ThinkingStyle,
};
use serde_json::{Value, json};

struct Plain;
impl Provider for Plain {
    const NAME: &'static str = "plain";
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

struct Prefixing;
impl Provider for Prefixing {
    const NAME: &'static str = "prefixing";
    const CAPABILITIES: Capabilities = Capabilities {
        streaming: true,
        native_json_schema: false,
        thinking: ThinkingStyle::ReasoningField,
        prefill_continuation: true,
        chat: true,
        embedding: false,
        ocr: false,
        audio: false,
    };
    const PREFILL_FLAG: Option<&'static str> = Some("prefix");
    fn add_body_fields(
        _: &ChatRequest,
        s: &SourceInfo,
        body: &mut ChatBody,
    ) -> Result<(), BuildError> {
        if let Some(on) = s.enable_thinking {
            body.insert(
                "thinking",
                &json!({"type": if on { "enabled" } else { "disabled" }}),
            );
        }
        Ok(())
    }
}

fn source(extra: &str) -> SourceInfo {
    SourceInfo {
        model: "m-1".into(),
        base_url: "https://api.example.com/v1".into(),
        enable_thinking: None,
        extra_body_json: extra.into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    }
}

fn request(messages: &str, overlay: &str, stream: bool) -> ChatRequest {
    ChatRequest {
        messages_json: messages.into(),
        overlay_json: overlay.into(),
        stream,
        prefill: None,
    }
}

const MSGS: &str = r#"[{"role":"user","content":"hi"}]"#;

fn body_of<P: Provider>(req: &ChatRequest, src: &SourceInfo) -> Value {
    let http = P::build_request(req, src).unwrap();
    serde_json::from_slice(&http.body).unwrap()
}

#[test]
fn http_shape() {
    let http = Plain::build_request(&request(MSGS, "{}", true), &source("{}")).unwrap();
    assert_eq!(http.method, "POST");
    assert_eq!(http.path, "/chat/completions");
    assert_eq!(
        http.headers,
        vec![Header {
            name: "content-type".into(),
            value: "application/json".into()
        }]
    );
    assert_eq!(http.auth, AuthScheme::Bearer);
}

#[test]
fn streaming_and_non_streaming_bodies() {
    assert_eq!(
        body_of::<Plain>(&request(MSGS, "{}", true), &source("{}")),
        json!({"model": "m-1", "messages": [{"role": "user", "content": "hi"}], "stream": true,
               "stream_options": {"include_usage": true}})
    );
    assert_eq!(
        body_of::<Plain>(&request(MSGS, "{}", false), &source("{}")),
        json!({"model": "m-1", "messages": [{"role": "user", "content": "hi"}], "stream": false})
    );
}

#[test]
fn extra_body_then_overlay_later_wins_protected_keys_never() {
    let extra = r#"{"temperature":0.1,"top_k":20,"model":"x","stream":false,"messages":[],"stream_options":null}"#;
    let overlay = r#"{"temperature":0.7,"max_tokens":64,"model":"y","stream_options":{"include_usage":false}}"#;
    let body = body_of::<Plain>(&request(MSGS, overlay, true), &source(extra));
    assert_eq!(
        body,
        json!({"model": "m-1", "messages": [{"role": "user", "content": "hi"}], "stream": true,
               "stream_options": {"include_usage": true},
               "temperature": 0.7, "top_k": 20, "max_tokens": 64})
    );
}

#[test]
fn provider_fields_come_before_extra_body_and_overlay() {
    let mut src = source("{}");
    src.enable_thinking = Some(true);
    let body = body_of::<Prefixing>(&request(MSGS, "{}", false), &src);
    assert_eq!(body["thinking"], json!({"type": "enabled"}));
    let body = body_of::<Prefixing>(
        &request(MSGS, "{}", false),
        &source(r#"{"thinking":{"type":"auto"}}"#),
    );
    assert_eq!(body["thinking"], json!({"type": "auto"}));
}

#[test]
fn client_json_is_passed_verbatim() {
    // Property order of a schema (and number spelling) survive untouched.
    let overlay = r#"{"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}}}}},"temperature":1.0}"#;
    let messages = r#"[{"role":"user","content":"é \u00e9","z":1,"a":2.50}]"#;
    let http = Plain::build_request(&request(messages, overlay, false), &source("{}")).unwrap();
    let text = String::from_utf8(http.body).unwrap();
    assert!(
        text.contains(r#""properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}}"#),
        "{text}"
    );
    assert!(text.contains(r#""temperature":1.0"#), "{text}");
    assert!(text.contains(messages), "{text}");
}

#[test]
fn invalid_client_json_names_the_field() {
    let err = |req: ChatRequest| Plain::build_request(&req, &source("{}")).unwrap_err();
    let BuildError::InvalidRequest(m) = err(request("[{", "{}", false)) else {
        panic!()
    };
    assert!(m.starts_with("messages-json: invalid JSON"), "{m}");
    assert_eq!(
        err(request(r#"{"role":"user"}"#, "{}", false)),
        BuildError::InvalidRequest("messages-json: expected a JSON array of messages".into())
    );
    assert_eq!(
        err(request(MSGS, "[]", false)),
        BuildError::InvalidRequest("overlay-json: expected a JSON object".into())
    );
    let BuildError::InvalidRequest(m) = err(request(MSGS, "{\"a\":", false)) else {
        panic!()
    };
    assert!(m.starts_with("overlay-json: invalid JSON"), "{m}");
    // Empty overlay / extra body are `{}`.
    assert!(Plain::build_request(&request(MSGS, "", false), &source("")).is_ok());
    // A broken EXTRA_BODY is the source's problem: try another source.
    assert_eq!(
        Plain::build_request(&request(MSGS, "{}", false), &source("null")).unwrap_err(),
        BuildError::Unsupported("extra-body-json: expected a JSON object".into())
    );
}

#[test]
fn prefill_appends_a_flagged_assistant_message_or_is_unsupported() {
    let mut req = request(MSGS, "{}", true);
    req.prefill = Some("Once upon a".into());
    let body = body_of::<Prefixing>(&req, &source("{}"));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "hi"},
               {"role": "assistant", "content": "Once upon a", "prefix": true}])
    );
    assert!(matches!(
        Plain::build_request(&req, &source("{}")),
        Err(BuildError::Unsupported(_))
    ));
}

struct NoStream;
impl Provider for NoStream {
    const NAME: &'static str = "nostream";
    const CAPABILITIES: Capabilities = Capabilities {
        streaming: false,
        native_json_schema: false,
        thinking: ThinkingStyle::None,
        prefill_continuation: false,
        chat: true,
        embedding: false,
        ocr: false,
        audio: false,
    };
}

#[test]
fn streaming_without_the_capability_is_unsupported() {
    assert!(matches!(
        NoStream::build_request(&request(MSGS, "{}", true), &source("{}")),
        Err(BuildError::Unsupported(_))
    ));
    assert!(NoStream::build_request(&request(MSGS, "{}", false), &source("{}")).is_ok());
}

#[test]
fn max_tokens_is_the_sources_default_cap_only() {
    let capped = SourceInfo {
        max_tokens: Some(512),
        ..source("{}")
    };
    let req = |overlay| request(MSGS, overlay, false);
    assert_eq!(
        body_of::<Plain>(&req("{}"), &capped),
        json!({"model": "m-1", "messages": [{"role": "user", "content": "hi"}], "stream": false,
               "max_tokens": 512})
    );
    // The client's cap, in either spelling, wins; never both keys at once.
    assert_eq!(
        body_of::<Plain>(&req(r#"{"max_tokens":7}"#), &capped)["max_tokens"],
        json!(7)
    );
    let b = body_of::<Plain>(&req(r#"{"max_completion_tokens":9}"#), &capped);
    assert_eq!(b["max_completion_tokens"], json!(9));
    assert!(b.get("max_tokens").is_none(), "{b}");
    // EXTRA_BODY's cap counts as set too.
    let extra = SourceInfo {
        max_tokens: Some(512),
        ..source(r#"{"max_tokens":64}"#)
    };
    assert_eq!(
        body_of::<Plain>(&req("{}"), &extra)["max_tokens"],
        json!(64)
    );
    // No MAX_TOKENS: nothing added.
    assert!(
        body_of::<Plain>(&req("{}"), &source("{}"))
            .get("max_tokens")
            .is_none()
    );
}
