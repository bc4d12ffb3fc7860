//! Starting a configuration: [`Inner::build`] validates the settings, opens the state
//! stores (in memory or Redis), loads every component, and builds each scope's governance
//! state from its settings (`governance::scope_config` derives the breaker and limiter
//! tuning). On a reload the previous `Inner` lends what is process-wide: telemetry (and the
//! trace exporter), the HTTP clients, and the plugin engine while its limits and cache
//! directory are unchanged.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::config::{ScopeSettings, Settings, StateBackend, StateBackends};
use crate::governance::breaker::{BreakerBackend, BreakerConfig, MemoryBreaker, RedisBreaker};
use crate::governance::limiter::{
    AdaptivePacer, LimiterBackend, LimiterConfig, MemoryLimiter, RedisLimiter,
};
use crate::governance::redis_conn::RedisHandle;
use crate::governance::stats::{ScopeProgress, SourceStats};
use crate::governance::{Entropy, SharedClock};
use crate::plugin::{PluginEngine, PluginLimits, SelectSource, source_info};
use crate::telemetry::Telemetry;
use crate::transport::HttpClients;

use super::super::cache_layer::state::CacheRuntime;
use super::super::structured::Strategies;
use super::plugins::Loaded;
use super::{Inner, ScopeRuntime, SourceRuntime, StartError};

/// Where the scopes' governance state lives.
struct StateStores {
    backends: StateBackends,
    redis: Option<Arc<RedisHandle>>,
    /// A test injected the clock: Redis scripts use it instead of the server's `TIME`.
    injected_clock: bool,
}

impl StateStores {
    /// Open the Redis connection when the breaker or the limiter lives there.
    fn open(backends: StateBackends, injected_clock: bool) -> Result<Self, StartError> {
        let needs_redis =
            backends.limiter == StateBackend::Redis || backends.breaker == StateBackend::Redis;
        let redis = match (&backends.redis_url, needs_redis) {
            (Some(url), true) => Some(Arc::new(
                RedisHandle::new(url, &backends.redis_prefix).map_err(StartError::Transport)?,
            )),
            _ => None,
        };
        Ok(Self {
            backends,
            redis,
            injected_clock,
        })
    }

    /// The breaker of a scope, in the configured store. With Redis, windows and leases use
    /// the server clock unless a test injects one.
    fn breaker(&self, scope: &ScopeSettings, clock: &SharedClock) -> Arc<dyn BreakerBackend> {
        let cfg = BreakerConfig::for_scope(scope);
        let names: Vec<(Arc<str>, u32)> = scope
            .sources
            .iter()
            .map(|s| (s.name.clone(), s.max_concurrency))
            .collect();
        match (&self.redis, self.backends.breaker) {
            (Some(r), StateBackend::Redis) => RedisBreaker::new(
                r.clone(),
                &scope.name,
                cfg,
                &names,
                self.injected_clock.then(|| clock.clone()),
            ),
            _ => Arc::new(MemoryBreaker::new(cfg, clock.clone(), &names)),
        }
    }

    /// The limiter of a scope, in the configured store.
    fn limiter(
        &self,
        scope: &ScopeSettings,
        clock: &SharedClock,
    ) -> Result<Arc<dyn LimiterBackend>, StartError> {
        let cfg = LimiterConfig::for_scope(scope, self.backends.rate_window);
        Ok(match (&self.redis, self.backends.limiter) {
            (Some(r), StateBackend::Redis) => RedisLimiter::new(
                r.clone(),
                &scope.name,
                cfg,
                self.injected_clock.then(|| clock.clone()),
            )
            .map_err(|e| StartError::Transport(e.to_string()))?,
            _ => Arc::new(MemoryLimiter::new(cfg, clock.clone())),
        })
    }
}

impl ScopeRuntime {
    fn new(
        settings: ScopeSettings,
        sources: Vec<SourceRuntime>,
        (clock, entropy): (SharedClock, Arc<Entropy>),
        selector: Arc<dyn SelectSource>,
        state: &StateStores,
    ) -> Result<Self, StartError> {
        Ok(Self {
            breaker: state.breaker(&settings, &clock),
            limiter: state.limiter(&settings, &clock)?,
            stats: sources.iter().map(|_| SourceStats::default()).collect(),
            pacers: sources
                .iter()
                .map(|s| AdaptivePacer::new(s.settings.max_concurrency))
                .collect(),
            progress: ScopeProgress::default(),
            selector,
            seed: AtomicU64::new(0),
            clock,
            entropy,
            settings,
            sources,
        })
    }
}

