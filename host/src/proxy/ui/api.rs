//! The dashboard's JSON (docs/dashboard.md#api): every handler checks the admin key first
//! (403 when `PGW_ADMIN_KEYS` is empty, 401 for a wrong key), then reads — the live series
//! (`telemetry/live.rs`), the gateway's health snapshot, or the ledger (`ledger/`). Query
//! errors are 400 naming the parameter; a ledger that cannot be read is 503 with the reason,
//! and `PGW_TELEMETRY_BACKEND=none` is 409 `ledger_off` (the page then says so).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::keys::{BudgetSpec, KeyAdmin, KeyFilter};
use crate::ledger::{
    CallFilter, CallStatus, Ledger, LedgerError, MAX_LIMIT, SpendGroup, SpendLine, SpendRange,
};
use crate::proxy::errors::plain_error;
use crate::proxy::{AppState, auth};
use crate::telemetry::live::LiveSeries;

/// What the dashboard's handlers share: the ledger reader and the live series.
#[derive(Clone)]
pub(crate) struct DashboardState {
    pub ledger: Arc<Ledger>,
    pub live: Arc<LiveSeries>,
}

impl DashboardState {
    /// The state of `gateway`, with the live series' sampler started when a runtime runs.
    pub(crate) fn new(gateway: &crate::pipeline::Gateway) -> Self {
        let live = Arc::new(LiveSeries::new(
            gateway.metrics().live(),
            gateway.now_unix_ms(),
        ));
        if tokio::runtime::Handle::try_current().is_ok() {
            let g = gateway.clone();
            LiveSeries::spawn_sampler(&live, move || g.now_unix_ms());
        }
        Self {
            ledger: Arc::new(Ledger::new(&gateway.settings().process.telemetry.backend)),
            live,
        }
    }
}

/// The admin check of every dashboard route: the refusal to send, or `None` to go on.
fn refusal(state: &AppState, peer: SocketAddr, headers: &HeaderMap) -> Option<Response> {
    let keys = &state.gateway.settings().process.admin_keys;
    if keys.is_empty() {
        return Some(plain_error(
            403,
            "permission_error",
            "no PGW_ADMIN_KEYS configured: /admin/* is disabled",
        ));
    }
    auth::check(keys, headers, peer).err().map(|e| {
        let (status, ty, message) = e.into_gateway_error();
        plain_error(status, ty, &message)
    })
}

/// Why the budgets of the spend page could not be read.
enum BudgetsError {
    Store(crate::keys::KeysError),
    Ledger(LedgerError),
}

