//! HTTP of one attempt, chat or lean: turn a plugin's request description into headers
//! (with the credential the host attaches), map a send result, read a 2xx body with a cap,
//! and classify a non-2xx answer through the provider's `classify-error` plus the
//! `Retry-After` header (RFC 9110, both forms; the larger of header and plugin hint wins).

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::Instant;

use crate::plugin::{
    AuthScheme, ClassifiedError, ErrorClass, Header, PluginError, ProviderInstance,
};
use crate::transport::{UpstreamError, UpstreamResponse, parse_retry_after};

use super::attempt::{AttemptFailure, UpstreamFailure};
use super::gateway::SourceRuntime;

/// Most bytes of an error body kept for classification.
pub(crate) const ERROR_BODY_CAP: usize = 64 * 1024;

/// A transient failure with a short per-source reason.
pub(crate) fn transient(message: impl Into<String>, short: &'static str) -> AttemptFailure {
    AttemptFailure::Upstream(UpstreamFailure {
        class: ErrorClass::Transient,
        message: message.into(),
        code: None,
        status: None,
        retry_after: None,
        short,
    })
}

/// A plugin fault in `function` (a request description the host cannot send).
pub(crate) fn fault(
    source: &SourceRuntime,
    function: &'static str,
    message: String,
) -> AttemptFailure {
    AttemptFailure::Plugin(PluginError::Fault {
        plugin: source.component.info().name.clone(),
        function,
        message,
    })
}

/// A classified error a plugin returned for a 2xx body (or the host found in one).
pub(crate) fn classified(c: ClassifiedError) -> AttemptFailure {
    let short = match c.class {
        ErrorClass::SourceDead => "source_dead",
        ErrorClass::RequestRejected => "rejected",
        ErrorClass::ResultInvalid => "result_invalid",
        ErrorClass::Transient => "bad_response",
    };
    AttemptFailure::Upstream(UpstreamFailure {
        class: c.class,
        message: c.message,
        code: c.code,
        status: None,
        retry_after: c.retry_after_ms.map(Duration::from_millis),
        short,
    })
}

/// A `result-invalid` failure found by the host (wrong vector count, bad archive, …).
pub(crate) fn result_invalid(message: impl Into<String>) -> AttemptFailure {
    classified(ClassifiedError {
        class: ErrorClass::ResultInvalid,
        message: message.into(),
        code: None,
        retry_after_ms: None,
    })
}

/// The plugin's headers plus the source's credential per `auth`. A header the host cannot
/// send is a fault of the plugin's `function`.
pub(crate) fn request_headers(
    source: &SourceRuntime,
    function: &'static str,
    headers: &[Header],
    auth: &AuthScheme,
) -> Result<HeaderMap, AttemptFailure> {
    let mut map = HeaderMap::with_capacity(headers.len() + 1);
    for h in headers {
        match (
            HeaderName::try_from(h.name.as_str()),
            HeaderValue::try_from(h.value.as_str()),
        ) {
            (Ok(n), Ok(v)) => {
                map.insert(n, v);
            }
            _ => {
                return Err(fault(
                    source,
                    function,
                    format!("invalid header `{}`", h.name),
                ));
            }
        }
    }
    match source.auth_header(auth) {
        Ok(Some((n, v))) => {
            map.insert(n, v);
        }
        Ok(None) => {}
        Err(m) => return Err(fault(source, function, m)),
    }
    Ok(map)
}

/// The URL of a plugin path (must start with `/`) on the source. A plugin names the same
/// path call after call, so the source keeps the last one parsed: the URL is parsed once, not
/// per request. A path that does not make a valid URL is a fault of `function`.
pub(crate) fn url_of(
    source: &SourceRuntime,
    function: &'static str,
    path: &str,
) -> Result<reqwest::Url, AttemptFailure> {
    if !path.starts_with('/') {
        return Err(fault(
            source,
            function,
            format!("path `{path}` does not start with `/`"),
        ));
    }
    if let Some(last) = &*source.last_url.load()
        && last.0 == path
    {
        return Ok(last.1.clone());
    }
    let full = format!("{}{}", source.base_url, path);
    let url = reqwest::Url::parse(&full)
        .map_err(|e| fault(source, function, format!("invalid URL `{full}`: {e}")))?;
    source
        .last_url
        .store(Some(std::sync::Arc::new((path.to_string(), url.clone()))));
    Ok(url)
}

