//! The OpenAI-compatible HTTP server (`polygateway serve`): routes, the layers around them
//! (`x-request-id`, CORS, the body-read deadline, JSON 404/405), client auth and the loopback
//! rule, the body limit, error mapping, and the listener (connection cap, timeouts, graceful
//! shutdown). Handlers only translate between HTTP and the embedded API; every decision is
//! made in the pipeline.

mod admin_keys;
mod auth;
mod call_headers;
mod chat;
mod dialect;
mod embeddings;
mod errors;
pub(crate) mod floor;
mod health;
mod layers;
mod messages;
mod metrics;
mod neutral;
mod ocr;
mod reload;
mod responses;
mod server;
mod sse;
mod ui;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::pipeline::Gateway;

pub use crate::config::env_settings_source;
pub(crate) use embeddings::input_count as parse_embeddings_body;
pub use errors::error_response;
pub use reload::spawn_sighup_reload;

/// Shared state of the handlers: one `Arc`, because axum clones the state for every
/// request (into the handler's `State` extractor) and drops it at the request's end. As a
/// struct of up to six `Arc`s that was as many reference-count increments and decrements per
/// request, on counters every worker thread touches, so their cache line moves between
/// cores with each one; behind one `Arc` it is one of each.
#[derive(Clone)]
pub(crate) struct AppState(Arc<AppStateInner>);

impl std::ops::Deref for AppState {
    type Target = AppStateInner;

    fn deref(&self) -> &AppStateInner {
        &self.0
    }
}

/// What [`AppState`] shares.
pub(crate) struct AppStateInner {
    pub gateway: Gateway,
    pub api_keys: Arc<Vec<String>>,
    pub max_body_bytes: usize,
    /// The OCR health probes `/healthz` reports, cached for 5 s.
    pub ocr_health: Arc<ocr::HealthCache>,
    /// The virtual keys (`PGW_VIRTUAL_KEYS`); `None` when they are off.
    pub keys: Option<Arc<crate::keys::KeyRegistry>>,
    /// The dashboard's ledger reader and live series (`ui/`).
    pub dashboard: ui::DashboardState,
}

impl AppStateInner {
    /// Who is calling (`proxy/auth.rs`): a virtual key's principal, or `None` for a static
    /// key or an open loopback gateway.
    ///
    /// Errors: the refusal (401 / 403) to answer with.
    pub(crate) fn caller(
        &self,
        headers: &axum::http::HeaderMap,
        peer: SocketAddr,
    ) -> Result<Option<Arc<crate::keys::Principal>>, auth::AuthError> {
        auth::identify(&self.api_keys, self.keys.as_deref(), headers, peer)
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to bind {0} without PGW_API_KEYS or PGW_VIRTUAL_KEYS: with no client keys only loopback addresses may be served"
    )]
    OpenWithoutKeys(SocketAddr),
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The router: one place that lists the endpoints, with the layers every response goes
/// through (see [`router_draining`]).
pub fn router(gateway: Gateway) -> Router {
    router_draining(gateway, CancellationToken::new())
}

/// The router whose body-read layer stops waiting for request bodies once `draining` is
/// cancelled (the server is shutting down).
fn router_draining(gateway: Gateway, draining: CancellationToken) -> Router {
    let p = &gateway.settings().process;
    let state = AppState(Arc::new(AppStateInner {
        api_keys: Arc::new(p.api_keys.clone()),
        max_body_bytes: p.max_body_bytes,
        ocr_health: Arc::new(ocr::HealthCache::default()),
        keys: gateway.key_registry(),
        dashboard: ui::DashboardState::new(&gateway),
        gateway: gateway.clone(),
    }));
    let body_read = layers::BodyRead {
        timeout: p.listener.body_read_timeout,
        draining,
    };
    let router = Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/messages", post(messages::messages))
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .route("/v1/responses", post(responses::responses))
        .route("/v1/embeddings", post(embeddings::embeddings))
        .merge(ocr::routes())
        .route("/v1/models", get(health::models))
        .route("/v1/models/{*model}", get(health::model))
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(metrics::metrics))
        .route("/admin/reload", post(reload::admin_reload))
        .merge(admin_keys::routes())
        .merge(ui::routes())
        // After every route: it applies to the routes that exist when it is called.
        .method_not_allowed_fallback(layers::method_not_allowed)
        // Only matched routes read bodies.
        .route_layer(axum::middleware::from_fn_with_state(
            body_read,
            layers::read_body,
        ))
        .fallback(layers::not_found)
        .with_state(state);
    // Outside the routes and the fallback: a preflight is answered for any path, and even
    // a 404 carries the CORS headers, so a browser application can read the error.
    let router = match layers::cors(&p.listener.cors_origins) {
        Some(cors) => router.layer(cors),
        None => router,
    };
    // Outermost: every response, the CORS layer's and the body-read layer's included.
    router.layer(axum::middleware::map_response_with_state(
        gateway.clone(),
        layers::request_id,
    ))
}

/// Bind the listener, enforcing the loopback rule. Returns it with its bound address.
pub async fn bind(gateway: &Gateway) -> Result<(TcpListener, SocketAddr), ServeError> {
    let p = &gateway.settings().process;
    // With virtual keys on, every request needs a key (static or virtual): none is open.
    if p.api_keys.is_empty() && !p.keys.enabled && !p.listen.ip().is_loopback() {
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

/// Serve until `shutdown` resolves, then shut down gracefully: stop accepting, close idle
/// connections and those still sending a request head, let requests in flight finish for
/// `PGW_SHUTDOWN_GRACE_S`, then close every connection. Returns when all are closed (flush
/// telemetry after it).
pub async fn serve(
    gateway: Gateway,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = gateway.settings().process.listener.clone();
    warn_if_descriptors_are_short(limits.max_connections);
    let draining = CancellationToken::new();
    let app = router_draining(gateway, draining.clone());
    server::run(listener, app, &limits, draining, shutdown).await;
    Ok(())
}

/// Log a warning when the process may run out of file descriptors before it reaches
/// `PGW_MAX_CONNECTIONS` (each client connection holds one; calls, the telemetry file and
/// plugins need more): accept would then fail instead of the cap holding connections back.
fn warn_if_descriptors_are_short(max_connections: u32) {
    #[cfg(target_os = "linux")]
    {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        if let Some(soft) = limit.current
            && soft < u64::from(max_connections) + 64
        {
            tracing::warn!(
                soft_limit = soft,
                max_connections,
                "the open-file limit (ulimit -n) is below PGW_MAX_CONNECTIONS + 64: lower PGW_MAX_CONNECTIONS or raise the limit"
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = max_connections;
}
