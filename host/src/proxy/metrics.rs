//! `GET /metrics`: every metric of the gateway in the Prometheus text format (0.0.4).

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

use super::AppState;

pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(CONTENT_TYPE, crate::telemetry::METRICS_CONTENT_TYPE)],
        state.gateway.metrics_text(),
    )
        .into_response()
}
