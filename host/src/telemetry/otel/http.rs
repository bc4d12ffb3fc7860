//! The OTLP exporter's HTTP client: `opentelemetry_http::HttpClient` over the reqwest client
//! `transport::collector_client` builds (the only place clients are built), so the exporter
//! needs no HTTP stack of its own. The collector's answer is read up to a small cap.

use std::future::Future;
use std::pin::Pin;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// Most bytes of a collector's answer read (an OTLP answer is a few bytes; a partial-success
/// message a few hundred).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The collector's HTTP client.
#[derive(Debug, Clone)]
pub(super) struct ReqwestCollector(reqwest::Client);

impl ReqwestCollector {
    pub(super) fn new(client: reqwest::Client) -> Self {
        Self(client)
    }

    async fn send(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let url = reqwest::Url::parse(&parts.uri.to_string())?;
        let mut resp = self
            .0
            .request(parts.method, url)
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .map_err(|e| e.without_url())?;
        let status = resp.status();
        let mut answer = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| e.without_url())? {
            let room = MAX_ANSWER_BYTES.saturating_sub(answer.len());
            answer.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if room <= chunk.len() {
                break;
            }
        }
        let mut out = Response::new(Bytes::from(answer));
        *out.status_mut() = status;
        *out.headers_mut() = std::mem::take(resp.headers_mut());
        Ok(out)
    }
}

impl HttpClient for ReqwestCollector {
    // The trait is declared with `async_trait`; this is its expansion, written out.
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.send(request))
    }
}
