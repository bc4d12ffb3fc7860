//! Telemetry row construction (docs/telemetry.md#rows): one row per attempt, and one terminal row
//! (or a cache-hit row) per logical call. NULL (`None`) where a value is unknown, never an
//! invented number. Rows go to `Telemetry::record`, which adds the cost and the metrics.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::GatewayError;
use crate::plugin::ErrorClass;
use crate::telemetry::{CallRow, RowKind, Telemetry, UsageSource};

use super::attempt::{AttemptAnswer, AttemptMetrics};
use super::failure::AttemptFailure;
use super::request::ChatRequest;
use super::response::{ChatResponse, TokenUsage};
use super::runtime::{Inner, ScopeRuntime, SourceRuntime};
use super::sink::CallState;

/// Overlay keys that are not sampling parameters (structure, tools): left out of `sampling`.
const NOT_SAMPLING: &[&str] = &["response_format", "tools", "tool_choice"];

/// A duration in milliseconds, fractional (TTFT and inter-token gaps).
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
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
    row.ingress = Some(req.ingress.as_str());
    if let Some(p) = &req.principal {
        row.key_id = Some(Arc::from(p.key.id.as_str()));
        row.team_id = p.team.as_ref().map(|t| Arc::from(t.id.as_str()));
    }
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
    row.cache_write_tokens = usage.and_then(|u| u.cache_write_tokens);
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
    let mut row = base(
        tel,
        RowKind::Attempt,
        attempt_id,
        scope,
        req,
        st,
        scope.clock.unix_ms(),
    );
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

/// Why an attempt was cut before it ended, for its `cancelled` row: the call deadline (when
/// it had passed by the time the attempt was dropped) or the caller going away.
fn cut_reason(deadline: Option<Duration>, call_age: Duration) -> String {
    match deadline {
        Some(d) if call_age >= d => format!(
            "the call deadline of {}s expired during the attempt",
            d.as_secs_f64()
        ),
        _ => "the caller went away during the attempt".into(),
    }
}

/// Marks `row` as the row of an attempt cut before it ended: `cancelled`, with the usage
/// the attempt had seen (a request the upstream received may be billed even if nobody reads
/// the answer), as `estimated` since the answer is incomplete.
fn mark_cut(row: &mut CallRow, usage: Option<TokenUsage>, reason: String) {
    let source = if usage.is_some() {
        UsageSource::Estimated
    } else {
        UsageSource::Unavailable
    };
    set_usage(row, usage, source);
    row.error_type = Some("cancelled".into());
    row.error = Some(reason);
}

/// Writes the row of a chat attempt whose future is dropped before it ends — the call
/// deadline fired, or the caller went away and dropped the call — so that an attempt the
/// upstream may bill never goes unrecorded. Holds the call's state for the attempt (the
/// attempt borrows it through [`AttemptRowGuard::state`]); [`AttemptRowGuard::finished`]
/// disarms it once the attempt returned and the loop writes the row itself.
pub(crate) struct AttemptRowGuard<'a> {
    tel: &'a Telemetry,
    attempt_id: &'a str,
    scope: &'a ScopeRuntime,
    source: &'a SourceRuntime,
    req: &'a ChatRequest,
    st: &'a mut CallState,
    started: tokio::time::Instant,
    armed: bool,
}

impl<'a> AttemptRowGuard<'a> {
    /// Arm the guard for attempt `attempt_id` on `source`, starting now; resets the usage
    /// seen by the previous attempt.
    pub(crate) fn new(
        tel: &'a Telemetry,
        attempt_id: &'a str,
        scope: &'a ScopeRuntime,
        source: &'a SourceRuntime,
        req: &'a ChatRequest,
        st: &'a mut CallState,
    ) -> Self {
        st.attempt_usage = None;
        Self {
            tel,
            attempt_id,
            scope,
            source,
            req,
            st,
            started: tokio::time::Instant::now(),
            armed: true,
        }
    }

    /// The call's state, for the attempt to run with.
    pub(crate) fn state(&mut self) -> &mut CallState {
        &mut *self.st
    }

    /// The attempt returned: no row from the guard.
    pub(crate) fn finished(mut self) {
        self.armed = false;
    }
}

impl Drop for AttemptRowGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let metrics = AttemptMetrics {
            latency: self.started.elapsed(),
            ..AttemptMetrics::default()
        };
        let mut row = attempt_row(
            self.tel,
            self.attempt_id,
            self.scope,
            self.source,
            self.req,
            self.st,
            &Err(AttemptFailure::SinkClosed),
            &metrics,
        );
        let deadline = self.req.call_deadline.or(self.scope.settings.call_deadline);
        mark_cut(
            &mut row,
            self.st.attempt_usage,
            cut_reason(deadline, self.st.started.elapsed()),
        );
        if !self.st.sent_content.is_empty() {
            row.response = Some(self.tel.stored_text(&self.st.sent_content));
        }
        self.tel.record(row);
    }
}

/// The same for an attempt of the lean loop (embeddings, OCR): `row` builds the
/// operation's attempt row for a cancelled outcome and the attempt's latency.
pub(crate) struct LeanAttemptRowGuard<'a, F: FnMut(Duration) -> CallRow> {
    tel: &'a Telemetry,
    row: F,
    started: tokio::time::Instant,
    armed: bool,
}

impl<'a, F: FnMut(Duration) -> CallRow> LeanAttemptRowGuard<'a, F> {
    /// Arm the guard, starting now.
    pub(crate) fn new(tel: &'a Telemetry, row: F) -> Self {
        Self {
            tel,
            row,
            started: tokio::time::Instant::now(),
            armed: true,
        }
    }

    /// The attempt returned: no row from the guard.
    pub(crate) fn finished(mut self) {
        self.armed = false;
    }
}

impl<F: FnMut(Duration) -> CallRow> Drop for LeanAttemptRowGuard<'_, F> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut row = (self.row)(self.started.elapsed());
        mark_cut(
            &mut row,
            None,
            "the attempt was cut before it ended: the call deadline expired or the caller went away"
                .into(),
        );
        self.tel.record(row);
    }
}

/// Writes a `cancelled` terminal row when a call's future is dropped before it ends
/// (attempts and source unknown at that point: NULL).
pub(crate) struct CancelGuard<F: FnOnce() -> CallRow> {
    pub inner: Arc<Inner>,
    /// Builds the row to write if dropped; set to `None` once the call wrote its own.
    pub row: Option<F>,
    pub started: tokio::time::Instant,
}

impl<F: FnOnce() -> CallRow> Drop for CancelGuard<F> {
    fn drop(&mut self) {
        if let Some(build) = self.row.take() {
            let mut row = build();
            row.total_latency_ms = Some(self.started.elapsed().as_millis() as u64);
            self.inner.recorder.record(row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_attempt_names_the_deadline_only_once_it_passed() {
        let d = Some(Duration::from_millis(1500));
        assert_eq!(
            cut_reason(d, Duration::from_millis(1500)),
            "the call deadline of 1.5s expired during the attempt"
        );
        assert_eq!(
            cut_reason(d, Duration::from_millis(1499)),
            "the caller went away during the attempt"
        );
        assert_eq!(
            cut_reason(None, Duration::from_secs(3600)),
            "the caller went away during the attempt"
        );
    }
}
