//! Where a call's output goes (`Sink`: collected whole, or forwarded as `CallEvent`s once the
//! call commits), the call's event channel (`EventTx`/`EventRx`: events travel in batches,
//! one per upstream read, and come out one by one), and the per-call bookkeeping every layer
//! reads (`CallState`).

use std::collections::VecDeque;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::GatewayError;
use crate::plugin::Delta;

use super::response::{Accumulator, ChatResponse, TokenUsage};
use super::runtime::SourceRuntime;

/// What `Gateway::chat_stream` yields.
#[derive(Debug)]
pub enum CallEvent {
    /// The call committed to a source: its first token is ready.
    Start(StreamStart),
    /// A piece of the answer (role, content, reasoning, tool-call fragment, finish).
    Delta(Delta),
    /// The answer is complete (usage, timings, ids).
    End(Box<ChatResponse>),
    /// The call failed; after `Start`, the output so far is incomplete.
    Failed(GatewayError),
}

/// The head of a streamed answer.
#[derive(Debug, Clone)]
pub struct StreamStart {
    pub call_id: String,
    pub source_name: String,
    /// The configured model of the source.
    pub model: String,
    pub model_reported: Option<String>,
    /// Attempts made so far (1 = first try).
    pub attempts: u32,
    /// Microseconds the gateway itself spent before the first byte (upstream waits and
    /// back-off sleeps excluded).
    pub overhead_us: u64,
    /// Unix seconds at the start of the call (the OpenAI `created`).
    pub created: u64,
    /// The answer is replayed from the response cache (`x-pgw-cache-hit`).
    pub cache_hit: bool,
    /// Soft budget limits this call crossed (`x-pgw-budget-warning`).
    pub budget_warnings: Vec<String>,
}

/// The client went away.
#[derive(Debug)]
pub(crate) struct SinkClosed;

/// A call's event channel with room for `capacity` batches. The deltas of one upstream read
/// go as one batch, so the proxy writes them to its client at once instead of one per delta.
/// A send wakes the receiver's registered waker: for `chat_stream` that is the call's own
/// waker (`own_wakes.rs`), so a send from within the call is no wake of its task.
pub(crate) fn event_channel(capacity: usize) -> (EventTx, EventRx) {
    let (tx, rx) = mpsc::channel(capacity);
    (
        EventTx(tx),
        EventRx {
            rx,
            ready: VecDeque::new(),
        },
    )
}

/// The sending half of a call's event channel.
#[derive(Debug, Clone)]
pub(crate) struct EventTx(mpsc::Sender<Vec<CallEvent>>);

impl EventTx {
    /// Send one event (waits while the channel is full).
    pub(crate) async fn send(&self, ev: CallEvent) -> Result<(), SinkClosed> {
        self.send_batch(vec![ev]).await
    }

    /// Send events as one batch; an empty batch sends nothing.
    pub(crate) async fn send_batch(&self, evs: Vec<CallEvent>) -> Result<(), SinkClosed> {
        if evs.is_empty() {
            return Ok(());
        }
        self.0.send(evs).await.map_err(|_| SinkClosed)
    }
}

/// The receiving half of a call's event channel: events come out one by one, in order.
#[derive(Debug)]
pub(crate) struct EventRx {
    rx: mpsc::Receiver<Vec<CallEvent>>,
    /// The rest of the batch being taken apart.
    ready: VecDeque<CallEvent>,
}

impl EventRx {
    /// The next event; `None` once every sender is gone and everything was taken.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<CallEvent>> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Poll::Ready(Some(ev));
            }
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(batch)) => self.ready = VecDeque::from(batch),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// The next event already queued, without waiting — and without spending the task's
    /// cooperative budget, which `poll_recv` does (it answers `Pending` once the budget is
    /// spent, whatever is queued); `None` when nothing is.
    pub(crate) fn try_recv(&mut self) -> Option<CallEvent> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Some(ev);
            }
            match self.rx.try_recv() {
                Ok(batch) => self.ready = VecDeque::from(batch),
                Err(_) => return None,
            }
        }
    }

    /// The events of the next batch (what is left of the current one first), for relays
    /// that forward batches whole.
    pub(crate) async fn recv_batch(&mut self) -> Option<Vec<CallEvent>> {
        if !self.ready.is_empty() {
            return Some(self.ready.drain(..).collect());
        }
        self.rx.recv().await
    }
}

/// Where a call's output goes.
pub(crate) enum Sink {
    /// Nothing is forwarded; the answer is returned whole.
    Collect,
    /// Events are forwarded as they come.
    Channel(EventTx),
}

impl Sink {
    pub(crate) fn forwards(&self) -> bool {
        matches!(self, Sink::Channel(_))
    }

    /// Forward deltas of a committed call as one batch.
    pub(crate) async fn send_deltas(&mut self, ds: Vec<Delta>) -> Result<(), SinkClosed> {
        match self {
            Sink::Collect => Ok(()),
            Sink::Channel(tx) => {
                tx.send_batch(ds.into_iter().map(CallEvent::Delta).collect())
                    .await
            }
        }
    }

