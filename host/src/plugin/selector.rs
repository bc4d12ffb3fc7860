//! Source-selector components (`wit/selector.wit`, world `selector`): load (compile, version
//! check, pre-instantiate, `describe`), a pool of warm instances reused across calls, and the
//! [`SelectSource`] seam the retry loop calls once per attempt.
//!
//! **Contract enforcement:** a selector only proposes. The host passes every source of the
//! scope with its statistics and availability; when the plugin answers an index that is
//! unknown or unavailable (or none while a source is available), [`SelectSource::choose`]
//! takes the first available candidate instead and logs a warning, so a plugin can never send
//! an attempt to a source the host marked unavailable.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wasmtime::component::Component;

use wasmtime::Store;

use super::bindings::{v0_1, v0_2};
use super::engine::PluginEngine;
use super::error::PluginError;
use super::pool::Pool;
use super::schedule::GuestFuture;
use super::state::HostState;
use super::v0_1::Migrate;
use super::versioned::{Calls, Versioned};

use v0_2::selector::exports::polygateway::plugin::source_selector::Candidate as WireCandidate;
pub use v0_2::selector::exports::polygateway::plugin::source_selector::SelectorInfo;

type Bindings0_1 = v0_1::selector::Selector;
type Bindings0_2 = v0_2::selector::Selector;

/// The selector world's calls in 0.2 types, per contract version (see `versioned.rs`).
pub(crate) trait SelectorCalls: Send + Sync {
    fn describe<'a>(&'a self, s: &'a mut Store<HostState>) -> GuestFuture<'a, SelectorInfo>;
    fn choose<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        candidates: &'a [WireCandidate],
        seed: u64,
    ) -> GuestFuture<'a, Option<u32>>;
}

impl SelectorCalls for Bindings0_2 {
    fn describe<'a>(&'a self, s: &'a mut Store<HostState>) -> GuestFuture<'a, SelectorInfo> {
        Box::pin(self.polygateway_plugin_source_selector().call_describe(s))
    }
    fn choose<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        candidates: &'a [WireCandidate],
        seed: u64,
    ) -> GuestFuture<'a, Option<u32>> {
        Box::pin(
            self.polygateway_plugin_source_selector()
                .call_choose(s, candidates, seed),
        )
    }
}

impl SelectorCalls for Bindings0_1 {
    fn describe<'a>(&'a self, s: &'a mut Store<HostState>) -> GuestFuture<'a, SelectorInfo> {
        Box::pin(async move {
            let info = self
                .polygateway_plugin_source_selector()
                .call_describe(s)
                .await?;
            Ok(info.migrate())
        })
    }
    fn choose<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        candidates: &'a [WireCandidate],
        seed: u64,
    ) -> GuestFuture<'a, Option<u32>> {
        Box::pin(async move {
            let candidates: Vec<_> = candidates.to_vec().migrate();
            self.polygateway_plugin_source_selector()
                .call_choose(s, &candidates, seed)
                .await
        })
    }
}

impl Calls<dyn SelectorCalls> for Bindings0_1 {
    fn calls(&self) -> &(dyn SelectorCalls + 'static) {
        self
    }
}

impl Calls<dyn SelectorCalls> for Bindings0_2 {
    fn calls(&self) -> &(dyn SelectorCalls + 'static) {
        self
    }
}

/// Most idle warm instances kept per selector component. A `choose` call holds an instance
/// for a few microseconds, so concurrent holders are bounded by the runtime's threads; more
/// are created under contention and dropped when they come back to a full pool.
const POOL_CAPACITY: usize = 64;

/// One source of a scope as offered to a selector for one attempt: the host-owned
/// statistics of `wit/selector.wit`'s `candidate` record.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The source's position in the scope's source list (0-based); unique within one call.
    /// [`SelectSource::choose`] answers with this value.
    pub index: usize,
    /// The source's configured name.
    pub name: String,
    /// Relative share of traffic (a unitless ratio; 1 when not configured; the first-party
    /// selectors treat 0 as 1).
    pub weight: u32,
    /// Attempts currently running on this source, across all calls of the process.
    pub in_flight: u32,
    /// EWMA of per-attempt outcomes (1 = success, 0 = failure), in `[0.0, 1.0]`; 1.0 for a
    /// source without history. Must be finite.
    pub success_ewma: f64,
    /// EWMA of successful attempts' latency to the first byte, in milliseconds (≥ 0.0,
    /// finite); 0.0 without history.
    pub latency_ewma_ms: f64,
    /// False when this attempt must not go here (breaker open, cooling down, or excluded
    /// for this call). A selector's choice of an unavailable candidate is overridden.
    pub available: bool,
    /// Milliseconds until the cool-down or open breaker ends (0 = none); informational.
    pub cooldown_remaining_ms: u64,
    /// True on the candidate the call's previous attempt went to (at most one).
    pub previous: bool,
}

