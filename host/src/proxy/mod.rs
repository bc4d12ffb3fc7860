//! The OpenAI-compatible HTTP server (`polygateway serve`, DESIGN §6): routes, client auth
//! and the loopback rule, the body limit, and error mapping. Handlers only translate between
//! HTTP and the embedded API; every decision is made in the pipeline.

mod auth;
mod call_headers;
mod chat;
mod embeddings;
mod errors;
mod health;
mod metrics;
mod ocr;
mod reload;
mod sse;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::pipeline::Gateway;

pub use errors::error_response;
pub use reload::{env_settings_source, spawn_sighup_reload};

/// Shared state of the handlers.
#[derive(Clone)]
pub(crate) struct AppState {
    pub gateway: Gateway,
    pub api_keys: Arc<Vec<String>>,
    pub max_body_bytes: usize,
    /// The OCR health probes `/healthz` reports, cached for 5 s.
    pub ocr_health: Arc<ocr::HealthCache>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to bind {0} without PGW_API_KEYS: with no client keys only loopback addresses may be served"
    )]
    OpenWithoutKeys(SocketAddr),
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The router: one place that lists the endpoints.
pub fn router(gateway: Gateway) -> Router {
    let p = &gateway.settings().process;
    let state = AppState {
        api_keys: Arc::new(p.api_keys.clone()),
        max_body_bytes: p.max_body_bytes,
        ocr_health: Arc::new(ocr::HealthCache::default()),
        gateway: gateway.clone(),
    };
    Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/embeddings", post(embeddings::embeddings))
        .merge(ocr::routes())
        .route("/v1/models", get(health::models))
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(metrics::metrics))
        .route("/admin/reload", post(reload::admin_reload))
        .with_state(state)
}

/// Bind the listener, enforcing the loopback rule. Returns it with its bound address.
pub async fn bind(gateway: &Gateway) -> Result<(TcpListener, SocketAddr), ServeError> {
    let p = &gateway.settings().process;
    if p.api_keys.is_empty() && !p.listen.ip().is_loopback() {
        return Err(ServeError::OpenWithoutKeys(p.listen));
    }
    let listener = TcpListener::bind(p.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: p.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: p.listen,
        source,
    })?;
    Ok((listener, addr))
}

/// Serve until `shutdown` resolves.
pub async fn serve(
    gateway: Gateway,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(gateway).into_make_service_with_connect_info::<SocketAddr>();
    // TCP_NODELAY on every client connection: without it, small SSE writes wait for the
    // client's delayed ACK (~40 ms per chunk on Linux).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a client connection");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
