//! Provider components: load (compile, version check, pre-instantiate, `describe`), their
//! pool of warm instances (`pool.rs`), and the typed sandboxed calls. Stream parsers live in
//! instances shared by several streams (`stream_parser.rs`).

use std::sync::Arc;

use wasmtime::component::{Component, InstancePre};

use super::bindings::{v0_1, v0_2};
use super::engine::PluginEngine;
use super::error::PluginError;
use super::pool::{Pool, instantiate_fault};
use super::provider_calls::ProviderCalls;
use super::state::HostState;
use super::stream_parser::{ParserHosts, StreamParser};
use super::versioned::{CallFn, Calls, Versioned, VersionedWarm};
use super::wire::{
    ArchiveFetch, BuildError, ChatRequest, ClassifiedError, Delta, EmbeddingRequest,
    EmbeddingResponse, Header, HttpRequest, ImageInfo, LayoutDocument, OcrOperation, PluginInfo,
    SourceInfo, UploadRequest,
};

/// Most idle warm instances kept per component; more are created under load and dropped
/// when they come back to a full pool.
const POOL_CAPACITY: usize = 512;

type Bindings0_1 = v0_1::provider::Provider;
type Bindings0_2 = v0_2::provider::Provider;
pub(super) type VersionedPool = Versioned<Bindings0_1, Bindings0_2>;
pub(super) type WarmProvider = VersionedWarm<Bindings0_1, Bindings0_2>;

impl Calls<dyn ProviderCalls> for Bindings0_1 {
    fn calls(&self) -> &(dyn ProviderCalls + 'static) {
        self
    }
}

impl Calls<dyn ProviderCalls> for Bindings0_2 {
    fn calls(&self) -> &(dyn ProviderCalls + 'static) {
        self
    }
}

/// The pool for a component exporting contract `version` (one `check_version` accepted).
fn versioned_pool(
    engine: &PluginEngine,
    version: &str,
    pre: InstancePre<HostState>,
) -> Result<VersionedPool, String> {
    let err = |e: wasmtime::Error| format!("{e:#}");
    match version {
        "0.1.0" => Ok(Versioned::V0_1(Pool::new(
            engine,
            v0_1::provider::ProviderPre::new(pre).map_err(err)?,
            POOL_CAPACITY,
        ))),
        "0.2.0" => Ok(Versioned::V0_2(Pool::new(
            engine,
            v0_2::provider::ProviderPre::new(pre).map_err(err)?,
            POOL_CAPACITY,
        ))),
        other => Err(format!("no binding for contract version {other}")),
    }
}

/// A loaded provider component.
pub struct ProviderComponent {
    origin: String,
    info: PluginInfo,
    /// The contract version the component exports (`0.1.0`, `0.2.0`).
    version: String,
    pool: VersionedPool,
    /// The instances stream parsers share.
    parsers: ParserHosts,
}

impl std::fmt::Debug for ProviderComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderComponent")
            .field("origin", &self.origin)
            .field("name", &self.info.name)
            .finish_non_exhaustive()
    }
}

impl ProviderComponent {
    /// Compile and check a provider component. `origin` names it in errors (a path or
    /// `builtin:openai`). Fails on a wrong contract version, a missing export, a trap in
    /// `describe`, or a `describe` whose contract version disagrees with the export.
    pub fn load(
        engine: &PluginEngine,
        origin: &str,
        bytes: &[u8],
    ) -> Result<Arc<Self>, PluginError> {
        let component = engine.compile(origin, bytes)?;
        Self::from_component(engine, origin, &component)
    }

    /// Like [`ProviderComponent::load`], from an already compiled component.
    pub(crate) fn from_component(
        engine: &PluginEngine,
        origin: &str,
        component: &Component,
    ) -> Result<Arc<Self>, PluginError> {
        let (version, instance_pre) = engine.prepare(origin, component, "chat-provider")?;
        // A provider built before the world gained embeddings and OCR exports only
        // chat-provider: say so instead of failing to link with a type error.
        let exports = engine.contract_exports(component);
        let missing: Vec<&str> = ["embedding-provider", "ocr-provider"]
            .into_iter()
            .filter(|i| !exports.iter().any(|(e, v)| e == i && *v == version))
            .collect();
        if !missing.is_empty() {
            return Err(PluginError::Load {
                origin: origin.to_string(),
                message: format!(
                    "it exports chat-provider@{version} but not {}: it was built with an older draft of the provider world; rebuild it with the current polygateway-plugin-sdk",
                    missing.join(" and ")
                ),
            });
        }
        let load_err = |message: String| PluginError::Load {
            origin: origin.to_string(),
            message,
        };
        let pool = versioned_pool(engine, &version, instance_pre).map_err(load_err)?;
        let mut warm = pool.instantiate().map_err(|e| load_err(format!("{e:#}")))?;
        let info = warm
            .call::<dyn ProviderCalls, _, _>(pool.limits(), &(), |store, b, _| b.describe(store))
            .map_err(|e| load_err(format!("describe failed: {e:#}")))?;
        if info.contract_version != version {
            return Err(load_err(format!(
                "describe says contract version {} but the component exports chat-provider@{version}",
                info.contract_version
            )));
        }
        pool.give(warm);
        Ok(Arc::new(Self {
            origin: origin.to_string(),
            info,
            version,
            pool,
            parsers: ParserHosts::new(engine.limits().streams_per_instance),
        }))
    }

