//! Structured-output strategy components (`wit/strategy.wit`, world `strategy`): load
//! (compile, version check, pre-instantiate, `describe`), a pool of warm instances reused
//! across calls, and the two sandboxed calls the structured-output ladder makes —
//! `prepare` (the "prevent" step) and `repair`.
//!
//! **Contract enforcement:** a strategy only proposes. The host checks what `prepare`
//! returns (a native schema for a provider without native support is dropped, see
//! [`StrategyComponent::prepare`]) and parses and validates whatever `repair` returns; a
//! strategy can never make the host accept an answer the schema refuses.

use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::Component;

use super::bindings::{v0_1, v0_2};
use super::engine::PluginEngine;
use super::error::PluginError;
use super::pool::Pool;
use super::schedule::GuestFuture;
use super::state::HostState;
use super::v0_1::Migrate;
use super::versioned::{CallFn, Calls, Versioned};

use v0_2::strategy::polygateway::plugin::types::{
    Capabilities as WireCapabilities, ThinkingStyle as WireThinkingStyle,
};

pub use v0_2::strategy::exports::polygateway::plugin::structured_strategy::{
    JsonTarget, NativeSchema, Preparation, RepairError, ResponseFormat, StrategyInfo,
};

type Bindings0_1 = v0_1::strategy::Strategy;
type Bindings0_2 = v0_2::strategy::Strategy;

/// The strategy world's calls in 0.2 types, per contract version (see `versioned.rs`).
pub(crate) trait StrategyCalls: Send + Sync {
    fn describe<'a>(&'a self, s: &'a mut Store<HostState>) -> GuestFuture<'a, StrategyInfo>;
    fn prepare<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        target: &'a JsonTarget,
        provider: WireCapabilities,
    ) -> GuestFuture<'a, Preparation>;
    fn repair<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        raw: &'a str,
        target: &'a JsonTarget,
    ) -> GuestFuture<'a, Result<String, RepairError>>;
}

impl StrategyCalls for Bindings0_2 {
    fn describe<'a>(&'a self, s: &'a mut Store<HostState>) -> GuestFuture<'a, StrategyInfo> {
        Box::pin(
            self.polygateway_plugin_structured_strategy()
                .call_describe(s),
        )
    }
    fn prepare<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        target: &'a JsonTarget,
        provider: WireCapabilities,
    ) -> GuestFuture<'a, Preparation> {
        Box::pin(
            self.polygateway_plugin_structured_strategy()
                .call_prepare(s, target, provider),
        )
    }
    fn repair<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        raw: &'a str,
        target: &'a JsonTarget,
    ) -> GuestFuture<'a, Result<String, RepairError>> {
        Box::pin(
            self.polygateway_plugin_structured_strategy()
                .call_repair(s, raw, target),
        )
    }
}

impl StrategyCalls for Bindings0_1 {
    fn describe<'a>(&'a self, s: &'a mut Store<HostState>) -> GuestFuture<'a, StrategyInfo> {
        Box::pin(async move {
            let info = self
                .polygateway_plugin_structured_strategy()
                .call_describe(s)
                .await?;
            Ok(info.migrate())
        })
    }
    fn prepare<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        target: &'a JsonTarget,
        provider: WireCapabilities,
    ) -> GuestFuture<'a, Preparation> {
        Box::pin(async move {
            let target = target.clone().migrate();
            let out = self
                .polygateway_plugin_structured_strategy()
                .call_prepare(s, &target, provider.migrate())
                .await?;
            Ok(out.migrate())
        })
    }
    fn repair<'a>(
        &'a self,
        s: &'a mut Store<HostState>,
        raw: &'a str,
        target: &'a JsonTarget,
    ) -> GuestFuture<'a, Result<String, RepairError>> {
        Box::pin(async move {
            let target = target.clone().migrate();
            let out = self
                .polygateway_plugin_structured_strategy()
                .call_repair(s, raw, &target)
                .await?;
            Ok(out.migrate())
        })
    }
}

impl Calls<dyn StrategyCalls> for Bindings0_1 {
    fn calls(&self) -> &(dyn StrategyCalls + 'static) {
        self
    }
}

impl Calls<dyn StrategyCalls> for Bindings0_2 {
    fn calls(&self) -> &(dyn StrategyCalls + 'static) {
        self
    }
}

/// Most idle warm instances kept per strategy component. A call holds an instance for the
/// microseconds of one `prepare` or `repair`; more are created under contention and dropped
/// when they come back to a full pool.
const POOL_CAPACITY: usize = 64;

/// The WIT export a strategy component must have.
const INTERFACE: &str = "structured-strategy";

/// A loaded structured-output strategy component.
pub struct StrategyComponent {
    origin: String,
    info: StrategyInfo,
    pool: Versioned<Bindings0_1, Bindings0_2>,
}

impl std::fmt::Debug for StrategyComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrategyComponent")
            .field("origin", &self.origin)
            .field("name", &self.info.name)
            .finish_non_exhaustive()
    }
}

impl StrategyComponent {
    /// Compile and check a strategy component. `origin` names it in errors (a path or
    /// `builtin:json-repair`). Fails on a wrong contract version, a missing
    /// `structured-strategy` export, a trap in `describe`, or a `describe` whose contract
    /// version disagrees with the export.
    pub fn load(
        engine: &PluginEngine,
        origin: &str,
        bytes: &[u8],
    ) -> Result<Arc<Self>, PluginError> {
        let component = engine.compile(origin, bytes)?;
        Self::from_component(engine, origin, &component)
    }

