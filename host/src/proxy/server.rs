//! The proxy's accept loop and client connections (HTTP/1.1 over hyper): the connection cap
//! (`PGW_MAX_CONNECTIONS`: at the cap the loop stops accepting, so waiting clients sit in
//! the kernel's accept queue and hold no descriptor of ours), each connection's two timers
//! (`PGW_HEADER_READ_TIMEOUT_S` while a request head arrives, `PGW_IDLE_TIMEOUT_S` while a
//! keep-alive connection waits for its next request; neither runs while a request is in
//! flight), and graceful shutdown (stop accepting, close connections that have no request
//! in flight, let in-flight ones finish for `PGW_SHUTDOWN_GRACE_S`, then close the rest).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use axum::routing::future::RouteFuture;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use crate::config::ListenerSettings;

/// After the grace period, how long the loop waits for the connections it closed to be
/// dropped (their calls' cancellation rows are recorded then), before returning anyway.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// Pause after an accept error that is not about one connection (out of descriptors):
/// retrying at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// Serve `router` on `listener` until `shutdown` resolves, then drain as described in the
/// module header. `draining` is cancelled when shutdown starts (the body-read layer stops
/// waiting for bodies then). Returns once every connection is closed.
pub(crate) async fn run(
    listener: TcpListener,
    router: Router,
    limits: &ListenerSettings,
    draining: CancellationToken,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    let closing = CancellationToken::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // The header timeout is ours (`ConnTimer`): hyper's would also run while a keep-alive
    // connection is idle, and it needs a timer hyper would read on every request.
    http.header_read_timeout(None);
    let http = Arc::new(http);
    tokio::pin!(shutdown);
    let mut full = false;
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            r = listener.accept() => r,
        };
        let (tcp, peer) = match accepted {
            Ok(x) => x,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                tracing::error!(error = %e, "cannot accept a client connection; retrying in 1 s");
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                }
            }
        };
        if slots.available_permits() == 0 {
            if !full {
                tracing::warn!(
                    max = limits.max_connections,
                    "PGW_MAX_CONNECTIONS reached: new connections wait until one closes"
                );
            }
            full = true;
        } else {
            full = false;
        }
        // TCP_NODELAY: without it, small SSE writes wait for the client's delayed ACK
        // (~40 ms per chunk on Linux).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a client connection");
        }
        tokio::spawn(connection(Conn {
            tcp,
            peer,
            router: router.clone(),
            http: http.clone(),
            header_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
            draining: draining.clone(),
            closing: closing.clone(),
            _slot: permit,
        }));
    }
    // New connections are refused from here on.
    drop(listener);
    draining.cancel();
    let all = limits.max_connections;
    let open = all as usize - slots.available_permits();
    if open > 0 {
        tracing::info!(
            open,
            grace_s = limits.shutdown_grace.as_secs_f64(),
            "shutting down: letting in-flight requests finish"
        );
    }
    if tokio::time::timeout(limits.shutdown_grace, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            open = all as usize - slots.available_permits(),
            "PGW_SHUTDOWN_GRACE_S expired: closing the remaining connections"
        );
        closing.cancel();
        let _ = tokio::time::timeout(CLOSE_WAIT, slots.acquire_many(all)).await;
    }
}

/// An accept error about one connection (the client gave up before it was accepted).
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// One accepted connection and what it needs.
struct Conn {
    tcp: TcpStream,
    peer: SocketAddr,
    router: Router,
    http: Arc<hyper::server::conn::http1::Builder>,
    header_timeout: Duration,
    idle_timeout: Duration,
    draining: CancellationToken,
    closing: CancellationToken,
    /// The connection's place under `PGW_MAX_CONNECTIONS`, given back when it ends.
    _slot: OwnedSemaphorePermit,
}

/// Serve one connection until the client closes it, a timer fires, or shutdown closes it.
/// Returning drops the connection: its socket, and any request still in flight with it.
async fn connection(c: Conn) {
    let activity = Arc::new(Activity::default());
    let io = TokioIo::new(CountingIo {
        tcp: c.tcp,
        activity: activity.clone(),
    });
    let service = ConnService {
        router: c.router,
        peer: c.peer,
        activity: activity.clone(),
    };
    let conn = c.http.serve_connection(io, service);
    tokio::pin!(conn);
    let mut timer = ConnTimer::new(activity.clone(), c.header_timeout, c.idle_timeout);
    let mut draining = false;
    loop {
        // The connection is polled first: a response that ends in this poll makes the
        // connection idle, and the timer, polled next, sees it at once.
        tokio::select! {
            biased;
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(peer = %c.peer, error = %e, "client connection ended with an error");
                }
                return;
            }
            limit = &mut timer => {
                tracing::debug!(peer = %c.peer, limit, "closing a client connection at its time limit");
                return;
            }
            () = c.draining.cancelled(), if !draining => {
                draining = true;
                if !activity.is_busy() {
                    return;
                }
                // Finish the request in flight, then close.
                conn.as_mut().graceful_shutdown();
            }
            () = c.closing.cancelled() => return,
        }
    }
}

/// What a connection's requests and reads tell its timer.
#[derive(Debug, Default)]
struct Activity {
    /// Requests in flight: from the end of the head to the end (or drop) of the response.
    busy: AtomicU32,
    /// Requests that ended (a whole request can start and end within one poll of the
    /// connection, unseen by `busy` alone).
    ends: AtomicU64,
    /// Reads that returned bytes.
    reads: AtomicU64,
}

impl Activity {
    fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire) > 0
    }
}

/// Marks a request in flight for as long as it lives.
struct BusyGuard(Arc<Activity>);

