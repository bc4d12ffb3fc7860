//! What a native future resolves to (`Outcome`), turned into the package's Python types
//! (`polygateway/_types.py`) under the GIL when the future completes — or into the
//! package's exception when the call failed. The classes are imported once per process.

use std::sync::Arc;

use polygateway::plugin::{Delta, finish_reason_str};
use polygateway::telemetry::{BilledTokens, Pricing};
use polygateway::{
    CallEvent, ChatResponse, EmbeddingResponse, GatewayError, OcrLayoutResult, OcrTextResult,
    StreamStart,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{IntoPyObject, intern};

use crate::convert;
use crate::errors;
use crate::stream::NativeStream;

/// The end of a native call, converted when the asyncio future gets its result.
pub enum Outcome {
    Chat(Box<ChatResponse>, Option<Arc<Pricing>>),
    /// A streamed call that committed: the stream and its head.
    Stream(NativeStream, StreamStart),
    /// Events of a stream that were ready together; `done` once the stream has ended.
    Batch {
        events: Vec<CallEvent>,
        pricing: Option<Arc<Pricing>>,
        done: bool,
    },
    Embed(Box<EmbeddingResponse>, Option<Arc<Pricing>>),
    OcrText(Box<OcrTextResult>),
    OcrLayout(Box<OcrLayoutResult>),
    /// `{scope: {source: healthy}}`.
    OcrHealth(std::collections::BTreeMap<String, std::collections::BTreeMap<String, bool>>),
    Failed(GatewayError),
    None,
}

impl<'py> IntoPyObject<'py> for Outcome {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::exit::completing();
        match self {
            Outcome::Chat(r, pricing) => chat_response(py, &r, pricing.as_deref()),
            Outcome::Stream(stream, start) => {
                let head = stream_start(py, &start)?;
                let stream = Bound::new(py, stream)?.into_any();
                Ok(PyTuple::new(py, [stream, head])?.into_any())
            }
            Outcome::Batch {
                events,
                pricing,
                done,
            } => batch(py, events, pricing.as_deref(), done),
            Outcome::Embed(r, pricing) => embedding(py, &r, pricing.as_deref()),
            Outcome::OcrText(r) => ocr_text(py, &r),
            Outcome::OcrLayout(r) => ocr_layout(py, &r),
            Outcome::OcrHealth(h) => {
                let d = PyDict::new(py);
                for (scope, sources) in h {
                    let s = PyDict::new(py);
                    for (name, ok) in sources {
                        s.set_item(name, ok)?;
                    }
                    d.set_item(scope, s)?;
                }
                Ok(d.into_any())
            }
            Outcome::Failed(e) => Err(errors::gateway_error(py, &e)),
            Outcome::None => Ok(py.None().into_bound(py)),
        }
    }
}

/// One class of `polygateway._types`, imported once.
macro_rules! class {
    ($py:expr, $name:literal) => {{
        static CELL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        CELL.import($py, "polygateway._types", $name)
    }};
}

/// The cost of an answer from `model` with these tokens, when a price table is configured.
pub fn cost(
    pricing: Option<&Pricing>,
    model: &str,
    cache_hit: bool,
    tokens: Option<BilledTokens>,
) -> Option<f64> {
    let pricing = pricing?;
    if cache_hit {
        // No upstream call was made: 0 is a fact, not an unknown (docs/telemetry.md#cost).
        return Some(0.0);
    }
    pricing.cost(model, tokens)
}

