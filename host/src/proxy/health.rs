//! `GET /v1/models` (the scope aliases; client auth like the chat endpoint) and `GET /healthz`
//! (scopes, sources, plugins, telemetry, and `ocr_health` `{scope: {source: healthy}}` from
//! probes at most 5 s old; open, for load-balancer probes on the listen address).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use super::errors::plain_error;

pub(crate) async fn models(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = super::auth::check(&state.api_keys, &headers, peer) {
        let (status, ty, message) = e.into_gateway_error();
        return plain_error(status, ty, &message);
    }
    let data: Vec<_> = state
        .gateway
        .model_aliases()
        .into_iter()
        .map(|a| json!({"id": a, "object": "model", "created": 0, "owned_by": "polygateway"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    let mut body = state.gateway.health();
    let (ocr, age_s) = state.ocr_health.get(&state.gateway).await;
    body["ocr_health"] = json!(ocr);
    body["ocr_health_age_s"] = json!(age_s);
    axum::Json(body).into_response()
}
