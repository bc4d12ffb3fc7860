//! `GET /v1/models` (the scope aliases) and `GET /healthz` (scopes, sources, plugins,
//! telemetry).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;

pub(crate) async fn models(State(state): State<AppState>) -> Response {
    let data: Vec<_> = state
        .gateway
        .settings()
        .scopes
        .iter()
        .flat_map(|s| s.aliases.iter())
        .map(|a| json!({"id": a, "object": "model", "created": 0, "owned_by": "polygateway"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    axum::Json(state.gateway.health()).into_response()
}
