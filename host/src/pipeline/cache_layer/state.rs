//! What the cache layer keeps per configuration: the response cache and the single-flight
//! of identical calls in flight ([`CacheRuntime`]), the rule of what may be stored
//! (docs/cache.md#what-is-stored), and the cache's part of `/healthz`.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::cache::{CacheError, CachedAnswer, ResponseCache, SingleFlight};
use crate::config::Settings;
use crate::error::GatewayError;
use crate::governance::SharedClock;

use super::super::response::ChatResponse;

/// Whether an answer may be stored: complete and successful — never salvaged from a stream
/// without `[DONE]`, never empty, never itself a replay. (Failures, answers that failed the
/// structured-output ladder and calls cut by a deadline never reach this point.) See
/// docs/cache.md#what-is-stored.
impl CachedAnswer for ChatResponse {
    fn is_storable(&self) -> bool {
        // An answer with no text is still an answer (a refusal, a `content_filter` stop, …):
        // only one with no finish reason and nothing in it is not.
        let empty = self.finish_reason.is_none()
            && self.content.is_empty()
            && self.tool_calls.is_empty()
            && self.refusal.is_none()
            && self
                .upstream_fields
                .as_ref()
                .is_none_or(|f| f.message.is_none());
        !(self.salvaged || self.cache_hit || empty)
    }
}

/// The result of a shared call, as every caller of the flight sees it.
pub(super) type Shared = Arc<Result<ChatResponse, GatewayError>>;

/// The response cache and the single-flight of identical calls in flight.
pub(crate) struct CacheRuntime {
    pub cache: ResponseCache,
    pub(super) flights: SingleFlight<Shared>,
}

impl CacheRuntime {
    /// The runtime for these settings; `None` when `PGW_CACHE_BACKEND=none`.
    pub(crate) fn from_settings(
        settings: &Settings,
        clock: SharedClock,
    ) -> Result<Option<Self>, CacheError> {
        Ok(
            ResponseCache::from_settings(settings, clock)?.map(|cache| Self {
                cache,
                flights: SingleFlight::new(),
            }),
        )
    }
}

/// The cache's part of `/healthz`.
pub(crate) fn health(rt: Option<&CacheRuntime>) -> Value {
    let Some(rt) = rt else {
        return json!({ "backend": "none" });
    };
    let mut v = serde_json::to_value(rt.cache.status()).unwrap_or_else(|_| json!({}));
    v["in_flight"] = json!(rt.flights.in_flight());
    v["waiting_callers"] = json!(rt.flights.callers());
    v
}