    /// Calls that faulted (trap, exhausted time budget, memory cap) since load; each
    /// discarded its instance.
    pub fn faults(&self) -> u64 {
        self.pool.faults()
    }

    /// The sandbox limits its calls run under.
    pub fn limits(&self) -> super::PluginLimits {
        *self.pool.limits()
    }

    /// What `describe` returned at load time.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// The contract version the component exports (`0.1.0`, `0.2.0`): the binding its calls
    /// go through.
    pub fn contract_version(&self) -> &str {
        &self.version
    }

    /// Where the component came from (a path, or `builtin:<name>`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Idle warm instances in the pool (for `/healthz` and tests).
    pub fn idle_instances(&self) -> usize {
        self.pool.idle()
    }

    /// A per-attempt stream parser for `source`: in an instance shared with other streams of
    /// this component, or, with `PGW_PLUGIN_STREAMS_PER_INSTANCE=1`, in an instance of its
    /// own checked out of the pool until the parser is dropped (see `stream_parser.rs`).
    ///
    /// Errors: [`PluginError::Fault`] when the constructor (or an instantiation) faulted.
    pub fn stream_parser(
        self: &Arc<Self>,
        source: &SourceInfo,
    ) -> Result<StreamParser, PluginError> {
        StreamParser::new(self, None, source)
    }

    /// Instances that stream parsers share, alive right now (for `/healthz` and tests).
    pub fn stream_parser_instances(&self) -> usize {
        self.parsers.instances()
    }

    /// Stream parsers living in shared instances right now (for `/healthz` and tests).
    pub fn shared_stream_parsers(&self) -> usize {
        self.parsers.parsers()
    }

    pub(super) fn parsers(&self) -> &ParserHosts {
        &self.parsers
    }

    pub(super) fn pool(&self) -> &VersionedPool {
        &self.pool
    }

    /// Call `describe` on a new instance (not from the pool): the conformance kit checks it
    /// answers as it did at load.
    pub(crate) fn describe_fresh(self: &Arc<Self>) -> Result<PluginInfo, PluginError> {
        let fresh = self
            .pool
            .instantiate()
            .map_err(|e| instantiate_fault(&self.info.name, &e))?;
        let mut instance = ProviderInstance {
            component: self.clone(),
            warm: Some(fresh),
        };
        instance.call("describe", &(), |store, b, _| b.describe(store))
    }

    /// Check out a warm instance (or create one, ~30 µs, when the pool is empty).
    pub fn instance(self: &Arc<Self>) -> Result<ProviderInstance, PluginError> {
        let warm = self
            .pool
            .take()
            .map_err(|e| instantiate_fault(&self.info.name, &e))?;
        Ok(ProviderInstance {
            component: self.clone(),
            warm: Some(warm),
        })
    }
}

/// A warm instance checked out of its component's pool; returned to it on drop, unless a
/// call faulted (then it is discarded).
pub struct ProviderInstance {
    component: Arc<ProviderComponent>,
    warm: Option<WarmProvider>,
}

impl Drop for ProviderInstance {
    fn drop(&mut self) {
        if let Some(w) = self.warm.take() {
            self.component.pool.give(w);
        }
    }
}

impl ProviderInstance {
    /// Run one guest call under the plugin's budget; a trap discards the instance.
    pub(super) fn call<A: ?Sized + Sync, R: Send>(
        &mut self,
        function: &'static str,
        args: &A,
        f: impl CallFn<dyn ProviderCalls, A, R>,
    ) -> Result<R, PluginError> {
        let component = &self.component;
        let Some(warm) = self.warm.as_mut() else {
            return Err(PluginError::Fault {
                plugin: component.info.name.clone(),
                function,
                message: "instance already discarded".into(),
            });
        };
        match warm.call(component.pool.limits(), args, f) {
            Ok(r) => Ok(r),
            Err(e) => {
                // The instance is dead after a trap: drop it; the pool makes a new one.
                self.warm = None;
                Err(component.pool.fault(&component.info.name, function, &e))
            }
        }
    }

