//! The call-level frame of a lean call (embeddings, OCR): its ids, the stored form of its
//! inputs, and the rows every lean call writes — one per attempt (built by the operation)
//! and one terminal row, also when the call's future is dropped before it ends.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::GatewayError;
use crate::governance::SharedClock;
use crate::telemetry::{CallRow, RowKind, UsageSource};

use super::super::options::CallOptions;
use super::super::rows::{CancelGuard, millis, set_source};
use super::super::runtime::{Inner, ScopeRuntime};
use super::LeanState;

/// One lean call in progress.
pub(crate) struct LeanCall {
    /// The logical call id (`x-pgw-call-id`, the terminal row's id).
    pub call_id: String,
    pub scope: String,
    pub options: CallOptions,
    /// The inputs as telemetry stores them (chat-shaped messages: text capped, binary
    /// parts as their digest).
    pub messages: Arc<str>,
    pub started: tokio::time::Instant,
    pub created_at_ms: i64,
    /// The injected clock (the wall time of the call's rows).
    clock: SharedClock,
}

impl LeanCall {
    /// A new call in `scope` whose inputs are `messages` (chat-shaped, stored digested).
    pub(crate) fn new(
        inner: &Inner,
        scope: &ScopeRuntime,
        options: CallOptions,
        messages: &[Value],
    ) -> Self {
        let now = scope.clock.unix_ms();
        Self {
            call_id: scope.entropy.uuid_v7(now).to_string(),
            scope: scope.settings.name.to_string(),
            options,
            messages: inner.recorder.stored_messages(messages),
            started: tokio::time::Instant::now(),
            created_at_ms: now,
            clock: scope.clock.clone(),
        }
    }

    /// A row of this call with ids, links, dimensions and inputs set.
    pub(crate) fn row(&self, kind: RowKind, row_id: &str, created_at_ms: i64) -> CallRow {
        let mut row = CallRow::new(
            kind,
            row_id,
            self.call_id.as_str(),
            self.scope.as_str(),
            created_at_ms,
        );
        row.parent_call_id = self.options.parent_call_id.clone();
        row.session_id = self.options.session_id.clone();
        row.tenant_id = self.options.tenant_id.clone();
        if let Some(p) = &self.options.principal {
            row.key_id = Some(Arc::from(p.key.id.as_str()));
            row.team_id = p.team.as_ref().map(|t| Arc::from(t.id.as_str()));
        }
        row.meta = self
            .options
            .meta
            .as_ref()
            .map(|m| Value::Object(m.clone()).to_string());
        row.messages = Some(self.messages.clone());
        row
    }

    /// An attempt row (now), its source set.
    pub(crate) fn attempt_row(
        &self,
        attempt_id: &str,
        source: &super::super::runtime::SourceRuntime,
        latency: Duration,
    ) -> CallRow {
        let mut row = self.row(RowKind::Attempt, attempt_id, self.clock.unix_ms());
        set_source(&mut row, source);
        row.latency_ms = Some(millis(latency));
        row
    }

    /// The terminal row of the call: `ok` carries the usage (prompt, completion tokens),
    /// its source and the stored response text.
    pub(crate) fn terminal_row<T>(
        &self,
        scope: &ScopeRuntime,
        st: &LeanState,
        result: &Result<T, GatewayError>,
        usage: Option<(u64, u64)>,
        usage_source: UsageSource,
        response: Option<String>,
    ) -> CallRow {
        let kind = match result {
            Ok(_) => RowKind::TerminalSuccess,
            Err(_) => RowKind::TerminalFailure,
        };
        let mut row = self.row(kind, &self.call_id, self.created_at_ms);
        row.attempts = Some(st.attempts);
        row.total_latency_ms = Some(millis(self.started.elapsed()));
        row.latency_ms = st.last_attempt_ms;
        if let Some(last) = st.last_source.and_then(|i| scope.sources.get(i)) {
            set_source(&mut row, last);
        }
        match result {
            Ok(_) => {
                row.prompt_tokens = usage.map(|u| u.0);
                row.completion_tokens = usage.map(|u| u.1);
                row.usage_source = usage_source;
                row.response = response;
            }
            Err(e) => {
                row.error_type = Some(e.kind().to_string());
                row.error = Some(e.to_string());
            }
        }
        row
    }

    /// A guard that writes a `cancelled` terminal row if the call's future is dropped
    /// before it writes its own (set the guard's `row` to `None` then).
    pub(crate) fn cancel_guard(
        &self,
        inner: Arc<Inner>,
    ) -> CancelGuard<impl FnOnce() -> CallRow + use<>> {
        let mut row = self.row(RowKind::TerminalFailure, &self.call_id, self.created_at_ms);
        row.error_type = Some("cancelled".into());
        row.error = Some("the caller went away before the call finished".into());
        CancelGuard {
            inner,
            row: Some(move || row),
            started: self.started,
        }
    }
}

/// Find the scope whose aliases contain `model` (404 `model_not_found` otherwise).
pub(crate) fn scope_of<'a>(
    inner: &'a Inner,
    model: &str,
) -> Result<&'a ScopeRuntime, GatewayError> {
    inner
        .scope_of(model)
        .ok_or_else(|| GatewayError::ModelNotFound {
            model: model.to_string(),
            known: inner.known_aliases(),
        })
}