    /// Like [`StrategyComponent::load`], from an already compiled component.
    pub(crate) fn from_component(
        engine: &PluginEngine,
        origin: &str,
        component: &Component,
    ) -> Result<Arc<Self>, PluginError> {
        let (version, instance_pre) = engine.prepare(origin, component, INTERFACE)?;
        let load_err = |message: String| PluginError::Load {
            origin: origin.to_string(),
            message,
        };
        let err = |e: wasmtime::Error| load_err(format!("{e:#}"));
        let pool = match version.as_str() {
            "0.1.0" => Versioned::V0_1(Pool::new(
                engine,
                v0_1::strategy::StrategyPre::new(instance_pre).map_err(err)?,
                POOL_CAPACITY,
            )),
            _ => Versioned::V0_2(Pool::new(
                engine,
                v0_2::strategy::StrategyPre::new(instance_pre).map_err(err)?,
                POOL_CAPACITY,
            )),
        };
        let mut warm = pool.instantiate().map_err(err)?;
        let info = warm
            .call::<dyn StrategyCalls, _, _>(pool.limits(), &(), |store, b, _| b.describe(store))
            .map_err(|e| load_err(format!("describe failed: {e:#}")))?;
        if info.contract_version != version {
            return Err(load_err(format!(
                "describe says contract version {} but the component exports {INTERFACE}@{version}",
                info.contract_version
            )));
        }
        pool.give(warm);
        Ok(Arc::new(Self {
            origin: origin.to_string(),
            info,
            pool,
        }))
    }

    /// What `describe` returned at load time.
    pub fn info(&self) -> &StrategyInfo {
        &self.info
    }

    /// The strategy's name (its `describe` name, e.g. `json-repair`).
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Where the component came from (a path, or `builtin:<name>`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Idle warm instances in the pool (for `/healthz` and tests).
    pub fn idle_instances(&self) -> usize {
        self.pool.idle()
    }

    /// `prepare`: how to ask for `target` from a provider with `provider` capabilities.
    ///
    /// The contract is enforced on the answer: a `json-schema` response format for a
    /// provider that did not declare `native-json-schema` is dropped (with a warning), so
    /// such a provider never receives a native schema.
    ///
    /// Errors: [`PluginError::Fault`] on a trap or an exhausted time budget (the instance
    /// is discarded).
    pub fn prepare(
        &self,
        target: &JsonTarget,
        provider: &super::Capabilities,
    ) -> Result<Preparation, PluginError> {
        let caps = wire_capabilities(provider);
        let mut p = self.call("prepare", target, move |store, b, target| {
            b.prepare(store, target, caps)
        })?;
        if !provider.native_json_schema
            && matches!(p.response_format, Some(ResponseFormat::JsonSchema(_)))
        {
            tracing::warn!(
                strategy = %self.info.name,
                "strategy asked for a native json_schema from a provider without native support; sending none"
            );
            p.response_format = None;
        }
        Ok(p)
    }

    /// The plugin's own answer to `prepare`, unchecked (a native schema for a provider
    /// without native support is kept): for the conformance kit and diagnostics.
    ///
    /// Errors: [`PluginError::Fault`] on a trap or an exhausted time budget.
    pub fn prepare_raw(
        &self,
        target: &JsonTarget,
        provider: &super::Capabilities,
    ) -> Result<Preparation, PluginError> {
        let caps = wire_capabilities(provider);
        self.call("prepare", target, move |store, b, target| {
            b.prepare(store, target, caps)
        })
    }

    /// `repair`: the model's raw answer as JSON text (`Ok(Ok(..))`, still to be parsed and
    /// validated by the caller) or the strategy's typed reason why none can be recovered
    /// (`Ok(Err(..))`).
    ///
    /// Errors: [`PluginError::Fault`] on a trap or an exhausted time budget (the instance
    /// is discarded).
    pub fn repair(
        &self,
        raw: &str,
        target: &JsonTarget,
    ) -> Result<Result<String, RepairError>, PluginError> {
        self.call("repair", &(raw, target), move |store, b, (raw, target)| {
            b.repair(store, raw, target)
        })
    }

    /// Run one guest call on a pooled instance under the plugin's budget; a trap discards
    /// the instance, a success returns it to the pool.
    fn call<A: ?Sized + Sync, R: Send>(
        &self,
        function: &'static str,
        args: &A,
        f: impl CallFn<dyn StrategyCalls, A, R>,
    ) -> Result<R, PluginError> {
        self.pool
            .call::<dyn StrategyCalls, _, _>(&self.info.name, function, args, f)
    }
}

/// The provider world's capabilities as the strategy world's bindings spell them (the same
/// WIT record, generated twice).
fn wire_capabilities(c: &super::Capabilities) -> WireCapabilities {
    use super::ThinkingStyle as T;
    WireCapabilities {
        streaming: c.streaming,
        native_json_schema: c.native_json_schema,
        thinking: match c.thinking {
            T::None => WireThinkingStyle::None,
            T::ReasoningField => WireThinkingStyle::ReasoningField,
            T::InlineTags => WireThinkingStyle::InlineTags,
            T::ReasoningBlocks => WireThinkingStyle::ReasoningBlocks,
        },
        prefill_continuation: c.prefill_continuation,
        chat: true,
        embedding: false,
        ocr: false,
        audio: false,
    }
}
