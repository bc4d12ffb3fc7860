//! The spans of a call in the GenAI semantic conventions (docs/tracing.md#spans): the call
//! span ([`CallSpan`], kind SERVER, `{operation} {alias}`, child of the client's span) and
//! one span per attempt ([`AttemptSpan`], kind CLIENT, `{operation} {model}`, child of the
//! call span), their attributes — `gen_ai.*`, `error.type`, `server.*` and the gateway's
//! `pgw.*` — and the W3C trace context an attempt sends upstream. A span dropped before it
//! was ended (the call was cancelled) ends with `error.type = cancelled`.
//!
//! The pipeline fills the neutral `*Start` / `*End` values; nothing here knows a pipeline
//! type. No attribute ever carries a credential: sources are named, never their keys.

use std::borrow::Cow;
use std::sync::Arc;

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value as OtelValue};
use opentelemetry_sdk::trace::{SdkTracer, Span as SdkSpan};
use serde_json::{Map, Value};

use super::TraceParent;
use super::content::{self, OutputMessage};

// GenAI semantic-convention attributes.
const OPERATION: &str = "gen_ai.operation.name";
const PROVIDER: &str = "gen_ai.provider.name";
const REQUEST_MODEL: &str = "gen_ai.request.model";
const RESPONSE_MODEL: &str = "gen_ai.response.model";
const FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
const CONVERSATION: &str = "gen_ai.conversation.id";
const INPUT_MESSAGES: &str = "gen_ai.input.messages";
const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
const EMBEDDING_DIMENSIONS: &str = "gen_ai.embeddings.dimension.count";
// General conventions.
const ERROR_TYPE: &str = "error.type";
const SERVER_ADDRESS: &str = "server.address";
const SERVER_PORT: &str = "server.port";
const HTTP_STATUS: &str = "http.response.status_code";
// The gateway's own.
const PGW_SCOPE: &str = "pgw.scope";
const PGW_SOURCE: &str = "pgw.source";
const PGW_CALL_ID: &str = "pgw.call_id";
const PGW_ATTEMPT: &str = "pgw.attempt";
const PGW_ATTEMPT_ID: &str = "pgw.attempt_id";
const PGW_ATTEMPTS: &str = "pgw.attempts";
const PGW_CACHE_HIT: &str = "pgw.cache_hit";
const PGW_ERROR_CLASS: &str = "pgw.error_class";

/// The `error.type` of a span whose call or attempt was cut before it ended.
const CANCELLED: &str = "cancelled";

/// `gen_ai.operation.name` of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenAiOperation {
    /// A chat completion (`chat`).
    Chat,
    /// An embeddings call (`embeddings`).
    Embeddings,
}

impl GenAiOperation {
    /// The convention's value.
    pub fn as_str(self) -> &'static str {
        match self {
            GenAiOperation::Chat => "chat",
            GenAiOperation::Embeddings => "embeddings",
        }
    }
}

/// `gen_ai.provider.name` of a source's configured `PROVIDER`: the convention's well-known
/// value where there is one (`gemini` → `gcp.gemini`), else the provider as configured.
fn provider_name(provider: &str) -> String {
    match provider {
        "gemini" => "gcp.gemini".to_string(),
        other => other.to_string(),
    }
}

/// What a call span starts with.
#[derive(Debug, Clone, Copy)]
pub struct CallStart<'a> {
    pub operation: GenAiOperation,
    /// The model alias the client named (`gen_ai.request.model` of the call span).
    pub alias: &'a str,
    pub scope: &'a str,
    pub call_id: &'a str,
    /// `x-pgw-session-id` (`gen_ai.conversation.id`).
    pub conversation_id: Option<&'a str>,
    /// The client's span; `None`: the current OpenTelemetry context, if any.
    pub parent: Option<&'a TraceParent>,
    /// The request's sampling parameters (`gen_ai.request.*`).
    pub overlay: Option<&'a Map<String, Value>>,
    /// The embedding dimensions asked for (`gen_ai.embeddings.dimension.count`).
    pub embedding_dimensions: Option<u32>,
    /// The messages (recorded only when message content is captured).
    pub messages: &'a [Value],
}

