//! End-to-end tests whose timing must not depend on the rest of the suite, in their own test
//! binary: cargo runs test binaries one after another, and inside this one the tests take
//! turns ([`one_at_a_time`]), so nothing else competes for the machine's cores while they
//! run. Here: the latency of calls beside slow guest code (`worker_yield.rs`), and three
//! `polygateway serve` processes sharing Redis state (`scale_out.rs`), whose rate windows
//! and leases a loaded machine would blur. Each starts its own mock upstream and gateways on
//! free ports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
#[path = "../e2e/common.rs"]
mod common;
#[allow(dead_code)]
#[path = "../e2e/plugin_fixtures.rs"]
mod plugin_fixtures;
#[allow(dead_code)]
#[path = "../e2e/plugin_serve.rs"]
mod plugin_serve;
mod scale_out;
mod worker_yield;

/// Held for the whole of each test in this binary, so they run one at a time.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Wait until no other test of this binary runs; the guard lets the next one go.
pub(crate) async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    ALONE.lock().await
}
