//! `Gateway`: the embedded API. Built from `Settings` (or the environment), it owns the plugin
//! engine, the loaded provider components, the HTTP clients and the telemetry recorder, and
//! runs calls through the pipeline.
//!
//! **Hot reload:** everything built from settings (plugins, scopes, governance state, cache,
//! strategies) sits in one `Inner` behind an `ArcSwap`. A call takes a snapshot when it
//! starts and keeps it to its end, so a reload ([`Gateway::reload`]) never changes a call in
//! flight; a reload that fails validation leaves the current `Inner` in place. Telemetry and
//! the HTTP clients are process-wide and carried over.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use arc_swap::ArcSwap;
use futures_util::Stream;
use reqwest::header::{HeaderName, HeaderValue};

use crate::config::{ConfigError, PluginRef, ScopeSettings, Settings, SourceSettings};
use crate::config::{StateBackend, StateBackends};
use crate::error::GatewayError;
use crate::governance::breaker::{BreakerBackend, BreakerConfig, MemoryBreaker, RedisBreaker};
use crate::governance::limiter::{
    AdaptivePacer, LimiterBackend, LimiterConfig, Limits, MemoryLimiter, RedisLimiter,
};
use crate::governance::redis_conn::RedisHandle;
use crate::governance::stats::{ScopeProgress, SourceStats};
use crate::governance::{SharedClock, SystemClock};
use crate::plugin::{
    PluginEngine, PluginError, PluginLimits, ProviderComponent, SelectSource, SelectorComponent,
    SourceInfo, builtin_provider_bytes, builtin_selector_bytes, source_info,
};
use crate::telemetry::{Telemetry, TelemetryStatus};
use crate::transport::HttpClients;

use super::call::run_call;
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::sink::{CallEvent, EventRx, Sink, event_channel};

/// Batches of events (about one per upstream read) a streamed call may have in flight to its
/// consumer before it waits.
const CALL_EVENT_BATCHES: usize = 64;

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error("telemetry: {0}")]
    Telemetry(String),
    #[error("{0}")]
    Transport(String),
    #[error("{key}: {message}")]
    Source { key: String, message: String },
    #[error("response cache: {0}")]
    Cache(#[from] crate::cache::CacheError),
}

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
            AuthScheme::Bearer => HeaderValue::try_from(format!("Bearer {key}")),
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

/// Where the scopes' governance state lives.
struct StateStores {
    backends: StateBackends,
    redis: Option<Arc<RedisHandle>>,
    /// A test injected the clock: Redis scripts use it instead of the server's `TIME`.
    injected_clock: bool,
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
    pub clock: SharedClock,
}

impl ScopeRuntime {
    fn new(
        settings: ScopeSettings,
        sources: Vec<SourceRuntime>,
        clock: SharedClock,
        selector: Arc<dyn SelectSource>,
        state: &StateStores,
    ) -> Result<Self, StartError> {
        let g = &settings.governance;
        let names: Vec<(Arc<str>, u32)> = sources
            .iter()
            .map(|s| (s.settings.name.clone(), s.settings.max_concurrency))
            .collect();
        let longest_attempt_ms = sources
            .iter()
            .map(|s| s.settings.timeouts.total.as_millis() as u64)
            .max()
            .unwrap_or(120_000);
        let breaker_cfg = BreakerConfig {
            fail_threshold: g.fail_threshold,
            cooldown_ms: g.cooldown.as_millis() as u64,
            max_cooldown_ms: g.max_cooldown.as_millis() as u64,
            fail_rate: g.fail_rate,
            min_calls: g.min_calls,
            bucket_ms: 30_000,
            // A probe that dies frees the half-open slot after this lease.
            probe_ttl_ms: (2 * longest_attempt_ms).max(g.cooldown.as_millis() as u64),
        };
        let limiter_cfg = LimiterConfig {
            window_ms: state
                .backends
                .rate_window
                .unwrap_or(g.rate_window)
                .as_millis() as u64,
            // The lease must outlive the longest attempt.
            lease_ttl_ms: longest_attempt_ms + 5_000,
            global: Limits {
                max_concurrency: g.global_max_concurrency,
                rpm: g.global_rpm,
                tpm: g.global_tpm,
            },
            sources: sources
                .iter()
                .map(|s| (s.settings.name.clone(), Limits::from_source(&s.settings)))
                .collect(),
        };
        Ok(Self {
            breaker: match (&state.redis, state.backends.breaker) {
                (Some(r), StateBackend::Redis) => RedisBreaker::new(
                    r.clone(),
                    &settings.name,
                    breaker_cfg,
                    &names,
                    state.injected_clock.then(|| clock.clone()),
                ),
                _ => Arc::new(MemoryBreaker::new(breaker_cfg, clock.clone(), &names)),
            },
            limiter: match (&state.redis, state.backends.limiter) {
                (Some(r), StateBackend::Redis) => RedisLimiter::new(
                    r.clone(),
                    &settings.name,
                    limiter_cfg,
                    state.injected_clock.then(|| clock.clone()),
                )
                .map_err(|e| StartError::Transport(e.to_string()))?,
                _ => Arc::new(MemoryLimiter::new(limiter_cfg, clock.clone())),
            },
            stats: sources.iter().map(|_| SourceStats::default()).collect(),
            pacers: sources
                .iter()
                .map(|s| AdaptivePacer::new(s.settings.max_concurrency))
                .collect(),
            progress: ScopeProgress::default(),
            selector,
            seed: AtomicU64::new(0),
            clock,
            settings,
            sources,
        })
    }
}