    /// The component this instance belongs to.
    pub fn component(&self) -> &Arc<ProviderComponent> {
        &self.component
    }

    /// `build-request`: the HTTP request description for one attempt.
    pub fn build_request(
        &mut self,
        req: &ChatRequest,
        source: &SourceInfo,
    ) -> Result<Result<HttpRequest, BuildError>, PluginError> {
        self.call(
            "build-request",
            &(req, source),
            move |store, b, (req, source)| b.build_request(store, req, source),
        )
    }

    /// `parse-response`: a complete non-streamed body into deltas.
    pub fn parse_response(
        &mut self,
        body: &[u8],
    ) -> Result<Result<Vec<Delta>, ClassifiedError>, PluginError> {
        self.call("parse-response", body, move |store, b, body| {
            b.parse_response(store, body)
        })
    }

    /// `classify-error`: a non-2xx response into a classified error.
    pub fn classify_error(
        &mut self,
        status: u16,
        headers: &[Header],
        body: &[u8],
    ) -> Result<ClassifiedError, PluginError> {
        self.call(
            "classify-error",
            &(headers, body),
            move |store, b, (headers, body)| b.classify_error(store, status, headers, body),
        )
    }

    /// `build-embedding-request`: the HTTP request of one embedding batch.
    pub fn build_embedding_request(
        &mut self,
        req: &EmbeddingRequest,
        source: &SourceInfo,
    ) -> Result<Result<HttpRequest, BuildError>, PluginError> {
        self.call(
            "build-embedding-request",
            &(req, source),
            move |store, b, (req, source)| b.build_embedding_request(store, req, source),
        )
    }

    /// `parse-embedding-response`: a 2xx body into vectors (input order) and usage.
    pub fn parse_embedding_response(
        &mut self,
        body: &[u8],
    ) -> Result<Result<EmbeddingResponse, ClassifiedError>, PluginError> {
        self.call("parse-embedding-response", body, move |store, b, body| {
            b.parse_embedding_response(store, body)
        })
    }

    /// `build-ocr-request`: the multipart upload of one OCR attempt.
    pub fn build_ocr_request(
        &mut self,
        op: OcrOperation,
        image: &ImageInfo,
        source: &SourceInfo,
    ) -> Result<Result<UploadRequest, BuildError>, PluginError> {
        self.call(
            "build-ocr-request",
            &(image, source),
            move |store, b, (image, source)| b.build_ocr_request(store, op, image, source),
        )
    }

    /// `parse-text-response`: a 2xx OCR text answer into the text.
    pub fn parse_text_response(
        &mut self,
        body: &[u8],
    ) -> Result<Result<String, ClassifiedError>, PluginError> {
        self.call("parse-text-response", body, move |store, b, body| {
            b.parse_text_response(store, body)
        })
    }

    /// `parse-layout-response`: a 2xx layout submission answer into the archive to fetch.
    pub fn parse_layout_response(
        &mut self,
        body: &[u8],
    ) -> Result<Result<ArchiveFetch, ClassifiedError>, PluginError> {
        self.call("parse-layout-response", body, move |store, b, body| {
            b.parse_layout_response(store, body)
        })
    }

    /// `parse-layout-document`: the archive member into elements and page sizes.
    pub fn parse_layout_document(
        &mut self,
        member: &[u8],
    ) -> Result<Result<LayoutDocument, ClassifiedError>, PluginError> {
        self.call("parse-layout-document", member, move |store, b, member| {
            b.parse_layout_document(store, member)
        })
    }

    /// `health-request`: the OCR health probe's request, if the provider has one.
    pub fn health_request(
        &mut self,
        source: &SourceInfo,
    ) -> Result<Option<HttpRequest>, PluginError> {
        self.call("health-request", source, move |store, b, source| {
            b.health_request(store, source)
        })
    }

    /// Create a per-attempt stream parser: in an instance shared with other streams of the
    /// component (this one then goes back to the pool), or, with
    /// `PGW_PLUGIN_STREAMS_PER_INSTANCE=1`, in this instance until the parser is dropped
    /// (see `stream_parser.rs`).
    ///
    /// Errors: [`PluginError::Fault`] when the constructor faulted.
    pub fn into_stream_parser(self, source: &SourceInfo) -> Result<StreamParser, PluginError> {
        let component = self.component.clone();
        StreamParser::new(&component, Some(self), source)
    }
}
