//! OpenTelemetry traces of calls (docs/tracing.md): this module owns the gateway's trace
//! pipeline — the tracer and its sampler and resource ([`Otel`], built from
//! `config::OtelSettings`), the spans in the GenAI semantic conventions (`spans.rs`: one
//! call span, one span per attempt, with their attributes), the message content recorded
//! only when asked (`content.rs`), the W3C trace context taken from a client
//! ([`TraceParent`]) and sent upstream (`AttemptSpan::propagation`), and the export off the
//! call path (`processor.rs`: a bounded queue drained by one task; `http.rs`: the OTLP/HTTP
//! protobuf exporter over the reqwest client `transport/` builds).
//!
//! **Invariant:** the exporter never blocks, delays or fails a call. A finished span is
//! pushed onto a bounded lock-free queue or dropped and counted
//! (`pgw_otel_dropped_spans_total`); an export that fails is counted
//! (`pgw_otel_export_failures_total`) and logged once when failing starts and once when it
//! ends. With traces off, no [`Otel`] exists and the pipeline's hooks are one branch on an
//! `Option`: no span, no allocation.

mod content;
mod http;
mod processor;
mod spans;

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider, SpanExporter as _};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, oneshot};

use crate::config::{OtelSampler, OtelSettings};

pub use content::{OutputMessage, ToolCallPart};
pub use spans::{
    AttemptEnd, AttemptSpan, AttemptStart, CallEnd, CallSpan, CallStart, CallTrace, GenAiOperation,
};

use processor::{Control, QueueProcessor, Worker};

/// The instrumentation scope of every span.
const SCOPE_NAME: &str = "polygateway";

/// How long `Gateway::flush_telemetry` (and so `polygateway serve` at exit) waits for the
/// spans of finished calls to be exported: long enough for a batch to a healthy collector,
/// short enough that a collector that is down does not hold a shutdown.
pub const TRACE_FLUSH_WAIT: Duration = Duration::from_secs(5);

/// Why the trace exporter could not start.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// The OTLP exporter refused its configuration.
    #[error("OpenTelemetry exporter: {0}")]
    Exporter(String),
    /// Started outside a Tokio runtime (the export task needs one).
    #[error("OpenTelemetry exporter: no Tokio runtime to run the export task on")]
    NoRuntime,
}

/// The counters of the exporter in `/metrics` (registered by `Metrics`).
#[derive(Debug, Clone, Default)]
pub struct OtelCounters {
    /// `pgw_otel_exported_spans_total`: spans the collector accepted.
    pub exported: Counter,
    /// `pgw_otel_export_failures_total`: export requests that failed (collector unreachable,
    /// refusing, or too slow).
    pub failures: Counter,
    /// `pgw_otel_dropped_spans_total`: spans lost — the queue was full, or their export
    /// failed.
    pub dropped: Counter,
}

/// The trace pipeline of one gateway: the tracer, and the handle of its export task.
/// Dropping it ends the task after one last export of what is queued.
pub struct Otel {
    tracer: SdkTracer,
    /// Kept so the tracer's provider lives as long as the gateway.
    _provider: SdkTracerProvider,
    capture_content: bool,
    control: mpsc::Sender<Control>,
}

impl std::fmt::Debug for Otel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Otel")
            .field("capture_content", &self.capture_content)
            .finish_non_exhaustive()
    }
}