impl Candidate {
    /// An available, idle, healthy candidate with no history: weight 1, nothing in flight,
    /// success 1.0, latency 0 ms, no cool-down, not the previous attempt's source.
    pub fn new(index: usize, name: impl Into<String>) -> Self {
        Self {
            index,
            name: name.into(),
            weight: 1,
            in_flight: 0,
            success_ewma: 1.0,
            latency_ewma_ms: 0.0,
            available: true,
            cooldown_remaining_ms: 0,
            previous: false,
        }
    }

    /// The index as it crosses the WIT boundary (`u32`); `None` if it does not fit.
    fn wire_index(&self) -> Option<u32> {
        u32::try_from(self.index).ok()
    }

    fn to_wire(&self) -> WireCandidate {
        WireCandidate {
            // An index beyond `u32` cannot be named by the plugin; `u32::MAX` never matches
            // it back (see `wire_index`).
            index: self.wire_index().unwrap_or(u32::MAX),
            name: self.name.clone(),
            weight: self.weight,
            in_flight: self.in_flight,
            success_ewma: self.success_ewma,
            latency_ewma_ms: self.latency_ewma_ms,
            available: self.available,
            cooldown_remaining_ms: self.cooldown_remaining_ms,
            previous: self.previous,
        }
    }
}

/// Chooses the source of the next attempt. Implemented by selector components
/// ([`SelectorComponent`]); the retry loop calls it once per attempt.
pub trait SelectSource: Send + Sync {
    /// The `index` of the candidate the next attempt goes to — always an available one —
    /// or `Ok(None)` when no candidate is available. `candidates` are all the sources of the
    /// scope in ascending `index` order; `seed` is the per-scope call counter (successive
    /// calls get successive values; retries of one call reuse it).
    ///
    /// Errors: [`PluginError::Fault`] when the plugin trapped or exceeded its time budget
    /// (the caller should fall back to, e.g., the first available source).
    fn choose(&self, candidates: &[Candidate], seed: u64) -> Result<Option<usize>, PluginError>;

    /// The selector's name (its `describe` name, e.g. `health-aware`).
    fn name(&self) -> &str;
}

/// A loaded selector component.
pub struct SelectorComponent {
    origin: String,
    info: SelectorInfo,
    pool: Versioned<Bindings0_1, Bindings0_2>,
    violations: AtomicU64,
}

impl std::fmt::Debug for SelectorComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectorComponent")
            .field("origin", &self.origin)
            .field("name", &self.info.name)
            .finish_non_exhaustive()
    }
}

impl SelectorComponent {
    /// Compile and check a selector component. `origin` names it in errors (a path or
    /// `builtin:health-aware`). Fails on a wrong contract version, a missing
    /// `source-selector` export, a trap in `describe`, or a `describe` whose contract version
    /// disagrees with the export.
    pub fn load(
        engine: &PluginEngine,
        origin: &str,
        bytes: &[u8],
    ) -> Result<Arc<Self>, PluginError> {
        let component = engine.compile(origin, bytes)?;
        Self::from_component(engine, origin, &component)
    }

