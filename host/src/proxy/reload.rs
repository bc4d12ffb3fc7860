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
    // The handler is registered here, before this function returns (the caller then binds
    // and announces the listener): registered inside the spawned task, it waited for that
    // task's first poll, and a SIGHUP sent as soon as the gateway said it was listening
    // could still meet the default action and end the process.
    #[cfg(unix)]
    let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP: reload only through POST /admin/reload");
        return;
    };
    #[cfg(unix)]
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading");
            // The outcome is logged by `Gateway::reload`.
            let _ = gateway.reload().await;
        }
    });
    #[cfg(not(unix))]
    let _ = gateway;
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A SIGHUP that arrives before the reload task has ever run is handled, not fatal:
    /// on a current-thread runtime the spawned task cannot run until the test yields, so
    /// the handler must already be registered when `spawn_sighup_reload` returns (else the
    /// signal's default action ends this test process).
    #[test]
    fn a_sighup_before_the_reload_task_first_runs_is_handled() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        rt.block_on(async {
            let vars = [
                ("LLM__OPENAI__1__BASE_URL", "http://127.0.0.1:9/v1"),
                ("LLM__OPENAI__1__MODEL", "m"),
                ("PGW_TELEMETRY_BACKEND", "none"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()));
            let settings =
                crate::config::settings_from_vars(vars).unwrap_or_else(|e| panic!("{e}"));
            let gateway = Gateway::from_settings(settings)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            spawn_sighup_reload(gateway);
            let status = std::process::Command::new("kill")
                .args(["-HUP", &std::process::id().to_string()])
                .status()
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(status.success());
            // Let the task take the signal (a reload with no settings source: refused, logged).
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        });
    }
}
