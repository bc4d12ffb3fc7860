//! The chat request as the gateway takes it: built by the embedded API or validated from an
//! OpenAI `/v1/chat/completions` body, with every field error naming its field.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::GatewayError;

/// One chat call.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// Scope alias (the OpenAI `model` field).
    pub model: String,
    /// The OpenAI `messages` array.
    pub messages: Vec<Value>,
    /// Sampling and tool parameters passed through to the provider (temperature, top_p,
    /// seed, max_tokens, stop, tools, tool_choice, response_format, …).
    pub overlay: Map<String, Value>,
    /// Stream from the upstream (and to the proxy's client).
    pub stream: bool,
    /// The client asked for `stream_options.include_usage`.
    pub include_usage: bool,
    /// `x-pgw-session-id`.
    pub session_id: Option<String>,
    /// `x-pgw-parent-call-id`.
    pub parent_call_id: Option<String>,
    /// Per-call deadline (`x-pgw-call-deadline-s`), overriding the scope's.
    pub call_deadline: Option<Duration>,
    /// Caller dimensions (`x-pgw-tenant-id`, `x-pgw-meta`), validated by
    /// [`validate_tenant_id`] and [`validate_meta`].
    pub tenant_id: Option<String>,
    pub meta: Option<Map<String, Value>>,
    /// Cache isolation and control (`x-pgw-cache-namespace`, `x-pgw-cache-salt`,
    /// `x-pgw-cache`), used by the response cache.
    pub cache_namespace: Option<String>,
    pub cache_salt: Option<String>,
    pub cache_mode: CacheMode,
    /// `x-pgw-structured-strategy`.
    pub structured_strategy: Option<String>,
    /// The dialect the client spoke (the ledger's `ingress` column). Nothing else below the
    /// proxy reads it: the call, its cache key and its answer are the same whatever it is.
    pub ingress: Ingress,
    /// The virtual key the call was made with (docs/keys.md), set by the proxy from the
    /// authenticated key and never from the body or a header: its scopes, limits and budgets
    /// apply, and its team partitions the cache and names the ledger's `key_id` / `team_id`.
    /// `None` for a static key or an embedded call.
    pub principal: Option<std::sync::Arc<crate::keys::Principal>>,
    /// The caller's span, the parent of the call's span when traces are on: the proxy sets
    /// it from the W3C `traceparent` header; an embedding application may set it (else the
    /// current OpenTelemetry context is used; docs/tracing.md#propagation).
    pub trace_parent: Option<crate::telemetry::otel::TraceParent>,
}

/// The client dialect a call arrived in (the `ingress` column of `llm_calls`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ingress {
    /// The embedded Rust API (`Gateway::chat`, `Gateway::chat_stream`).
    #[default]
    Embedded,
    /// `POST /v1/chat/completions` (OpenAI Chat Completions).
    ChatCompletions,
    /// `POST /v1/messages` (Anthropic Messages).
    Messages,
    /// `POST /v1/responses` (OpenAI Responses).
    Responses,
}

impl Ingress {
    /// The stored value: `embedded`, `chat_completions`, `messages` or `responses`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ingress::Embedded => "embedded",
            Ingress::ChatCompletions => "chat_completions",
            Ingress::Messages => "messages",
            Ingress::Responses => "responses",
        }
    }
}

/// Per-call cache control (`x-pgw-cache`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CacheMode {
    /// Read and write the cache.
    #[default]
    Default,
    /// Neither read nor write.
    Bypass,
    /// Read, but do not store this answer.
    NoStore,
}

impl CacheMode {
    /// Parse the `x-pgw-cache` header value.
    pub fn parse(v: &str) -> Result<Self, GatewayError> {
        match v {
            "bypass" => Ok(CacheMode::Bypass),
            "no-store" => Ok(CacheMode::NoStore),
            _ => Err(GatewayError::invalid(
                "x-pgw-cache",
                format!("header `x-pgw-cache` must be `bypass` or `no-store`, got `{v}`"),
            )),
        }
    }
}

