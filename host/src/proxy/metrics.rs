//! `GET /metrics`: every metric of the gateway in the Prometheus text format (0.0.4). Client
//! auth like the chat endpoint (a scraper sends `Authorization: Bearer <key>`; with no keys
//! configured, loopback peers only).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::errors::plain_error;

pub(crate) async fn metrics(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = state.caller(&headers, peer) {
        let (status, ty, message) = e.into_gateway_error();
        return plain_error(status, ty, &message);
    }
    (
        [(CONTENT_TYPE, crate::telemetry::METRICS_CONTENT_TYPE)],
        state.gateway.metrics_text(),
    )
        .into_response()
}
