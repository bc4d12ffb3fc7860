//! The Acme provider component (`acme.wasm`): an out-of-tree example of a PolyGateway
//! provider plugin, built against the guest SDK only.
//!
//! "Acme" is a fictional chat API that speaks the OpenAI chat-completions protocol with two
//! differences, which are all this crate has to say:
//!
//! - the API key travels in an `x-acme-key` header, not `Authorization: Bearer …`;
//! - every request body carries `"acme_trace": true`.
//!
//! Everything else — the body's contract keys, `EXTRA_BODY` and client overlays, SSE and
//! response parsing, error classification — is the SDK's OpenAI-compatible default.

use polygateway_plugin_sdk::request::{ChatBody, chat_completions_request, parse_messages};
use polygateway_plugin_sdk::{
    AuthScheme, BuildError, Capabilities, ChatRequest, HttpRequest, Provider, SourceInfo,
    ThinkingStyle,
};
use serde_json::Value;

/// The header that carries Acme's API key (the whole value is the key).
pub const KEY_HEADER: &str = "x-acme-key";

/// The body flag Acme requires on every request.
pub const TRACE_FLAG: &str = "acme_trace";

/// The Acme chat API. `ENABLE_THINKING` is ignored (Acme has no reasoning channel); a
/// prefill makes `build-request` fail with `unsupported`, so the host picks another source.
pub struct Acme;

impl Provider for Acme {
    const NAME: &'static str = "acme";
    const CAPABILITIES: Capabilities = Capabilities {
        streaming: true,
        native_json_schema: false,
        thinking: ThinkingStyle::None,
        prefill_continuation: false,
        chat: true,
        embedding: false,
        ocr: false,
        audio: false,
    };

    /// The SDK's chat-completions request, with `"acme_trace": true` forced into the body
    /// (after `EXTRA_BODY` and the client's overlay, so neither can turn it off) and the
    /// credential in `x-acme-key`. The host attaches the key; the plugin never sees it.
    fn build_request(req: &ChatRequest, source: &SourceInfo) -> Result<HttpRequest, BuildError> {
        if req.prefill.is_some() {
            return Err(BuildError::Unsupported(
                "provider `acme` cannot continue a prefilled answer".to_owned(),
            ));
        }
        let invalid = |e: polygateway_plugin_sdk::request::JsonFieldError| {
            BuildError::InvalidRequest(e.to_string())
        };
        let messages = parse_messages(&req.messages_json).map_err(invalid)?;
        let mut body = ChatBody::new(&source.model, messages, req.stream);
        // A bad EXTRA_BODY is a source misconfiguration: `unsupported` lets the host try
        // another source; a bad client overlay is the client's fault: `invalid-request`.
        body.merge_object("extra-body-json", &source.extra_body_json)
            .map_err(|e| BuildError::Unsupported(e.to_string()))?;
        body.merge_object("overlay-json", &req.overlay_json)
            .map_err(invalid)?;
        body.insert(TRACE_FLAG, &Value::Bool(true));
        let mut http = chat_completions_request(&body);
        http.auth = AuthScheme::Header(KEY_HEADER.to_owned());
        Ok(http)
    }
}

polygateway_plugin_sdk::export_provider!(Acme);

#[cfg(test)]
mod tests {
    //! Native tests (`cargo test`): what the host will see from each export.
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use polygateway_plugin_sdk::{
        AuthScheme, BuildError, ChatRequest, Delta, ErrorClass, Guest, SourceInfo,
    };
    use serde_json::{Value, json};

    use super::Acme;

    fn source(extra_body_json: &str) -> SourceInfo {
        SourceInfo {
            model: "acme-1".into(),
            base_url: "https://api.acme.example/v1".into(),
            enable_thinking: Some(true),
            extra_body_json: extra_body_json.into(),
        }
    }

    fn request(stream: bool, overlay_json: &str) -> ChatRequest {
        ChatRequest {
            messages_json: r#"[{"role":"user","content":"hi"}]"#.into(),
            overlay_json: overlay_json.into(),
            stream,
            prefill: None,
        }
    }

    #[test]
    fn describes_itself() {
        let info = <Acme as Guest>::describe();
        assert_eq!(info.name, "acme");
        assert_eq!(
            info.contract_version,
            polygateway_plugin_sdk::CONTRACT_VERSION
        );
        assert!(info.capabilities.streaming);
        assert!(!info.capabilities.prefill_continuation);
    }

    #[test]
    fn request_uses_x_acme_key_and_forces_the_trace_flag() {
        let http = <Acme as Guest>::build_request(
            request(true, r#"{"temperature":0,"acme_trace":false}"#),
            source(r#"{"acme_trace":false,"top_k":5}"#),
        )
        .unwrap();
        assert_eq!(
            (http.method.as_str(), http.path.as_str()),
            ("POST", "/chat/completions")
        );
        assert_eq!(http.auth, AuthScheme::Header("x-acme-key".into()));
        let body: Value = serde_json::from_slice(&http.body).unwrap();
        assert_eq!(
            body,
            json!({"model": "acme-1", "messages": [{"role": "user", "content": "hi"}],
                   "stream": true, "stream_options": {"include_usage": true},
                   "temperature": 0, "top_k": 5, "acme_trace": true})
        );
    }

    #[test]
    fn build_errors_say_who_is_at_fault() {
        let bad_overlay = <Acme as Guest>::build_request(request(false, "[1]"), source("{}"));
        assert_eq!(
            bad_overlay.unwrap_err(),
            BuildError::InvalidRequest("overlay-json: expected a JSON object".into())
        );
        let bad_extra = <Acme as Guest>::build_request(request(false, "{}"), source("7"));
        assert!(matches!(bad_extra, Err(BuildError::Unsupported(_))));
        let mut prefill = request(true, "{}");
        prefill.prefill = Some("Once".into());
        let refused = <Acme as Guest>::build_request(prefill, source("{}"));
        assert!(matches!(refused, Err(BuildError::Unsupported(_))));
    }

    #[test]
    fn responses_and_errors_use_the_openai_defaults() {
        let body = br#"{"model":"acme-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}"#;
        let deltas = <Acme as Guest>::parse_response(body.to_vec()).unwrap();
        assert!(deltas.contains(&Delta::Content("Hi".into())));
        assert_eq!(deltas.last(), Some(&Delta::Done));
        let err = <Acme as Guest>::classify_error(401, Vec::new(), b"{}".to_vec());
        assert_eq!(err.class, ErrorClass::SourceDead);
    }
}
