//! What wraps every route of the proxy: the `x-request-id` of every response, CORS
//! (`PGW_CORS_ORIGINS`), the request-body deadline (`PGW_BODY_READ_TIMEOUT_S`, 408), and the
//! OpenAI-shaped JSON answers for a path the gateway does not serve (404) and a method a
//! path does not accept (405).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, Uri, header};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio_util::sync::CancellationToken;
use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer, ExposeHeaders};

use super::errors::plain_error;
use crate::config::CorsOrigins;
use crate::pipeline::Gateway;

/// The response header that identifies a response: the call id for a call
/// (`x-pgw-call-id`), a fresh UUID otherwise.
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// The header a call's answer carries its id in.
const CALL_ID: &str = "x-pgw-call-id";
/// Most characters of a request path quoted back in an error message.
const MAX_QUOTED_PATH: usize = 256;
/// How long a browser may cache a preflight answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// Every response carries `x-request-id`: a call's id when the handler set
/// `x-pgw-call-id`, else a fresh UUID (v7, so ids sort by time like call ids).
pub(crate) async fn request_id(State(gateway): State<Gateway>, resp: Response) -> Response {
    with_request_id(resp, || gateway.new_id())
}

/// `resp` with its `x-request-id`: the call id, else `fresh()`.
fn with_request_id(mut resp: Response, fresh: impl FnOnce() -> String) -> Response {
    if resp.headers().contains_key(REQUEST_ID) {
        return resp;
    }
    let id = match resp.headers().get(CALL_ID) {
        Some(v) => v.clone(),
        None => match HeaderValue::try_from(fresh()) {
            Ok(v) => v,
            Err(_) => return resp,
        },
    };
    resp.headers_mut().insert(REQUEST_ID, id);
    resp
}

/// The CORS layer of `PGW_CORS_ORIGINS`; none when no origin is allowed (then no CORS
/// header is ever sent and `OPTIONS` gets the 405 of [`method_not_allowed`]). Preflights
/// from an allowed origin are answered for every path; the browser may send any request
/// header (the OpenAI SDKs send their own `x-stainless-*` ones) and read the gateway's
/// `x-pgw-*`, `x-request-id` and `Retry-After` headers.
pub(crate) fn cors(origins: &CorsOrigins) -> Option<CorsLayer> {
    let allow = match origins {
        CorsOrigins::None => return None,
        CorsOrigins::Any => AllowOrigin::any(),
        CorsOrigins::List(list) => {
            AllowOrigin::list(list.iter().filter_map(|o| HeaderValue::try_from(o).ok()))
        }
    };
    let expose = [
        "x-request-id",
        "x-pgw-call-id",
        "x-pgw-source",
        "x-pgw-attempts",
        "x-pgw-cache-hit",
        "x-pgw-usage-source",
        "x-pgw-overhead-us",
        "retry-after",
    ]
    .map(HeaderName::from_static);
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods(AllowMethods::list([
                Method::GET,
                Method::POST,
                Method::OPTIONS,
            ]))
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers(ExposeHeaders::list(expose))
            .max_age(PREFLIGHT_MAX_AGE),
    )
}

/// What the body-read deadline needs.
#[derive(Clone)]
pub(crate) struct BodyRead {
    /// `PGW_BODY_READ_TIMEOUT_S`.
    pub timeout: Duration,
    /// Cancelled when the server starts shutting down: a body still arriving then is not
    /// waited for.
    pub draining: CancellationToken,
}

/// The body was read in time (or not at all).
const NOT_CUT: u8 = 0;
/// `PGW_BODY_READ_TIMEOUT_S` passed while the body was still arriving.
const CUT_TIMEOUT: u8 = 1;
/// The server started shutting down while the body was still arriving.
const CUT_DRAINING: u8 = 2;

/// The request body must arrive within `PGW_BODY_READ_TIMEOUT_S` of the end of its head:
/// the handler reads it through [`DeadlineBody`], whose read fails at the deadline (or when
/// shutdown starts), and its answer is then replaced by 408 naming the key (or 503), with
/// the connection closed. The handler still reads the body itself, after its auth check and
/// under its own size limit, so nothing is buffered here.
pub(crate) async fn read_body(
    State(limits): State<BodyRead>,
    req: Request,
    next: Next,
) -> Response {
    let (parts, body) = req.into_parts();
    if body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let cut = Arc::new(AtomicU8::new(NOT_CUT));
    let BodyRead { timeout, draining } = limits;
    let body = Body::new(DeadlineBody::new(body, timeout, draining, cut.clone()));
    let resp = next.run(Request::from_parts(parts, body)).await;
    match cut.load(Ordering::Acquire) {
        CUT_TIMEOUT => closing(plain_error(
            408,
            "request_timeout",
            &format!(
                "the request body did not arrive within PGW_BODY_READ_TIMEOUT_S ({} s)",
                timeout.as_secs_f64()
            ),
        )),
        CUT_DRAINING => closing(plain_error(
            503,
            "service_unavailable",
            "the gateway is shutting down; send the request again",
        )),
        _ => resp,
    }
}

