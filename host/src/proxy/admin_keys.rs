//! The virtual-key admin API (docs/keys.md#admin-api): `/admin/keys`, `/admin/teams` and
//! `/admin/spend`, authorised by `PGW_ADMIN_KEYS` like `/admin/reload` (403 when none is
//! configured). Handlers parse the request and call the operations `polygateway keys` uses
//! too (`keys::KeyAdmin`); errors map to HTTP in [`keys_error`], one exhaustive match. A
//! token's secret appears only in the body of a create or rotate answer, never in a log.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::AppState;
use super::auth;
use super::errors::plain_error;
use crate::keys::{
    Created, KeyAdmin, KeyFilter, KeyRegistry, KeyState, KeysError, SpendQuery, VirtualKey,
};

/// The admin routes of virtual keys, teams and spend.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/keys", post(create_key).get(list_keys))
        .route("/admin/keys/{id}", get(get_key).patch(update_key))
        .route("/admin/keys/{id}/rotate", post(rotate_key))
        .route("/admin/keys/{id}/revoke", post(revoke_key))
        .route("/admin/teams", post(create_team).get(list_teams))
        .route("/admin/teams/{id}", get(get_team).patch(update_team))
        .route("/admin/spend", get(spend))
}

/// `{"error": {message, type, param, code}}` with `status`.
fn error(
    status: StatusCode,
    ty: &str,
    message: &str,
    param: Option<&str>,
    code: Value,
) -> Response {
    let body = json!({"error": {"message": message, "type": ty, "param": param, "code": code}});
    (status, axum::Json(body)).into_response()
}

/// The HTTP form of a key operation's failure.
fn keys_error(e: &KeysError) -> Response {
    let message = e.to_string();
    match e {
        KeysError::Invalid { param, .. } => error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &message,
            Some(param),
            Value::Null,
        ),
        KeysError::NotFound { .. } => error(
            StatusCode::NOT_FOUND,
            "not_found_error",
            &message,
            None,
            Value::Null,
        ),
        KeysError::Conflict { .. } => error(
            StatusCode::CONFLICT,
            "invalid_request_error",
            &message,
            Some("id"),
            Value::Null,
        ),
        KeysError::Disabled => disabled(),
        KeysError::Store(_) => {
            tracing::warn!(error = %e, "virtual key admin: the key store failed");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "key_store_unavailable",
                &message,
                None,
                Value::Null,
            )
        }
        KeysError::Entropy(_) => {
            tracing::error!(error = %e, "virtual key admin: no randomness");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                &message,
                None,
                Value::Null,
            )
        }
    }
}

/// 404: the routes exist, but virtual keys are off in this process.
fn disabled() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "virtual keys are off: set PGW_VIRTUAL_KEYS=true",
        None,
        Value::Null,
    )
}

/// A request refused before any key operation ran.
enum Refusal {
    /// The admin check failed: status, type, message.
    Admin(u16, &'static str, String),
    /// `PGW_VIRTUAL_KEYS` is off.
    Disabled,
    /// A body or query string that does not parse (400), naming the field when serde does.
    Malformed {
        message: String,
        param: Option<String>,
    },
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Admin(status, ty, message) => plain_error(status, ty, &message),
            Refusal::Disabled => disabled(),
            Refusal::Malformed { message, param } => error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &message,
                param.as_deref(),
                Value::Null,
            ),
        }
    }
}

/// The admin check of `/admin/reload`, then the registry (404 when keys are off).
fn authorise<'s>(
    state: &'s AppState,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Result<&'s KeyRegistry, Refusal> {
    let keys = &state.gateway.settings().process.admin_keys;
    if keys.is_empty() {
        return Err(Refusal::Admin(
            403,
            "permission_error",
            "no PGW_ADMIN_KEYS configured: /admin/* is disabled".into(),
        ));
    }
    if let Err(e) = auth::check(keys, headers, peer) {
        let (status, ty, message) = e.into_gateway_error();
        return Err(Refusal::Admin(status, ty, message));
    }
    state.keys.as_deref().ok_or(Refusal::Disabled)
}

/// The field serde names in `message` after `prefix` (`unknown field `x``).
fn named_field(message: &str) -> Option<String> {
    ["unknown field `", "missing field `"]
        .iter()
        .find_map(|p| message.split(p).nth(1))
        .and_then(|rest| rest.split('`').next())
        .map(str::to_string)
}

/// A JSON body as `T`; a 400 naming the field at fault: the unknown or missing field serde
/// names, else the top-level field of a wrong type (found by leaving each field out).
fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, Refusal> {
    serde_json::from_slice(bytes).map_err(|e| {
        let message = e.to_string();
        let param = named_field(&message).or_else(|| mistyped_field::<T>(bytes));
        Refusal::Malformed {
            param,
            message: format!("invalid JSON body: {message}"),
        }
    })
}

/// The top-level field of a JSON object body whose value does not fit `T`: the one whose
/// removal lets the rest parse (or only leaves that field missing). Only runs on a refusal.
fn mistyped_field<T: DeserializeOwned>(bytes: &Bytes) -> Option<String> {
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(bytes) else {
        return None;
    };
    map.keys().find_map(|k| {
        let mut rest = map.clone();
        rest.remove(k);
        match serde_json::from_value::<T>(Value::Object(rest)) {
            Ok(_) => Some(k.clone()),
            Err(e) if named_field(&e.to_string()).as_deref() == Some(k.as_str()) => Some(k.clone()),
            Err(_) => None,
        }
    })
}

