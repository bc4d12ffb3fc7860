//! Hot reload: `POST /admin/reload` (authorised by `PGW_ADMIN_KEYS`) and `SIGHUP` re-read
//! `.env` and the environment, then reload plugins and configuration through
//! [`Gateway::reload`]. In-flight calls finish on the set they started with; new calls use
//! the new one. A reload that fails validation keeps the old set and says why (HTTP 400 with
//! the keys at fault, or 500, and a log line).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use super::auth;
use super::errors::plain_error;
use crate::pipeline::{Gateway, ReloadError};

/// `POST /admin/reload`.
pub(crate) async fn admin_reload(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let keys = &state.gateway.settings().process.admin_keys;
    if keys.is_empty() {
        return plain_error(
            403,
            "permission_error",
            "no PGW_ADMIN_KEYS configured: /admin/* is disabled",
        );
    }
    if let Err(e) = auth::check(keys, &headers, peer) {
        let (status, ty, message) = e.into_gateway_error();
        return plain_error(status, ty, &message);
    }
    match state.gateway.reload().await {
        Ok(report) => axum::Json(json!({
            "status": "reloaded",
            "scopes": report.scopes,
            "plugins": report.plugins,
            "restart_required": report.restart_required,
        }))
        .into_response(),
        Err(e) => reload_error_response(&e),
    }
}

/// The response of a refused reload: 400 with every key at fault for a configuration or
/// plugin problem, 500 otherwise; the previous configuration keeps serving either way.
fn reload_error_response(e: &ReloadError) -> Response {
    let status = if e.problems().is_empty() { 500 } else { 400 };
    let problems: Vec<_> = e
        .problems()
        .into_iter()
        .map(|(key, message)| json!({"key": key, "message": message}))
        .collect();
    let body = json!({"error": {
        "message": format!("reload refused, still serving the previous configuration: {e}"),
        "type": "reload_failed",
        "param": null,
        "code": null,
        "problems": problems,
    }});
    (
        axum::http::StatusCode::from_u16(status)
            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(body),
    )
        .into_response()
}

/// Reload on every `SIGHUP` for as long as the process runs (Unix only).
pub fn spawn_sighup_reload(gateway: Gateway) {
    #[cfg(unix)]
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!("cannot listen for SIGHUP: reload only through POST /admin/reload");
            return;
        };
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading");
            // The outcome is logged by `Gateway::reload`.
            let _ = gateway.reload().await;
        }
    });
    #[cfg(not(unix))]
    let _ = gateway;
}
