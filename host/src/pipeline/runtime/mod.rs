//! The runtime floor of the pipeline: what a configuration becomes when it starts — the
//! [`Inner`] snapshot a call runs on, each scope's [`ScopeRuntime`] (its sources, selector and
//! governance state) and each source's [`SourceRuntime`] (its settings, provider component
//! and credential). Every layer of a call reads these; none of them is imported from the
//! `Gateway` façade. Building them (`build.rs`) and loading their components (`plugins.rs`)
//! live beside them.
//!
//! **Hot reload:** everything built from settings sits in one `Inner`; a call keeps the
//! snapshot it started with to its end, so a reload never changes a call in flight.

mod build;
pub(crate) mod error;
pub(crate) mod gates;
mod plugins;
pub(crate) mod tenancy;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use reqwest::header::{HeaderName, HeaderValue};

use crate::config::{ScopeSettings, Settings, SourceSettings};
use crate::governance::breaker::BreakerBackend;
use crate::governance::limiter::{AdaptivePacer, LimiterBackend};
use crate::governance::stats::{ScopeProgress, SourceStats};
use crate::governance::{Entropy, SharedClock};
use crate::plugin::{PluginEngine, ProviderComponent, SelectSource, SourceInfo};
use crate::telemetry::Telemetry;
use crate::transport::HttpClients;

use super::cache_layer::state::CacheRuntime;
use super::structured::Strategies;

pub use error::StartError;

/// A source ready to serve: its settings, provider component and precomputed values.
pub(crate) struct SourceRuntime {
    pub settings: SourceSettings,
    pub component: Arc<ProviderComponent>,
    /// What the plugin sees of the source (no credential).
    pub info: SourceInfo,
    /// The full base URL without a trailing slash.
    pub base_url: String,
    /// The last plugin path sent to and its parsed URL (`upstream::url_of`).
    pub last_url: arc_swap::ArcSwapOption<(String, reqwest::Url)>,
    /// The injected clock (the wall time an HTTP-date `Retry-After` is measured from).
    pub clock: SharedClock,
}

impl SourceRuntime {
    /// The credential header for an auth scheme, if the source has a key.
    pub(crate) fn auth_header(
        &self,
        scheme: &crate::plugin::AuthScheme,
    ) -> Result<Option<(HeaderName, HeaderValue)>, String> {
        use crate::plugin::AuthScheme;
        let Some(key) = &self.settings.api_key else {
            return Ok(None);
        };
        let mut value = match scheme {
            AuthScheme::None => return Ok(None),
            // Concatenated, not `format!`ed: once per upstream request.
            AuthScheme::Bearer => HeaderValue::try_from(["Bearer ", key].concat()),
            AuthScheme::Header(_) => HeaderValue::try_from(key.as_str()),
        }
        .map_err(|_| "API_KEY contains characters not allowed in a header".to_string())?;
        value.set_sensitive(true);
        let name = match scheme {
            AuthScheme::Header(h) => HeaderName::try_from(h.as_str())
                .map_err(|_| format!("plugin asked for an invalid auth header name `{h}`"))?,
            _ => reqwest::header::AUTHORIZATION,
        };
        Ok(Some((name, value)))
    }
}

/// A scope ready to serve: its sources and the governance state of each.
pub(crate) struct ScopeRuntime {
    pub settings: ScopeSettings,
    pub sources: Vec<SourceRuntime>,
    /// The selector plugin (`{SCOPE}__SELECTOR`).
    pub selector: Arc<dyn SelectSource>,
    /// Advances once per call: the selector's seed (retries of a call keep it).
    pub seed: AtomicU64,
    pub breaker: Arc<dyn BreakerBackend>,
    pub limiter: Arc<dyn LimiterBackend>,
    /// Per source, same order as `sources`.
    pub stats: Vec<SourceStats>,
    pub pacers: Vec<AdaptivePacer>,
    pub progress: ScopeProgress,
    /// The injected clock: monotonic time for governance, wall time for what calls report.
    pub clock: SharedClock,
    /// The process's random source: back-off jitter, call and attempt ids.
    pub entropy: Arc<Entropy>,
}

/// One configuration, started: what every call of it runs on.
pub(crate) struct Inner {
    pub settings: Settings,
    pub scopes: Vec<ScopeRuntime>,
    pub http: HttpClients,
    /// The telemetry of the gateway (rows, cost, metrics); process-wide, kept by reloads.
    pub recorder: Arc<Telemetry>,
    /// The response cache and its single-flight; `None` when `PGW_CACHE_BACKEND=none`.
    pub cache: Option<CacheRuntime>,
    /// The structured-output strategy components (per-scope defaults and per-call choices).
    pub structured: Strategies,
    pub engine: PluginEngine,
    /// The process's random source, kept by reloads (so ids stay ordered).
    pub entropy: Arc<Entropy>,
    /// Virtual keys, their budgets and gates (`PGW_VIRTUAL_KEYS`); process-wide, kept by
    /// reloads.
    pub tenancy: Option<Arc<tenancy::Tenancy>>,
    /// The OpenTelemetry trace pipeline (`OTEL_*`, docs/tracing.md); `None` when traces are
    /// off. Process-wide, kept by reloads.
    pub otel: Option<Arc<crate::telemetry::otel::Otel>>,
}

impl Inner {
    /// The scope whose aliases contain `model`.
    pub(crate) fn scope_of(&self, model: &str) -> Option<&ScopeRuntime> {
        self.scopes
            .iter()
            .find(|s| s.settings.aliases.iter().any(|a| a == model))
    }

    /// Every model alias of this configuration, comma-separated (for `model_not_found`).
    pub(crate) fn known_aliases(&self) -> String {
        self.scopes
            .iter()
            .flat_map(|s| s.settings.aliases.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The provider and selector components of this configuration, by origin
    /// (`builtin:<name>` or a path), each once, sorted.
    pub(crate) fn plugin_origins(&self) -> Vec<String> {
        let mut plugins: Vec<String> = Vec::new();
        for s in &self.scopes {
            for src in &s.sources {
                plugins.push(src.component.origin().to_string());
            }
        }
        for s in &self.settings.scopes {
            plugins.push(plugins::selector_origin(&s.governance.selector));
        }
        plugins.sort();
        plugins.dedup();
        plugins
    }
}