    /// Commit the call to `source`: send `Start`, then the pending deltas (one batch).
    pub(crate) async fn commit(
        &mut self,
        st: &mut CallState,
        source: &SourceRuntime,
        acc: &Accumulator,
        pending: &mut Vec<Delta>,
    ) -> Result<(), SinkClosed> {
        let Sink::Channel(tx) = self else {
            pending.clear();
            return Ok(());
        };
        let mut batch = Vec::with_capacity(pending.len() + 1);
        if !st.committed {
            st.committed = true;
            let start = StreamStart {
                call_id: st.call_id.clone(),
                source_name: source.settings.name.to_string(),
                model: source.settings.model.clone(),
                model_reported: acc.model_reported.clone(),
                attempts: st.attempts,
                overhead_us: st.overhead().as_micros() as u64,
                created: st.created_unix,
                cache_hit: false,
                budget_warnings: st.budget_warnings.clone(),
            };
            batch.push(CallEvent::Start(start));
        }
        batch.extend(pending.drain(..).map(CallEvent::Delta));
        tx.send_batch(batch).await
    }
}

/// Per-call bookkeeping shared by the loop and its attempts.
pub(crate) struct CallState {
    pub call_id: String,
    pub started: Instant,
    pub created_unix: u64,
    pub created_at_ms: i64,
    pub attempts: u32,
    pub committed: bool,
    /// Answer text already forwarded to the client (the prefill of a continuation).
    pub sent_content: String,
    /// A tool-call fragment was forwarded (such a stream cannot be continued).
    pub sent_tool_calls: bool,
    /// Answer text forwarded by earlier attempts of a continued stream.
    pub sent_content_before: String,
    /// Time spent waiting on the upstream (excluded from the overhead).
    pub upstream_wait: Duration,
    /// Time spent in back-off sleeps (excluded from the overhead).
    pub sleeping: Duration,
    pub last_source: Option<usize>,
    /// Milliseconds of the last finished attempt (the terminal row's `latency_ms`).
    pub last_attempt_ms: Option<u64>,
    /// The call's messages as telemetry stores them, built once for all its rows.
    pub stored_messages: std::sync::OnceLock<std::sync::Arc<str>>,
    /// The usage the attempt in flight has seen so far (the upstream's last report), for
    /// the row of an attempt cut before it ends; reset when an attempt starts.
    pub attempt_usage: Option<TokenUsage>,
    /// Raised when the call's first attempt starts (the spend layer's reservation keeps or
    /// refunds by it when the call is dropped); `None` when no budget applies.
    pub upstream_sent: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// What the call's attempts were billed, as their ledger rows price them.
    pub billed: Billed,
    /// Soft budget limits this call crossed (`x-pgw-budget-warning`, docs/budgets.md).
    pub budget_warnings: Vec<String>,
    /// The call's span, its attempts' parent (docs/tracing.md); `None` when traces are off.
    pub trace: Option<crate::telemetry::otel::CallTrace>,
}

/// The sum of a call's attempt costs (the `cost` of its attempt rows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Billed {
    /// Micro-USD of the attempts whose cost is known.
    pub micro_usd: u64,
    /// An attempt reported usage that could not be priced (a model missing from the price
    /// table): the true total is unknown.
    pub unknown: bool,
}

impl Billed {
    /// Add one attempt row: `had_usage` whether it reported usage, `cost` its priced cost.
    pub(crate) fn add(&mut self, had_usage: bool, cost: Option<f64>) {
        match cost {
            Some(usd) => {
                self.micro_usd = self
                    .micro_usd
                    .saturating_add(crate::governance::budget::usd_to_micro(usd));
            }
            None if had_usage => self.unknown = true,
            None => {}
        }
    }
}

impl CallState {
    /// The state of a call `call_id` starting now, at wall-clock time `unix_ms` (Unix ms,
    /// from the gateway's clock).
    pub(crate) fn new(call_id: String, unix_ms: i64) -> Self {
        Self {
            call_id,
            started: Instant::now(),
            created_unix: u64::try_from(unix_ms / 1000).unwrap_or(0),
            created_at_ms: unix_ms,
            attempts: 0,
            committed: false,
            sent_content: String::new(),
            sent_tool_calls: false,
            sent_content_before: String::new(),
            upstream_wait: Duration::ZERO,
            sleeping: Duration::ZERO,
            last_source: None,
            last_attempt_ms: None,
            stored_messages: std::sync::OnceLock::new(),
            attempt_usage: None,
            upstream_sent: None,
            billed: Billed::default(),
            budget_warnings: Vec::new(),
            trace: None,
        }
    }

    /// Time the gateway itself spent so far.
    pub(crate) fn overhead(&self) -> Duration {
        self.started
            .elapsed()
            .saturating_sub(self.upstream_wait)
            .saturating_sub(self.sleeping)
    }
}