impl Inner {
    /// Build everything that depends on the settings (see the module comment). The settings
    /// are validated first with the same rules as the environment parser's, so settings
    /// built in code get the same messages.
    pub(crate) async fn build(
        settings: Settings,
        clock: &SharedClock,
        injected_clock: bool,
        previous: Option<&Inner>,
    ) -> Result<Inner, StartError> {
        settings.validate()?;
        let state = StateStores::open(settings.process.backends.clone(), injected_clock)?;
        let engine = engine_for(&settings, previous)?;
        let entropy = previous.map_or_else(|| Arc::new(Entropy::from_os()), |p| p.entropy.clone());
        let mut loaded = Loaded::default();
        let mut scopes = Vec::new();
        for scope in &settings.scopes {
            let mut sources = Vec::new();
            for s in &scope.sources {
                sources.push(SourceRuntime {
                    component: loaded.provider(&engine, scope, s)?,
                    info: source_info(s),
                    base_url: s.base_url.clone(),
                    last_url: arc_swap::ArcSwapOption::empty(),
                    clock: clock.clone(),
                    settings: s.clone(),
                });
            }
            let selector = loaded.selector(&engine, scope)?;
            scopes.push(ScopeRuntime::new(
                scope.clone(),
                sources,
                (clock.clone(), entropy.clone()),
                selector,
                &state,
            )?);
        }
        let cache = CacheRuntime::from_settings(&settings, clock.clone())?;
        let structured = Strategies::load(&engine, &settings.scopes)?;
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
        let tenancy = match previous {
            Some(p) => p.tenancy.clone(),
            None => super::tenancy::Tenancy::start(&settings, clock, injected_clock).await?,
        };
        let otel = match previous {
            Some(p) => p.otel.clone(),
            None => start_otel(&settings, &recorder)?,
        };
        Ok(Inner {
            settings,
            scopes,
            http,
            recorder,
            cache,
            structured,
            engine,
            entropy,
            tenancy,
            otel,
        })
    }
}

/// The trace exporter of `settings.process.otel`, on the collector client `transport/`
/// builds, counting into the gateway's `/metrics`; `None` when traces are off.
fn start_otel(
    settings: &Settings,
    telemetry: &Telemetry,
) -> Result<Option<Arc<crate::telemetry::otel::Otel>>, StartError> {
    let o = &settings.process.otel;
    if !o.enabled() {
        return Ok(None);
    }
    let http = crate::transport::collector_client(o.timeout)
        .map_err(|e| StartError::Transport(e.to_string()))?;
    crate::telemetry::otel::Otel::start(o, http, telemetry.metrics().otel_counters())
        .map(|otel| otel.map(Arc::new))
        .map_err(|e| StartError::Telemetry(e.to_string()))
}

/// The plugin engine: the previous configuration's while its limits, cache directory,
/// compiler and profiler are unchanged (its compiled components stay warm), else a new one.
fn engine_for(settings: &Settings, previous: Option<&Inner>) -> Result<PluginEngine, StartError> {
    let limits = PluginLimits {
        call_timeout: settings.process.plugin_timeout,
        memory_bytes: settings.process.plugin_memory_bytes,
        max_component_bytes: settings.process.plugin_max_bytes,
        streams_per_instance: settings.process.plugin_streams_per_instance,
    };
    Ok(match previous {
        Some(p)
            if p.engine.limits() == limits
                && p.engine.cache_dir() == settings.process.plugin_cache_dir.as_deref()
                && p.engine.compiler() == &settings.process.plugin_compiler
                && p.engine.profiler() == settings.process.plugin_profiler =>
        {
            p.engine.clone()
        }
        _ => PluginEngine::new_with_profiler(
            limits,
            settings.process.plugin_cache_dir.clone(),
            settings.process.plugin_profiler,
        )?
        .with_compiler(settings.process.plugin_compiler.clone()),
    })
}