/// Tenant id rules (docs/requests.md#tenant-id): 1–128 characters, no leading or trailing
/// whitespace (" t1" and "t1" would be two tenants).
pub fn validate_tenant_id(param: &str, v: &str) -> Result<(), GatewayError> {
    if v.is_empty() || v.chars().count() > 128 {
        return Err(GatewayError::invalid(
            param,
            format!("`{param}` must be 1–128 characters"),
        ));
    }
    if v.trim() != v {
        return Err(GatewayError::invalid(
            param,
            format!("`{param}` must not start or end with whitespace"),
        ));
    }
    Ok(())
}

/// Meta rules (docs/requests.md#meta): at most 16 keys matching `[a-z0-9_.]{1,64}`, none starting
/// with `pg_`; values are strings (≤ 256 characters), integers, finite numbers or booleans.
pub fn validate_meta(param: &str, meta: &Map<String, Value>) -> Result<(), GatewayError> {
    if meta.len() > 16 {
        return Err(GatewayError::invalid(
            param,
            format!("`{param}` has more than 16 keys"),
        ));
    }
    for (k, v) in meta {
        let key_ok = !k.is_empty()
            && k.len() <= 64
            && k.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.');
        if !key_ok {
            return Err(GatewayError::invalid(
                param,
                format!("`{param}` key `{k}` must match [a-z0-9_.]{{1,64}}"),
            ));
        }
        if k.starts_with("pg_") {
            return Err(GatewayError::invalid(
                param,
                format!("`{param}` key `{k}`: the `pg_` prefix is reserved"),
            ));
        }
        let value_ok = match v {
            Value::String(s) => s.chars().count() <= 256,
            Value::Bool(_) => true,
            Value::Number(n) => n.as_f64().is_some_and(f64::is_finite),
            _ => false,
        };
        if !value_ok {
            return Err(GatewayError::invalid(
                param,
                format!(
                    "`{param}` value of `{k}` must be a string (≤ 256 characters), a number or a boolean"
                ),
            ));
        }
    }
    Ok(())
}

impl ChatRequest {
    /// A streamed request for `model` (a scope alias) with these messages.
    pub fn new(model: impl Into<String>, messages: Vec<Value>) -> Self {
        Self {
            model: model.into(),
            messages,
            overlay: Map::new(),
            stream: true,
            include_usage: true,
            session_id: None,
            parent_call_id: None,
            call_deadline: None,
            tenant_id: None,
            meta: None,
            cache_namespace: None,
            cache_salt: None,
            cache_mode: CacheMode::Default,
            structured_strategy: None,
            ingress: Ingress::Embedded,
            principal: None,
            trace_parent: None,
        }
    }

    /// A request with one user message.
    pub fn user(model: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(
            model,
            vec![serde_json::json!({"role": "user", "content": text.into()})],
        )
    }

