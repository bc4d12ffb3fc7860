//! The `x-pgw-*` request headers every call endpoint reads (docs/requests.md#call-headers):
//! tracing links,
//! caller dimensions, the call deadline and the cache controls, as [`CallOptions`].

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use crate::error::GatewayError;
use crate::pipeline::{CacheMode, CallOptions, validate_meta, validate_tenant_id};
use crate::telemetry::otel::TraceParent;

/// The `x-pgw-*` request headers of one call, found in one pass over the request's headers.
/// Most requests carry none of them; the ten lookups by name they took (nine names,
/// `x-pgw-cache` twice; `HeaderMap::get` with a `&str` validates, lower-cases and hashes the
/// name every time) cost ~4k
/// instructions per call (`instructions.py`), where one pass over a request's handful of
/// headers compares a prefix per header. A header sent twice counts with its first value, as
/// `HeaderMap::get` would answer.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CallHeaders<'a> {
    session_id: Option<&'a HeaderValue>,
    parent_call_id: Option<&'a HeaderValue>,
    call_deadline_s: Option<&'a HeaderValue>,
    tenant_id: Option<&'a HeaderValue>,
    meta: Option<&'a HeaderValue>,
    cache_namespace: Option<&'a HeaderValue>,
    cache_salt: Option<&'a HeaderValue>,
    cache: Option<&'a HeaderValue>,
    structured_strategy: Option<&'a HeaderValue>,
}

impl<'a> CallHeaders<'a> {
    /// The call headers among `headers` (names are lower case in a `HeaderMap`).
    pub(crate) fn of(headers: &'a HeaderMap) -> Self {
        let mut h = Self::default();
        for (name, value) in headers {
            let Some(rest) = name.as_str().strip_prefix("x-pgw-") else {
                continue;
            };
            let slot = match rest {
                "session-id" => &mut h.session_id,
                "parent-call-id" => &mut h.parent_call_id,
                "call-deadline-s" => &mut h.call_deadline_s,
                "tenant-id" => &mut h.tenant_id,
                "meta" => &mut h.meta,
                "cache-namespace" => &mut h.cache_namespace,
                "cache-salt" => &mut h.cache_salt,
                "cache" => &mut h.cache,
                "structured-strategy" => &mut h.structured_strategy,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(value);
            }
        }
        h
    }

    /// Whether the request carries `x-pgw-cache` (valid or not).
    pub(crate) fn has_cache(&self) -> bool {
        self.cache.is_some()
    }

    /// `x-pgw-structured-strategy`, trimmed.
    ///
    /// Errors: 400 naming the header (see [`trimmed`]).
    pub(crate) fn structured_strategy(&self) -> Result<Option<String>, GatewayError> {
        trimmed("x-pgw-structured-strategy", self.structured_strategy)
    }

    /// `x-pgw-call-deadline-s`: a finite number of seconds > 0 (and < 10⁷).
    ///
    /// Errors: 400 naming the header.
    fn call_deadline(&self) -> Result<Option<Duration>, GatewayError> {
        let Some(raw) = trimmed("x-pgw-call-deadline-s", self.call_deadline_s)? else {
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

    /// The call options: `x-pgw-session-id`, `x-pgw-parent-call-id`,
    /// `x-pgw-call-deadline-s`, `x-pgw-tenant-id`, `x-pgw-meta` (a JSON object),
    /// `x-pgw-cache-namespace`, `x-pgw-cache-salt` (empty is a real salt) and `x-pgw-cache`
    /// (`bypass` / `no-store`).
    ///
    /// Errors: 400 naming the first header at fault, in that order.
    pub(crate) fn options(&self) -> Result<CallOptions, GatewayError> {
        let mut o = CallOptions {
            session_id: trimmed("x-pgw-session-id", self.session_id)?,
            parent_call_id: trimmed("x-pgw-parent-call-id", self.parent_call_id)?,
            call_deadline: self.call_deadline()?,
            ..CallOptions::default()
        };
        if let Some(t) = self.tenant_id {
            let t = visible_ascii("x-pgw-tenant-id", t)?;
            validate_tenant_id("x-pgw-tenant-id", t)?;
            o.tenant_id = Some(t.to_string());
        }
        if let Some(m) = self.meta {
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
        o.cache_namespace = trimmed("x-pgw-cache-namespace", self.cache_namespace)?;
        if let Some(salt) = self.cache_salt {
            let salt = visible_ascii("x-pgw-cache-salt", salt)?;
            o.cache_salt = Some(salt.to_string());
        }
        if let Some(mode) = trimmed("x-pgw-cache", self.cache)? {
            o.cache_mode = CacheMode::parse(&mode)?;
        }
        Ok(o)
    }
}

/// A header's value as text, untrimmed (an empty value is a value).
///
/// Errors: 400 naming the header when it is not visible ASCII.
fn visible_ascii<'v>(name: &str, value: &'v HeaderValue) -> Result<&'v str, GatewayError> {
    value
        .to_str()
        .map_err(|_| GatewayError::invalid(name, format!("header `{name}` must be visible ASCII")))
}

/// A header's trimmed value: `None` when absent; 1–256 visible ASCII characters otherwise.
///
/// Errors: 400 naming the header.
fn trimmed(name: &str, value: Option<&HeaderValue>) -> Result<Option<String>, GatewayError> {
    match value {
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

/// The call options of a request's headers ([`CallHeaders::options`]).
///
/// Errors: 400 naming the first header at fault.
pub(crate) fn call_options(headers: &HeaderMap) -> Result<CallOptions, GatewayError> {
    CallHeaders::of(headers).options()
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
pub(super) fn set(resp: &mut axum::response::Response, name: HeaderName, value: impl HeaderText) {
    if let Some(v) = value.header_value() {
        resp.headers_mut().insert(name, v);
    }
}

/// A value of an `x-pgw-*` response header. Numbers and flags become header values without
/// going through `ToString` (the formatter, then a validation pass over the text), and a
/// flag is a static value: six of these are set on every answered call.
pub(super) trait HeaderText {
    /// The header value; `None` when the text is not a valid header value.
    fn header_value(self) -> Option<HeaderValue>;
}

impl HeaderText for &str {
    fn header_value(self) -> Option<HeaderValue> {
        HeaderValue::from_str(self).ok()
    }
}

impl HeaderText for &String {
    fn header_value(self) -> Option<HeaderValue> {
        HeaderValue::from_str(self).ok()
    }
}

impl HeaderText for bool {
    fn header_value(self) -> Option<HeaderValue> {
        Some(HeaderValue::from_static(if self {
            "true"
        } else {
            "false"
        }))
    }
}

macro_rules! integer_header_text {
    ($($t:ty),*) => {$(
        impl HeaderText for $t {
            fn header_value(self) -> Option<HeaderValue> {
                Some(HeaderValue::from(self))
            }
        }
    )*};
}
integer_header_text!(u32, u64, usize);

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, HeaderValue::from_static(value));
        }
        h
    }

