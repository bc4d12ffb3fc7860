//! The pooled upstream HTTP client (reqwest on hyper, TCP_NODELAY, keep-alive pools). Two
//! clients: one that ignores the process's proxy settings (the default) and one that uses
//! them (`TRUST_ENV=true`).

use std::time::Duration;

use bytes::Bytes;

/// Transport-level failure of one upstream request (always transient).
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("connect to {url}: {message}")]
    Connect { url: String, message: String },
    #[error("upstream request to {url} failed: {message}")]
    Request { url: String, message: String },
    #[error("reading the upstream body failed: {0}")]
    Body(String),
    #[error("invalid upstream request: {0}")]
    Invalid(String),
}

/// The upstream's answer: status, headers, and a body read chunk by chunk.
pub struct UpstreamResponse {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: UpstreamBody,
}

/// The body of an upstream response, read incrementally. Dropping it closes the stream
/// (the connection is not reused if unread bytes remain).
pub struct UpstreamBody(reqwest::Response);

impl UpstreamBody {
    /// The next chunk of bytes; `None` at the end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, UpstreamError> {
        self.0
            .chunk()
            .await
            .map_err(|e| UpstreamError::Body(error_chain(&e)))
    }

    /// Read the whole body, keeping at most `cap` bytes (the rest is read and discarded).
    pub async fn read_capped(&mut self, cap: usize) -> Result<Vec<u8>, UpstreamError> {
        let mut out = Vec::new();
        while let Some(c) = self.chunk().await? {
            let room = cap.saturating_sub(out.len());
            out.extend_from_slice(&c[..c.len().min(room)]);
        }
        Ok(out)
    }
}

/// The two shared clients.
#[derive(Debug, Clone)]
pub struct HttpClients {
    direct: reqwest::Client,
    with_env_proxy: reqwest::Client,
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
    /// Build the clients.
    pub fn new() -> Result<Self, UpstreamError> {
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
            direct: build(false)?,
            with_env_proxy: build(true)?,
        })
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
        let client = if trust_env {
            &self.with_env_proxy
        } else {
            &self.direct
        };
        let mut resp = client
            .request(method, url.clone())
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| request_error(url.as_str(), &e))?;
        Ok(UpstreamResponse {
            status: resp.status().as_u16(),
            headers: std::mem::take(resp.headers_mut()),
            body: UpstreamBody(resp),
        })
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
        let mut resp = client
            .post(url.clone())
            .headers(headers)
            .multipart(form)
            .send()
            .await
            .map_err(|e| request_error(url.as_str(), &e))?;
        Ok(UpstreamResponse {
            status: resp.status().as_u16(),
            headers: std::mem::take(resp.headers_mut()),
            body: UpstreamBody(resp),
        })
    }
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

fn request_error(url: &str, e: &reqwest::Error) -> UpstreamError {
    if e.is_connect() {
        UpstreamError::Connect {
            url: url.to_string(),
            message: error_chain(e),
        }
    } else {
        UpstreamError::Request {
            url: url.to_string(),
            message: error_chain(e),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