pub fn chat_response<'py>(
    py: Python<'py>,
    r: &ChatResponse,
    pricing: Option<&Pricing>,
) -> PyResult<Bound<'py, PyAny>> {
    let k = PyDict::new(py);
    let billed = r.usage.map(|u| BilledTokens {
        prompt: u.prompt_tokens,
        completion: u.completion_tokens,
        cached_prompt: u.cached_prompt_tokens,
        cache_write: u.cache_write_tokens,
    });
    let usage = match r.usage {
        None => py.None().into_bound(py),
        Some(u) => {
            let d = PyDict::new(py);
            d.set_item(intern!(py, "prompt_tokens"), u.prompt_tokens)?;
            d.set_item(intern!(py, "completion_tokens"), u.completion_tokens)?;
            d.set_item(intern!(py, "cached_prompt_tokens"), u.cached_prompt_tokens)?;
            d.set_item(intern!(py, "reasoning_tokens"), u.reasoning_tokens)?;
            d.set_item(intern!(py, "cache_write_tokens"), u.cache_write_tokens)?;
            class!(py, "Usage")?.call((), Some(&d))?
        }
    };
    let tool_calls = r
        .tool_calls
        .iter()
        .map(|t| {
            class!(py, "ToolCall")?.call1((
                t.index,
                t.id.as_deref(),
                t.name.as_deref(),
                &t.arguments,
            ))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let structured = match &r.structured {
        Some(v) => convert::to_py(py, v)?,
        None => py.None().into_bound(py),
    };
    let details = r
        .reasoning_details
        .iter()
        .map(|v| convert::to_py(py, v))
        .collect::<PyResult<Vec<_>>>()?;
    k.set_item(intern!(py, "content"), &r.content)?;
    k.set_item(intern!(py, "reasoning"), r.reasoning.as_deref())?;
    k.set_item(intern!(py, "tool_calls"), PyTuple::new(py, tool_calls)?)?;
    k.set_item(intern!(py, "finish_reason"), r.finish_reason.as_deref())?;
    k.set_item(intern!(py, "usage"), usage)?;
    k.set_item(intern!(py, "usage_source"), r.usage_source.as_str())?;
    k.set_item(intern!(py, "model"), &r.model)?;
    k.set_item(intern!(py, "model_reported"), r.model_reported.as_deref())?;
    k.set_item(intern!(py, "provider"), &r.provider)?;
    k.set_item(intern!(py, "source_name"), &r.source_name)?;
    k.set_item(intern!(py, "scope"), &r.scope)?;
    k.set_item(intern!(py, "attempts"), r.attempts)?;
    k.set_item(intern!(py, "cache_hit"), r.cache_hit)?;
    k.set_item(intern!(py, "ttft_ms"), r.ttft_ms)?;
    k.set_item(intern!(py, "max_inter_token_ms"), r.max_inter_token_ms)?;
    k.set_item(intern!(py, "latency_ms"), r.latency_ms)?;
    k.set_item(intern!(py, "overhead_us"), r.overhead_us)?;
    k.set_item(
        intern!(py, "cost"),
        cost(pricing, &r.model, r.cache_hit, billed),
    )?;
    k.set_item(intern!(py, "call_id"), &r.call_id)?;
    k.set_item(intern!(py, "created"), r.created)?;
    k.set_item(intern!(py, "salvaged"), r.salvaged)?;
    k.set_item(intern!(py, "refusal"), r.refusal.as_deref())?;
    k.set_item(intern!(py, "structured_data"), &structured)?;
    k.set_item(intern!(py, "structured"), structured)?;
    k.set_item(intern!(py, "reasoning_details"), PyTuple::new(py, details)?)?;
    class!(py, "LLMResponse")?.call((), Some(&k))
}

fn stream_start<'py>(py: Python<'py>, s: &StreamStart) -> PyResult<Bound<'py, PyAny>> {
    let k = PyDict::new(py);
    k.set_item(intern!(py, "call_id"), &s.call_id)?;
    k.set_item(intern!(py, "source_name"), &s.source_name)?;
    k.set_item(intern!(py, "model"), &s.model)?;
    k.set_item(intern!(py, "model_reported"), s.model_reported.as_deref())?;
    k.set_item(intern!(py, "attempts"), s.attempts)?;
    k.set_item(intern!(py, "cache_hit"), s.cache_hit)?;
    k.set_item(intern!(py, "overhead_us"), s.overhead_us)?;
    class!(py, "StreamStart")?.call((), Some(&k))
}

/// `(items, error, done)`: the typed deltas (and the final `StreamEnd`), the exception that
/// ended the stream (`None` if it did not fail), and whether the stream is over.
fn batch<'py>(
    py: Python<'py>,
    events: Vec<CallEvent>,
    pricing: Option<&Pricing>,
    mut done: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let items = PyList::empty(py);
    let mut error = py.None().into_bound(py);
    for ev in events {
        match ev {
            CallEvent::Delta(d) => {
                if let Some(item) = delta(py, &d)? {
                    items.append(item)?;
                }
            }
            CallEvent::End(r) => {
                let resp = chat_response(py, &r, pricing)?;
                items.append(class!(py, "StreamEnd")?.call1((resp,))?)?;
                done = true;
            }
            CallEvent::Failed(e) => {
                error = errors::gateway_error(py, &e)
                    .into_value(py)
                    .into_bound(py)
                    .into_any();
                done = true;
            }
            // Only the first event of a stream is `Start`; the head was returned already.
            CallEvent::Start(_) => {}
        }
    }
    Ok(PyTuple::new(
        py,
        [
            items.into_any(),
            error,
            done.into_pyobject(py)?.to_owned().into_any(),
        ],
    )?
    .into_any())
}

/// The typed delta of `d`; `None` for what the final response carries instead (role, usage,
/// reported model, end marker, reasoning signatures, pass-through fields).
fn delta<'py>(py: Python<'py>, d: &Delta) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(Some(match d {
        Delta::Content(t) => class!(py, "ContentDelta")?.call1((t,))?,
        Delta::Reasoning(t) => class!(py, "ReasoningDelta")?.call1((t,))?,
        Delta::Refusal(t) => class!(py, "RefusalDelta")?.call1((t,))?,
        Delta::ToolCall(t) => class!(py, "ToolCallDelta")?.call1((
            t.index,
            t.id.as_deref(),
            t.name.as_deref(),
            t.arguments.as_deref(),
        ))?,
        Delta::Finish(f) => class!(py, "FinishDelta")?.call1((finish_reason_str(f),))?,
        Delta::Role(_)
        | Delta::Usage(_)
        | Delta::Model(_)
        | Delta::Done
        | Delta::ReasoningSignature(_)
        | Delta::ReasoningEncrypted(_)
        | Delta::Passthrough(_) => return Ok(None),
    }))
}

