//! `NativeGateway`: one `polygateway::Gateway` and its price table, with a method per
//! operation. Async methods return an asyncio future at once (`future_into_py`; the call
//! runs on the shared tokio runtime and the GIL is free while it waits); `chat_blocking`
//! releases the GIL and blocks on the runtime.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use polygateway::config::{ConfigError, parse_dotenv, settings_from_vars};
use polygateway::telemetry::Pricing;
use polygateway::{
    ChatRequest, ChatResponse, EmbeddingRequest, Gateway, GatewayError, OcrRequest, StartError,
    UsageSource,
};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::answer::{self, Outcome};
use crate::convert;
use crate::errors;
use crate::request::{self, Common};
use crate::stream::NativeStream;

/// Why a gateway could not start.
enum StartFailure {
    Config(ConfigError),
    Start(StartError),
}

impl StartFailure {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            StartFailure::Config(c) => errors::start_error(py, &StartError::Config(c)),
            StartFailure::Start(s) => errors::start_error(py, &s),
        }
    }
}

/// What a started gateway resolves to.
enum Started {
    Ok(NativeGateway),
    Failed(StartFailure),
}

/// Build and start a gateway from these variables (the `.env` / environment keys).
async fn build(vars: Vec<(String, String)>) -> Started {
    let settings = match settings_from_vars(vars) {
        Ok(s) => s,
        Err(e) => return Started::Failed(StartFailure::Config(e)),
    };
    // The price table of the telemetry's `cost` column, read again here for the answers'
    // `cost` (the gateway keeps its own copy private to telemetry).
    let pricing = match settings.process.telemetry.pricing_file.as_deref() {
        None => None,
        Some(path) => match Pricing::load(path) {
            Ok(p) => Some(Arc::new(p)),
            Err(e) => {
                return Started::Failed(StartFailure::Start(StartError::Telemetry(e.to_string())));
            }
        },
    };
    match Gateway::from_settings(settings).await {
        Ok(gateway) => Started::Ok(NativeGateway { gateway, pricing }),
        Err(e) => Started::Failed(StartFailure::Start(e)),
    }
}

/// Start a gateway, blocking the calling thread (the GIL released meanwhile): start-up
/// loads and compiles the plugin components and opens telemetry, once per process.
fn start_blocking(py: Python<'_>, vars: Vec<(String, String)>) -> PyResult<NativeGateway> {
    match py.detach(move || pyo3_async_runtimes::tokio::get_runtime().block_on(build(vars))) {
        Started::Ok(g) => Ok(g),
        Started::Failed(f) => Err(f.into_py(py)),
    }
}

/// `start(vars)`: a gateway started from `(key, value)` pairs (the `.env` keys).
#[pyfunction]
pub fn start(py: Python<'_>, vars: Vec<(String, String)>) -> PyResult<NativeGateway> {
    start_blocking(py, vars)
}

