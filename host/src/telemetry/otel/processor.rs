//! Export off the call path (docs/tracing.md#export): [`QueueProcessor`], the span processor
//! the SDK hands every finished span to — one push onto a bounded lock-free queue, or the
//! span is dropped and counted — and [`Worker`], the one task that drains the queue in
//! batches, sends them to the collector one request at a time, counts what was exported,
//! what failed and what was lost, and answers flush requests.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::config::OtelSettings;

use super::OtelCounters;

/// The queue between the processor and the worker.
pub(super) struct Queue {
    spans: ArrayQueue<SpanData>,
    /// Raised when a batch is full (the worker sends it without waiting for its delay).
    full: Notify,
    batch: usize,
}

/// The span processor: hands finished, sampled spans to the worker's queue; never waits.
pub(super) struct QueueProcessor {
    queue: Arc<Queue>,
    dropped: Counter,
}

impl std::fmt::Debug for QueueProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueProcessor")
            .field("queued", &self.queue.spans.len())
            .finish_non_exhaustive()
    }
}

impl QueueProcessor {
    /// A processor with the queue bounds of `settings`; the queue goes to the worker.
    pub(super) fn new(settings: &OtelSettings, dropped: Counter) -> (Self, Arc<Queue>) {
        let queue = Arc::new(Queue {
            spans: ArrayQueue::new(settings.max_queue_size.max(1)),
            full: Notify::new(),
            batch: settings.max_export_batch_size.max(1),
        });
        (
            Self {
                queue: queue.clone(),
                dropped,
            },
            queue,
        )
    }
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.queue.spans.push(span).is_err() {
            self.dropped.inc();
        } else if self.queue.spans.len() >= self.queue.batch {
            self.queue.full.notify_one();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.queue.full.notify_one();
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        // The worker ends when the gateway's `Otel` is dropped, after one last export.
        Ok(())
    }
}

/// What the gateway asks of the worker.
pub(super) enum Control {
    /// Export everything queued, then answer.
    Flush(oneshot::Sender<()>),
}

/// The export task.
pub(super) struct Worker<E> {
    queue: Arc<Queue>,
    exporter: E,
    delay: Duration,
    /// Bound of one export (the exporter's own timeout, retries included, plus a margin).
    bound: Duration,
    counters: OtelCounters,
    control: mpsc::Receiver<Control>,
    /// The collector's URL without userinfo, for the log lines.
    endpoint: String,
    /// The last export failed (logged once when failing starts and once when it ends).
    failing: bool,
}

impl<E: SpanExporter> Worker<E> {
    pub(super) fn new(
        queue: Arc<Queue>,
        exporter: E,
        settings: &OtelSettings,
        counters: OtelCounters,
        control: mpsc::Receiver<Control>,
        endpoint: String,
    ) -> Self {
        Self {
            queue,
            exporter,
            delay: settings.schedule_delay,
            bound: settings.timeout + Duration::from_secs(1),
            counters,
            control,
            endpoint,
            failing: false,
        }
    }

    /// Drain the queue every `delay`, when a batch is full, and on a flush; when the gateway
    /// goes away, drain once more and end.
    pub(super) async fn run(mut self) {
        loop {
            let flush = tokio::select! {
                c = self.control.recv() => match c {
                    Some(Control::Flush(done)) => Some(done),
                    None => {
                        self.drain().await;
                        let _ = self.exporter.shutdown();
                        return;
                    }
                },
                _ = self.queue.full.notified() => None,
                _ = tokio::time::sleep(self.delay) => None,
            };
            self.drain().await;
            if let Some(done) = flush {
                let _ = done.send(());
            }
        }
    }

    /// Export everything queued, one batch after another.
    async fn drain(&mut self) {
        loop {
            let n = self.queue.spans.len().min(self.queue.batch);
            if n == 0 {
                return;
            }
            let mut batch = Vec::with_capacity(n);
            while batch.len() < self.queue.batch {
                match self.queue.spans.pop() {
                    Some(s) => batch.push(s),
                    None => break,
                }
            }
            self.export(batch).await;
        }
    }

    /// Send one batch; count it as exported, or as a failure whose spans are dropped.
    async fn export(&mut self, batch: Vec<SpanData>) {
        let n = batch.len() as u64;
        let error = match tokio::time::timeout(self.bound, self.exporter.export(batch)).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {:?}", self.bound)),
        };
        match error {
            None => {
                self.counters.exported.inc_by(n);
                if self.failing {
                    self.failing = false;
                    tracing::info!(endpoint = %self.endpoint, "OpenTelemetry export recovered");
                }
            }
            Some(error) => {
                self.counters.failures.inc();
                self.counters.dropped.inc_by(n);
                if !self.failing {
                    self.failing = true;
                    tracing::warn!(
                        endpoint = %self.endpoint,
                        %error,
                        "OpenTelemetry export failed: spans are dropped and counted \
                         (pgw_otel_export_failures_total, pgw_otel_dropped_spans_total) until it recovers"
                    );
                }
            }
        }
    }
}