impl Otel {
    /// Start exporting spans as `settings` say, over `http` (a client built by
    /// `transport::collector_client`); `Ok(None)` when traces are off. Needs a Tokio
    /// runtime: the export task is spawned on it.
    pub fn start(
        settings: &OtelSettings,
        http: reqwest::Client,
        counters: OtelCounters,
    ) -> Result<Option<Self>, OtelError> {
        let Some(endpoint) = settings.traces_endpoint.clone() else {
            return Ok(None);
        };
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtelError::NoRuntime)?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint.clone())
            .with_timeout(settings.timeout)
            .with_headers(settings.headers.iter().cloned().collect())
            .with_http_client(http::ReqwestCollector::new(http))
            .build()
            .map_err(|e| OtelError::Exporter(e.to_string()))?;
        let resource = resource(settings);
        exporter.set_resource(&resource);
        let (processor, queue) = QueueProcessor::new(settings, counters.dropped.clone());
        let (control, rx) = mpsc::channel(16);
        let shown = without_userinfo(&endpoint);
        let worker = Worker::new(queue, exporter, settings, counters, rx, shown.clone());
        runtime.spawn(worker.run());
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(sampler(settings.sampler))
            .with_resource(resource)
            .build();
        let scope = opentelemetry::InstrumentationScope::builder(SCOPE_NAME)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let tracer = provider.tracer_with_scope(scope);
        tracing::info!(
            endpoint = %shown,
            service = %settings.service_name,
            capture_message_content = settings.capture_message_content,
            "OpenTelemetry traces on"
        );
        Ok(Some(Self {
            tracer,
            _provider: provider,
            capture_content: settings.capture_message_content,
            control,
        }))
    }

    /// Start the span of one call (see [`CallSpan`]).
    pub fn call(&self, start: CallStart<'_>) -> CallSpan {
        spans::start_call(&self.tracer, self.capture_content, start)
    }

    /// Export every span finished so far, waiting at most `max_wait`; whether everything
    /// queued was sent (or given up on) in time. Spans still open are not waited for.
    pub async fn flush(&self, max_wait: Duration) -> bool {
        let (tx, rx) = oneshot::channel();
        let flushed = async {
            self.control.send(Control::Flush(tx)).await.ok()?;
            rx.await.ok()
        };
        matches!(tokio::time::timeout(max_wait, flushed).await, Ok(Some(())))
    }
}

/// `endpoint` for the log lines: its userinfo (a credential) removed.
fn without_userinfo(endpoint: &str) -> String {
    match reqwest::Url::parse(endpoint) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.to_string()
        }
        Err(_) => "<not a URL>".to_string(),
    }
}

/// The SDK sampler of a configured one.
fn sampler(s: OtelSampler) -> Sampler {
    match s {
        OtelSampler::AlwaysOn => Sampler::AlwaysOn,
        OtelSampler::AlwaysOff => Sampler::AlwaysOff,
        OtelSampler::TraceIdRatio(r) => Sampler::TraceIdRatioBased(r),
        OtelSampler::ParentBasedAlwaysOn => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        OtelSampler::ParentBasedAlwaysOff => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        OtelSampler::ParentBasedTraceIdRatio(r) => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(r)))
        }
    }
}

/// The resource of every span: `service.name`, `service.version`, the SDK's
/// `telemetry.sdk.*` and `OTEL_RESOURCE_ATTRIBUTES` — from the settings only (the SDK's
/// environment detectors are not used: only `config/` reads the environment).
fn resource(settings: &OtelSettings) -> Resource {
    let attrs = settings
        .resource_attributes
        .iter()
        .filter(|(k, _)| k != "service.name")
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()));
    let mut builder = Resource::builder_empty()
        .with_detector(Box::new(
            opentelemetry_sdk::resource::TelemetryResourceDetector,
        ))
        .with_service_name(settings.service_name.clone());
    if !settings
        .resource_attributes
        .iter()
        .any(|(k, _)| k == "service.version")
    {
        builder =
            builder.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    }
    builder.with_attributes(attrs).build()
}

/// The caller's span a call's span is a child of: from a W3C `traceparent` (and
/// `tracestate`) header, from an OpenTelemetry `SpanContext`, or from the current
/// OpenTelemetry context of an embedding application.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceParent(SpanContext);

/// The two W3C headers, for the propagator.
struct W3cHeaders<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for W3cHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.traceparent),
            "tracestate" => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

impl TraceParent {
    /// The parent named by a W3C `traceparent` header (and `tracestate`, when sent);
    /// `None` when it does not parse — the call then starts a trace of its own, as the W3C
    /// recommendation says.
    pub fn from_w3c(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let headers = W3cHeaders {
            traceparent,
            tracestate,
        };
        let cx = TraceContextPropagator::new().extract(&headers);
        let sc = cx.span().span_context().clone();
        sc.is_valid().then_some(Self(sc))
    }

    /// The span of the current OpenTelemetry context (`opentelemetry::Context::current()`,
    /// of this crate's `opentelemetry` version), if one is active.
    pub fn current() -> Option<Self> {
        let cx = opentelemetry::Context::current();
        let sc = cx.span().span_context().clone();
        sc.is_valid().then_some(Self(sc))
    }

    /// The parent's span context.
    pub fn span_context(&self) -> &SpanContext {
        &self.0
    }
}

impl From<SpanContext> for TraceParent {
    fn from(sc: SpanContext) -> Self {
        Self(sc)
    }
}