pub(crate) struct Inner {
    pub settings: Settings,
    pub scopes: Vec<ScopeRuntime>,
    pub http: HttpClients,
    /// The telemetry of the gateway (rows, cost, metrics); process-wide, kept by reloads.
    pub recorder: Arc<Telemetry>,
    /// The response cache and its single-flight; `None` when `PGW_CACHE_BACKEND=none`.
    pub cache: Option<super::cache_layer::CacheRuntime>,
    /// The structured-output strategy components (per-scope defaults and per-call choices).
    pub structured: super::structured::Strategies,
    pub _engine: PluginEngine,
}

/// Where [`Gateway::reload`] reads fresh settings from (e.g. `.env` and the environment:
/// `config::env_settings_source`).
pub use crate::config::SettingsSource;

/// Why a reload was refused. The previous configuration keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The gateway was started from explicit settings and has no source to re-read.
    #[error(
        "no settings source: this gateway was started from explicit settings (see Gateway::set_settings_source)"
    )]
    NoSource,
    /// The new settings do not validate.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The new settings validate but cannot be started (a plugin that does not load, …).
    #[error(transparent)]
    Start(#[from] StartError),
}

impl ReloadError {
    /// Every `(key, problem)` at fault for a configuration or plugin problem (empty for
    /// other failures).
    pub fn problems(&self) -> Vec<(String, String)> {
        match self {
            ReloadError::NoSource => Vec::new(),
            ReloadError::Config(ConfigError::Invalid(problems)) => problems
                .iter()
                .map(|p| (p.key.clone(), p.message.clone()))
                .collect(),
            ReloadError::Config(ConfigError::DotEnv { path, message }) => {
                vec![(path.clone(), message.clone())]
            }
            ReloadError::Start(StartError::Source { key, message }) => {
                vec![(key.clone(), message.clone())]
            }
            ReloadError::Start(StartError::Config(e)) => {
                ReloadError::Config(ConfigError::Invalid(match e {
                    ConfigError::Invalid(p) => p.clone(),
                    ConfigError::DotEnv { .. } => Vec::new(),
                }))
                .problems()
            }
            ReloadError::Start(_) => Vec::new(),
        }
    }
}

/// What a successful reload loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// The scopes now served.
    pub scopes: Vec<String>,
    /// The provider and selector components now loaded, by origin (`builtin:<name>` or a
    /// path), each once.
    pub plugins: Vec<String>,
    /// Process settings that changed but only take effect on a restart (`PGW_LISTEN`,
    /// client and admin keys, body limit, logging, telemetry).
    pub restart_required: Vec<&'static str>,
}

/// What a gateway shares between its clones: the current `Inner` and what a reload needs.
pub(crate) struct Shared {
    current: ArcSwap<Inner>,
    /// The settings at start (process settings that a reload cannot change).
    started: Settings,
    telemetry: Arc<Telemetry>,
    clock: SharedClock,
    injected_clock: bool,
    source: std::sync::Mutex<Option<SettingsSource>>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
}

