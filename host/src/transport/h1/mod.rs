//! The upstream HTTP/1.1 client of sources that do not use the process's proxy settings:
//! hyper's connection-level client (`hyper::client::conn::http1`), each connection driven
//! inside the task of the call that is using it instead of in a task of its own.
//!
//! Why: a pooled client such as reqwest (on hyper-util) runs every connection as a spawned
//! task; the request, the response head and every body frame cross between that task and
//! the call's task through channels, one wake-up per hand-off — on a busy runtime one or two
//! thread switches per streamed chunk. Here the call's task polls the connection itself
//! while it waits for the head and while it reads the body, so a chunk goes from the socket
//! to the SSE framer within one task. It also skips reqwest's per-request URL parses (its
//! redirect layer renders and re-parses the URL of every request).
//!
//! Behaviour kept from the reqwest client it replaces (`client.rs` keeps reqwest for sources
//! with `trust_env` and for multipart uploads): TCP_NODELAY; a 10 s bound on connecting
//! (TCP and TLS); keep-alive pools per origin ([`pool`]: at most 1,024 idle connections,
//! dropped after 90 s idle); redirects followed only within the request's origin, at most
//! 10 ([`redirect`]); `user-agent: polygateway/<version>` and `accept: */*` unless the
//! request sets them; TLS by rustls with the webpki roots, offering only `http/1.1` in ALPN.
//!
//! A request that a pooled connection could not even start to send (the upstream closed it
//! while it was idle) is sent once more on a new connection; any later failure is the
//! caller's to retry.

mod conn;
mod pool;
mod redirect;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, HOST, HeaderMap, HeaderValue, USER_AGENT};
use http::{Method, Request};
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;

use super::client::UpstreamError;
use super::redact::strip_userinfo;
pub(crate) use conn::H1Body;
use conn::{Connector, SendFailure};
use pool::Pool;

/// How long connecting (TCP, then TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an idle pooled connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Most idle connections kept per origin.
const MAX_IDLE_PER_ORIGIN: usize = 1024;

/// The client: a connector (DNS, TCP, TLS) and the idle connections per origin. Cheap to
/// share behind an `Arc`; every method takes `&self`.
pub(crate) struct H1Client {
    connector: Connector,
    pool: Pool,
    user_agent: HeaderValue,
}

impl std::fmt::Debug for H1Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H1Client").finish_non_exhaustive()
    }
}

/// The response head and its body, which owns the connection until the body is read.
pub(crate) struct H1Response {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: H1Body,
}

