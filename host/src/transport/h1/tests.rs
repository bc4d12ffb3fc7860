//! The HTTP/1.1 client against raw TCP (and TLS) servers written here, so the tests see
//! the exact bytes sent and control when a connection closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Mutex;

use super::H1Client;
use crate::transport::client::UpstreamError;

/// A request as the server read it: the head's bytes and the body.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Vec<u8>,
}

impl Seen {
    fn line(&self) -> &str {
        self.head.lines().next().unwrap_or_default()
    }
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

/// What the server does with one request.
enum Reply {
    /// Write these bytes, keep the connection for the next request.
    Keep(Vec<u8>),
    /// Write these bytes, then close the connection.
    Close(Vec<u8>),
    /// Write these parts with a pause between them, keep the connection.
    Paced(Vec<Vec<u8>>, Duration),
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

struct Server {
    port: u16,
    accepted: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Server {
        Self::start_with(handler, None).await
    }

    async fn start_with(
        handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Handler = Arc::new(handler);
        let (acc, s) = (accepted.clone(), seen.clone());
        tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                acc.fetch_add(1, Ordering::SeqCst);
                let (handler, seen, tls) = (handler.clone(), s.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(sock).await {
                                serve(stream, handler, seen).await;
                            }
                        }
                        None => serve(sock, handler, seen).await,
                    }
                });
            }
        });
        Server {
            port,
            accepted,
            seen,
        }
    }

    fn url(&self, path: &str) -> url::Url {
        url::Url::parse(&format!("http://127.0.0.1:{}{path}", self.port)).unwrap()
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    async fn seen(&self) -> Vec<Seen> {
        self.seen.lock().await.clone()
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut sock: S,
    handler: Handler,
    seen: Arc<Mutex<Vec<Seen>>>,
) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut req = Seen {
            head,
            body: Vec::new(),
        };
        let len: usize = req
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 4096];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        req.body = buf[head_end..head_end + len].to_vec();
        buf.drain(..head_end + len);
        let reply = handler(&req);
        seen.lock().await.push(req);
        match reply {
            Reply::Keep(bytes) => {
                if sock.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Reply::Close(bytes) => {
                let _ = sock.write_all(&bytes).await;
                let _ = sock.shutdown().await;
                return;
            }
            Reply::Paced(parts, pause) => {
                for part in parts {
                    if sock.write_all(&part).await.is_err() {
                        return;
                    }
                    let _ = sock.flush().await;
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn json_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h.insert("authorization", HeaderValue::from_static("Bearer sk-test"));
    h
}

/// `POST {}` with [`json_headers`] to `url`.
async fn post_json(client: &H1Client, url: &url::Url) -> Result<super::H1Response, UpstreamError> {
    client
        .send(Method::POST, url, json_headers(), Bytes::from_static(b"{}"))
        .await
}

async fn get(client: &H1Client, url: &url::Url) -> Result<super::H1Response, UpstreamError> {
    client
        .send(Method::GET, url, HeaderMap::new(), Bytes::new())
        .await
}

async fn read_all(body: &mut super::H1Body) -> Result<Vec<u8>, hyper::Error> {
    let mut out = Vec::new();
    while let Some(b) = body.chunk().await? {
        out.extend_from_slice(&b);
    }
    Ok(out)
}

#[tokio::test]
async fn sends_the_request_in_origin_form_and_reuses_the_connection() {
    let server = Server::start(|_| Reply::Keep(ok(r#"{"ok":true}"#))).await;
    let client = H1Client::new().unwrap();
    let url = server.url("/v1/chat/completions?api-version=2");
    for i in 0..3 {
        let body = Bytes::from(format!(r#"{{"n":{i}}}"#));
        let mut resp = client
            .send(Method::POST, &url, json_headers(), body)
            .await
            .unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body.content_length(), Some(11));
        assert_eq!(read_all(&mut resp.body).await.unwrap(), br#"{"ok":true}"#);
        assert_eq!(client.idle(&url), 1, "request {i}");
    }
    assert_eq!(server.accepted(), 1);
    let seen = server.seen().await;
    assert_eq!(seen.len(), 3);
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        seen[0].head,
        format!(
            "POST /v1/chat/completions?api-version=2 HTTP/1.1\r\n\
             host: 127.0.0.1:{}\r\n\
             content-type: application/json\r\n\
             authorization: Bearer sk-test\r\n\
             user-agent: polygateway/{version}\r\n\
             accept: */*\r\n\
             content-length: 7\r\n\r\n",
            server.port
        )
    );
    assert_eq!(seen[2].body, br#"{"n":2}"#);
}

#[tokio::test]
async fn the_callers_user_agent_and_accept_are_kept() {
    let server = Server::start(|_| Reply::Keep(ok("{}"))).await;
    let client = H1Client::new().unwrap();
    let mut h = HeaderMap::new();
    h.insert("user-agent", HeaderValue::from_static("my-plugin/1"));
    h.insert("accept", HeaderValue::from_static("text/event-stream"));
    let mut resp = client
        .send(Method::GET, &server.url("/models"), h, Bytes::new())
        .await
        .unwrap();
    read_all(&mut resp.body).await.unwrap();
    let seen = server.seen().await;
    assert_eq!(seen[0].line(), "GET /models HTTP/1.1");
    assert_eq!(seen[0].header("user-agent").as_deref(), Some("my-plugin/1"));
    assert_eq!(
        seen[0].header("accept").as_deref(),
        Some("text/event-stream")
    );
    assert_eq!(seen[0].header("content-length"), None);
}

#[tokio::test]
async fn a_body_dropped_before_its_end_closes_its_connection() {
    let server = Server::start(|_| Reply::Keep(ok(r#"{"ok":true}"#))).await;
    let client = H1Client::new().unwrap();
    let url = server.url("/v1/x");
    let resp = post_json(&client, &url).await.unwrap();
    drop(resp);
    assert_eq!(client.idle(&url), 0);
    let mut resp = post_json(&client, &url).await.unwrap();
    read_all(&mut resp.body).await.unwrap();
    assert_eq!(server.accepted(), 2);
    assert_eq!(client.idle(&url), 1);
}

#[tokio::test]
async fn a_connection_the_upstream_closed_while_idle_is_replaced() {
    // Every connection answers one request without `Connection: close`, then closes.
    let server = Server::start(|_| Reply::Close(ok("{}"))).await;
    let client = H1Client::new().unwrap();
    let url = server.url("/v1/x");
    for _ in 0..3 {
        let mut resp = post_json(&client, &url).await.unwrap();
        assert_eq!(read_all(&mut resp.body).await.unwrap(), b"{}");
        // The upstream's FIN reaches this side before the next request.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server.accepted(), 3);
    assert_eq!(server.seen().await.len(), 3);
}

#[tokio::test]
async fn connection_close_is_not_pooled() {
    let server = Server::start(|_| {
        Reply::Close(
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}".to_vec(),
        )
    })
    .await;
    let client = H1Client::new().unwrap();
    let url = server.url("/v1/x");
    let mut resp = get(&client, &url).await.unwrap();
    assert_eq!(read_all(&mut resp.body).await.unwrap(), b"{}");
    assert_eq!(client.idle(&url), 0);
}

#[tokio::test]
async fn chunks_of_a_streamed_body_arrive_as_sent_and_the_connection_is_reused() {
    let server = Server::start(|_| {
        Reply::Paced(
            vec![
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_vec(),
                b"b\r\ndata: one\n\n\r\n".to_vec(),
                b"b\r\ndata: two\n\n\r\n".to_vec(),
                b"0\r\n\r\n".to_vec(),
            ],
            Duration::from_millis(30),
        )
    })
    .await;
    let client = H1Client::new().unwrap();
    let url = server.url("/v1/stream");
    let mut resp = post_json(&client, &url).await.unwrap();
    assert_eq!(resp.body.content_length(), None);
    let mut chunks = Vec::new();
    while let Some(c) = resp.body.chunk().await.unwrap() {
        chunks.push(c);
    }
    assert_eq!(
        chunks,
        vec![Bytes::from("data: one\n\n"), Bytes::from("data: two\n\n")]
    );
    assert_eq!(client.idle(&url), 1);
    assert_eq!(resp.body.chunk().await.unwrap(), None);
}

#[tokio::test]
async fn chunks_already_received_are_read_at_once() {
    let server = Server::start(|_| {
        Reply::Keep(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
              b\r\ndata: one\n\n\r\nb\r\ndata: two\n\n\r\nd\r\ndata: three\n\n\r\n0\r\n\r\n"
                .to_vec(),
        )
    })
    .await;
    let client = H1Client::new().unwrap();
    let url = server.url("/v1/stream");
    let mut resp = post_json(&client, &url).await.unwrap();
    assert_eq!(
        resp.body.chunk().await.unwrap(),
        Some(Bytes::from("data: one\n\ndata: two\n\ndata: three\n\n"))
    );
    // The end was met while joining: the connection is back in the pool already.
    assert_eq!(client.idle(&url), 1);
    assert_eq!(resp.body.chunk().await.unwrap(), None);
    assert_eq!(resp.body.chunk().await.unwrap(), None);
}

#[tokio::test]
async fn a_failure_met_while_joining_comes_after_the_bytes_before_it() {
    let server = Server::start(|_| {
        Reply::Close(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\nabcd\r\n4\r\nefgh\r\n"
                .to_vec(),
        )
    })
    .await;
    let client = H1Client::new().unwrap();
    let url = server.url("/v1/x");
    let mut resp = get(&client, &url).await.unwrap();
    let mut got = Vec::new();
    let err = loop {
        match resp.body.chunk().await {
            Ok(Some(b)) => got.extend_from_slice(&b),
            Ok(None) => panic!("a body cut inside its chunks ended as if complete"),
            Err(e) => break e,
        }
    };
    assert_eq!(got, b"abcdefgh");
    assert_eq!(
        crate::transport::client::error_chain(&err),
        "error reading a body from connection: unexpected EOF during chunk size line"
    );
    assert_eq!(client.idle(&url), 0);
}

#[tokio::test]
async fn a_joined_read_is_bounded() {
    const CHUNK: usize = 4096;
    const CHUNKS: usize = 48;
    let server = Server::start(|_| {
        let mut r = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for i in 0..CHUNKS {
            r.extend_from_slice(format!("{CHUNK:x}\r\n").as_bytes());
            r.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, CHUNK));
            r.extend_from_slice(b"\r\n");
        }
        r.extend_from_slice(b"0\r\n\r\n");
        Reply::Keep(r)
    })
    .await;
    let client = H1Client::new().unwrap();
    let url = server.url("/v1/x");
    let mut resp = get(&client, &url).await.unwrap();
    let mut got = Vec::new();
    while let Some(b) = resp.body.chunk().await.unwrap() {
        assert!(
            b.len() < super::conn::JOIN_MAX_BYTES + CHUNK,
            "one read held {} bytes",
            b.len()
        );
        got.extend_from_slice(&b);
    }
    let expected: Vec<u8> = (0..CHUNKS)
        .flat_map(|i| std::iter::repeat_n(b'a' + (i % 26) as u8, CHUNK))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(client.idle(&url), 1);
}

#[tokio::test]
async fn a_body_cut_short_is_an_error() {
    let server = Server::start(|_| {
        Reply::Close(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabcd".to_vec())
    })
    .await;
    let client = H1Client::new().unwrap();
    let url = server.url("/v1/x");
    let mut resp = get(&client, &url).await.unwrap();
    assert_eq!(resp.body.chunk().await.unwrap(), Some(Bytes::from("abcd")));
    let err = resp.body.chunk().await.unwrap_err();
    assert_eq!(
        crate::transport::client::error_chain(&err),
        "error reading a body from connection: end of file before message length reached"
    );
    assert_eq!(client.idle(&url), 0);
}

#[tokio::test]
async fn redirects_within_the_origin_are_followed_with_reqwests_method_rules() {
    let server = Server::start(|req| match req.line() {
        "POST /a HTTP/1.1" => Reply::Keep(
            b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /b\r\ncontent-length: 0\r\n\r\n"
                .to_vec(),
        ),
        "POST /b HTTP/1.1" => Reply::Keep(
            b"HTTP/1.1 302 Found\r\nlocation: /c?q=1\r\ncontent-length: 0\r\n\r\n".to_vec(),
        ),
        _ => Reply::Keep(ok(r#"{"at":"c"}"#)),
    })
    .await;
    let client = H1Client::new().unwrap();
    let mut resp = client
        .send(
            Method::POST,
            &server.url("/a"),
            json_headers(),
            Bytes::from_static(b"{\"x\":1}"),
        )
        .await
        .unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(read_all(&mut resp.body).await.unwrap(), br#"{"at":"c"}"#);
    let seen = server.seen().await;
    let lines: Vec<_> = seen.iter().map(|s| s.line().to_owned()).collect();
    assert_eq!(
        lines,
        [
            "POST /a HTTP/1.1",
            "POST /b HTTP/1.1",
            "GET /c?q=1 HTTP/1.1"
        ]
    );
    // 307 sends the body again; 302 turns the POST into a GET without one.
    assert_eq!(seen[1].body, b"{\"x\":1}");
    assert_eq!(seen[2].body, b"");
    assert_eq!(seen[2].header("content-type"), None);
    assert_eq!(
        seen[2].header("authorization").as_deref(),
        Some("Bearer sk-test")
    );
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_answered_as_it_is() {
    let other = Server::start(|_| Reply::Keep(ok("{}"))).await;
    let location = other.url("/steal").to_string();
    let server = Server::start(move |_| {
        Reply::Keep(
            format!("HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\n\r\n")
                .into_bytes(),
        )
    })
    .await;
    let client = H1Client::new().unwrap();
    let resp = post_json(&client, &server.url("/a")).await.unwrap();
    assert_eq!(resp.status, 302);
    assert_eq!(other.accepted(), 0);
}

#[tokio::test]
async fn more_than_ten_redirects_fail() {
    let server = Server::start(|_| {
        Reply::Keep(
            b"HTTP/1.1 308 Permanent Redirect\r\nlocation: /loop\r\ncontent-length: 0\r\n\r\n"
                .to_vec(),
        )
    })
    .await;
    let client = H1Client::new().unwrap();
    let err = post_json(&client, &server.url("/start"))
        .await
        .err()
        .unwrap();
    match err {
        UpstreamError::Request { url, message } => {
            assert_eq!(url, format!("http://127.0.0.1:{}/start", server.port));
            assert_eq!(message, "more than 10 redirects");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.seen().await.len(), 11);
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error_without_userinfo() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let client = H1Client::new().unwrap();
    let url = url::Url::parse(&format!("http://user:s3cret@127.0.0.1:{port}/v1/x")).unwrap();
    let err = get(&client, &url).await.err().unwrap();
    match &err {
        UpstreamError::Connect { url, message } => {
            assert_eq!(url, &format!("http://127.0.0.1:{port}/v1/x"));
            assert!(message.contains("Connection refused"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!err.to_string().contains("s3cret"));
}

#[tokio::test]
async fn a_url_without_a_host_or_of_another_scheme_is_invalid() {
    let client = H1Client::new().unwrap();
    for u in ["ftp://127.0.0.1/x", "unix:/tmp/sock"] {
        let url = url::Url::parse(u).unwrap();
        let err = get(&client, &url).await.err().unwrap();
        assert!(matches!(err, UpstreamError::Invalid(_)), "{u}: {err:?}");
    }
}

fn test_ca() -> rustls::RootCertStore {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let ca = CertificateDer::from_pem_slice(include_bytes!("fixtures/ca.pem")).unwrap();
    roots.add(ca).unwrap();
    roots
}

fn tls_acceptor() -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let cert = CertificateDer::from_pem_slice(include_bytes!("fixtures/localhost.pem")).unwrap();
    let key = PrivateKeyDer::from_pem_slice(include_bytes!("fixtures/localhost.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

#[tokio::test]
async fn https_to_a_trusted_certificate_is_sent_and_reused() {
    let server =
        Server::start_with(|_| Reply::Keep(ok(r#"{"tls":true}"#)), Some(tls_acceptor())).await;
    let client = H1Client::with_roots(test_ca()).unwrap();
    let url = url::Url::parse(&format!("https://localhost:{}/v1/x", server.port)).unwrap();
    for _ in 0..2 {
        let mut resp = post_json(&client, &url).await.unwrap();
        assert_eq!(read_all(&mut resp.body).await.unwrap(), br#"{"tls":true}"#);
    }
    assert_eq!(server.accepted(), 1);
    let seen = server.seen().await;
    assert_eq!(
        seen[0].header("host"),
        Some(format!("localhost:{}", server.port))
    );
}

#[tokio::test]
async fn https_to_an_unknown_issuer_is_a_connect_error() {
    let server = Server::start_with(|_| Reply::Keep(ok("{}")), Some(tls_acceptor())).await;
    let client = H1Client::new().unwrap();
    let url = url::Url::parse(&format!("https://localhost:{}/v1/x", server.port)).unwrap();
    let err = post_json(&client, &url).await.err().unwrap();
    match err {
        UpstreamError::Connect { message, .. } => {
            assert!(message.contains("UnknownIssuer"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(server.seen().await.is_empty());
}

#[test]
fn an_origin_is_its_pool_key_and_host_header() {
    let origin = |u: &str| {
        let o = super::Origin::of(&url::Url::parse(u).unwrap()).unwrap();
        (o.key, o.host_header.to_str().unwrap().to_owned())
    };
    // The key always names the port; `Host` only when the URL names a non-default one.
    assert_eq!(
        origin("http://127.0.0.1:8081/v1"),
        ("http://127.0.0.1:8081".into(), "127.0.0.1:8081".into())
    );
    assert_eq!(
        origin("https://api.example.com/v1/chat"),
        (
            "https://api.example.com:443".into(),
            "api.example.com".into()
        )
    );
    assert_eq!(
        origin("http://example.com:80/"),
        ("http://example.com:80".into(), "example.com".into())
    );
    assert_eq!(
        origin("http://[::1]:9000/x"),
        ("http://[::1]:9000".into(), "[::1]:9000".into())
    );
    assert!(super::Origin::of(&url::Url::parse("ftp://example.com/").unwrap()).is_err());
}