    /// Validate an OpenAI chat-completions body. Unknown fields pass through to the provider.
    pub fn from_openai_body(body: &[u8]) -> Result<Self, GatewayError> {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| GatewayError::InvalidRequest {
                param: None,
                message: format!("request body is not valid JSON: {e}"),
            })?;
        let Value::Object(mut map) = value else {
            return Err(GatewayError::InvalidRequest {
                param: None,
                message: "request body must be a JSON object".into(),
            });
        };
        let model = match map.remove("model") {
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(_) => {
                return Err(GatewayError::invalid(
                    "model",
                    "`model` must be a non-empty string",
                ));
            }
            None => return Err(GatewayError::invalid("model", "`model` is required")),
        };
        let messages = match map.remove("messages") {
            Some(Value::Array(a)) => a,
            Some(_) => {
                return Err(GatewayError::invalid(
                    "messages",
                    "`messages` must be an array",
                ));
            }
            None => return Err(GatewayError::invalid("messages", "`messages` is required")),
        };
        let stream = match map.remove("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(_) => {
                return Err(GatewayError::invalid(
                    "stream",
                    "`stream` must be a boolean",
                ));
            }
        };
        let include_usage = match map.remove("stream_options") {
            None | Some(Value::Null) => false,
            Some(Value::Object(o)) => match o.get("include_usage") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => {
                    return Err(GatewayError::invalid(
                        "stream_options.include_usage",
                        "`stream_options.include_usage` must be a boolean",
                    ));
                }
            },
            Some(_) => {
                return Err(GatewayError::invalid(
                    "stream_options",
                    "`stream_options` must be an object",
                ));
            }
        };
        if !stream && include_usage {
            return Err(GatewayError::invalid(
                "stream_options",
                "`stream_options` is only allowed when `stream` is true",
            ));
        }
        let req = Self {
            model,
            messages,
            overlay: map,
            stream,
            include_usage,
            session_id: None,
            parent_call_id: None,
            call_deadline: None,
            tenant_id: None,
            meta: None,
            cache_namespace: None,
            cache_salt: None,
            cache_mode: CacheMode::Default,
            structured_strategy: None,
            ingress: Ingress::ChatCompletions,
            principal: None,
            trace_parent: None,
        };
        req.validate()?;
        Ok(req)
    }

    /// Check messages and the known sampling fields; the error names the field.
    pub fn validate(&self) -> Result<(), GatewayError> {
        if self.messages.is_empty() {
            return Err(GatewayError::invalid(
                "messages",
                "`messages` must not be empty",
            ));
        }
        for (i, m) in self.messages.iter().enumerate() {
            let Value::Object(o) = m else {
                return Err(GatewayError::invalid(
                    format!("messages[{i}]"),
                    format!("`messages[{i}]` must be an object"),
                ));
            };
            match o.get("role") {
                Some(Value::String(r)) if !r.is_empty() => {}
                _ => {
                    return Err(GatewayError::invalid(
                        format!("messages[{i}].role"),
                        format!("`messages[{i}].role` must be a non-empty string"),
                    ));
                }
            }
            match o.get("content") {
                None | Some(Value::Null) | Some(Value::String(_)) | Some(Value::Array(_)) => {}
                Some(_) => {
                    return Err(GatewayError::invalid(
                        format!("messages[{i}].content"),
                        format!(
                            "`messages[{i}].content` must be a string, an array of parts or null"
                        ),
                    ));
                }
            }
        }
        if let Some(t) = &self.tenant_id {
            validate_tenant_id("tenant_id", t)?;
        }
        if let Some(m) = &self.meta {
            validate_meta("meta", m)?;
        }
        if self.call_deadline.is_some_and(|d| d.is_zero()) {
            return Err(GatewayError::invalid(
                "call_deadline",
                "the call deadline must be > 0",
            ));
        }
        for key in crate::config::PROTECTED_BODY_KEYS {
            if self.overlay.contains_key(key) {
                return Err(GatewayError::invalid(
                    key,
                    format!("`{key}` cannot be set here"),
                ));
            }
        }
        for (key, v) in &self.overlay {
            let ok = match key.as_str() {
                "temperature" | "top_p" | "presence_penalty" | "frequency_penalty" => {
                    v.is_null() || v.as_f64().is_some_and(f64::is_finite)
                }
                "max_tokens" | "max_completion_tokens" => {
                    v.is_null() || v.as_u64().is_some_and(|n| n >= 1)
                }
                "seed" => v.is_null() || v.is_i64() || v.is_u64(),
                "n" => v.is_null() || v.as_u64() == Some(1),
                "stop" => {
                    v.is_null()
                        || v.is_string()
                        || v.as_array().is_some_and(|a| a.iter().all(Value::is_string))
                }
                "tools" => v.is_null() || v.is_array(),
                "tool_choice" => v.is_null() || v.is_string() || v.is_object(),
                "response_format" => v.is_null() || v.is_object(),
                _ => true,
            };
            if !ok {
                let expected = match key.as_str() {
                    "temperature" | "top_p" | "presence_penalty" | "frequency_penalty" => {
                        "a finite number"
                    }
                    "max_tokens" | "max_completion_tokens" => "an integer ≥ 1",
                    "seed" => "an integer",
                    "n" => "1 (this gateway returns one choice)",
                    "stop" => "a string or an array of strings",
                    "tools" => "an array",
                    "tool_choice" => "a string or an object",
                    _ => "an object",
                };
                return Err(GatewayError::invalid(
                    key,
                    format!("`{key}` must be {expected}"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_dimensions() {
        assert!(validate_tenant_id("t", "acme").is_ok());
        assert!(validate_tenant_id("t", " acme").is_err());
        assert!(validate_tenant_id("t", "").is_err());
        assert!(validate_tenant_id("t", &"x".repeat(129)).is_err());
        let ok = serde_json::json!({"batch.id": "b1", "n": 3, "ok": true, "score": 0.5});
        assert!(validate_meta("m", ok.as_object().unwrap()).is_ok());
        for bad in [
            serde_json::json!({"Bad": 1}),
            serde_json::json!({"pg_x": 1}),
            serde_json::json!({"k": [1]}),
            serde_json::json!({"k": null}),
            serde_json::json!({"k": "x".repeat(257)}),
        ] {
            assert!(
                validate_meta("m", bad.as_object().unwrap()).is_err(),
                "{bad}"
            );
        }
    }

    fn param(body: &str) -> Option<String> {
        match ChatRequest::from_openai_body(body.as_bytes()) {
            Err(GatewayError::InvalidRequest { param, .. }) => param,
            other => Some(format!("unexpected: {other:?}")),
        }
    }

    #[test]
    fn field_errors_name_the_field() {
        assert_eq!(param("{"), None);
        assert_eq!(param("[]"), None);
        assert_eq!(param(r#"{"messages":[]}"#).as_deref(), Some("model"));
        assert_eq!(
            param(r#"{"model":1,"messages":[]}"#).as_deref(),
            Some("model")
        );
        assert_eq!(
            param(r#"{"model":"m","messages":{}}"#).as_deref(),
            Some("messages")
        );
        assert_eq!(
            param(r#"{"model":"m","messages":[]}"#).as_deref(),
            Some("messages")
        );
        assert_eq!(
            param(r#"{"model":"m","messages":[{"content":"x"}]}"#).as_deref(),
            Some("messages[0].role")
        );
        assert_eq!(
            param(r#"{"model":"m","messages":[{"role":"user","content":5}]}"#).as_deref(),
            Some("messages[0].content")
        );
        let ok = r#""messages":[{"role":"user","content":"hi"}]"#;
        assert_eq!(
            param(&format!(r#"{{"model":"m",{ok},"stream":"yes"}}"#)).as_deref(),
            Some("stream")
        );
        assert_eq!(
            param(&format!(r#"{{"model":"m",{ok},"temperature":"hot"}}"#)).as_deref(),
            Some("temperature")
        );
        assert_eq!(
            param(&format!(r#"{{"model":"m",{ok},"max_tokens":0}}"#)).as_deref(),
            Some("max_tokens")
        );
        assert_eq!(
            param(&format!(r#"{{"model":"m",{ok},"n":2}}"#)).as_deref(),
            Some("n")
        );
        assert_eq!(
            param(&format!(
                r#"{{"model":"m",{ok},"stream":true,"stream_options":{{"include_usage":1}}}}"#
            ))
            .as_deref(),
            Some("stream_options.include_usage")
        );
    }

    #[test]
    fn unknown_fields_pass_through() {
        let r = ChatRequest::from_openai_body(
            br#"{"model":"llm","messages":[{"role":"user","content":"hi"}],"stream":true,
                "stream_options":{"include_usage":true},"temperature":0.2,"x_custom":{"a":1}}"#,
        );
        let r = r.expect("valid request");
        assert!(r.stream && r.include_usage);
        assert_eq!(r.overlay.len(), 2);
        assert_eq!(r.overlay["x_custom"], serde_json::json!({"a":1}));
    }
}
