//! The operator dashboard (docs/dashboard.md): the page at `/ui/` with its assets embedded
//! in the binary (no CDN; it works offline), and the JSON it polls under
//! `/admin/dashboard/` — overview, sources, spend, calls — authorised by `PGW_ADMIN_KEYS`
//! like the rest of `/admin/*`. The page keeps the admin key in its memory only (a
//! JavaScript variable, sent as `Authorization: Bearer`), never in the URL, a cookie or
//! storage; reloading the page asks for it again.
//!
//! The page and its assets carry no data, so they are served without a key; every byte of
//! gateway state goes through the authorised API.

mod api;
mod assets;

use axum::Router;
use axum::routing::get;

use super::AppState;

pub(crate) use api::DashboardState;

/// The dashboard's routes: the page, its assets and its API.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(assets::redirect_to_index))
        .route("/ui/", get(assets::index))
        .route("/ui/assets/{*file}", get(assets::asset))
        .route("/admin/dashboard/overview", get(api::overview))
        .route("/admin/dashboard/sources", get(api::sources))
        .route("/admin/dashboard/spend", get(api::spend))
        .route("/admin/dashboard/calls", get(api::calls))
        .route("/admin/dashboard/calls/{id}", get(api::call))
}
