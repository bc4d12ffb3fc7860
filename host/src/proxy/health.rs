//! `GET /v1/models` (the scope aliases as OpenAI model objects, or in Anthropic's list shape
//! when the request carries `anthropic-version`, as Anthropic's clients send; client auth like
//! the chat endpoint), `GET /v1/models/{model}` (one of them, or 404 `model_not_found`) and `GET /healthz`
//! (scopes, sources, plugins, telemetry, and `ocr_health` `{scope: {source: healthy}}` from
//! probes at most 5 s old; open, for load-balancer probes on the listen address).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use super::errors::{error_response, plain_error};
use crate::error::GatewayError;

/// The OpenAI model object of a scope alias. `created` is 0: an alias has no creation time.
fn model_object(alias: &str) -> serde_json::Value {
    json!({"id": alias, "object": "model", "created": 0, "owned_by": "polygateway"})
}

pub(crate) async fn models(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let anthropic = headers.contains_key("anthropic-version");
    let principal = match state.caller(&headers, peer) {
        Ok(p) => p,
        Err(e) => {
            let (status, ty, message) = e.into_gateway_error();
            if anthropic {
                return super::messages::auth_error(status, ty, &message);
            }
            return plain_error(status, ty, &message);
        }
    };
    // A virtual key sees the models it may call.
    let aliases: Vec<String> = state
        .gateway
        .model_aliases()
        .into_iter()
        .filter(|a| principal.as_ref().is_none_or(|p| p.may_use(a)))
        .collect();
    if anthropic {
        return super::messages::models_list(&aliases);
    }
    let data: Vec<_> = aliases.into_iter().map(|a| model_object(&a)).collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

/// `GET /v1/models/{model}`: the alias's model object, or 404 `model_not_found` listing the
/// known aliases.
pub(crate) async fn model(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(model): Path<String>,
) -> Response {
    let principal = match state.caller(&headers, peer) {
        Ok(p) => p,
        Err(e) => {
            let (status, ty, message) = e.into_gateway_error();
            return plain_error(status, ty, &message);
        }
    };
    let aliases: Vec<String> = state
        .gateway
        .model_aliases()
        .into_iter()
        .filter(|a| principal.as_ref().is_none_or(|p| p.may_use(a)))
        .collect();
    if aliases.iter().any(|a| a.as_str() == model) {
        return axum::Json(model_object(&model)).into_response();
    }
    error_response(&GatewayError::ModelNotFound {
        model,
        known: aliases.join(", "),
    })
}

pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    let mut body = state.gateway.health();
    let (ocr, age_s) = state.ocr_health.get(&state.gateway).await;
    body["ocr_health"] = json!(ocr);
    body["ocr_health_age_s"] = json!(age_s);
    axum::Json(body).into_response()
}
