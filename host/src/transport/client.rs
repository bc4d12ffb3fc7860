//! The upstream HTTP clients. Requests of sources that ignore the process's proxy settings
//! (the default) go through the HTTP/1.1 client driven in the caller's task (`h1/`); those of
//! sources with `TRUST_ENV=true`, and multipart uploads, through reqwest (on hyper,
//! TCP_NODELAY, keep-alive pools). Errors carry the URL without its userinfo, never a
//! credential.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::h1::{H1Body, H1Client};
use crate::config::UpstreamLimits;

/// Transport-level failure of one upstream request (always transient). URLs in it have
/// their userinfo removed (`http://user:pass@host/…` → `http://host/…`).
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection: DNS, TCP or TLS failed. `url` has no userinfo.
    #[error("connect to {url}: {message}")]
    Connect { url: String, message: String },
    /// The request failed after connecting (reset, protocol error, redirect limit). `url`
    /// has no userinfo.
    #[error("upstream request to {url} failed: {message}")]
    Request { url: String, message: String },
    /// The body broke while it was read.
    #[error("reading the upstream body failed: {0}")]
    Body(String),
    /// The request cannot be sent (bad method, content type, client set-up).
    #[error("invalid upstream request: {0}")]
    Invalid(String),
}

impl UpstreamError {
    /// The kind of failure, without any detail: what a client is told.
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamError::Connect { .. } => "connect_error",
            UpstreamError::Request { .. } => "request_error",
            UpstreamError::Body(_) => "body_error",
            UpstreamError::Invalid(_) => "invalid_request",
        }
    }
}

/// The upstream's answer: status, headers, and a body read chunk by chunk.
pub struct UpstreamResponse {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: UpstreamBody,
}

/// The body of an upstream response, read incrementally. Dropping it closes the stream
/// (the connection is not reused if unread bytes remain).
pub struct UpstreamBody {
    inner: BodyInner,
    max_bytes: usize,
}

enum BodyInner {
    Reqwest(reqwest::Response),
    H1(H1Body),
}

impl UpstreamBody {
    /// The next chunk of bytes; `None` at the end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, UpstreamError> {
        match &mut self.inner {
            BodyInner::Reqwest(r) => r
                .chunk()
                .await
                .map_err(|e| UpstreamError::Body(error_chain(&e.without_url()))),
            BodyInner::H1(b) => b
                .chunk()
                .await
                .map_err(|e| UpstreamError::Body(error_chain(&e))),
        }
    }

    /// The body's length from `Content-Length`, when the upstream sent one.
    pub fn content_length(&self) -> Option<u64> {
        match &self.inner {
            BodyInner::Reqwest(r) => r.content_length(),
            BodyInner::H1(b) => b.content_length(),
        }
    }

    /// The most bytes a non-streamed or error body may have
    /// (`PGW_UPSTREAM_MAX_BODY_BYTES`); the readers of such bodies stop past it.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

/// The two shared clients, and the bounds on what an upstream may send.
#[derive(Debug, Clone)]
pub struct HttpClients {
    h1: Arc<H1Client>,
    direct: reqwest::Client,
    with_env_proxy: reqwest::Client,
    limits: UpstreamLimits,
}

