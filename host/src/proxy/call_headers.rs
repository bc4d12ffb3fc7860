//! The `x-pgw-*` request headers every call endpoint reads (docs/requests.md#call-headers):
//! tracing links,
//! caller dimensions, the call deadline and the cache controls, as [`CallOptions`].

use std::time::Duration;

use axum::http::HeaderMap;

use crate::error::GatewayError;
use crate::pipeline::{CacheMode, CallOptions, validate_meta, validate_tenant_id};
use crate::telemetry::otel::TraceParent;

/// A header's trimmed value: `None` when absent; 1–256 visible ASCII characters otherwise.
///
/// Errors: 400 naming the header.
pub(crate) fn header_str(headers: &HeaderMap, name: &str) -> Result<Option<String>, GatewayError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => match v.to_str() {
            Ok(s) if !s.trim().is_empty() && s.len() <= 256 => Ok(Some(s.trim().to_string())),
            _ => Err(GatewayError::invalid(
                name,
                format!("header `{name}` must be 1–256 visible ASCII characters"),
            )),
        },
    }
}

/// `x-pgw-call-deadline-s`: a finite number of seconds > 0 (and < 10⁷).
///
/// Errors: 400 naming the header.
pub(crate) fn deadline_header(headers: &HeaderMap) -> Result<Option<Duration>, GatewayError> {
    let Some(raw) = header_str(headers, "x-pgw-call-deadline-s")? else {
        return Ok(None);
    };
    match raw.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x < 1e7 => Ok(Some(Duration::from_secs_f64(x))),
        _ => Err(GatewayError::invalid(
            "x-pgw-call-deadline-s",
            format!(
                "header `x-pgw-call-deadline-s` must be a finite number of seconds > 0, got `{raw}`"
            ),
        )),
    }
}

/// The call options of a request: `x-pgw-session-id`, `x-pgw-parent-call-id`,
/// `x-pgw-call-deadline-s`, `x-pgw-tenant-id`, `x-pgw-meta` (a JSON object),
/// `x-pgw-cache-namespace`, `x-pgw-cache-salt` (empty is a real salt) and `x-pgw-cache`
/// (`bypass` / `no-store`).
///
/// Errors: 400 naming the first header at fault.
pub(crate) fn call_options(headers: &HeaderMap) -> Result<CallOptions, GatewayError> {
    let mut o = CallOptions {
        session_id: header_str(headers, "x-pgw-session-id")?,
        parent_call_id: header_str(headers, "x-pgw-parent-call-id")?,
        call_deadline: deadline_header(headers)?,
        ..CallOptions::default()
    };
    if let Some(t) = headers.get("x-pgw-tenant-id") {
        let t = t.to_str().map_err(|_| {
            GatewayError::invalid(
                "x-pgw-tenant-id",
                "header `x-pgw-tenant-id` must be visible ASCII",
            )
        })?;
        validate_tenant_id("x-pgw-tenant-id", t)?;
        o.tenant_id = Some(t.to_string());
    }
    if let Some(m) = headers.get("x-pgw-meta") {
        let parsed: Option<serde_json::Map<String, serde_json::Value>> =
            m.to_str().ok().and_then(|s| serde_json::from_str(s).ok());
        let Some(map) = parsed else {
            return Err(GatewayError::invalid(
                "x-pgw-meta",
                "header `x-pgw-meta` must be a JSON object",
            ));
        };
        validate_meta("x-pgw-meta", &map)?;
        o.meta = Some(map);
    }
    o.cache_namespace = header_str(headers, "x-pgw-cache-namespace")?;
    if let Some(salt) = headers.get("x-pgw-cache-salt") {
        let salt = salt.to_str().map_err(|_| {
            GatewayError::invalid(
                "x-pgw-cache-salt",
                "header `x-pgw-cache-salt` must be visible ASCII",
            )
        })?;
        o.cache_salt = Some(salt.to_string());
    }
    if let Some(mode) = header_str(headers, "x-pgw-cache")? {
        o.cache_mode = CacheMode::parse(&mode)?;
    }
    Ok(o)
}

/// The client's span from the W3C `traceparent` (and `tracestate`) headers, the parent of
/// the call's span (docs/tracing.md#propagation). One that does not parse is ignored: the
/// call starts a trace of its own, as the W3C recommendation says — never a 400. Read only
/// when traces are on.
pub(crate) fn trace_parent(headers: &HeaderMap) -> Option<TraceParent> {
    let traceparent = headers.get("traceparent")?.to_str().ok()?;
    let tracestate = headers.get("tracestate").and_then(|v| v.to_str().ok());
    TraceParent::from_w3c(traceparent, tracestate)
}

/// The `x-pgw-*` response headers, parsed once: a `&str` name is validated and looked up in
/// the table of standard names each time it is inserted, six times per answered call.
pub(crate) mod names {
    use axum::http::HeaderName;

    pub(crate) const CALL_ID: HeaderName = HeaderName::from_static("x-pgw-call-id");
    pub(crate) const SOURCE: HeaderName = HeaderName::from_static("x-pgw-source");
    pub(crate) const ATTEMPTS: HeaderName = HeaderName::from_static("x-pgw-attempts");
    pub(crate) const CACHE_HIT: HeaderName = HeaderName::from_static("x-pgw-cache-hit");
    pub(crate) const USAGE_SOURCE: HeaderName = HeaderName::from_static("x-pgw-usage-source");
    pub(crate) const OVERHEAD_US: HeaderName = HeaderName::from_static("x-pgw-overhead-us");
    pub(crate) const CACHED_INPUTS: HeaderName = HeaderName::from_static("x-pgw-cached-inputs");
    pub(crate) const UPSTREAM_BATCHES: HeaderName =
        HeaderName::from_static("x-pgw-upstream-batches");
    pub(crate) const BUDGET_WARNING: HeaderName = HeaderName::from_static("x-pgw-budget-warning");
}

/// Set a response header; a value that is not a valid header value is left out.
pub(super) fn set(
    resp: &mut axum::response::Response,
    name: axum::http::HeaderName,
    value: impl ToString,
) {
    if let Ok(v) = axum::http::HeaderValue::try_from(value.to_string()) {
        resp.headers_mut().insert(name, v);
    }
}