/// `start_from_env(path, required)`: a gateway from the variables of the `.env` file at
/// `path` (a missing file is an error only when `required`) under the process environment,
/// which wins, as for `polygateway serve`.
#[pyfunction]
pub fn start_from_env(py: Python<'_>, path: String, required: bool) -> PyResult<NativeGateway> {
    let mut vars = BTreeMap::new();
    let file = Path::new(&path);
    match std::fs::read(file) {
        Ok(text) => match parse_dotenv(file, &text) {
            Ok(pairs) => vars.extend(pairs),
            Err(e) => return Err(StartFailure::Config(e).into_py(py)),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {}
        Err(e) => {
            return Err(StartFailure::Config(ConfigError::DotEnv {
                path: file.display().to_string(),
                message: e.to_string(),
            })
            .into_py(py));
        }
    }
    vars.extend(std::env::vars());
    start_blocking(py, vars.into_iter().collect())
}

/// A started gateway.
#[pyclass(frozen, module = "polygateway._native")]
pub struct NativeGateway {
    gateway: Gateway,
    pricing: Option<Arc<Pricing>>,
}

impl Drop for NativeGateway {
    fn drop(&mut self) {
        // Whatever the gateway's last clone releases, it releases inside the runtime.
        let _runtime = pyo3_async_runtimes::tokio::get_runtime().enter();
    }
}

/// The chat request of the Python arguments, or the exception to raise.
#[allow(clippy::too_many_arguments)]
fn chat_args(
    py: Python<'_>,
    model: String,
    messages: &Bound<'_, PyAny>,
    params: Option<&Bound<'_, PyAny>>,
    structured_strategy: Option<String>,
    common: Common,
) -> PyResult<ChatRequest> {
    request::chat_request(model, messages, params, structured_strategy, common)?
        .map_err(|e| errors::gateway_error(py, &e))
}

#[pymethods]
#[allow(clippy::too_many_arguments)]
impl NativeGateway {
    /// One chat call, collected: an awaitable of `LLMResponse`.
    #[pyo3(signature = (model, messages, params=None, structured_strategy=None, session_id=None,
        parent_call_id=None, deadline_s=None, tenant_id=None, meta=None, cache_namespace=None,
        cache_salt=None, cache=None))]
    fn chat<'py>(
        &self,
        py: Python<'py>,
        model: String,
        messages: &Bound<'py, PyAny>,
        params: Option<&Bound<'py, PyAny>>,
        structured_strategy: Option<String>,
        session_id: Option<String>,
        parent_call_id: Option<String>,
        deadline_s: Option<f64>,
        tenant_id: Option<String>,
        meta: Option<&Bound<'py, PyAny>>,
        cache_namespace: Option<String>,
        cache_salt: Option<String>,
        cache: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let common = Common::from_py(
            session_id,
            parent_call_id,
            deadline_s,
            tenant_id,
            meta,
            cache_namespace,
            cache_salt,
            cache,
        )?;
        let req = chat_args(py, model, messages, params, structured_strategy, common)?;
        let gateway = self.gateway.clone();
        let pricing = self.pricing.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            Ok(match gateway.chat(req).await {
                Ok(r) => Outcome::Chat(Box::new(r), pricing),
                Err(e) => Outcome::Failed(e),
            })
        })
    }

    /// One chat call, blocking the calling thread (the GIL released meanwhile).
    #[pyo3(signature = (model, messages, params=None, structured_strategy=None, session_id=None,
        parent_call_id=None, deadline_s=None, tenant_id=None, meta=None, cache_namespace=None,
        cache_salt=None, cache=None))]
    fn chat_blocking<'py>(
        &self,
        py: Python<'py>,
        model: String,
        messages: &Bound<'py, PyAny>,
        params: Option<&Bound<'py, PyAny>>,
        structured_strategy: Option<String>,
        session_id: Option<String>,
        parent_call_id: Option<String>,
        deadline_s: Option<f64>,
        tenant_id: Option<String>,
        meta: Option<&Bound<'py, PyAny>>,
        cache_namespace: Option<String>,
        cache_salt: Option<String>,
        cache: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let common = Common::from_py(
            session_id,
            parent_call_id,
            deadline_s,
            tenant_id,
            meta,
            cache_namespace,
            cache_salt,
            cache,
        )?;
        let req = chat_args(py, model, messages, params, structured_strategy, common)?;
        let gateway = self.gateway.clone();
        let result = py
            .detach(move || pyo3_async_runtimes::tokio::get_runtime().block_on(gateway.chat(req)));
        match result {
            Ok(r) => answer::chat_response(py, &r, self.pricing.as_deref()),
            Err(e) => Err(errors::gateway_error(py, &e)),
        }
    }

    /// One streamed chat call: an awaitable of `(NativeStream, StreamStart)` once the call
    /// has committed to a source (a failure before that raises from the await).
    #[pyo3(signature = (model, messages, params=None, structured_strategy=None, session_id=None,
        parent_call_id=None, deadline_s=None, tenant_id=None, meta=None, cache_namespace=None,
        cache_salt=None, cache=None))]
    fn chat_stream<'py>(
        &self,
        py: Python<'py>,
        model: String,
        messages: &Bound<'py, PyAny>,
        params: Option<&Bound<'py, PyAny>>,
        structured_strategy: Option<String>,
        session_id: Option<String>,
        parent_call_id: Option<String>,
        deadline_s: Option<f64>,
        tenant_id: Option<String>,
        meta: Option<&Bound<'py, PyAny>>,
        cache_namespace: Option<String>,
        cache_salt: Option<String>,
        cache: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        use futures_util::StreamExt;
        let common = Common::from_py(
            session_id,
            parent_call_id,
            deadline_s,
            tenant_id,
            meta,
            cache_namespace,
            cache_salt,
            cache,
        )?;
        let req = chat_args(py, model, messages, params, structured_strategy, common)?;
        let gateway = self.gateway.clone();
        let pricing = self.pricing.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let mut events: crate::stream::EventStream = Box::pin(gateway.chat_stream(req));
            Ok(match events.next().await {
                Some(polygateway::CallEvent::Start(start)) => {
                    Outcome::Stream(NativeStream::new(events, pricing), start)
                }
                Some(polygateway::CallEvent::Failed(e)) => Outcome::Failed(e),
                Some(other) => Outcome::Failed(GatewayError::Internal(format!(
                    "a stream began with {} instead of its start",
                    event_name(&other)
                ))),
                None => Outcome::Failed(GatewayError::Internal(
                    "the stream ended before it started".into(),
                )),
            })
        })
    }

    /// Embed `texts`: an awaitable of `EmbeddingResult`.
    #[pyo3(signature = (model, texts, dimensions=None, session_id=None, parent_call_id=None,
        deadline_s=None, tenant_id=None, meta=None, cache_namespace=None, cache_salt=None,
        cache=None))]
    fn embed<'py>(
        &self,
        py: Python<'py>,
        model: String,
        texts: Vec<String>,
        dimensions: Option<u32>,
        session_id: Option<String>,
        parent_call_id: Option<String>,
        deadline_s: Option<f64>,
        tenant_id: Option<String>,
        meta: Option<&Bound<'py, PyAny>>,
        cache_namespace: Option<String>,
        cache_salt: Option<String>,
        cache: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = Common::from_py(
            session_id,
            parent_call_id,
            deadline_s,
            tenant_id,
            meta,
            cache_namespace,
            cache_salt,
            cache,
        )?
        .into_options()
        .map_err(|e| errors::gateway_error(py, &e))?;
        let mut req = EmbeddingRequest::new(model, texts);
        req.dimensions = dimensions;
        req.options = options;
        let gateway = self.gateway.clone();
        let pricing = self.pricing.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            Ok(match gateway.embed(req).await {
                Ok(r) => Outcome::Embed(Box::new(r), pricing),
                Err(e) => Outcome::Failed(e),
            })
        })
    }

    /// Recognise the text of an image: an awaitable of `OcrTextResult`.
    #[pyo3(signature = (model, image, file_name=None, session_id=None, parent_call_id=None,
        deadline_s=None, tenant_id=None, meta=None))]
    fn recognize_text<'py>(
        &self,
        py: Python<'py>,
        model: String,
        image: &[u8],
        file_name: Option<String>,
        session_id: Option<String>,
        parent_call_id: Option<String>,
        deadline_s: Option<f64>,
        tenant_id: Option<String>,
        meta: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let req = ocr_request(
            py,
            model,
            image,
            file_name,
            Common::from_py(
                session_id,
                parent_call_id,
                deadline_s,
                tenant_id,
                meta,
                None,
                None,
                None,
            )?,
        )?;
        let gateway = self.gateway.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            Ok(match gateway.recognize_text(req).await {
                Ok(r) => Outcome::OcrText(Box::new(r)),
                Err(e) => Outcome::Failed(e),
            })
        })
    }

    /// Parse the layout of an image: an awaitable of `OcrLayoutResult`.
    #[pyo3(signature = (model, image, file_name=None, session_id=None, parent_call_id=None,
        deadline_s=None, tenant_id=None, meta=None))]
    fn parse_layout<'py>(
        &self,
        py: Python<'py>,
        model: String,
        image: &[u8],
        file_name: Option<String>,
        session_id: Option<String>,
        parent_call_id: Option<String>,
        deadline_s: Option<f64>,
        tenant_id: Option<String>,
        meta: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let req = ocr_request(
            py,
            model,
            image,
            file_name,
            Common::from_py(
                session_id,
                parent_call_id,
                deadline_s,
                tenant_id,
                meta,
                None,
                None,
                None,
            )?,
        )?;
        let gateway = self.gateway.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            Ok(match gateway.parse_layout(req).await {
                Ok(r) => Outcome::OcrLayout(Box::new(r)),
                Err(e) => Outcome::Failed(e),
            })
        })
    }

    /// Probe the OCR services: an awaitable of `{scope: {source: healthy}}`.
    fn check_ocr_health<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let gateway = self.gateway.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            Ok(Outcome::OcrHealth(gateway.check_ocr_health().await))
        })
    }

    /// The `/healthz` snapshot (scopes, sources, breakers, limiter use, telemetry, cache).
    fn health<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::to_py(py, &self.gateway.health())
    }

    /// The Prometheus text of `/metrics`.
    fn metrics_text(&self) -> String {
        self.gateway.metrics_text()
    }

    /// The model aliases of the configuration.
    fn aliases<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.gateway.model_aliases())
    }

    /// Wait until every telemetry row of finished calls is written: an awaitable of `None`.
    fn flush_telemetry<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let gateway = self.gateway.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            gateway.flush_telemetry().await;
            Ok(Outcome::None)
        })
    }
}