/// Redirects are followed (at most 10) only within the origin of the request: a request
/// may carry a source's credential in any header the plugin named, and the client strips
/// only the standard ones on a cross-origin hop. A cross-origin redirect is answered as the
/// 3xx it is.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(|u| u.origin());
        if attempt.previous().len() >= 10 {
            attempt.error("more than 10 redirects")
        } else if first.is_some_and(|o| o != attempt.url().origin()) {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

impl HttpClients {
    /// Build the clients; bodies they return carry `limits.max_body_bytes`.
    pub fn new(limits: UpstreamLimits) -> Result<Self, UpstreamError> {
        let build = |trust_env: bool| {
            let mut b = reqwest::Client::builder()
                .tcp_nodelay(true)
                .pool_idle_timeout(Duration::from_secs(90))
                .pool_max_idle_per_host(1024)
                .connect_timeout(Duration::from_secs(10))
                .redirect(same_origin_redirects())
                .user_agent(concat!("polygateway/", env!("CARGO_PKG_VERSION")));
            if !trust_env {
                b = b.no_proxy();
            }
            b.build()
                .map_err(|e| UpstreamError::Invalid(format!("cannot build the HTTP client: {e}")))
        };
        Ok(Self {
            h1: Arc::new(H1Client::new()?),
            direct: build(false)?,
            with_env_proxy: build(true)?,
            limits,
        })
    }

    /// The same pooled clients with other limits (a reload keeps the connection pools).
    pub fn with_limits(&self, limits: UpstreamLimits) -> Self {
        Self {
            limits,
            ..self.clone()
        }
    }

    /// The bounds on upstream answers.
    pub fn limits(&self) -> UpstreamLimits {
        self.limits
    }

    fn response(&self, mut resp: reqwest::Response) -> UpstreamResponse {
        UpstreamResponse {
            status: resp.status().as_u16(),
            headers: std::mem::take(resp.headers_mut()),
            body: UpstreamBody {
                inner: BodyInner::Reqwest(resp),
                max_bytes: self.limits.max_body_bytes,
            },
        }
    }

    /// Send one request and wait for the response head.
    pub async fn send(
        &self,
        trust_env: bool,
        method: &str,
        url: &reqwest::Url,
        headers: reqwest::header::HeaderMap,
        body: Vec<u8>,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| UpstreamError::Invalid(format!("bad HTTP method `{method}`")))?;
        if !trust_env {
            let resp = self
                .h1
                .send(method, url, headers, Bytes::from(body))
                .await?;
            return Ok(UpstreamResponse {
                status: resp.status,
                headers: resp.headers,
                body: UpstreamBody {
                    inner: BodyInner::H1(resp.body),
                    max_bytes: self.limits.max_body_bytes,
                },
            });
        }
        let resp = self
            .with_env_proxy
            .request(method, url.clone())
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| request_error(url, e))?;
        Ok(self.response(resp))
    }

    /// `POST` a `multipart/form-data` upload (the client sets `content-type` with the
    /// boundary) and wait for the response head.
    pub async fn send_multipart(
        &self,
        trust_env: bool,
        url: &reqwest::Url,
        headers: reqwest::header::HeaderMap,
        upload: MultipartUpload,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let client = if trust_env {
            &self.with_env_proxy
        } else {
            &self.direct
        };
        // With its length, the form has a Content-Length (no chunked upload).
        let len = upload.bytes.len() as u64;
        let file = reqwest::multipart::Part::stream_with_length(upload.bytes, len)
            .file_name(upload.file_name)
            .mime_str(&upload.content_type)
            .map_err(|_| {
                UpstreamError::Invalid(format!("bad content type `{}`", upload.content_type))
            })?;
        let mut form = reqwest::multipart::Form::new();
        for (name, value) in upload.fields {
            form = form.text(name, value);
        }
        form = form.part(upload.file_field, file);
        let resp = client
            .post(url.clone())
            .headers(headers)
            .multipart(form)
            .send()
            .await
            .map_err(|e| request_error(url, e))?;
        Ok(self.response(resp))
    }
}

/// The HTTP client of the OpenTelemetry trace exporter (docs/tracing.md#export): its own
/// small pool, so exports never take a connection from the upstreams' pools; no proxy from
/// the environment; every request bounded by `timeout`; no redirects (a collector that
/// redirects is misconfigured, and its headers may carry a credential).
pub fn collector_client(timeout: Duration) -> Result<reqwest::Client, UpstreamError> {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .pool_max_idle_per_host(2)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("polygateway/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            UpstreamError::Invalid(format!("cannot build the collector's HTTP client: {e}"))
        })
}

/// A `multipart/form-data` upload: text fields in order, then one file part.
#[derive(Debug, Clone)]
pub struct MultipartUpload {
    /// The form field of the file part.
    pub file_field: String,
    /// The file name sent with the part.
    pub file_name: String,
    /// The part's media type, e.g. `image/png`.
    pub content_type: String,
    pub bytes: Bytes,
    /// Text fields (name, value), sent before the file part.
    pub fields: Vec<(String, String)>,
}

/// The error of a request to `url`, with the URL once (the error's own copy is dropped)
/// and without userinfo.
fn request_error(url: &reqwest::Url, e: reqwest::Error) -> UpstreamError {
    let connect = e.is_connect();
    let message = error_chain(&e.without_url());
    let url = super::redact::strip_userinfo(url.as_str()).into_owned();
    if connect {
        UpstreamError::Connect { url, message }
    } else {
        UpstreamError::Request { url, message }
    }
}

/// The error and its sources joined with `: `, any URL in them without userinfo.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    super::redact::strip_userinfo(&s).into_owned()
}