/// What a call span ends with.
#[derive(Debug, Clone, Default)]
pub struct CallEnd<'a> {
    /// The call's error kind (`GatewayError::kind`); `None` for an answer.
    pub error_type: Option<&'a str>,
    /// The source that answered (or of the last attempt, for a failure).
    pub source: Option<&'a str>,
    /// Its configured `PROVIDER`.
    pub provider: Option<&'a str>,
    /// The model the upstream reported.
    pub response_model: Option<&'a str>,
    pub finish_reason: Option<&'a str>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub attempts: u32,
    pub cache_hit: bool,
    /// The answer (recorded only when message content is captured).
    pub output: Option<OutputMessage<'a>>,
}

/// What an attempt span starts with.
#[derive(Debug, Clone, Copy)]
pub struct AttemptStart<'a> {
    /// The source's configured `PROVIDER`.
    pub provider: &'a str,
    /// The source's configured `MODEL` (`gen_ai.request.model`).
    pub model: &'a str,
    pub source: &'a str,
    /// The source's `BASE_URL` (`server.address`, `server.port`).
    pub base_url: &'a str,
    /// 1 for the call's first attempt.
    pub attempt: u32,
    pub attempt_id: &'a str,
}

/// What an attempt span ends with.
#[derive(Debug, Clone, Copy, Default)]
pub struct AttemptEnd<'a> {
    /// The failure's short reason (`server_error`, `timeout`, `rate_limited`, …); `None`
    /// for an answer.
    pub error_type: Option<&'a str>,
    /// The failure's class as the ledger stores it (`transient`, `source_dead`, …).
    pub error_class: Option<&'a str>,
    /// The upstream's HTTP status, when it answered with an error.
    pub http_status: Option<u16>,
    pub response_model: Option<&'a str>,
    pub finish_reason: Option<&'a str>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}

/// What the attempts of a call need of it: the call span's context, the tracer, and the
/// attributes every span of the call carries. Cheap to clone.
#[derive(Clone)]
pub struct CallTrace {
    cx: Context,
    tracer: SdkTracer,
    operation: GenAiOperation,
    capture: bool,
    /// `pgw.scope`, `pgw.call_id`, the conversation and the request parameters.
    common: Arc<[KeyValue]>,
}

impl std::fmt::Debug for CallTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallTrace")
            .field("span", self.cx.span().span_context())
            .finish_non_exhaustive()
    }
}

/// The span of one call. End it with [`CallSpan::end`]; dropped before, it ends as
/// cancelled.
#[derive(Debug)]
pub struct CallSpan {
    trace: CallTrace,
    ended: bool,
}