    fn param(e: GatewayError) -> Option<String> {
        match e {
            GatewayError::InvalidRequest { param, .. } => param,
            other => panic!("not an invalid request: {other:?}"),
        }
    }

    /// One pass finds every call header among the others, trims them, takes the first of a
    /// repeated header (as `HeaderMap::get`), and ignores `x-pgw-*` names it does not know.
    #[test]
    fn one_pass_reads_every_call_header() {
        let h = headers(&[
            ("authorization", "Bearer sk"),
            ("x-pgw-session-id", " s-1 "),
            ("x-pgw-parent-call-id", "p-1"),
            ("x-pgw-call-deadline-s", "2.5"),
            ("x-pgw-tenant-id", "acme"),
            ("x-pgw-meta", r#"{"team":"a"}"#),
            ("x-pgw-cache-namespace", "ns"),
            ("x-pgw-cache-salt", ""),
            ("x-pgw-cache", "no-store"),
            ("x-pgw-structured-strategy", "native-schema"),
            ("x-pgw-session-id", "s-2"),
            ("x-pgw-unknown", "ignored"),
            ("x-pgw", "ignored"),
        ]);
        let call = CallHeaders::of(&h);
        let o = call.options().unwrap();
        assert_eq!(o.session_id.as_deref(), Some("s-1"));
        assert_eq!(o.parent_call_id.as_deref(), Some("p-1"));
        assert_eq!(o.call_deadline, Some(Duration::from_millis(2500)));
        assert_eq!(o.tenant_id.as_deref(), Some("acme"));
        assert_eq!(
            o.meta.map(serde_json::Value::Object),
            Some(serde_json::json!({"team": "a"}))
        );
        assert_eq!(o.cache_namespace.as_deref(), Some("ns"));
        assert_eq!(o.cache_salt.as_deref(), Some(""));
        assert_eq!(o.cache_mode, CacheMode::NoStore);
        assert!(call.has_cache());
        assert_eq!(
            call.structured_strategy().unwrap().as_deref(),
            Some("native-schema")
        );
        // The same as looking each header up by name.
        assert_eq!(
            trimmed("x-pgw-session-id", h.get("x-pgw-session-id")).unwrap(),
            o.session_id
        );

        let plain = headers(&[("content-type", "application/json")]);
        let none = CallHeaders::of(&plain);
        let o = none.options().unwrap();
        assert_eq!(
            (o.session_id, o.call_deadline, o.tenant_id, o.cache_salt),
            (None, None, None, None)
        );
        assert_eq!(o.cache_mode, CacheMode::Default);
        assert!(!none.has_cache());
        assert_eq!(none.structured_strategy().unwrap(), None);
    }

    /// The error names the first header at fault, in the documented order, whatever the
    /// order the client sent them in.
    #[test]
    fn the_first_header_at_fault_is_named() {
        let h = headers(&[
            ("x-pgw-cache", "sometimes"),
            ("x-pgw-call-deadline-s", "-1"),
            ("x-pgw-session-id", "   "),
        ]);
        assert_eq!(
            param(call_options(&h).unwrap_err()).as_deref(),
            Some("x-pgw-session-id")
        );
        let h = headers(&[
            ("x-pgw-cache", "sometimes"),
            ("x-pgw-call-deadline-s", "-1"),
        ]);
        assert_eq!(
            param(call_options(&h).unwrap_err()).as_deref(),
            Some("x-pgw-call-deadline-s")
        );
        let h = headers(&[("x-pgw-cache", "sometimes"), ("x-pgw-meta", "[1]")]);
        assert_eq!(
            param(call_options(&h).unwrap_err()).as_deref(),
            Some("x-pgw-meta")
        );
        let h = headers(&[("x-pgw-cache", "sometimes")]);
        assert_eq!(
            param(call_options(&h).unwrap_err()).as_deref(),
            Some("x-pgw-cache")
        );
        // An invalid `x-pgw-cache` still counts as present.
        assert!(CallHeaders::of(&h).has_cache());
        let empty = headers(&[("x-pgw-structured-strategy", "")]);
        assert_eq!(
            param(CallHeaders::of(&empty).structured_strategy().unwrap_err()).as_deref(),
            Some("x-pgw-structured-strategy")
        );
    }
}
