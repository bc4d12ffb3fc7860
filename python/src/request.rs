//! The arguments of a Python call → the gateway's request types (`ChatRequest`,
//! `CallOptions`). A bad argument is a `GatewayError::InvalidRequest` naming the Python
//! parameter, raised as `InvalidRequestError` like the gateway's own request checks.

use std::time::Duration;

use polygateway::pipeline::CacheMode;
use polygateway::{CallOptions, ChatRequest, GatewayError};
use pyo3::prelude::*;
use serde_json::Value;

use crate::convert;

/// The per-call options every operation takes (the proxy's `x-pgw-*` headers).
#[derive(Debug, Default)]
pub struct Common {
    pub session_id: Option<String>,
    pub parent_call_id: Option<String>,
    pub deadline_s: Option<f64>,
    pub tenant_id: Option<String>,
    pub meta: Option<serde_json::Map<String, Value>>,
    pub cache_namespace: Option<String>,
    pub cache_salt: Option<String>,
    pub cache: Option<String>,
}

impl Common {
    /// The options from the Python arguments (`meta` a dict or `None`).
    #[allow(clippy::too_many_arguments)]
    pub fn from_py(
        session_id: Option<String>,
        parent_call_id: Option<String>,
        deadline_s: Option<f64>,
        tenant_id: Option<String>,
        meta: Option<&Bound<'_, PyAny>>,
        cache_namespace: Option<String>,
        cache_salt: Option<String>,
        cache: Option<String>,
    ) -> PyResult<Self> {
        Ok(Self {
            session_id,
            parent_call_id,
            deadline_s,
            tenant_id,
            meta: convert::to_object(meta, "meta")?,
            cache_namespace,
            cache_salt,
            cache,
        })
    }

    fn deadline(&self) -> Result<Option<Duration>, GatewayError> {
        match self.deadline_s {
            None => Ok(None),
            Some(s) if s.is_finite() && s > 0.0 && s < 1e7 => Ok(Some(Duration::from_secs_f64(s))),
            Some(s) => Err(GatewayError::invalid(
                "deadline_s",
                format!("`deadline_s` must be a number of seconds > 0 and < 10^7, got {s}"),
            )),
        }
    }

    fn cache_mode(&self) -> Result<CacheMode, GatewayError> {
        match self.cache.as_deref() {
            None => Ok(CacheMode::Default),
            Some("bypass") => Ok(CacheMode::Bypass),
            Some("no-store") => Ok(CacheMode::NoStore),
            Some(other) => Err(GatewayError::invalid(
                "cache",
                format!("`cache` must be None, \"bypass\" or \"no-store\", got {other:?}"),
            )),
        }
    }

    /// The options of an embeddings or OCR call.
    pub fn into_options(self) -> Result<CallOptions, GatewayError> {
        Ok(CallOptions {
            call_deadline: self.deadline()?,
            cache_mode: self.cache_mode()?,
            session_id: self.session_id,
            parent_call_id: self.parent_call_id,
            tenant_id: self.tenant_id,
            meta: self.meta,
            cache_namespace: self.cache_namespace,
            cache_salt: self.cache_salt,
            principal: None,
            trace_parent: None,
        })
    }
}

/// The keys of `**params` the gateway owns: they are set by `chat`'s own arguments.
const PROTECTED: [&str; 4] = ["model", "messages", "stream", "stream_options"];

/// A chat request from the Python arguments.
pub fn chat_request(
    model: String,
    messages: &Bound<'_, PyAny>,
    params: Option<&Bound<'_, PyAny>>,
    structured_strategy: Option<String>,
    common: Common,
) -> PyResult<Result<ChatRequest, GatewayError>> {
    let messages = match convert::to_json(messages, "messages")? {
        Value::Array(a) => a,
        _ => {
            return Ok(Err(GatewayError::invalid(
                "messages",
                "`messages` must be a list of message dicts",
            )));
        }
    };
    let overlay = convert::to_object(params, "params")?.unwrap_or_default();
    if let Some(k) = PROTECTED.iter().find(|k| overlay.contains_key(**k)) {
        return Ok(Err(GatewayError::invalid(
            *k,
            format!("`{k}` is set by chat()'s own arguments, not by a sampling parameter"),
        )));
    }
    let deadline = match common.deadline() {
        Ok(d) => d,
        Err(e) => return Ok(Err(e)),
    };
    let cache_mode = match common.cache_mode() {
        Ok(m) => m,
        Err(e) => return Ok(Err(e)),
    };
    let mut req = ChatRequest::new(model, messages);
    req.overlay = overlay;
    req.session_id = common.session_id;
    req.parent_call_id = common.parent_call_id;
    req.call_deadline = deadline;
    req.tenant_id = common.tenant_id;
    req.meta = common.meta;
    req.cache_namespace = common.cache_namespace;
    req.cache_salt = common.cache_salt;
    req.cache_mode = cache_mode;
    req.structured_strategy = structured_strategy;
    Ok(Ok(req))
}