/// A query string as `T`, or 400.
fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, Refusal> {
    q.map(|Query(t)| t).map_err(|e| {
        let message = e.body_text();
        Refusal::Malformed {
            param: named_field(&message),
            message,
        }
    })
}

fn ok(status: StatusCode, v: impl serde::Serialize) -> Response {
    (status, axum::Json(v)).into_response()
}

/// `{"key": …, "secret": "sk-pgw-…"}`: the only place a secret is written.
fn created(status: StatusCode, c: &Created) -> Response {
    ok(status, json!({"key": c.key, "secret": c.secret.expose()}))
}

/// Run `f` with the admin operations of this process, or answer the refusal.
macro_rules! with_admin {
    ($state:expr, $peer:expr, $headers:expr, |$admin:ident| $body:expr) => {
        match authorise(&$state, $peer, &$headers) {
            Err(r) => r.into_response(),
            Ok(reg) => {
                let $admin = KeyAdmin::of(reg);
                $body
            }
        }
    };
}

fn answer<T>(r: Result<T, KeysError>, f: impl FnOnce(T) -> Response) -> Response {
    match r {
        Ok(v) => f(v),
        Err(e) => keys_error(&e),
    }
}

async fn create_key(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        let req = match body(&bytes) {
            Ok(r) => r,
            Err(r) => return r.into_response(),
        };
        answer(admin.create_key(req).await, |c| {
            tracing::info!(key_id = %c.key.id, team_id = ?c.key.team_id, "virtual key created");
            created(StatusCode::CREATED, &c)
        })
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListKeysQuery {
    team: Option<String>,
    state: Option<String>,
}

async fn list_keys(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    q: Result<Query<ListKeysQuery>, QueryRejection>,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        let q = match query(q) {
            Ok(q) => q,
            Err(r) => return r.into_response(),
        };
        let state = match q.state.as_deref() {
            None => None,
            Some(s) => match KeyState::parse(s) {
                Some(s) => Some(s),
                None => {
                    return keys_error(&KeysError::invalid(
                        "state",
                        format!("expected active|revoked, got `{s}`"),
                    ));
                }
            },
        };
        let filter = KeyFilter {
            team: q.team,
            state,
        };
        answer(admin.list_keys(&filter).await, |keys: Vec<VirtualKey>| {
            ok(StatusCode::OK, json!({"data": keys}))
        })
    })
}

async fn get_key(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        answer(admin.get_key(&id).await, |k| ok(StatusCode::OK, k))
    })
}

async fn update_key(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        let patch = match body(&bytes) {
            Ok(p) => p,
            Err(r) => return r.into_response(),
        };
        answer(admin.update_key(&id, patch).await, |k| {
            tracing::info!(key_id = %k.id, "virtual key updated");
            ok(StatusCode::OK, k)
        })
    })
}

async fn rotate_key(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        answer(admin.rotate_key(&id).await, |c| {
            tracing::info!(key_id = %c.key.id, "virtual key rotated");
            created(StatusCode::OK, &c)
        })
    })
}

async fn revoke_key(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        answer(admin.revoke_key(&id).await, |k| {
            tracing::info!(key_id = %k.id, "virtual key revoked");
            ok(StatusCode::OK, k)
        })
    })
}

async fn create_team(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        let req = match body(&bytes) {
            Ok(r) => r,
            Err(r) => return r.into_response(),
        };
        answer(admin.create_team(req).await, |t| {
            tracing::info!(team_id = %t.id, "team created");
            ok(StatusCode::CREATED, t)
        })
    })
}

async fn list_teams(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        answer(admin.list_teams().await, |teams| {
            ok(StatusCode::OK, json!({"data": teams}))
        })
    })
}

async fn get_team(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        answer(admin.get_team(&id).await, |t| ok(StatusCode::OK, t))
    })
}

async fn update_team(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        let patch = match body(&bytes) {
            Ok(p) => p,
            Err(r) => return r.into_response(),
        };
        answer(admin.update_team(&id, patch).await, |t| {
            tracing::info!(team_id = %t.id, "team updated");
            ok(StatusCode::OK, t)
        })
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpendParams {
    key: Option<String>,
    team: Option<String>,
    from: Option<String>,
    to: Option<String>,
    group_by: Option<String>,
}

async fn spend(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    q: Result<Query<SpendParams>, QueryRejection>,
) -> Response {
    with_admin!(state, peer, headers, |admin| {
        let p = match query(q) {
            Ok(p) => p,
            Err(r) => return r.into_response(),
        };
        let now = admin.now_ms();
        let q = match SpendQuery::parse(
            p.key,
            p.team,
            p.from.as_deref(),
            p.to.as_deref(),
            p.group_by.as_deref(),
            now,
        ) {
            Ok(q) => q,
            Err(e) => return keys_error(&e),
        };
        answer(admin.spend(&q).await, |r| ok(StatusCode::OK, r))
    })
}