/// The span of one attempt. End it with [`AttemptSpan::end`]; dropped before, it ends as
/// cancelled.
#[derive(Debug)]
pub struct AttemptSpan {
    span: SdkSpan,
    /// `traceparent` (and `tracestate`) naming this span, for the upstream request.
    propagation: Vec<(&'static str, String)>,
    ended: bool,
}

fn kv(key: &'static str, value: impl Into<OtelValue>) -> KeyValue {
    KeyValue::new(key, value)
}

fn strings(items: impl IntoIterator<Item = String>) -> OtelValue {
    OtelValue::Array(Array::String(
        items.into_iter().map(StringValue::from).collect(),
    ))
}

/// `gen_ai.request.*` and `gen_ai.output.type` from a chat request's parameters.
fn request_attributes(overlay: &Map<String, Value>, out: &mut Vec<KeyValue>) {
    for (param, key) in [
        ("temperature", "gen_ai.request.temperature"),
        ("top_p", "gen_ai.request.top_p"),
        ("frequency_penalty", "gen_ai.request.frequency_penalty"),
        ("presence_penalty", "gen_ai.request.presence_penalty"),
    ] {
        if let Some(x) = overlay.get(param).and_then(Value::as_f64) {
            out.push(kv(key, x));
        }
    }
    let max_tokens = overlay
        .get("max_completion_tokens")
        .or_else(|| overlay.get("max_tokens"))
        .and_then(Value::as_i64);
    if let Some(n) = max_tokens {
        out.push(kv("gen_ai.request.max_tokens", n));
    }
    if let Some(n) = overlay.get("seed").and_then(Value::as_i64) {
        out.push(kv("gen_ai.request.seed", n));
    }
    if let Some(n) = overlay.get("n").and_then(Value::as_i64).filter(|&n| n != 1) {
        out.push(kv("gen_ai.request.choice.count", n));
    }
    let stop: Option<Vec<String>> = match overlay.get("stop") {
        Some(Value::String(s)) => Some(vec![s.clone()]),
        Some(Value::Array(a)) => Some(
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        ),
        _ => None,
    };
    if let Some(stop) = stop {
        out.push(kv("gen_ai.request.stop_sequences", strings(stop)));
    }
    let output_type = overlay
        .get("response_format")
        .and_then(|f| f.get("type"))
        .and_then(Value::as_str)
        .and_then(|t| match t {
            "json_object" | "json_schema" => Some("json"),
            "text" => Some("text"),
            _ => None,
        });
    if let Some(t) = output_type {
        out.push(kv("gen_ai.output.type", t));
    }
}

/// Start the span of a call (`Otel::call`).
pub(super) fn start_call(tracer: &SdkTracer, capture: bool, start: CallStart<'_>) -> CallSpan {
    let parent_cx = match start.parent {
        Some(p) => Context::new().with_remote_span_context(p.span_context().clone()),
        None => Context::current(),
    };
    let mut common = vec![
        kv(PGW_SCOPE, start.scope.to_string()),
        kv(PGW_CALL_ID, start.call_id.to_string()),
    ];
    if let Some(c) = start.conversation_id {
        common.push(kv(CONVERSATION, c.to_string()));
    }
    if let Some(o) = start.overlay {
        request_attributes(o, &mut common);
    }
    if let Some(d) = start.embedding_dimensions {
        common.push(kv(EMBEDDING_DIMENSIONS, i64::from(d)));
    }
    let op = start.operation;
    let mut attrs = Vec::with_capacity(common.len() + 3);
    attrs.push(kv(OPERATION, op.as_str()));
    attrs.push(kv(REQUEST_MODEL, start.alias.to_string()));
    attrs.extend(common.iter().cloned());
    if capture {
        attrs.push(kv(INPUT_MESSAGES, content::input_messages(start.messages)));
    }
    let span = tracer
        .span_builder(format!("{} {}", op.as_str(), start.alias))
        .with_kind(SpanKind::Server)
        .with_attributes(attrs)
        .start_with_context(tracer, &parent_cx);
    CallSpan {
        trace: CallTrace {
            cx: parent_cx.with_span(span),
            tracer: tracer.clone(),
            operation: op,
            capture,
            common: common.into(),
        },
        ended: false,
    }
}

impl CallSpan {
    /// What the call's attempts are started from.
    pub fn trace(&self) -> CallTrace {
        self.trace.clone()
    }

    /// Whether message content is recorded (build [`CallEnd::output`] only then).
    pub fn captures_content(&self) -> bool {
        self.trace.capture
    }

