//! One upstream connection (hyper's HTTP/1 `SendRequest` and its `Connection` driver), how
//! it is opened, and the futures that drive it from the caller's task: while the response
//! head is awaited ([`send`]) and while the body is read ([`H1Body`]). A body read to its end
//! on a connection that stays open returns the connection to its origin's pool; a body
//! dropped before its end closes the connection (its unread bytes make it unusable).
//!
//! A read hands over every body byte already received, not one HTTP chunk: an upstream
//! writes an SSE stream one event per chunk, and a burst of events arrives in one socket
//! read, which the caller then frames and parses in one pass (one guest call per read
//! instead of one per event).

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Body as _;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower_service::Service;

use super::pool::Queue;
use crate::transport::client::{UpstreamError, error_chain};
use crate::transport::redact::strip_userinfo;

type Io = MaybeHttpsStream<TokioIo<TcpStream>>;

/// An open connection: the handle requests are sent through and the driver that reads and
/// writes the socket whenever it is polled.
pub(crate) struct Conn {
    pub(super) tx: http1::SendRequest<Full<Bytes>>,
    pub(super) driver: http1::Connection<Io, Full<Bytes>>,
}

impl Conn {
    /// Poll the driver once; `true` when the connection has ended (closed or failed).
    pub(super) fn poll_ended(&mut self, cx: &mut Context<'_>) -> bool {
        Pin::new(&mut self.driver).poll(cx).is_ready()
    }
}

/// Opens connections: DNS and TCP (hyper-util's `HttpConnector`, TCP_NODELAY), then TLS
/// for `https` (hyper-rustls), then the HTTP/1 handshake; the whole bounded by `timeout`.
pub(super) struct Connector {
    https: HttpsConnector<HttpConnector>,
    timeout: Duration,
}

impl Connector {
    pub(super) fn new(https: HttpsConnector<HttpConnector>, timeout: Duration) -> Self {
        Self { https, timeout }
    }

    /// A new connection to the origin `key` (`scheme://host:port`). Errors are text without
    /// any credential (the key has no userinfo).
    pub(super) async fn connect(&self, key: &str) -> Result<Box<Conn>, String> {
        let authority_uri = http::Uri::try_from(format!("{key}/"))
            .map_err(|e| format!("`{key}` cannot be dialled: {e}"))?;
        let mut https = self.https.clone();
        let dial = async move {
            poll_fn(|cx| https.poll_ready(cx))
                .await
                .map_err(|e| error_chain(&*e))?;
            let io = https
                .call(authority_uri)
                .await
                .map_err(|e| error_chain(&*e))?;
            let (tx, driver) = http1::Builder::new()
                .handshake(io)
                .await
                .map_err(|e| error_chain(&e))?;
            Ok::<_, String>(Box::new(Conn { tx, driver }))
        };
        match tokio::time::timeout(self.timeout, dial).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "no connection within {} s",
                self.timeout.as_secs_f64()
            )),
        }
    }
}

/// Why a request on a connection failed.
pub(super) enum SendFailure {
    /// The connection was closed before the request could be started: it can be sent again
    /// on another connection.
    NotSent(Box<Request<Full<Bytes>>>),
    /// The request was (at least partly) sent, then the connection failed.
    Failed(hyper::Error),
}

impl SendFailure {
    pub(super) fn into_error(self, url: &url::Url) -> UpstreamError {
        let message = match self {
            SendFailure::NotSent(_) => "the connection closed before the request was sent".into(),
            SendFailure::Failed(e) => error_chain(&e),
        };
        UpstreamError::Request {
            url: strip_userinfo(url.as_str()).into_owned(),
            message,
        }
    }
}

/// Send `req` on `conn`, driving the connection in this task until the response head
/// arrives. Returns the head and the connection, `None` when the connection ended meanwhile
/// (`Connection: close`, or the upstream closed it).
pub(super) async fn send(
    mut conn: Box<Conn>,
    req: Request<Full<Bytes>>,
) -> Result<(Response<Incoming>, Option<Box<Conn>>), SendFailure> {
    let mut alive = true;
    let result = {
        let Conn { tx, driver } = &mut *conn;
        let mut head = pin!(tx.try_send_request(req));
        poll_fn(|cx| {
            if alive && Pin::new(&mut *driver).poll(cx).is_ready() {
                alive = false;
            }
            head.as_mut().poll(cx)
        })
        .await
    };
    match result {
        Ok(resp) => Ok((resp, alive.then_some(conn))),
        Err(mut e) => match e.take_message() {
            Some(req) => Err(SendFailure::NotSent(Box::new(req))),
            None => Err(SendFailure::Failed(e.into_error())),
        },
    }
}

