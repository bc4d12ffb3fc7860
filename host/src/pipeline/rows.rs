//! Telemetry row construction (reference §7.8): one row per attempt, and one terminal row
//! (or a cache-hit row) per logical call. NULL (`None`) where a value is unknown, never an
//! invented number. Rows go to `Telemetry::record`, which adds the cost and the metrics.

use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};

use crate::error::GatewayError;
use crate::plugin::ErrorClass;
use crate::telemetry::{CallRow, RowKind, Telemetry, UsageSource};

use super::attempt::{AttemptAnswer, AttemptFailure, AttemptMetrics};
use super::gateway::{ScopeRuntime, SourceRuntime};
use super::request::ChatRequest;
use super::response::{ChatResponse, TokenUsage};
use super::retry::ms;
use super::sink::CallState;

/// Overlay keys that are not sampling parameters (structure, tools): left out of `sampling`.
const NOT_SAMPLING: &[&str] = &["response_format", "tools", "tool_choice"];

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What every row of a call shares: ids, links, caller dimensions, the stored messages.
fn base(
    tel: &Telemetry,
    kind: RowKind,
    call_id: &str,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &CallState,
    created_at_ms: i64,
) -> CallRow {
    let mut row = CallRow::new(
        kind,
        call_id,
        st.call_id.as_str(),
        scope.settings.name.as_ref(),
        created_at_ms,
    );
    row.parent_call_id = req.parent_call_id.clone();
    row.session_id = req.session_id.clone();
    row.tenant_id = req.tenant_id.clone();
    row.meta = req
        .meta
        .as_ref()
        .map(|m| Value::Object(m.clone()).to_string());
    row.messages = Some(
        st.stored_messages
            .get_or_init(|| tel.stored_messages(&req.messages))
            .clone(),
    );
    row
}

/// The call's sampling parameters, merged over the source's `EXTRA_BODY` on attempt rows
/// (the request's values win, as in the body sent upstream).
fn sampling(req: &ChatRequest, extra: Option<&Map<String, Value>>) -> Option<String> {
    let mut m = extra.cloned().unwrap_or_default();
    for (k, v) in &req.overlay {
        if !NOT_SAMPLING.contains(&k.as_str()) {
            m.insert(k.clone(), v.clone());
        }
    }
    (!m.is_empty()).then(|| Value::Object(m).to_string())
}

fn set_usage(row: &mut CallRow, usage: Option<TokenUsage>, source: UsageSource) {
    row.prompt_tokens = usage.map(|u| u.prompt_tokens);
    row.completion_tokens = usage.map(|u| u.completion_tokens);
    row.cached_prompt_tokens = usage.and_then(|u| u.cached_prompt_tokens);
    row.reasoning_tokens = usage.and_then(|u| u.reasoning_tokens);
    row.usage_source = source;
}

pub(crate) fn set_source(row: &mut CallRow, source: &SourceRuntime) {
    row.source_name = Some(source.settings.name.to_string());
    row.provider = Some(source.settings.provider.to_string());
    row.model = Some(source.settings.model.clone());
}

/// The terminal row of a logical call (success or failure) that went to the upstream.
pub(crate) fn terminal_row(
    tel: &Telemetry,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &CallState,
    result: &Result<ChatResponse, GatewayError>,
    total: Duration,
) -> CallRow {
    let kind = match result {
        Ok(_) => RowKind::TerminalSuccess,
        Err(_) => RowKind::TerminalFailure,
    };
    let mut row = base(tel, kind, &st.call_id, scope, req, st, st.created_at_ms);
    row.sampling = sampling(req, None);
    row.attempts = Some(st.attempts);
    row.total_latency_ms = Some(millis(total));
    row.latency_ms = st.last_attempt_ms;
    match result {
        Ok(r) => {
            row.source_name = Some(r.source_name.clone());
            row.provider = Some(r.provider.clone());
            row.model = Some(r.model.clone());
            row.model_reported = r.model_reported.clone();
            set_usage(&mut row, r.usage, r.usage_source);
            row.ttft_ms = r.ttft_ms;
            row.max_inter_token_ms = r.max_inter_token_ms;
            row.response = Some(tel.stored_text(&r.content));
            row.thinking = r.reasoning.as_deref().map(|t| tel.stored_text(t));
        }
        Err(e) => {
            if let Some(last) = st.last_source.and_then(|i| scope.sources.get(i)) {
                set_source(&mut row, last);
            }
            row.error_type = Some(e.kind().to_string());
            row.error = Some(e.to_string());
        }
    }
    row
}

