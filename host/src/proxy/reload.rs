//! Hot reload: `POST /admin/reload` (authorised by `PGW_ADMIN_KEYS`) and `SIGHUP` re-read
//! `.env` and the environment, then reload plugins and configuration through
//! [`Gateway::reload`]. In-flight calls finish on the set they started with; new calls use
//! the new one. A reload that fails validation keeps the old set and says why (HTTP 400 with
//! the keys at fault, or 500, and a log line).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use super::auth;
use super::errors::plain_error;
use crate::config::{ConfigError, Settings};
use crate::pipeline::{Gateway, ReloadError, SettingsSource};

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

/// A settings source that re-reads `.env` from the working directory (and its parents, as
/// at start-up) under the process environment as it was when this was called — call it
/// before `config::load_dotenv` so the environment it captures is the real one: the process
/// environment wins over `.env`, as at start-up, and a key removed from `.env` is gone.
pub fn env_settings_source() -> SettingsSource {
    let base: Vec<(String, String)> = std::env::vars().collect();
    Arc::new(move || settings_from_dotenv_and(&base))
}

fn settings_from_dotenv_and(base: &[(String, String)]) -> Result<Settings, ConfigError> {
    let mut vars: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    match dotenvy::dotenv_iter() {
        Ok(iter) => {
            for item in iter {
                let (k, v) = item.map_err(|e| ConfigError::DotEnv {
                    path: ".env".into(),
                    message: e.to_string(),
                })?;
                vars.insert(k, v);
            }
        }
        Err(e) if e.not_found() => {}
        Err(e) => {
            return Err(ConfigError::DotEnv {
                path: ".env".into(),
                message: e.to_string(),
            });
        }
    }
    for (k, v) in base {
        vars.insert(k.clone(), v.clone());
    }
    crate::config::settings_from_vars(vars)
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
