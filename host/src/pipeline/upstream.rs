//! HTTP of one attempt, chat or lean: turn a plugin's request description into headers
//! (with the credential the host attaches), map a send result, read a 2xx body with a cap,
//! and classify a non-2xx answer through the provider's `classify-error` plus the
//! `Retry-After` header (RFC 9110, both forms; the larger of header and plugin hint wins).
//! Every body is read against `PGW_UPSTREAM_MAX_BODY_BYTES` and the deadline as it arrives;
//! every failure's text is scrubbed of the source's credentials and of URL userinfo
//! ([`scrub`]) before anything reports or stores it.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::Instant;

use crate::plugin::{AuthScheme, ClassifiedError, ErrorClass, Header, PluginError};
use crate::telemetry::otel::AttemptSpan;
use crate::transport::{
    LivenessTimer, UpstreamError, UpstreamResponse, parse_retry_after, redact_secrets,
    strip_userinfo,
};

use super::failure::{AttemptFailure, UpstreamFailure};
use super::runtime::SourceRuntime;

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
        detail: None,
    })
}

/// A transport failure (`short`: `network_error`, `broken_stream`) of `source`: the client
/// is told the error's kind only; the log line and the row get the detail (URLs without
/// userinfo).
pub(crate) fn transport_failure(
    source: &SourceRuntime,
    e: &UpstreamError,
    short: &'static str,
) -> AttemptFailure {
    let detail = e.to_string();
    tracing::warn!(source = %source.settings.name, error = %detail, "upstream transport failed");
    AttemptFailure::Upstream(UpstreamFailure {
        class: ErrorClass::Transient,
        message: e.kind().to_string(),
        code: None,
        status: None,
        retry_after: None,
        short,
        detail: Some(detail),
    })
}