/// The row of a call answered from the response cache: the cached answer's text, tokens
/// and models, this call's ids and dimensions, cost 0 (set by the telemetry helper). It
/// replaces the terminal row of such a call (`event = cache_hit`).
pub(crate) fn cache_hit_row(
    tel: &Telemetry,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &CallState,
    r: &ChatResponse,
    total: Duration,
) -> CallRow {
    let mut row = base(
        tel,
        RowKind::CacheHit,
        &st.call_id,
        scope,
        req,
        st,
        st.created_at_ms,
    );
    row.cache_hit = true;
    row.sampling = sampling(req, None);
    row.attempts = Some(st.attempts);
    row.total_latency_ms = Some(millis(total));
    row.source_name = Some(r.source_name.clone());
    row.provider = Some(r.provider.clone());
    row.model = Some(r.model.clone());
    row.model_reported = r.model_reported.clone();
    set_usage(&mut row, r.usage, r.usage_source);
    row.response = Some(tel.stored_text(&r.content));
    row.thinking = r.reasoning.as_deref().map(|t| tel.stored_text(t));
    row
}

/// The telemetry `error_type` and message of a failed attempt.
pub(crate) fn attempt_error(f: &AttemptFailure) -> (&'static str, String) {
    match f {
        AttemptFailure::Upstream(u) => (
            match u.class {
                ErrorClass::Transient => "transient",
                ErrorClass::SourceDead => "source_dead",
                ErrorClass::RequestRejected => "request_rejected",
                ErrorClass::ResultInvalid => "result_invalid",
            },
            {
                let text = u.detail.as_ref().unwrap_or(&u.message);
                match u.status {
                    Some(s) => format!("HTTP {s}: {text}"),
                    None => text.clone(),
                }
            },
        ),
        AttemptFailure::Plugin(e) => ("plugin_fault", e.to_string()),
        AttemptFailure::BuildInvalid(m) => ("invalid_request", m.clone()),
        AttemptFailure::Unsupported(m) => ("unsupported", m.clone()),
        AttemptFailure::SinkClosed => ("cancelled", "the client went away".into()),
    }
}

/// The row of one attempt.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attempt_row(
    tel: &Telemetry,
    attempt_id: &str,
    scope: &ScopeRuntime,
    source: &SourceRuntime,
    req: &ChatRequest,
    st: &CallState,
    outcome: &Result<AttemptAnswer, AttemptFailure>,
    metrics: &AttemptMetrics,
) -> CallRow {
    let mut row = base(tel, RowKind::Attempt, attempt_id, scope, req, st, now_ms());
    set_source(&mut row, source);
    row.sampling = sampling(req, Some(&source.settings.extra_body));
    row.latency_ms = Some(millis(metrics.latency));
    row.ttft_ms = metrics.ttft.map(ms);
    row.max_inter_token_ms = metrics.max_inter_token.map(ms);
    match outcome {
        Ok(a) => {
            set_usage(&mut row, a.acc.usage, a.usage_source);
            row.model_reported = a.acc.model_reported.clone();
            row.response = Some(tel.stored_text(&a.acc.content));
            row.thinking = (!a.acc.reasoning.is_empty()).then(|| tel.stored_text(&a.acc.reasoning));
        }
        Err(f) => {
            let (t, m) = attempt_error(f);
            row.error_type = Some(t.to_string());
            row.error = Some(m);
        }
    }
    row
}