/// Map a send result (already bounded by a timeout) to a response or an attempt failure.
pub(crate) fn sent(
    source: &SourceRuntime,
    function: &'static str,
    result: Result<Result<UpstreamResponse, UpstreamError>, tokio::time::error::Elapsed>,
) -> Result<UpstreamResponse, AttemptFailure> {
    match result {
        Err(_) => Err(transient(
            format!("total timeout from {}", source.settings.name),
            "timeout",
        )),
        Ok(Err(UpstreamError::Invalid(m))) => Err(fault(source, function, m)),
        Ok(Err(e)) => Err(transient(e.to_string(), "network_error")),
        Ok(Ok(r)) => Ok(r),
    }
}

/// Read a 2xx body of at most `cap` bytes before `deadline`. A longer body is
/// `result_invalid` (the service answered; the answer is too big to parse within the plugin's
/// memory), never silently cut and then mistaken for malformed JSON.
pub(crate) async fn read_body(
    source: &SourceRuntime,
    resp: &mut UpstreamResponse,
    cap: usize,
    deadline: Instant,
) -> Result<Vec<u8>, AttemptFailure> {
    read_capped(source, resp, cap, deadline, |_| {
        result_invalid(format!(
            "the answer exceeds {cap} bytes, the most a plugin parses within its memory cap"
        ))
    })
    .await
}

/// Read a body of at most `cap` bytes before `deadline`; past the cap, `over(bytes seen)` is
/// the failure. A timeout or a broken body is transient.
pub(crate) async fn read_capped(
    source: &SourceRuntime,
    resp: &mut UpstreamResponse,
    cap: usize,
    deadline: Instant,
    over: impl Fn(u64) -> AttemptFailure,
) -> Result<Vec<u8>, AttemptFailure> {
    let mut out = Vec::new();
    loop {
        let chunk = match tokio::time::timeout_at(deadline, resp.body.chunk()).await {
            Err(_) => {
                return Err(transient(
                    format!("total timeout from {}", source.settings.name),
                    "timeout",
                ));
            }
            Ok(Err(e)) => return Err(transient(e.to_string(), "network_error")),
            Ok(Ok(None)) => return Ok(out),
            Ok(Ok(Some(c))) => c,
        };
        if out.len() + chunk.len() > cap {
            return Err(over((out.len() + chunk.len()) as u64));
        }
        out.extend_from_slice(&chunk);
    }
}

/// The most bytes of a 2xx answer handed to a plugin: a quarter of its memory cap
/// (`PGW_PLUGIN_MEMORY_MB`), since parsing JSON takes a few times the text's size.
pub(crate) fn body_cap(source: &SourceRuntime) -> usize {
    source.component.limits().memory_bytes / 4
}

/// Classify a non-2xx answer: the provider's `classify-error` on the status, headers and
/// (capped) body, the retry hint from `Retry-After` and the plugin, and a short reason.
pub(crate) async fn classify_status(
    source: &SourceRuntime,
    instance: &mut ProviderInstance,
    mut resp: UpstreamResponse,
    deadline: Instant,
) -> AttemptFailure {
    let body = match tokio::time::timeout_at(deadline, resp.body.read_capped(ERROR_BODY_CAP)).await
    {
        Ok(Ok(b)) => b,
        // The status alone still classifies the failure.
        _ => Vec::new(),
    };
    let headers: Vec<Header> = resp
        .headers
        .iter()
        .filter_map(|(n, v)| {
            v.to_str().ok().map(|v| Header {
                name: n.as_str().to_string(),
                value: v.to_string(),
            })
        })
        .collect();
    let c = match instance.classify_error(resp.status, &headers, &body) {
        Ok(c) => c,
        Err(e) => return AttemptFailure::Plugin(e),
    };
    let header_hint = resp
        .headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, std::time::SystemTime::now(), &source.settings.name));
    let plugin_hint = c.retry_after_ms.map(Duration::from_millis);
    let retry_after = match (header_hint, plugin_hint) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let short = match (c.class, resp.status) {
        (ErrorClass::SourceDead, _) => "source_dead",
        (_, 429) => "rate_limited",
        (_, 408) | (_, 504) => "timeout",
        (_, s) if s >= 500 => "server_error",
        (ErrorClass::RequestRejected, _) => "rejected",
        (ErrorClass::ResultInvalid, _) => "result_invalid",
        _ => "http_error",
    };
    AttemptFailure::Upstream(UpstreamFailure {
        class: c.class,
        message: c.message,
        code: c.code,
        status: Some(resp.status),
        retry_after,
        short,
    })
}
