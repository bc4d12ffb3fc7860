//! What the gateway reports about itself: the `/healthz` JSON snapshot (scopes, sources,
//! components, breaker, limiter, telemetry, cache) and the Prometheus text of `/metrics`
//! with its gauges refreshed, both read from one configuration's [`Inner`].

use serde_json::{Value, json};

use crate::governance::breaker::BreakerState;
use crate::governance::limiter::GateUsage;

use super::cache_layer;
use super::runtime::{Inner, ScopeRuntime};

/// Every metric in the Prometheus text format, gauges (breaker states, telemetry
/// degradation) refreshed first.
pub(crate) fn metrics_text(inner: &Inner) -> String {
    let m = inner.recorder.metrics();
    for s in &inner.scopes {
        for src in &s.sources {
            if let Some(b) = s.breaker.snapshot(&src.settings.name) {
                let state = match b.state {
                    BreakerState::Open => 2,
                    BreakerState::HalfOpen => 1,
                    BreakerState::Closed => 0,
                };
                m.set_breaker_state(&s.settings.name, &src.settings.name, state);
            }
        }
    }
    m.set_telemetry_degraded(inner.recorder.status().degraded);
    m.encode()
}

/// A JSON snapshot for `/healthz`: scopes, sources, plugins, telemetry, cache.
pub(crate) fn health(inner: &Inner) -> Value {
    let scopes: serde_json::Map<String, Value> = inner
        .scopes
        .iter()
        .map(|s| (s.settings.name.to_string(), scope_health(s)))
        .collect();
    json!({
        "status": "ok",
        "scopes": scopes,
        "telemetry": inner.recorder.status(),
        "cache": cache_layer::health(inner.cache.as_ref()),
    })
}

/// One gate's use and limits.
fn usage(u: &GateUsage) -> Value {
    json!({
        "in_flight": u.in_flight,
        "requests_in_window": u.requests_in_window,
        "tokens_in_window": u.tokens_in_window,
        "max_concurrency": u.limits.max_concurrency,
        "rpm": u.limits.rpm,
        "tpm": u.limits.tpm,
    })
}

/// One scope: its aliases, each source's state, and the scope-wide limiter.
fn scope_health(s: &ScopeRuntime) -> Value {
    let limiter = s.limiter.snapshot();
    let now = s.clock.now_ms();
    let sources: Vec<_> = s
        .sources
        .iter()
        .enumerate()
        .map(|(i, src)| {
            let breaker = s.breaker.snapshot(&src.settings.name);
            let limits = limiter
                .sources
                .iter()
                .find(|(n, _)| *n == src.settings.name)
                .map(|(_, u)| usage(u));
            json!({
                "name": &*src.settings.name,
                "provider": &*src.settings.provider,
                "model": src.settings.model,
                "plugin": src.component.info().name,
                "plugin_origin": src.component.origin(),
                "idle_instances": src.component.idle_instances(),
                "stream_parser_instances": src.component.stream_parser_instances(),
                "shared_stream_parsers": src.component.shared_stream_parsers(),
                "plugin_faults": src.component.faults(),
                "serves": serves(&src.component.info().capabilities),
                "breaker": breaker.as_ref().map(|b| b.state.as_str()),
                "cooldown_remaining_s": breaker.as_ref().map(|b| b.retry_after_ms as f64 / 1000.0),
                "consecutive_failures": breaker.as_ref().map(|b| b.consecutive_failures),
                "in_flight": s.stats[i].in_flight(),
                "success_ewma": s.stats[i].success_ewma(),
                "latency_ewma_ms": s.stats[i].latency_ewma_ms(),
                "pacer_limit": s.pacers[i].limit(),
                "memo_cooldown_s": s.stats[i].cooldown_remaining_ms(now) as f64 / 1000.0,
                "limiter": limits,
            })
        })
        .collect();
    json!({
        "aliases": s.settings.aliases,
        "sources": sources,
        "limiter": {
            "global": usage(&limiter.global),
            "window_s": limiter.window_ms as f64 / 1000.0,
            "expired_leases": limiter.expired_leases,
            "settle_failures": limiter.settle_failures,
        },
    })
}

/// What a provider serves, from its capabilities: `chat`, `embedding`, `ocr`, `audio`.
fn serves(c: &crate::plugin::Capabilities) -> Vec<&'static str> {
    [
        (c.chat, "chat"),
        (c.embedding, "embedding"),
        (c.ocr, "ocr"),
        (c.audio, "audio"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect()
}