/// The gateway. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("scopes", &self.inner().settings.scopes.len())
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Read `.env` and the environment (docs/configuration.md#environment) and start.
    /// [`Gateway::reload`] re-reads them.
    pub async fn from_env() -> Result<Self, StartError> {
        let source = crate::config::env_settings_source();
        crate::config::load_dotenv()?;
        let settings = crate::config::settings_from_env()?;
        let gateway = Self::from_settings(settings).await?;
        gateway.set_settings_source(source);
        Ok(gateway)
    }

    /// Start from explicit settings: load plugins, open telemetry, build clients.
    pub async fn from_settings(settings: Settings) -> Result<Self, StartError> {
        Self::build(settings, SystemClock::shared(), false).await
    }

    /// Like `from_settings`, with the clock of the governance state (breaker, limiter,
    /// stall budget) injected — tests drive cooldowns and windows with a `ManualClock`.
    pub async fn from_settings_with_clock(
        settings: Settings,
        clock: SharedClock,
    ) -> Result<Self, StartError> {
        Self::build(settings, clock, true).await
    }

    async fn build(
        settings: Settings,
        clock: SharedClock,
        injected_clock: bool,
    ) -> Result<Self, StartError> {
        let inner = Self::build_inner(settings, &clock, injected_clock, None).await?;
        Ok(Self {
            shared: Arc::new(Shared {
                started: inner.settings.clone(),
                telemetry: inner.recorder.clone(),
                current: ArcSwap::from_pointee(inner),
                clock,
                injected_clock,
                source: std::sync::Mutex::new(None),
                reloading: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// Build everything that depends on the settings. On a reload, `previous` lends what is
    /// process-wide: telemetry, HTTP clients, and the plugin engine while its limits and
    /// cache directory are unchanged.
    async fn build_inner(
        settings: Settings,
        clock: &SharedClock,
        injected_clock: bool,
        previous: Option<&Inner>,
    ) -> Result<Inner, StartError> {
        // The same rules as the environment parser's, for settings built in code too.
        settings.validate()?;
        let backends = settings.process.backends.clone();
        let needs_redis =
            backends.limiter == StateBackend::Redis || backends.breaker == StateBackend::Redis;
        let redis = match (&backends.redis_url, needs_redis) {
            (Some(url), true) => Some(Arc::new(
                RedisHandle::new(url, &backends.redis_prefix).map_err(StartError::Transport)?,
            )),
            _ => None,
        };
        // With Redis, windows and leases use the server clock unless a test injects one.
        let state = StateStores {
            backends,
            redis,
            injected_clock,
        };
        let limits = PluginLimits {
            call_timeout: settings.process.plugin_timeout,
            memory_bytes: settings.process.plugin_memory_bytes,
            max_component_bytes: settings.process.plugin_max_bytes,
        };
        let engine = match previous {
            Some(p)
                if p._engine.limits() == limits
                    && p._engine.cache_dir() == settings.process.plugin_cache_dir.as_deref() =>
            {
                p._engine.clone()
            }
            _ => PluginEngine::new(limits, settings.process.plugin_cache_dir.clone())?,
        };
        let mut loaded: Vec<(PluginRef, Arc<ProviderComponent>)> = Vec::new();
        let mut selectors: Vec<(String, Arc<SelectorComponent>)> = Vec::new();
        let mut scopes = Vec::new();
        for scope in &settings.scopes {
            let mut sources = Vec::new();
            for s in &scope.sources {
                if let (Some(pin), PluginRef::File(path)) = (&s.plugin_sha256, &s.plugin) {
                    check_pin(&engine, scope, s, path, pin)?;
                }
                let component = match loaded.iter().find(|(r, _)| *r == s.plugin) {
                    Some((_, c)) => c.clone(),
                    None => {
                        let c = load_provider(&engine, scope, s)?;
                        loaded.push((s.plugin.clone(), c.clone()));
                        c
                    }
                };
                sources.push(SourceRuntime {
                    info: source_info(s),
                    base_url: s.base_url.clone(),
                    last_url: arc_swap::ArcSwapOption::empty(),
                    component,
                    settings: s.clone(),
                });
            }
            let selector = load_selector(&engine, scope, &mut selectors)?;
            scopes.push(ScopeRuntime::new(
                scope.clone(),
                sources,
                clock.clone(),
                selector,
                &state,
            )?);
        }
        let cache = super::cache_layer::CacheRuntime::from_settings(&settings, clock.clone())?;
        let structured = super::structured::Strategies::load(&engine, &settings.scopes)?;
        let (recorder, http) = match previous {
            Some(p) => (
                p.recorder.clone(),
                p.http.with_limits(settings.process.upstream_limits),
            ),
            None => (
                Arc::new(
                    Telemetry::start(&settings.process.telemetry)
                        .await
                        .map_err(|e| StartError::Telemetry(e.to_string()))?,
                ),
                HttpClients::new(settings.process.upstream_limits)
                    .map_err(|e| StartError::Transport(e.to_string()))?,
            ),
        };
        Ok(Inner {
            settings,
            scopes,
            http,
            recorder,
            cache,
            structured,
            _engine: engine,
        })
    }

    /// The current configuration and runtime; a call keeps the snapshot it started with.
    pub(crate) fn inner(&self) -> Arc<Inner> {
        self.shared.current.load_full()
    }

    /// The settings the gateway started with. Process settings (listen address, keys, body
    /// limit, logging, telemetry) stay these until a restart; scopes and sources follow
    /// reloads (see [`Gateway::current_settings`]).
    pub fn settings(&self) -> &Settings {
        &self.shared.started
    }

    /// The settings of the current configuration (after the last successful reload).
    pub fn current_settings(&self) -> Settings {
        self.inner().settings.clone()
    }

    /// Give the gateway a source to re-read settings from on [`Gateway::reload`]
    /// (`Gateway::from_env` sets one that re-reads `.env` and the environment).
    pub fn set_settings_source(&self, source: SettingsSource) {
        if let Ok(mut s) = self.shared.source.lock() {
            *s = Some(source);
        }
    }

    /// Re-read the settings from the source and swap in a new configuration: plugins are
    /// loaded again, scopes and their governance state rebuilt. Calls in flight finish on
    /// the configuration they started with; new calls use the new one. On any error the
    /// current configuration keeps serving and the error is logged.
    pub async fn reload(&self) -> Result<ReloadReport, ReloadError> {
        let source = self.shared.source.lock().ok().and_then(|s| s.clone());
        let result = match source {
            None => Err(ReloadError::NoSource),
            Some(source) => match source() {
                Ok(settings) => self.reload_with(settings).await,
                Err(e) => Err(ReloadError::Config(e)),
            },
        };
        if let Err(e) = &result {
            tracing::error!(error = %e, "reload refused; still serving the previous configuration");
        }
        result
    }

    /// Swap in a configuration built from `settings` (see [`Gateway::reload`]). A failure
    /// leaves the current configuration serving.
    pub async fn reload_with(&self, settings: Settings) -> Result<ReloadReport, ReloadError> {
        let _one_at_a_time = self.shared.reloading.lock().await;
        let old = self.inner();
        let restart_required = restart_required(&self.shared.started, &settings);
        let new = Self::build_inner(
            settings,
            &self.shared.clock,
            self.shared.injected_clock,
            Some(&old),
        )
        .await?;
        let mut plugins: Vec<String> = Vec::new();
        for s in &new.scopes {
            for src in &s.sources {
                plugins.push(src.component.origin().to_string());
            }
        }
        for s in &new.settings.scopes {
            let selector = s.governance.selector.to_string();
            plugins.push(match builtin_selector_bytes(&selector) {
                Some(_) => format!("builtin:{selector}"),
                None => selector,
            });
        }
        plugins.sort();
        plugins.dedup();
        let report = ReloadReport {
            scopes: new
                .scopes
                .iter()
                .map(|s| s.settings.name.to_string())
                .collect(),
            plugins,
            restart_required,
        };
        self.shared.current.store(Arc::new(new));
        tracing::info!(
            scopes = ?report.scopes,
            plugins = ?report.plugins,
            restart_required = ?report.restart_required,
            "reloaded"
        );
        Ok(report)
    }

    /// The model aliases clients can send (`/v1/models`), of the current configuration.
    pub fn model_aliases(&self) -> Vec<String> {
        self.inner()
            .settings
            .scopes
            .iter()
            .flat_map(|s| s.aliases.iter().cloned())
            .collect()
    }

    /// Telemetry status (for `/healthz`).
    pub fn telemetry_status(&self) -> TelemetryStatus {
        self.shared.telemetry.status()
    }

    /// The metrics registry (`/metrics`); layers report cache lookups and waits here.
    pub fn metrics(&self) -> &crate::telemetry::Metrics {
        self.shared.telemetry.metrics()
    }

    /// Every metric in the Prometheus text format, gauges (breaker states, telemetry
    /// degradation) refreshed first.
    pub fn metrics_text(&self) -> String {
        let inner = self.inner();
        let m = inner.recorder.metrics();
        for s in &inner.scopes {
            for src in &s.sources {
                if let Some(b) = s.breaker.snapshot(&src.settings.name) {
                    use crate::governance::breaker::BreakerState;
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

    /// A JSON snapshot for `/healthz`: scopes, sources, plugins, telemetry.
    pub fn health(&self) -> serde_json::Value {
        use serde_json::json;
        let inner = self.inner();
        let scopes: serde_json::Map<String, serde_json::Value> = inner
            .scopes
            .iter()
            .map(|s| {
                let limiter = s.limiter.snapshot();
                let usage = |u: &crate::governance::limiter::GateUsage| {
                    json!({
                        "in_flight": u.in_flight,
                        "requests_in_window": u.requests_in_window,
                        "tokens_in_window": u.tokens_in_window,
                        "max_concurrency": u.limits.max_concurrency,
                        "rpm": u.limits.rpm,
                        "tpm": u.limits.tpm,
                    })
                };
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
                (
                    s.settings.name.to_string(),
                    json!({
                        "aliases": s.settings.aliases,
                        "sources": sources,
                        "limiter": {
                            "global": usage(&limiter.global),
                            "window_s": limiter.window_ms as f64 / 1000.0,
                            "expired_leases": limiter.expired_leases,
                            "settle_failures": limiter.settle_failures,
                        },
                    }),
                )
            })
            .collect();
        json!({
            "status": "ok",
            "scopes": scopes,
            "telemetry": inner.recorder.status(),
            "cache": super::cache_layer::health(inner.cache.as_ref()),
        })
    }

    /// Wait until every telemetry row of finished calls is written (call before exiting).
    pub async fn flush_telemetry(&self) {
        self.shared.telemetry.flush().await;
    }

    /// Run one call to its end and return the whole answer.
    pub async fn chat(&self, req: ChatRequest) -> Result<ChatResponse, GatewayError> {
        req.validate()?;
        let mut sink = Sink::Collect;
        run_call(self.inner(), req, &mut sink).await
    }

    /// Run one call as a stream of events: `Start` when the first token is ready (failover
    /// is free until then), then deltas, then `End` with the whole answer. A failure before
    /// `Start` is the stream's only item; a failure after it is its last item, and the answer
    /// must then be treated as incomplete. Dropping the stream cancels the call.
    ///
    /// The call runs inside the stream, as it is polled, in the caller's task: no task is
    /// spawned, so handing a burst of deltas to the caller is not a wake-up of another
    /// thread. Like any Rust stream, nothing happens until it is polled.
    pub fn chat_stream(
        &self,
        req: ChatRequest,
    ) -> impl Stream<Item = CallEvent> + Send + 'static + use<> {
        let (tx, rx) = event_channel(CALL_EVENT_BATCHES);
        let inner = self.inner();
        let call = async move {
            if let Err(e) = req.validate() {
                let _ = tx.send(CallEvent::Failed(e)).await;
                return;
            }
            let mut sink = Sink::Channel(tx.clone());
            if let Err(e) = run_call(inner, req, &mut sink).await {
                let _ = tx.send(CallEvent::Failed(e)).await;
            }
        };
        CallStream {
            rx,
            call: Some(Box::pin(call)),
        }
    }
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

/// The env key of a source field, e.g. `LLM__ACME__1__PLUGIN`.
fn source_key(scope: &ScopeSettings, s: &SourceSettings, field: &str) -> String {
    format!(
        "{}__{}__{}__{field}",
        scope.name,
        s.provider.to_ascii_uppercase(),
        s.index
    )
}

/// A plugin error as a start error naming the key that chose the plugin.
fn keyed(key: String) -> impl FnOnce(PluginError) -> StartError {
    move |e| StartError::Source {
        key,
        message: e.to_string(),
    }
}

fn load_provider(
    engine: &PluginEngine,
    scope: &ScopeSettings,
    s: &SourceSettings,
) -> Result<Arc<ProviderComponent>, StartError> {
    let key = source_key(scope, s, "PLUGIN");
    match &s.plugin {
        PluginRef::FirstParty(fp) => ProviderComponent::load(
            engine,
            &format!("builtin:{}", fp.name()),
            builtin_provider_bytes(*fp),
        )
        .map_err(keyed(key)),
        PluginRef::File(path) => {
            let bytes = engine.read_component(path).map_err(keyed(key.clone()))?;
            ProviderComponent::load(engine, &path.display().to_string(), &bytes).map_err(keyed(key))
        }
    }
}

/// The scope's selector component (`{SCOPE}__SELECTOR`: a first-party name or a path),
/// loaded once per distinct value.
fn load_selector(
    engine: &PluginEngine,
    scope: &ScopeSettings,
    loaded: &mut Vec<(String, Arc<SelectorComponent>)>,
) -> Result<Arc<dyn SelectSource>, StartError> {
    let want = &scope.governance.selector.to_string();
    if let Some((_, c)) = loaded.iter().find(|(n, _)| n == want) {
        return Ok(c.clone());
    }
    let key = format!("{}__SELECTOR", scope.name);
    let component = match builtin_selector_bytes(want) {
        Some(bytes) => SelectorComponent::load(engine, &format!("builtin:{want}"), bytes)
            .map_err(keyed(key))?,
        None => {
            let bytes = engine
                .read_component(std::path::Path::new(want))
                .map_err(keyed(key.clone()))?;
            SelectorComponent::load(engine, want, &bytes).map_err(keyed(key))?
        }
    };
    loaded.push((want.clone(), component.clone()));
    Ok(component)
}

fn check_pin(
    engine: &PluginEngine,
    scope: &ScopeSettings,
    s: &SourceSettings,
    path: &std::path::Path,
    pin: &str,
) -> Result<(), StartError> {
    use sha2::Digest;
    let bytes = engine
        .read_component(path)
        .map_err(keyed(source_key(scope, s, "PLUGIN")))?;
    let actual = hex::encode(sha2::Sha256::digest(&bytes));
    if actual != pin {
        return Err(keyed(source_key(scope, s, "PLUGIN_SHA256"))(
            PluginError::Checksum {
                origin: path.display().to_string(),
                expected: pin.to_string(),
                actual,
            },
        ));
    }
    Ok(())
}

/// The process settings that differ between `started` and `new` but only take effect on a
/// restart (the listener, the HTTP server's keys and limits, logging and telemetry are set
/// up once), by env key.
fn restart_required(started: &Settings, new: &Settings) -> Vec<&'static str> {
    let (a, b) = (&started.process, &new.process);
    let mut keys = Vec::new();
    for (key, changed) in [
        ("PGW_LISTEN", a.listen != b.listen),
        ("PGW_API_KEYS", a.api_keys != b.api_keys),
        ("PGW_ADMIN_KEYS", a.admin_keys != b.admin_keys),
        ("PGW_MAX_BODY_BYTES", a.max_body_bytes != b.max_body_bytes),
        ("PGW_LOG", a.log_filter != b.log_filter),
        ("PGW_LOG_FORMAT", a.log_json != b.log_json),
        ("PGW_TELEMETRY_*", a.telemetry != b.telemetry),
        (
            "PGW_HEADER_READ_TIMEOUT_S, PGW_BODY_READ_TIMEOUT_S, PGW_IDLE_TIMEOUT_S, PGW_MAX_CONNECTIONS, PGW_SHUTDOWN_GRACE_S, PGW_CORS_ORIGINS",
            a.listener != b.listener,
        ),
    ] {
        if changed {
            keys.push(key);
        }
    }
    keys
}

/// The stream returned by `chat_stream`: the call's future and its event channel. Polling
/// hands out the events already sent; when there are none it drives the call, which sends
/// more (or ends). Dropping the stream drops the call (its guards settle and its terminal
/// row is still written).
struct CallStream {
    rx: EventRx,
    /// The call, until it has ended.
    call: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
}

impl Stream for CallStream {
    type Item = CallEvent;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<CallEvent>> {
        use std::task::Poll;
        loop {
            if let Poll::Ready(ev) = self.rx.poll_recv(cx) {
                return Poll::Ready(ev);
            }
            let Some(call) = self.call.as_mut() else {
                // The call ended and every event it sent was handed out.
                return Poll::Ready(None);
            };
            if call.as_mut().poll(cx).is_ready() {
                // Its senders are gone: what it sent comes out, then the end.
                self.call = None;
                continue;
            }
            // The call waits (upstream, back-off, a full channel never: it was empty);
            // hand out whatever it sent during this poll.
            return self.rx.poll_recv(cx);
        }
    }
}
