//! End-to-end tests: a real `polygateway serve` process (the binary built by this package),
//! the mock upstream over TCP, the wasm provider components, and the official OpenAI Python
//! SDK. Each test starts its own mock and gateway on free ports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod answers;
mod anthropic;
mod bench_floor;
mod bench_micro;
mod build_target;
mod cache;
mod cancelled;
mod claude_code;
mod common;
mod conformance;
mod contract_0_1;
mod dashboard;
mod embedded;
mod embeddings;
mod external_plugin;
mod failover;
mod gemini;
mod golden;
mod governance;
mod grafana;
mod hostile;
mod keys_admin;
mod listener;
mod messages;
mod ocr;
mod otel;
mod pgo_train;
mod plugin_cache;
mod plugin_compile;
mod plugin_fixtures;
mod plugin_load;
mod plugin_profiler;
mod plugin_serve;
mod proxy_basics;
mod rate_limits;
mod reload;
mod repo_rules;
mod responses;
mod sandbox;
mod sdk;
mod sdk_wit;
mod selectors;
mod stream_parsers;
mod streaming;
mod structured;
mod telemetry;
mod validation;
mod virtual_keys;