/// Bytes after which one [`H1Body::chunk`] stops joining the chunks already received: a
/// burst of SSE events is handed over (and parsed) together, and what one read holds stays
/// bounded (by this plus one chunk).
pub(crate) const JOIN_MAX_BYTES: usize = 64 * 1024;

/// A response body read in the caller's task, which drives the connection as it reads.
pub(crate) struct H1Body {
    body: Incoming,
    /// Boxed: hyper's connection state is ~1.7 KB, and a body moves with its response.
    conn: Option<Box<Conn>>,
    queue: Arc<Queue>,
    ended: bool,
    /// A failure met while joining chunks, after bytes that were handed over first: the
    /// next read returns it.
    failed: Option<hyper::Error>,
}

impl H1Body {
    pub(super) fn new(body: Incoming, conn: Option<Box<Conn>>, queue: Arc<Queue>) -> Self {
        Self {
            body,
            conn,
            queue,
            ended: false,
            failed: None,
        }
    }

    /// The body's length from `Content-Length`, when the upstream sent one.
    pub(crate) fn content_length(&self) -> Option<u64> {
        self.body.size_hint().exact()
    }

    /// The next bytes of the body: the next chunk joined with every chunk already received
    /// after it (joining stops once [`JOIN_MAX_BYTES`] are held), never waiting for more;
    /// `None` at its end (then the connection, if still open, goes back to the pool).
    ///
    /// Errors: the connection failed or closed before the body's end (after the bytes
    /// received before the failure were returned).
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, hyper::Error> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if self.ended {
            return Ok(None);
        }
        poll_fn(|cx| self.poll_joined(cx)).await
    }

    /// The next chunk and those that follow it without waiting, as one buffer; an end or a
    /// failure met after the first chunk is kept for the next read.
    fn poll_joined(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, hyper::Error>> {
        let first = match self.poll_chunk(cx) {
            Poll::Ready(Ok(Some(first))) => first,
            other => return other,
        };
        let mut joined: Option<Vec<u8>> = None;
        while joined.as_ref().map_or(first.len(), Vec::len) < JOIN_MAX_BYTES {
            match self.poll_chunk(cx) {
                Poll::Pending | Poll::Ready(Ok(None)) => break,
                Poll::Ready(Err(e)) => {
                    self.failed = Some(e);
                    break;
                }
                Poll::Ready(Ok(Some(next))) => joined
                    .get_or_insert_with(|| {
                        let mut v = Vec::with_capacity(first.len() + next.len());
                        v.extend_from_slice(&first);
                        v
                    })
                    .extend_from_slice(&next),
            }
        }
        Poll::Ready(Ok(Some(joined.map_or(first, Bytes::from))))
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, hyper::Error>> {
        self.poll_driver(cx);
        loop {
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    self.ended = true;
                    self.release(cx);
                    return Poll::Ready(Ok(None));
                }
                Poll::Ready(Some(Err(e))) => {
                    self.conn = None;
                    return Poll::Ready(Err(e));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => return Poll::Ready(Ok(Some(data))),
                    // Empty data frames and trailers carry nothing a reader wants.
                    _ => continue,
                },
            }
        }
    }

    fn poll_driver(&mut self, cx: &mut Context<'_>) {
        if let Some(conn) = &mut self.conn
            && conn.poll_ended(cx)
        {
            self.conn = None;
        }
    }

    /// At the body's end: the connection goes back to the pool when it can take another
    /// request.
    fn release(&mut self, cx: &mut Context<'_>) {
        self.poll_driver(cx);
        if let Some(conn) = self.conn.take()
            && conn.tx.is_ready()
        {
            self.queue.put(conn);
        }
    }
}