/// The secrets `source` sends upstream: its `API_KEY` and the password of its `BASE_URL`'s
/// userinfo, plain and as the `user:password` of HTTP basic auth (how the client sends it).
fn secrets(source: &SourceRuntime) -> Vec<String> {
    use base64::Engine as _;
    let mut out = Vec::new();
    if let Some(key) = &source.settings.api_key {
        out.push(key.clone());
    }
    if let Ok(url) = reqwest::Url::parse(&source.base_url)
        && let Some(password) = url.password()
    {
        let basic = format!("{}:{password}", url.username());
        out.push(base64::engine::general_purpose::STANDARD.encode(&basic));
        out.push(basic);
        out.push(password.to_string());
    }
    // Longest first, so a secret that contains another goes as a whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

fn clean(text: &mut String, secrets: &[String]) {
    let stripped = strip_userinfo(text);
    let redacted = redact_secrets(&stripped, secrets);
    if redacted != text.as_str() {
        *text = redacted.into_owned();
    }
}

/// `failure` with every credential `source` sends upstream and every URL userinfo taken out
/// of its text, so an upstream that echoes the key cannot make the gateway pass it on to the
/// client, a log or a row. Runs on failed attempts only.
pub(crate) fn scrub(source: &SourceRuntime, mut failure: AttemptFailure) -> AttemptFailure {
    let secrets = secrets(source);
    match &mut failure {
        AttemptFailure::Upstream(u) => {
            clean(&mut u.message, &secrets);
            if let Some(d) = &mut u.detail {
                clean(d, &secrets);
            }
            if let Some(c) = &mut u.code {
                clean(c, &secrets);
            }
        }
        AttemptFailure::Plugin(PluginError::Fault { message, .. })
        | AttemptFailure::Plugin(PluginError::Load { message, .. })
        | AttemptFailure::BuildInvalid(message)
        | AttemptFailure::Unsupported(message) => clean(message, &secrets),
        // A component file's error names a path and sizes, never a credential.
        AttemptFailure::Plugin(PluginError::Version { .. })
        | AttemptFailure::Plugin(PluginError::Checksum { .. })
        | AttemptFailure::Plugin(PluginError::File(_))
        | AttemptFailure::SinkClosed => {}
    }
    failure
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
        detail: None,
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

/// The plugin's headers plus the source's credential per `auth`, and the W3C trace context
/// of the attempt's span when it is traced (docs/tracing.md#propagation; it replaces any the
/// plugin named). A header the host cannot send is a fault of the plugin's `function`.
pub(crate) fn request_headers(
    source: &SourceRuntime,
    function: &'static str,
    headers: &[Header],
    auth: &AuthScheme,
    trace: Option<&AttemptSpan>,
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
    if let Some(span) = trace {
        for (name, value) in span.propagation() {
            if let Ok(v) = HeaderValue::try_from(value.as_str()) {
                map.insert(*name, v);
            }
        }
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
    let url = reqwest::Url::parse(&full).map_err(|e| {
        let full = strip_userinfo(&full);
        fault(source, function, format!("invalid URL `{full}`: {e}"))
    })?;
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
        Ok(Err(e)) => Err(transport_failure(source, &e, "network_error")),
        Ok(Ok(r)) => Ok(r),
    }
}

/// Read a 2xx body of at most `cap` bytes before `deadline`. A body over
/// `PGW_UPSTREAM_MAX_BODY_BYTES` is a transient failure of the source ([`read_answer`]); one
/// over a smaller `cap` is `result_invalid` (the service answered; the answer is too big to
/// parse within the plugin's memory), never silently cut and then mistaken for malformed
/// JSON.
pub(crate) async fn read_body(
    source: &SourceRuntime,
    resp: &mut UpstreamResponse,
    cap: usize,
    deadline: Instant,
) -> Result<Vec<u8>, AttemptFailure> {
    let max_body = resp.body.max_bytes();
    if cap >= max_body {
        return read_answer(source, resp, deadline).await;
    }
    read_capped(source, resp, cap, deadline, |_| {
        result_invalid(format!(
            "the answer exceeds {cap} bytes, the most a plugin parses within its memory cap"
        ))
    })
    .await
}

/// Read a 2xx answer of at most `max_body` bytes (`PGW_UPSTREAM_MAX_BODY_BYTES`) before
/// `deadline`; a longer one is a transient failure of the source, found from its
/// `Content-Length` before reading or while reading, never after holding it all.
pub(crate) async fn read_answer(
    source: &SourceRuntime,
    resp: &mut UpstreamResponse,
    deadline: Instant,
) -> Result<Vec<u8>, AttemptFailure> {
    let max_body = resp.body.max_bytes();
    read_capped(source, resp, max_body, deadline, |_| {
        oversized(source, "answer", max_body, None)
    })
    .await
}

/// The transient failure of a body over `PGW_UPSTREAM_MAX_BODY_BYTES`.
fn oversized(
    source: &SourceRuntime,
    what: &str,
    max_body: usize,
    status: Option<u16>,
) -> AttemptFailure {
    AttemptFailure::Upstream(UpstreamFailure {
        class: ErrorClass::Transient,
        message: format!(
            "the {what} of {} exceeds {max_body} bytes (PGW_UPSTREAM_MAX_BODY_BYTES)",
            source.settings.name
        ),
        code: None,
        status,
        retry_after: None,
        short: "oversized_body",
        detail: None,
    })
}

/// Read a body of at most `cap` bytes before `deadline`; past the cap (by `Content-Length`
/// before reading, or by the bytes read so far), `over(bytes seen)` is the failure and the
/// rest is not read. A timeout or a broken body is transient. The deadline is checked before
/// every read, so a body that is always ready cannot outrun it.
pub(crate) async fn read_capped(
    source: &SourceRuntime,
    resp: &mut UpstreamResponse,
    cap: usize,
    deadline: Instant,
    over: impl Fn(u64) -> AttemptFailure,
) -> Result<Vec<u8>, AttemptFailure> {
    let declared = resp.body.content_length();
    if let Some(n) = declared
        && n > cap as u64
    {
        return Err(over(n));
    }
    // A declared length is trusted only up to the cap.
    let mut out = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    let mut timer = LivenessTimer::new(deadline);
    loop {
        let chunk = match timer.run(deadline, resp.body.chunk()).await {
            None => {
                return Err(transient(
                    format!("total timeout from {}", source.settings.name),
                    "timeout",
                ));
            }
            Some(Err(e)) => return Err(transport_failure(source, &e, "network_error")),
            Some(Ok(None)) => return Ok(out),
            Some(Ok(Some(c))) => c,
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

/// The injected clock's wall time as a `SystemTime` (for an HTTP-date `Retry-After`).
fn wall_clock(source: &SourceRuntime) -> std::time::SystemTime {
    let ms = u64::try_from(source.clock.unix_ms()).unwrap_or(0);
    std::time::SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

/// Classify a non-2xx answer: the provider's `classify-error` on the status, headers and
/// (capped) body, the retry hint from `Retry-After` and the plugin, and a short reason. The
/// first `ERROR_BODY_CAP` bytes of the body are classified; a body over
/// `PGW_UPSTREAM_MAX_BODY_BYTES` is a transient failure with the status, and is not read
/// past that cap.
pub(crate) async fn classify_status(
    source: &SourceRuntime,
    mut resp: UpstreamResponse,
    deadline: Instant,
) -> AttemptFailure {
    let status = resp.status;
    let max_body = resp.body.max_bytes();
    let body = match read_error_body(&mut resp, max_body, deadline).await {
        ErrorBody::Read(b) => b,
        ErrorBody::Oversized => return oversized(source, "error answer", max_body, Some(status)),
        // The status alone still classifies the failure.
        ErrorBody::Broken => Vec::new(),
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
    // An instance is checked out only for the call, not while the body was read.
    let classified = source
        .component
        .instance()
        .and_then(|mut instance| instance.classify_error(resp.status, &headers, &body));
    let c = match classified {
        Ok(c) => c,
        Err(e) => return AttemptFailure::Plugin(e),
    };
    let header_hint = resp
        .headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, wall_clock(source), &source.settings.name));
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
        detail: None,
    })
}

/// An error answer's body as far as it was read.
enum ErrorBody {
    /// Its first `ERROR_BODY_CAP` bytes (all of it if shorter).
    Read(Vec<u8>),
    /// Longer than the cap of bodies.
    Oversized,
    /// It broke or the deadline passed.
    Broken,
}

/// Read an error body: keep its first `ERROR_BODY_CAP` bytes, count the rest against
/// `max_body`.
async fn read_error_body(
    resp: &mut UpstreamResponse,
    max_body: usize,
    deadline: Instant,
) -> ErrorBody {
    if resp
        .body
        .content_length()
        .is_some_and(|n| n > max_body as u64)
    {
        return ErrorBody::Oversized;
    }
    let mut kept = Vec::new();
    let mut seen = 0usize;
    let mut timer = LivenessTimer::new(deadline);
    loop {
        match timer.run(deadline, resp.body.chunk()).await {
            Some(Ok(Some(c))) => {
                seen = seen.saturating_add(c.len());
                if seen > max_body {
                    return ErrorBody::Oversized;
                }
                let room = ERROR_BODY_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&c[..c.len().min(room)]);
            }
            Some(Ok(None)) => return ErrorBody::Read(kept),
            None | Some(Err(_)) => return ErrorBody::Broken,
        }
    }
}