fn embedding<'py>(
    py: Python<'py>,
    r: &EmbeddingResponse,
    pricing: Option<&Pricing>,
) -> PyResult<Bound<'py, PyAny>> {
    let k = PyDict::new(py);
    let vectors = PyList::empty(py);
    for v in &r.vectors {
        vectors.append(PyList::new(py, v)?)?;
    }
    let billed = r.usage.map(|u| BilledTokens {
        prompt: u.prompt_tokens,
        completion: 0,
        cached_prompt: None,
        cache_write: None,
    });
    let cost = match (&r.model, pricing) {
        (Some(model), Some(p)) => p.cost(model, billed),
        // Every input from the cache: no upstream call.
        (None, Some(_)) => Some(0.0),
        (_, None) => None,
    };
    k.set_item(intern!(py, "vectors"), vectors)?;
    k.set_item(
        intern!(py, "prompt_tokens"),
        r.usage.map(|u| u.prompt_tokens),
    )?;
    k.set_item(intern!(py, "total_tokens"), r.usage.map(|u| u.total_tokens))?;
    k.set_item(intern!(py, "usage_source"), r.usage_source.as_str())?;
    k.set_item(intern!(py, "model"), r.model.as_deref())?;
    k.set_item(intern!(py, "source_name"), r.source_name.as_deref())?;
    k.set_item(intern!(py, "upstream_batches"), r.upstream_batches)?;
    k.set_item(intern!(py, "cached_inputs"), r.cached_inputs)?;
    k.set_item(intern!(py, "attempts"), r.attempts)?;
    k.set_item(intern!(py, "latency_ms"), r.latency_ms)?;
    k.set_item(intern!(py, "cost"), cost)?;
    k.set_item(intern!(py, "call_id"), &r.call_id)?;
    k.set_item(intern!(py, "scope"), &r.scope)?;
    class!(py, "EmbeddingResult")?.call((), Some(&k))
}

/// The provenance fields every OCR result has.
#[allow(clippy::too_many_arguments)]
fn ocr_common<'py>(
    py: Python<'py>,
    k: &Bound<'py, PyDict>,
    call_id: &str,
    scope: &str,
    source_name: &str,
    model: &str,
    latency_ms: u64,
    attempts: u32,
    usage_source: &str,
) -> PyResult<()> {
    k.set_item(intern!(py, "call_id"), call_id)?;
    k.set_item(intern!(py, "scope"), scope)?;
    k.set_item(intern!(py, "source_name"), source_name)?;
    k.set_item(intern!(py, "model"), model)?;
    k.set_item(intern!(py, "latency_ms"), latency_ms)?;
    k.set_item(intern!(py, "attempts"), attempts)?;
    k.set_item(intern!(py, "usage_source"), usage_source)?;
    Ok(())
}

fn ocr_text<'py>(py: Python<'py>, r: &OcrTextResult) -> PyResult<Bound<'py, PyAny>> {
    let k = PyDict::new(py);
    k.set_item(intern!(py, "text"), &r.text)?;
    ocr_common(
        py,
        &k,
        &r.call_id,
        &r.scope,
        &r.source_name,
        &r.model,
        r.latency_ms,
        r.attempts,
        r.usage.usage_source.as_str(),
    )?;
    class!(py, "OcrTextResult")?.call((), Some(&k))
}

fn ocr_layout<'py>(py: Python<'py>, r: &OcrLayoutResult) -> PyResult<Bound<'py, PyAny>> {
    let k = PyDict::new(py);
    let elements = r
        .elements
        .iter()
        .map(|e| {
            let bbox = PyTuple::new(py, e.bbox)?;
            class!(py, "OcrElement")?.call1((&e.kind, &e.text, bbox, e.page_index))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let pages = r
        .page_sizes
        .iter()
        .map(|p| class!(py, "OcrPageSize")?.call1((p.page_index, p.width, p.height)))
        .collect::<PyResult<Vec<_>>>()?;
    k.set_item(intern!(py, "elements"), PyTuple::new(py, elements)?)?;
    k.set_item(intern!(py, "page_sizes"), PyTuple::new(py, pages)?)?;
    k.set_item(intern!(py, "dropped_boxes"), r.dropped_boxes)?;
    ocr_common(
        py,
        &k,
        &r.call_id,
        &r.scope,
        &r.source_name,
        &r.model,
        r.latency_ms,
        r.attempts,
        r.usage.usage_source.as_str(),
    )?;
    class!(py, "OcrLayoutResult")?.call((), Some(&k))
}
