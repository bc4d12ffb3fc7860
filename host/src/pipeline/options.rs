//! Per-call options shared by embeddings and OCR calls (chat keeps them on `ChatRequest`):
//! tracing links, caller dimensions, the call deadline and the cache controls — the
//! `x-pgw-*` request headers of the proxy (docs/requests.md#call-headers).

use std::time::Duration;

use serde_json::{Map, Value};

use super::request::CacheMode;

/// Options of one embeddings or OCR call. All optional; `Default` is "none of them".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallOptions {
    /// `x-pgw-session-id`.
    pub session_id: Option<String>,
    /// `x-pgw-parent-call-id`.
    pub parent_call_id: Option<String>,
    /// `x-pgw-call-deadline-s`: one hard boundary around the whole call (all batches, all
    /// attempts, all back-off); overrides `{SCOPE}__CALL_DEADLINE_S`.
    pub call_deadline: Option<Duration>,
    /// `x-pgw-tenant-id` (validated like chat's, docs/requests.md#tenant-id).
    pub tenant_id: Option<String>,
    /// `x-pgw-meta`: a JSON object of caller dimensions.
    pub meta: Option<Map<String, Value>>,
    /// `x-pgw-cache-namespace` (embeddings only; OCR answers are not cached).
    pub cache_namespace: Option<String>,
    /// `x-pgw-cache-salt`; `Some("")` is a real salt.
    pub cache_salt: Option<String>,
    /// `x-pgw-cache`: `bypass` or `no-store`.
    pub cache_mode: CacheMode,
    /// The virtual key of the call (set by the proxy from the authenticated key, see
    /// [`ChatRequest::principal`](super::ChatRequest::principal)).
    pub principal: Option<std::sync::Arc<crate::keys::Principal>>,
    /// The caller's span, the parent of the call's span when traces are on (the W3C
    /// `traceparent` header; docs/tracing.md#propagation). Embeddings only: OCR calls are
    /// not traced.
    pub trace_parent: Option<crate::telemetry::otel::TraceParent>,
}

impl CallOptions {
    /// Attach the call's virtual key (`None`: a static key): its tenant replaces the
    /// client's, which only narrows it (`<tenant>/<x-pgw-tenant-id>`), and its partition
    /// keys the cache (docs/keys.md#identity).
    pub fn identify(&mut self, principal: Option<std::sync::Arc<crate::keys::Principal>>) {
        if let Some(p) = &principal {
            self.tenant_id = Some(match &self.tenant_id {
                Some(h) => format!("{}/{h}", p.tenant()),
                None => p.tenant().to_string(),
            });
        }
        self.principal = principal;
    }
}