fn ocr_request(
    py: Python<'_>,
    model: String,
    image: &[u8],
    file_name: Option<String>,
    common: Common,
) -> PyResult<OcrRequest> {
    let options = common
        .into_options()
        .map_err(|e| errors::gateway_error(py, &e))?;
    let mut req = OcrRequest::new(model, bytes::Bytes::copy_from_slice(image));
    req.file_name = file_name;
    req.options = options;
    Ok(req)
}

fn event_name(e: &polygateway::CallEvent) -> &'static str {
    match e {
        polygateway::CallEvent::Start(_) => "start",
        polygateway::CallEvent::Delta(_) => "a delta",
        polygateway::CallEvent::End(_) => "its end",
        polygateway::CallEvent::Failed(_) => "a failure",
    }
}

/// The binding's own cost, for the benchmark: the arguments of `chat` converted as `chat`
/// converts them, an asyncio future completed from the tokio runtime, and a fixed answer
/// turned into an `LLMResponse` — everything but the gateway.
#[pyfunction]
#[pyo3(signature = (messages, params=None))]
pub fn bench_roundtrip<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyAny>,
    params: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let req = chat_args(py, "llm".into(), messages, params, None, Common::default())?;
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        let answer = ChatResponse {
            call_id: "0".into(),
            scope: "LLM".into(),
            content: format!("{} message(s)", req.messages.len()),
            reasoning: None,
            reasoning_details: Vec::new(),
            tool_calls: Vec::new(),
            finish_reason: Some("stop".into()),
            usage: None,
            usage_source: UsageSource::Unavailable,
            model: "bench".into(),
            model_reported: None,
            source_name: "bench-1".into(),
            provider: "bench".into(),
            attempts: 1,
            latency_ms: 0,
            created: 0,
            ttft_ms: None,
            max_inter_token_ms: None,
            salvaged: false,
            overhead_us: 0,
            cache_hit: false,
            refusal: None,
            upstream_fields: None,
            structured: None,
            budget_warnings: Vec::new(),
        };
        Ok(Outcome::Chat(Box::new(answer), None))
    })
}