fn ledger_error(e: &LedgerError) -> Response {
    match e {
        LedgerError::Off => plain_error(409, "ledger_off", &e.to_string()),
        LedgerError::Invalid { param, .. } => {
            let body = json!({"error": {"message": e.to_string(), "type": "invalid_request_error",
                "param": param, "code": null}});
            (axum::http::StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
        }
        LedgerError::Database(_) => {
            tracing::warn!(error = %e, "dashboard: the ledger cannot be read");
            plain_error(503, "ledger_unavailable", &e.to_string())
        }
    }
}

fn bad_query(e: &QueryRejection) -> Response {
    plain_error(400, "invalid_request_error", &e.body_text())
}

/// `GET /admin/dashboard/overview`: the live series of the last hour
/// (`telemetry::live::Overview`), `now_ms` and the scope names.
pub(super) async fn overview(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = refusal(&state, peer, &headers) {
        return r;
    }
    let now_ms = state.gateway.now_unix_ms();
    let overview = state.dashboard.live.overview(now_ms);
    let mut body = serde_json::to_value(&overview).unwrap_or(Value::Null);
    body["now_ms"] = json!(now_ms);
    body["scopes"] = json!(state.gateway.scope_names());
    axum::Json(body).into_response()
}

/// `GET /admin/dashboard/sources`: `/healthz`'s scopes (breaker, limiter gates, pacer,
/// cooldown memos, plugin and faults per source) with the configuration's generation.
pub(super) async fn sources(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = refusal(&state, peer, &headers) {
        return r;
    }
    let health = state.gateway.health();
    axum::Json(json!({
        "now_ms": state.gateway.now_unix_ms(),
        "generation": state.gateway.generation(),
        "scopes": health["scopes"],
        "telemetry": health["telemetry"],
        "cache": health["cache"],
    }))
    .into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SpendParams {
    group_by: Option<String>,
    from: Option<String>,
    to: Option<String>,
}

/// `GET /admin/dashboard/spend?group_by=key|team|scope|source|model&from=&to=`: spend
/// lines over the range (default the last 24 hours, grouped by model) and, when virtual
/// keys are on, every budget of every key and team with what its current period spent.
pub(super) async fn spend(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    q: Result<Query<SpendParams>, QueryRejection>,
) -> Response {
    if let Some(r) = refusal(&state, peer, &headers) {
        return r;
    }
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_query(&e),
    };
    let now_ms = state.gateway.now_unix_ms();
    let parsed = SpendGroup::parse(q.group_by.as_deref().unwrap_or("model")).and_then(|g| {
        SpendRange::parse(q.from.as_deref(), q.to.as_deref(), now_ms).map(|r| (g, r))
    });
    let (group, range) = match parsed {
        Ok(v) => v,
        Err(e) => return ledger_error(&e),
    };
    let ledger = &state.dashboard.ledger;
    let lines = match ledger.spend(group, range).await {
        Ok(l) => l,
        Err(e) => return ledger_error(&e),
    };
    let budgets = match budgets(&state, ledger, now_ms).await {
        Ok(b) => b,
        Err(BudgetsError::Ledger(e)) => return ledger_error(&e),
        Err(BudgetsError::Store(e)) => {
            return plain_error(503, "key_store_unavailable", &e.to_string());
        }
    };
    axum::Json(json!({
        "group_by": q.group_by.as_deref().unwrap_or("model"),
        "from_ms": range.from_ms,
        "to_ms": range.to_ms,
        "lines": lines,
        "budgets": budgets,
    }))
    .into_response()
}

/// Every budget of every key and team with its current period's spend from the ledger;
/// `null` when virtual keys are off.
async fn budgets(state: &AppState, ledger: &Ledger, now_ms: i64) -> Result<Value, BudgetsError> {
    let Some(registry) = state.keys.as_deref() else {
        return Ok(Value::Null);
    };
    let admin = KeyAdmin::of(registry);
    let keys = admin
        .list_keys(&KeyFilter::default())
        .await
        .map_err(BudgetsError::Store)?;
    let teams = admin.list_teams().await.map_err(BudgetsError::Store)?;
    let mut owners: Vec<(&'static str, String, String, &Vec<BudgetSpec>)> = Vec::new();
    for k in &keys {
        owners.push(("key", k.id.clone(), k.name.clone(), &k.budgets));
    }
    for t in &teams {
        owners.push(("team", t.id.clone(), t.name.clone(), &t.budgets));
    }
    // One ledger query per (grouping, period start) in use.
    let mut starts: BTreeSet<(&'static str, i64)> = BTreeSet::new();
    for (kind, _, _, budgets) in &owners {
        for b in budgets.iter() {
            starts.insert((kind, b.period.window(now_ms).start_ms));
        }
    }
    let mut spent: BTreeMap<(&'static str, i64), Vec<SpendLine>> = BTreeMap::new();
    for (kind, start) in starts {
        let group = if kind == "key" {
            SpendGroup::Key
        } else {
            SpendGroup::Team
        };
        let range = SpendRange {
            from_ms: start,
            to_ms: now_ms.saturating_add(1),
        };
        let lines = ledger
            .spend(group, range)
            .await
            .map_err(BudgetsError::Ledger)?;
        spent.insert((kind, start), lines);
    }
    let mut out = Vec::new();
    for (kind, id, name, budgets) in owners {
        for b in budgets.iter() {
            let w = b.period.window(now_ms);
            let spent_usd = spent
                .get(&(kind, w.start_ms))
                .and_then(|lines| lines.iter().find(|l| l.group == id))
                .and_then(|l| l.cost)
                .unwrap_or(0.0);
            out.push(json!({
                "owner": kind,
                "id": id,
                "name": name,
                "period": b.period.as_str(),
                "limit_usd": b.limit_usd,
                "soft_limit_usd": b.soft_limit_usd,
                "spent_usd": spent_usd,
                "period_start_ms": w.start_ms,
                "resets_at_ms": w.resets_at_ms,
            }));
        }
    }
    Ok(Value::Array(out))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CallParams {
    scope: Option<String>,
    source: Option<String>,
    status: Option<String>,
    key: Option<String>,
    before_ms: Option<i64>,
    limit: Option<u32>,
}

/// An empty filter value (a form's blank field) means "any".
fn given(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

/// `GET /admin/dashboard/calls?scope=&source=&status=success|failure|cache_hit&key=&before_ms=&limit=`:
/// the ledger's calls, newest first (default 50, at most 500).
pub(super) async fn calls(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    q: Result<Query<CallParams>, QueryRejection>,
) -> Response {
    if let Some(r) = refusal(&state, peer, &headers) {
        return r;
    }
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_query(&e),
    };
    let status = match given(q.status).as_deref().map(CallStatus::parse) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => return ledger_error(&e),
    };
    let limit = q.limit.unwrap_or(50);
    if limit == 0 || limit > MAX_LIMIT {
        return ledger_error(&LedgerError::invalid(
            "limit",
            format!("must be between 1 and {MAX_LIMIT}, got {limit}"),
        ));
    }
    let filter = CallFilter {
        scope: given(q.scope),
        source: given(q.source),
        status,
        key: given(q.key),
        before_ms: q.before_ms,
        limit,
    };
    match state.dashboard.ledger.calls(&filter).await {
        Ok(calls) => axum::Json(json!({"calls": calls})).into_response(),
        Err(e) => ledger_error(&e),
    }
}

/// `GET /admin/dashboard/calls/{id}`: one call with its attempts in order, or 404.
pub(super) async fn call(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(r) = refusal(&state, peer, &headers) {
        return r;
    }
    match state.dashboard.ledger.call(&id).await {
        Ok(Some(detail)) => axum::Json(detail).into_response(),
        Ok(None) => plain_error(
            404,
            "not_found_error",
            &format!("no call `{id}` in the ledger"),
        ),
        Err(e) => ledger_error(&e),
    }
}