impl H1Client {
    /// A client trusting the webpki roots (Mozilla's CA list compiled in).
    ///
    /// Errors: [`UpstreamError::Invalid`] when rustls refuses its own default protocol set
    /// (it does not with the ring provider).
    pub(crate) fn new() -> Result<Self, UpstreamError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        Self::with_roots(roots)
    }

    /// A client trusting exactly `roots` (tests use their own CA).
    pub(crate) fn with_roots(roots: rustls::RootCertStore) -> Result<Self, UpstreamError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| UpstreamError::Invalid(format!("cannot set up TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        // `enable_http1` alone makes ALPN offer `http/1.1` only.
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(Self {
            connector: Connector::new(https, CONNECT_TIMEOUT),
            pool: Pool::new(MAX_IDLE_PER_ORIGIN, IDLE_TIMEOUT),
            user_agent: HeaderValue::from_static(concat!(
                "polygateway/",
                env!("CARGO_PKG_VERSION")
            )),
        })
    }

    /// Idle connections pooled for `url`'s origin (tests).
    #[cfg(test)]
    pub(crate) fn idle(&self, url: &url::Url) -> usize {
        Origin::of(url).map_or(0, |o| self.pool.idle(&o.key))
    }

    /// Send `method url` with `headers` and `body`; follow same-origin redirects; return
    /// the final response's head with its body unread.
    ///
    /// Errors: [`UpstreamError::Invalid`] for a URL that is not `http`/`https` with a host
    /// or a header value that cannot be sent; [`UpstreamError::Connect`] when DNS, TCP or
    /// TLS fail or take over 10 s; [`UpstreamError::Request`] when the connection fails
    /// after the request was started, or after more than 10 redirects. URLs in errors have
    /// no userinfo.
    pub(crate) async fn send(
        &self,
        method: Method,
        url: &url::Url,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> Result<H1Response, UpstreamError> {
        if !headers.contains_key(USER_AGENT) {
            headers.insert(USER_AGENT, self.user_agent.clone());
        }
        if !headers.contains_key(ACCEPT) {
            headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        }
        let first = Origin::of(url)?;
        let mut method = method;
        let mut body = body;
        let mut redirected: Option<url::Url> = None;
        let mut hops = 0;
        loop {
            let current = redirected.as_ref().unwrap_or(url);
            let resp = self
                .send_once(&first, current, &method, &headers, &body)
                .await?;
            let Some(next) = redirect::follow(&first, current, &method, resp.status, &resp.headers)
            else {
                return Ok(resp);
            };
            if hops == redirect::MAX_REDIRECTS {
                return Err(UpstreamError::Request {
                    url: strip_userinfo(url.as_str()).into_owned(),
                    message: format!("more than {} redirects", redirect::MAX_REDIRECTS),
                });
            }
            hops += 1;
            // The redirect's own body is not read: dropping it closes its connection.
            drop(resp);
            if next.drop_body {
                body = Bytes::new();
                redirect::strip_body_headers(&mut headers);
            }
            method = next.method;
            redirected = Some(next.url);
        }
    }

    /// One request on a pooled connection or a new one; a pooled connection that was
    /// closed before the request could start is replaced by a new one, once.
    async fn send_once(
        &self,
        origin: &Origin,
        url: &url::Url,
        method: &Method,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Result<H1Response, UpstreamError> {
        let request = build_request(origin, url, method, headers, body)?;
        let queue = self.pool.queue(&origin.key);
        let (conn, reused) = match queue.take() {
            Some(c) => (c, true),
            None => (self.connect(origin, url).await?, false),
        };
        match conn::send(conn, request).await {
            Ok((head, conn)) => Ok(H1Response::new(head, conn, queue)),
            Err(SendFailure::NotSent(request)) if reused => {
                let conn = self.connect(origin, url).await?;
                match conn::send(conn, *request).await {
                    Ok((head, conn)) => Ok(H1Response::new(head, conn, queue)),
                    Err(e) => Err(e.into_error(url)),
                }
            }
            Err(e) => Err(e.into_error(url)),
        }
    }

    async fn connect(
        &self,
        origin: &Origin,
        url: &url::Url,
    ) -> Result<Box<conn::Conn>, UpstreamError> {
        self.connector
            .connect(&origin.key)
            .await
            .map_err(|e| UpstreamError::Connect {
                url: strip_userinfo(url.as_str()).into_owned(),
                message: e,
            })
    }
}

impl H1Response {
    fn new(
        resp: http::Response<hyper::body::Incoming>,
        conn: Option<Box<conn::Conn>>,
        queue: Arc<pool::Queue>,
    ) -> Self {
        let (head, body) = resp.into_parts();
        Self {
            status: head.status.as_u16(),
            headers: head.headers,
            body: H1Body::new(body, conn, queue),
        }
    }
}

/// Where a request goes: the pool key `scheme://host:port` (what the connector dials) and
/// the `Host` header.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    key: String,
    host_header: HeaderValue,
}

impl Origin {
    /// The origin of an `http` or `https` URL with a host.
    fn of(url: &url::Url) -> Result<Self, UpstreamError> {
        let scheme = url.scheme();
        let host = url.host_str().filter(|h| !h.is_empty());
        let (Some(host), Some(port), "http" | "https") =
            (host, url.port_or_known_default(), scheme)
        else {
            return Err(UpstreamError::Invalid(format!(
                "upstream URL `{}` is not an http or https URL with a host",
                strip_userinfo(url.as_str())
            )));
        };
        // Built by hand: this runs once per upstream request, and `format!`'s machinery cost
        // ten times the copies (1.5k instructions per string).
        let mut port_text = itoa::Buffer::new();
        let port_text = port_text.format(port);
        let key = [scheme, "://", host, ":", port_text].concat();
        // `Host` carries the port only when the URL names a non-default one (RFC 9110 §7.2).
        let host_header = match url.port() {
            Some(_) => HeaderValue::try_from(&key[scheme.len() + 3..]),
            None => HeaderValue::try_from(host),
        }
        .map_err(|_| {
            UpstreamError::Invalid(format!("upstream host `{host}` is not a valid Host"))
        })?;
        Ok(Self { key, host_header })
    }
}

/// The request in origin form (`/path?query`), with `Host` unless the caller set one.
fn build_request(
    origin: &Origin,
    url: &url::Url,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Request<Full<Bytes>>, UpstreamError> {
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let uri = http::Uri::try_from(target).map_err(|e| {
        UpstreamError::Invalid(format!(
            "upstream URL `{}` has no valid path: {e}",
            strip_userinfo(url.as_str())
        ))
    })?;
    let mut req = Request::new(Full::new(body.clone()));
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri;
    let h = req.headers_mut();
    h.reserve(headers.len() + 1);
    if !headers.contains_key(HOST) {
        h.insert(HOST, origin.host_header.clone());
    }
    for (name, value) in headers {
        h.append(name, value.clone());
    }
    Ok(req)
}