impl BusyGuard {
    fn new(activity: Arc<Activity>) -> Self {
        activity.busy.fetch_add(1, Ordering::AcqRel);
        Self(activity)
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.ends.fetch_add(1, Ordering::AcqRel);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where a connection is in its life, for its timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A request head is (or the first one may be) arriving: `PGW_HEADER_READ_TIMEOUT_S`.
    Head,
    /// A request is in flight: no timer (the body-read layer and the call bound it).
    Busy,
    /// Between requests, nothing received yet: `PGW_IDLE_TIMEOUT_S`.
    Idle,
}

/// Resolves, with the key of the limit, when the connection spent too long reading a head
/// or idle. Polled with the connection, in its task.
struct ConnTimer {
    activity: Arc<Activity>,
    phase: Phase,
    ends_seen: u64,
    reads_seen: u64,
    sleep: Pin<Box<Sleep>>,
    header: Duration,
    idle: Duration,
}

impl ConnTimer {
    /// A fresh connection: its first request head must arrive within the header timeout.
    fn new(activity: Arc<Activity>, header: Duration, idle: Duration) -> Self {
        Self {
            activity,
            phase: Phase::Head,
            ends_seen: 0,
            reads_seen: 0,
            sleep: Box::pin(tokio::time::sleep(header)),
            header,
            idle,
        }
    }
}

impl Future for ConnTimer {
    type Output = &'static str;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<&'static str> {
        let this = &mut *self;
        if this.activity.is_busy() {
            // Nothing to wake: the request ends inside a poll of the connection, which is
            // followed by a poll of this timer.
            this.phase = Phase::Busy;
            return Poll::Pending;
        }
        let ends = this.activity.ends.load(Ordering::Acquire);
        let reads = this.activity.reads.load(Ordering::Relaxed);
        if this.phase == Phase::Busy || ends != this.ends_seen {
            // A request ended since the last poll: wait for the next one.
            this.phase = Phase::Idle;
            this.ends_seen = ends;
            this.reads_seen = reads;
            this.sleep.as_mut().reset(Instant::now() + this.idle);
        } else if this.phase == Phase::Idle && reads != this.reads_seen {
            this.phase = Phase::Head;
            this.sleep.as_mut().reset(Instant::now() + this.header);
        }
        ready!(this.sleep.as_mut().poll(cx));
        Poll::Ready(match this.phase {
            Phase::Idle => "PGW_IDLE_TIMEOUT_S",
            Phase::Head | Phase::Busy => "PGW_HEADER_READ_TIMEOUT_S",
        })
    }
}

/// The client socket, counting the reads that return bytes (an idle connection whose
/// next request starts arriving moves to the header timer).
struct CountingIo {
    tcp: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for CountingIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.reads.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for CountingIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// The router as one connection's hyper service: the peer address for the handlers
/// (`ConnectInfo`), and the request marked in flight until its response body is done.
#[derive(Clone)]
struct ConnService {
    router: Router,
    peer: SocketAddr,
    activity: Arc<Activity>,
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<GuardedBody>;
    type Error = Infallible;
    type Future = GuardedFuture;

    fn call(&self, mut req: Request<Incoming>) -> GuardedFuture {
        let guard = BusyGuard::new(self.activity.clone());
        req.extensions_mut().insert(ConnectInfo(self.peer));
        let inner = tower_service::Service::call(&mut self.router.clone(), req);
        GuardedFuture {
            inner,
            guard: Some(guard),
        }
    }
}

pin_project_lite::pin_project! {
    /// The router's future; its response body takes over the request's [`BusyGuard`].
    struct GuardedFuture {
        #[pin]
        inner: RouteFuture<Infallible>,
        guard: Option<BusyGuard>,
    }
}

impl Future for GuardedFuture {
    type Output = Result<Response<GuardedBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let resp = ready!(this.inner.poll(cx))?;
        let guard = this.guard.take();
        Poll::Ready(Ok(resp.map(|body| GuardedBody {
            body,
            _guard: guard,
        })))
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request in flight until hyper is done with it.
    struct GuardedBody {
        #[pin]
        body: Body,
        _guard: Option<BusyGuard>,
    }
}

impl HttpBody for GuardedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within a millisecond (the paused clock advances to timer deadlines exactly).
    fn near(got: Duration, want: Duration) -> bool {
        got >= want && got <= want + Duration::from_millis(1)
    }

    #[tokio::test(start_paused = true)]
    async fn the_timer_follows_the_connection_phases() {
        let a = Arc::new(Activity::default());
        let header = Duration::from_secs(10);
        let idle = Duration::from_secs(75);
        let mut t = ConnTimer::new(a.clone(), header, idle);
        // A fresh connection: the header timer.
        let start = Instant::now();
        assert_eq!((&mut t).await, "PGW_HEADER_READ_TIMEOUT_S");
        assert!(near(start.elapsed(), header));

        // A request in flight: no timer, however long it takes.
        let mut t = ConnTimer::new(a.clone(), header, idle);
        let g = BusyGuard::new(a.clone());
        assert!(
            tokio::time::timeout(Duration::from_secs(600), &mut t)
                .await
                .is_err()
        );
        // It ends: the idle timer.
        drop(g);
        let start = Instant::now();
        assert_eq!((&mut t).await, "PGW_IDLE_TIMEOUT_S");
        assert!(near(start.elapsed(), idle));

        // A request that starts and ends between two polls: the idle timer all the same.
        let mut t = ConnTimer::new(a.clone(), header, idle);
        drop(BusyGuard::new(a.clone()));
        assert!(
            tokio::time::timeout(Duration::from_secs(50), &mut t)
                .await
                .is_err()
        );
        a.reads.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        assert_eq!((&mut t).await, "PGW_HEADER_READ_TIMEOUT_S");
        assert!(near(start.elapsed(), header));
    }
}