    /// Like [`SelectorComponent::load`], from an already compiled component.
    pub(crate) fn from_component(
        engine: &PluginEngine,
        origin: &str,
        component: &Component,
    ) -> Result<Arc<Self>, PluginError> {
        let (version, instance_pre) = engine.prepare(origin, component, "source-selector")?;
        let load_err = |message: String| PluginError::Load {
            origin: origin.to_string(),
            message,
        };
        let err = |e: wasmtime::Error| load_err(format!("{e:#}"));
        let pool = match version.as_str() {
            "0.1.0" => Versioned::V0_1(Pool::new(
                engine,
                v0_1::selector::SelectorPre::new(instance_pre).map_err(err)?,
                POOL_CAPACITY,
            )),
            _ => Versioned::V0_2(Pool::new(
                engine,
                v0_2::selector::SelectorPre::new(instance_pre).map_err(err)?,
                POOL_CAPACITY,
            )),
        };
        let mut warm = pool.instantiate().map_err(err)?;
        let info = warm
            .call::<dyn SelectorCalls, _, _>(pool.limits(), &(), |store, b, _| b.describe(store))
            .map_err(|e| load_err(format!("describe failed: {e:#}")))?;
        if info.contract_version != version {
            return Err(load_err(format!(
                "describe says contract version {} but the component exports source-selector@{version}",
                info.contract_version
            )));
        }
        pool.give(warm);
        Ok(Arc::new(Self {
            origin: origin.to_string(),
            info,
            pool,
            violations: AtomicU64::new(0),
        }))
    }

    /// Calls that faulted (trap or exhausted time budget) since load; each discarded its
    /// instance.
    pub fn faults(&self) -> u64 {
        self.pool.faults()
    }

    /// What `describe` returned at load time.
    pub fn info(&self) -> &SelectorInfo {
        &self.info
    }

    /// Where the component came from (a path, or `builtin:<name>`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Idle warm instances in the pool (for `/healthz` and tests).
    pub fn idle_instances(&self) -> usize {
        self.pool.idle()
    }

    /// How many answers [`SelectSource::choose`] has overridden since load (unknown or
    /// unavailable index, or none while a candidate was available).
    pub fn contract_violations(&self) -> u64 {
        self.violations.load(Ordering::Relaxed)
    }

    /// The plugin's own answer to `choose`, unchecked: what the component returned, which
    /// may violate the contract. For conformance tests and diagnostics; the retry loop uses
    /// [`SelectSource::choose`], which enforces the contract.
    ///
    /// Errors: [`PluginError::Fault`] on a trap or an exhausted time budget (the instance
    /// is discarded).
    pub fn choose_raw(
        &self,
        candidates: &[Candidate],
        seed: u64,
    ) -> Result<Option<u32>, PluginError> {
        let wire: Vec<WireCandidate> = candidates.iter().map(Candidate::to_wire).collect();
        self.pool.call::<dyn SelectorCalls, _, _>(
            &self.info.name,
            "choose",
            &wire[..],
            move |store, b, wire| b.choose(store, wire, seed),
        )
    }

    /// Count a contract violation and log it (the 1st, 2nd, 4th, 8th, … occurrence, so a
    /// misbehaving plugin cannot flood the log).
    fn violation(&self, what: std::fmt::Arguments<'_>, fallback: usize) {
        let n = self.violations.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            tracing::warn!(
                selector = %self.info.name,
                origin = %self.origin,
                violations = n,
                fallback,
                "selector plugin {what}; using the first available source instead"
            );
        }
    }
}

impl SelectSource for SelectorComponent {
    fn choose(&self, candidates: &[Candidate], seed: u64) -> Result<Option<usize>, PluginError> {
        let Some(fallback) = candidates.iter().find(|c| c.available).map(|c| c.index) else {
            // Nothing to choose from: the plugin is not asked.
            return Ok(None);
        };
        match self.choose_raw(candidates, seed)? {
            Some(i) => match candidates.iter().find(|c| c.wire_index() == Some(i)) {
                Some(c) if c.available => Ok(Some(c.index)),
                Some(c) => {
                    self.violation(
                        format_args!("chose unavailable source {i} ({})", c.name),
                        fallback,
                    );
                    Ok(Some(fallback))
                }
                None => {
                    self.violation(format_args!("chose unknown source index {i}"), fallback);
                    Ok(Some(fallback))
                }
            },
            None => {
                self.violation(
                    format_args!("chose no source although one is available"),
                    fallback,
                );
                Ok(Some(fallback))
            }
        }
    }

    fn name(&self) -> &str {
        &self.info.name
    }
}

impl SelectSource for Arc<SelectorComponent> {
    fn choose(&self, candidates: &[Candidate], seed: u64) -> Result<Option<usize>, PluginError> {
        SelectSource::choose(&**self, candidates, seed)
    }

    fn name(&self) -> &str {
        SelectSource::name(&**self)
    }
}