/// What wakes a read waiting for more of the body: the deadline or the start of shutdown.
type Wake = Pin<Box<dyn Future<Output = u8> + Send>>;

pin_project_lite::pin_project! {
    /// A request body whose reads fail once its deadline `until` passes or `draining` is
    /// cancelled (with why, in `cut`).
    ///
    /// Both are checked at every read without waiting on them (a clock read and an atomic
    /// load); the timer and the shutdown waiter that wake a read are armed only when the
    /// body has nothing ready. Most bodies arrive with their head and never wait, and arming
    /// both for every request registered a timer in the runtime's wheel and a waiter in the
    /// shutdown token's list (under its lock, shared by every worker) and removed them
    /// again: ~1.7k instructions a request (`host/src/bench/instructions.py`).
    struct DeadlineBody {
        #[pin]
        inner: Body,
        until: tokio::time::Instant,
        draining: CancellationToken,
        wake: Option<Wake>,
        cut: Arc<AtomicU8>,
    }
}

impl DeadlineBody {
    /// `inner`, to be read within `timeout` from now and before `draining` is cancelled.
    fn new(
        inner: Body,
        timeout: Duration,
        draining: CancellationToken,
        cut: Arc<AtomicU8>,
    ) -> Self {
        Self {
            inner,
            until: tokio::time::Instant::now() + timeout,
            draining,
            wake: None,
            cut,
        }
    }
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.project();
        // The deadline first: a client that always has a byte ready is cut all the same.
        let why = match this.cut.load(Ordering::Acquire) {
            NOT_CUT if this.draining.is_cancelled() => CUT_DRAINING,
            NOT_CUT if tokio::time::Instant::now() >= *this.until => CUT_TIMEOUT,
            why => why,
        };
        if why != NOT_CUT {
            return cut_read(this.cut, why);
        }
        let frame = this.inner.poll_frame(cx);
        if frame.is_ready() {
            return frame;
        }
        // Nothing ready: be woken by the next bytes, the deadline or the start of shutdown.
        let wake = this.wake.get_or_insert_with(|| {
            let (until, draining) = (*this.until, this.draining.clone());
            Box::pin(async move {
                tokio::select! {
                    () = tokio::time::sleep_until(until) => CUT_TIMEOUT,
                    () = draining.cancelled_owned() => CUT_DRAINING,
                }
            })
        });
        match wake.as_mut().poll(cx) {
            Poll::Ready(why) => cut_read(this.cut, why),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A read of a body cut for `why` (recorded in `cut` for [`read_body`]'s answer): an error.
fn cut_read(cut: &AtomicU8, why: u8) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
    cut.store(why, Ordering::Release);
    Poll::Ready(Some(Err(axum::Error::new(
        "the request body did not arrive in time",
    ))))
}

/// `resp` with `Connection: close`: the rest of the request is not read, so the connection
/// cannot carry another one.
fn closing(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// A request path as quoted in an error message (at most [`MAX_QUOTED_PATH`] characters).
fn quoted_path(uri: &Uri) -> String {
    let path = uri.path();
    match path.char_indices().nth(MAX_QUOTED_PATH) {
        Some((i, _)) => format!("{}…", &path[..i]),
        None => path.to_string(),
    }
}

/// 404 for a path no route serves, naming it.
pub(crate) async fn not_found(uri: Uri) -> Response {
    plain_error(
        404,
        "invalid_request_error",
        &format!(
            "{} is not supported by this gateway (it serves POST /v1/chat/completions, POST /v1/embeddings, POST /v1/ocr/text, POST /v1/ocr/layout, GET /v1/models, GET /v1/models/{{model}}, GET /healthz, GET /metrics, POST /admin/reload)",
            quoted_path(&uri)
        ),
    )
}

/// 405 for a method a served path does not accept (the `Allow` header lists those it
/// does); for `OPTIONS`, also that CORS is off.
pub(crate) async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let hint = if method == Method::OPTIONS {
        " (CORS preflight is off: PGW_CORS_ORIGINS allows no origin)"
    } else {
        ""
    };
    plain_error(
        405,
        "invalid_request_error",
        &format!(
            "method {method} is not allowed on {}; see the Allow header{hint}",
            quoted_path(&uri)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_paths_are_cut_in_messages() {
        let long: Uri = format!("/{}", "a".repeat(10_000)).parse().unwrap();
        let q = quoted_path(&long);
        assert_eq!(q.chars().count(), MAX_QUOTED_PATH + 1);
        assert!(q.ends_with('…'));
        let short: Uri = "/v1/responses?x=1".parse().unwrap();
        assert_eq!(quoted_path(&short), "/v1/responses");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_read_fails_at_its_deadline_and_says_why() {
        use http_body_util::BodyExt;
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        tx.send(Ok(Bytes::from_static(b"{\"mo"))).await.unwrap();
        let cut = Arc::new(AtomicU8::new(NOT_CUT));
        let mut body = DeadlineBody::new(
            Body::from_stream(tokio_stream_of(rx)),
            Duration::from_secs(60),
            CancellationToken::new(),
            cut.clone(),
        );
        let start = tokio::time::Instant::now();
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), Bytes::from_static(b"{\"mo"));
        assert!(body.wake.is_none(), "armed before the body had to wait");
        assert!(body.frame().await.unwrap().is_err());
        assert_eq!(start.elapsed(), Duration::from_secs(60));
        assert_eq!(cut.load(Ordering::Acquire), CUT_TIMEOUT);
        // Later reads keep failing; the sender is still open.
        assert!(body.frame().await.unwrap().is_err());
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_is_always_ready_is_cut_at_its_deadline_too() {
        use http_body_util::BodyExt;
        let endless =
            futures_util::stream::repeat_with(|| Ok::<_, std::io::Error>(Bytes::from_static(b" ")));
        let cut = Arc::new(AtomicU8::new(NOT_CUT));
        let mut body = DeadlineBody::new(
            Body::from_stream(endless),
            Duration::from_secs(60),
            CancellationToken::new(),
            cut.clone(),
        );
        for _ in 0..3 {
            assert!(body.frame().await.unwrap().is_ok());
        }
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(body.frame().await.unwrap().is_err());
        assert_eq!(cut.load(Ordering::Acquire), CUT_TIMEOUT);
        assert!(body.wake.is_none(), "an always-ready body never waits");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_cuts_a_waiting_body_and_a_ready_one() {
        use http_body_util::BodyExt;
        // Waiting for bytes when shutdown starts: woken, cut as draining.
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let draining = CancellationToken::new();
        let cut = Arc::new(AtomicU8::new(NOT_CUT));
        let mut body = DeadlineBody::new(
            Body::from_stream(tokio_stream_of(rx)),
            Duration::from_secs(60),
            draining.clone(),
            cut.clone(),
        );
        let read = tokio::spawn(async move { body.frame().await.map(|f| f.is_err()) });
        tokio::time::sleep(Duration::from_secs(1)).await;
        draining.cancel();
        assert_eq!(read.await.unwrap(), Some(true));
        assert_eq!(cut.load(Ordering::Acquire), CUT_DRAINING);
        drop(tx);

        // A body with bytes ready is cut at its next read once shutdown has started.
        let draining = CancellationToken::new();
        let cut = Arc::new(AtomicU8::new(NOT_CUT));
        let mut body = DeadlineBody::new(
            Body::from("{}"),
            Duration::from_secs(60),
            draining.clone(),
            cut.clone(),
        );
        draining.cancel();
        assert!(body.frame().await.unwrap().is_err());
        assert_eq!(cut.load(Ordering::Acquire), CUT_DRAINING);
    }

    fn tokio_stream_of(
        mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
        futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }

    #[test]
    fn the_call_id_is_the_request_id_else_a_fresh_one() {
        let mut resp = Response::new(Body::empty());
        resp.headers_mut()
            .insert(CALL_ID, HeaderValue::from_static("0190-call"));
        let ids = crate::governance::Entropy::seeded(1);
        let fresh = || ids.uuid_v7(1_700_000_000_000).to_string();
        let resp = with_request_id(resp, fresh);
        assert_eq!(resp.headers()[REQUEST_ID], "0190-call");
        let a = with_request_id(Response::new(Body::empty()), fresh);
        let b = with_request_id(Response::new(Body::empty()), fresh);
        assert_eq!(a.headers()[REQUEST_ID].len(), 36);
        assert_ne!(a.headers()[REQUEST_ID], b.headers()[REQUEST_ID]);
    }
}
