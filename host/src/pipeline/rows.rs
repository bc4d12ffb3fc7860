//! Telemetry row construction: one row per attempt and one terminal row per logical call
//! (reference §7.8). NULL (`None`) where a value is unknown, never an invented number.

use std::time::{Duration, SystemTime};

use crate::error::GatewayError;
use crate::plugin::ErrorClass;
use crate::telemetry::{CallRow, RowKind, UsageSource};

use super::attempt::{AttemptAnswer, AttemptFailure, AttemptMetrics};
use super::gateway::{ScopeRuntime, SourceRuntime};
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::retry::ms;
use super::sink::CallState;

/// The terminal row of a logical call (success or failure).
pub(crate) fn terminal_row(
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &CallState,
    result: &Result<ChatResponse, GatewayError>,
    latency: Duration,
) -> CallRow {
    match result {
        Ok(r) => CallRow {
            call_id: st.call_id.clone(),
            logical_call_id: st.call_id.clone(),
            parent_call_id: req.parent_call_id.clone(),
            session_id: req.session_id.clone(),
            kind: RowKind::TerminalSuccess,
            scope: scope.settings.name.to_string(),
            source_name: Some(r.source_name.clone()),
            provider: Some(r.provider.clone()),
            model: Some(r.model.clone()),
            model_reported: r.model_reported.clone(),
            error_type: None,
            error: None,
            prompt_tokens: r.usage.map(|u| u.prompt_tokens),
            completion_tokens: r.usage.map(|u| u.completion_tokens),
            cached_prompt_tokens: r.usage.and_then(|u| u.cached_prompt_tokens),
            reasoning_tokens: r.usage.and_then(|u| u.reasoning_tokens),
            usage_source: r.usage_source,
            latency_ms: latency.as_millis() as u64,
            ttft_ms: r.ttft_ms,
            max_inter_token_ms: r.max_inter_token_ms,
            attempts: Some(st.attempts),
            created_at_ms: st.created_at_ms,
        },
        Err(e) => {
            let last = st.last_source.and_then(|i| scope.sources.get(i));
            CallRow {
                call_id: st.call_id.clone(),
                logical_call_id: st.call_id.clone(),
                parent_call_id: req.parent_call_id.clone(),
                session_id: req.session_id.clone(),
                kind: RowKind::TerminalFailure,
                scope: scope.settings.name.to_string(),
                source_name: last.map(|s| s.settings.name.to_string()),
                provider: last.map(|s| s.settings.provider.to_string()),
                model: last.map(|s| s.settings.model.clone()),
                model_reported: None,
                error_type: Some(e.kind().to_string()),
                error: Some(e.to_string()),
                prompt_tokens: None,
                completion_tokens: None,
                cached_prompt_tokens: None,
                reasoning_tokens: None,
                usage_source: UsageSource::Unavailable,
                latency_ms: latency.as_millis() as u64,
                ttft_ms: None,
                max_inter_token_ms: None,
                attempts: Some(st.attempts),
                created_at_ms: st.created_at_ms,
            }
        }
    }
}

/// The row of one attempt.
pub(crate) fn attempt_row(
    attempt_id: &str,
    scope: &ScopeRuntime,
    source: &SourceRuntime,
    req: &ChatRequest,
    st: &CallState,
    outcome: &Result<AttemptAnswer, AttemptFailure>,
    metrics: &AttemptMetrics,
) -> CallRow {
    let (error_type, error, usage, usage_source, model_reported) = match outcome {
        Ok(a) => (
            None,
            None,
            a.acc.usage,
            a.usage_source,
            a.acc.model_reported.clone(),
        ),
        Err(f) => {
            let (t, m) = match f {
                AttemptFailure::Upstream(u) => (
                    match u.class {
                        ErrorClass::Transient => "transient",
                        ErrorClass::SourceDead => "source_dead",
                        ErrorClass::RequestRejected => "request_rejected",
                        ErrorClass::ResultInvalid => "result_invalid",
                    },
                    match u.status {
                        Some(s) => format!("HTTP {s}: {}", u.message),
                        None => u.message.clone(),
                    },
                ),
                AttemptFailure::Plugin(e) => ("plugin_fault", e.to_string()),
                AttemptFailure::BuildInvalid(m) => ("invalid_request", m.clone()),
                AttemptFailure::Unsupported(m) => ("unsupported", m.clone()),
                AttemptFailure::SinkClosed => ("cancelled", "the client went away".into()),
            };
            (
                Some(t.to_string()),
                Some(m),
                None,
                UsageSource::Unavailable,
                None,
            )
        }
    };
    CallRow {
        call_id: attempt_id.to_string(),
        logical_call_id: st.call_id.clone(),
        parent_call_id: req.parent_call_id.clone(),
        session_id: req.session_id.clone(),
        kind: RowKind::Attempt,
        scope: scope.settings.name.to_string(),
        source_name: Some(source.settings.name.to_string()),
        provider: Some(source.settings.provider.to_string()),
        model: Some(source.settings.model.clone()),
        model_reported,
        error_type,
        error,
        prompt_tokens: usage.map(|u| u.prompt_tokens),
        completion_tokens: usage.map(|u| u.completion_tokens),
        cached_prompt_tokens: usage.and_then(|u| u.cached_prompt_tokens),
        reasoning_tokens: usage.and_then(|u| u.reasoning_tokens),
        usage_source,
        latency_ms: metrics.latency.as_millis() as u64,
        ttft_ms: metrics.ttft.map(ms),
        max_inter_token_ms: metrics.max_inter_token.map(ms),
        attempts: None,
        created_at_ms: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    }
}
