//! End-to-end tests that measure latency, in their own test binary: cargo runs test binaries
//! one after another, so nothing else in the suite competes for the machine's cores while
//! these measure. Each starts its own mock upstream and `polygateway serve` on free ports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
#[path = "../e2e/plugin_fixtures.rs"]
mod plugin_fixtures;
#[allow(dead_code)]
#[path = "../e2e/plugin_serve.rs"]
mod plugin_serve;
mod worker_yield;