    /// End the span with the call's outcome.
    pub fn end(mut self, end: CallEnd<'_>) {
        self.ended = true;
        let span = self.trace.cx.span();
        let mut attrs = vec![
            kv(PGW_CACHE_HIT, end.cache_hit),
            kv(PGW_ATTEMPTS, i64::from(end.attempts)),
        ];
        if let Some(p) = end.provider {
            attrs.push(kv(PROVIDER, provider_name(p)));
        }
        if let Some(s) = end.source {
            attrs.push(kv(PGW_SOURCE, s.to_string()));
        }
        outcome_attributes(
            &mut attrs,
            end.response_model,
            end.finish_reason,
            end.input_tokens,
            end.output_tokens,
        );
        if let (true, Some(out)) = (self.trace.capture, &end.output) {
            attrs.push(kv(OUTPUT_MESSAGES, content::output_messages(out)));
        }
        if let Some(e) = end.error_type {
            attrs.push(kv(ERROR_TYPE, e.to_string()));
            span.set_status(Status::error(e.to_string()));
        }
        span.set_attributes(attrs);
        span.end();
    }
}

impl Drop for CallSpan {
    fn drop(&mut self) {
        if !self.ended {
            let span = self.trace.cx.span();
            span.set_attribute(kv(ERROR_TYPE, CANCELLED));
            span.set_status(Status::error(CANCELLED));
            span.end();
        }
    }
}

/// The response attributes an answer sets on either span.
fn outcome_attributes(
    attrs: &mut Vec<KeyValue>,
    response_model: Option<&str>,
    finish_reason: Option<&str>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
) {
    if let Some(m) = response_model {
        attrs.push(kv(RESPONSE_MODEL, m.to_string()));
    }
    if let Some(f) = finish_reason {
        attrs.push(kv(FINISH_REASONS, strings([f.to_string()])));
    }
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    if let Some(n) = input_tokens {
        attrs.push(kv(INPUT_TOKENS, int(n)));
    }
    if let Some(n) = output_tokens {
        attrs.push(kv(OUTPUT_TOKENS, int(n)));
    }
}

/// `server.address` and `server.port` of a base URL.
fn server(base_url: &str, attrs: &mut Vec<KeyValue>) {
    if let Ok(url) = reqwest::Url::parse(base_url)
        && let Some(host) = url.host_str()
    {
        attrs.push(kv(SERVER_ADDRESS, host.to_string()));
        if let Some(port) = url.port_or_known_default() {
            attrs.push(kv(SERVER_PORT, i64::from(port)));
        }
    }
}

impl CallTrace {
    /// Start the span of one attempt, a child of the call span.
    pub fn attempt(&self, start: AttemptStart<'_>) -> AttemptSpan {
        let op = self.operation;
        let mut attrs = Vec::with_capacity(self.common.len() + 8);
        attrs.push(kv(OPERATION, op.as_str()));
        attrs.push(kv(PROVIDER, provider_name(start.provider)));
        attrs.push(kv(REQUEST_MODEL, start.model.to_string()));
        attrs.push(kv(PGW_SOURCE, start.source.to_string()));
        attrs.push(kv(PGW_ATTEMPT, i64::from(start.attempt)));
        attrs.push(kv(PGW_ATTEMPT_ID, start.attempt_id.to_string()));
        server(start.base_url, &mut attrs);
        attrs.extend(self.common.iter().cloned());
        let span = self
            .tracer
            .span_builder(format!("{} {}", op.as_str(), start.model))
            .with_kind(SpanKind::Client)
            .with_attributes(attrs)
            .start_with_context(&self.tracer, &self.cx);
        let sc = span.span_context();
        let mut propagation = vec![(
            "traceparent",
            format!(
                "00-{}-{}-{:02x}",
                sc.trace_id(),
                sc.span_id(),
                sc.trace_flags().to_u8()
            ),
        )];
        let state = sc.trace_state().header();
        if !state.is_empty() {
            propagation.push(("tracestate", state));
        }
        AttemptSpan {
            span,
            propagation,
            ended: false,
        }
    }
}

impl AttemptSpan {
    /// The W3C trace-context headers naming this span (`traceparent`, and `tracestate`
    /// when the trace has one), for the upstream request.
    pub fn propagation(&self) -> &[(&'static str, String)] {
        &self.propagation
    }

    /// End the span with the attempt's outcome.
    pub fn end(mut self, end: AttemptEnd<'_>) {
        self.ended = true;
        let mut attrs = Vec::with_capacity(6);
        outcome_attributes(
            &mut attrs,
            end.response_model,
            end.finish_reason,
            end.input_tokens,
            end.output_tokens,
        );
        if let Some(s) = end.http_status {
            attrs.push(kv(HTTP_STATUS, i64::from(s)));
        }
        if let Some(c) = end.error_class {
            attrs.push(kv(PGW_ERROR_CLASS, c.to_string()));
        }
        if let Some(e) = end.error_type {
            attrs.push(kv(ERROR_TYPE, e.to_string()));
            self.span
                .set_status(Status::error(Cow::Owned(e.to_string())));
        }
        self.span.set_attributes(attrs);
        self.span.end();
    }
}

impl Drop for AttemptSpan {
    fn drop(&mut self) {
        if !self.ended {
            self.span.set_attribute(kv(ERROR_TYPE, CANCELLED));
            self.span.set_status(Status::error(CANCELLED));
            self.span.end();
        }
    }
}
