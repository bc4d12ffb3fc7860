//! `Gateway`: the embedded API, a thin façade. Built from `Settings` (or the environment),
//! it holds the current configuration (`runtime::Inner`) behind an `ArcSwap` and hands each
//! call the snapshot it runs on: chat (`stack::run_call`), embeddings (`embed`), OCR (`ocr`),
//! health and metrics (`health.rs`), reload (`reload.rs`). No pipeline file imports it.
//!
//! **Hot reload:** a call takes a snapshot when it starts and keeps it to its end, so a
//! reload ([`Gateway::reload`]) never changes a call in flight; a reload that fails
//! validation leaves the current `Inner` in place. Telemetry and the HTTP clients are
//! process-wide and carried over.

use std::sync::Arc;

use arc_swap::ArcSwap;
use futures_util::Stream;

use crate::config::Settings;
use crate::error::GatewayError;
use crate::governance::{SharedClock, SystemClock};
use crate::telemetry::{Telemetry, TelemetryStatus};

use super::embed::{self, EmbeddingRequest, EmbeddingResponse};
use super::health;
use super::ocr::{self, OcrHealth, OcrLayoutResult, OcrRequest, OcrTextResult};
use super::own_wakes::OwnWakes;
use super::reload::{ReloadError, ReloadReport, restart_required};
use super::request::ChatRequest;
use super::response::ChatResponse;
use super::runtime::{Inner, StartError};
use super::sink::{CallEvent, EventRx, Sink, event_channel};
use super::stack;

/// Where [`Gateway::reload`] reads fresh settings from (e.g. `.env` and the environment:
/// `config::env_settings_source`).
pub use crate::config::SettingsSource;

/// Batches of events (about one per upstream read) a streamed call may have in flight to its
/// consumer before it waits.
const CALL_EVENT_BATCHES: usize = 64;

/// What a gateway shares between its clones: the current `Inner` and what a reload needs.
pub(crate) struct Shared {
    current: ArcSwap<Inner>,
    /// The settings at start (process settings that a reload cannot change).
    started: Settings,
    telemetry: Arc<Telemetry>,
    clock: SharedClock,
    injected_clock: bool,
    source: std::sync::Mutex<Option<SettingsSource>>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// Successful reloads so far (0 = the configuration the gateway started with).
    generation: std::sync::atomic::AtomicU64,
}

/// The gateway. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("scopes", &self.inner().settings.scopes.len())
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Read `.env` and the environment (docs/configuration.md#environment) and start.
    /// [`Gateway::reload`] re-reads them.
    pub async fn from_env() -> Result<Self, StartError> {
        let source = crate::config::env_settings_source();
        crate::config::load_dotenv()?;
        let settings = crate::config::settings_from_env()?;
        let gateway = Self::from_settings(settings).await?;
        gateway.set_settings_source(source);
        Ok(gateway)
    }

    /// Start from explicit settings: load plugins, open telemetry, build clients.
    pub async fn from_settings(settings: Settings) -> Result<Self, StartError> {
        Self::build(settings, SystemClock::shared(), false).await
    }

    /// Like `from_settings`, with the clock of the governance state (breaker, limiter,
    /// stall budget) injected — tests drive cooldowns and windows with a `ManualClock`.
    pub async fn from_settings_with_clock(
        settings: Settings,
        clock: SharedClock,
    ) -> Result<Self, StartError> {
        Self::build(settings, clock, true).await
    }

    async fn build(
        settings: Settings,
        clock: SharedClock,
        injected_clock: bool,
    ) -> Result<Self, StartError> {
        let inner = Inner::build(settings, &clock, injected_clock, None).await?;
        Ok(Self {
            shared: Arc::new(Shared {
                started: inner.settings.clone(),
                telemetry: inner.recorder.clone(),
                current: ArcSwap::from_pointee(inner),
                clock,
                injected_clock,
                source: std::sync::Mutex::new(None),
                reloading: tokio::sync::Mutex::new(()),
                generation: std::sync::atomic::AtomicU64::new(0),
            }),
        })
    }

    /// The virtual-key registry (`PGW_VIRTUAL_KEYS`), `None` when keys are off.
    pub(crate) fn key_registry(&self) -> Option<Arc<crate::keys::KeyRegistry>> {
        self.inner().tenancy.as_ref().map(|t| t.registry.clone())
    }

    /// The current configuration and runtime; a call keeps the snapshot it started with.
    pub(crate) fn inner(&self) -> Arc<Inner> {
        self.shared.current.load_full()
    }

    /// The settings the gateway started with. Process settings (listen address, keys, body
    /// limit, logging, telemetry) stay these until a restart; scopes and sources follow
    /// reloads (see [`Gateway::current_settings`]).
    pub fn settings(&self) -> &Settings {
        &self.shared.started
    }

    /// The settings of the current configuration (after the last successful reload).
    pub fn current_settings(&self) -> Settings {
        self.inner().settings.clone()
    }

    /// Give the gateway a source to re-read settings from on [`Gateway::reload`]
    /// (`Gateway::from_env` sets one that re-reads `.env` and the environment).
    pub fn set_settings_source(&self, source: SettingsSource) {
        if let Ok(mut s) = self.shared.source.lock() {
            *s = Some(source);
        }
    }

    /// Re-read the settings from the source and swap in a new configuration: plugins are
    /// loaded again, scopes and their governance state rebuilt. Calls in flight finish on
    /// the configuration they started with; new calls use the new one. On any error the
    /// current configuration keeps serving and the error is logged.
    pub async fn reload(&self) -> Result<ReloadReport, ReloadError> {
        let source = self.shared.source.lock().ok().and_then(|s| s.clone());
        let result = match source {
            None => Err(ReloadError::NoSource),
            Some(source) => match source() {
                Ok(settings) => self.reload_with(settings).await,
                Err(e) => Err(ReloadError::Config(e)),
            },
        };
        if let Err(e) = &result {
            tracing::error!(error = %e, "reload refused; still serving the previous configuration");
        }
        result
    }

    /// Swap in a configuration built from `settings` (see [`Gateway::reload`]). A failure
    /// leaves the current configuration serving.
    pub async fn reload_with(&self, settings: Settings) -> Result<ReloadReport, ReloadError> {
        let _one_at_a_time = self.shared.reloading.lock().await;
        let old = self.inner();
        let restart_required = restart_required(&self.shared.started, &settings);
        let new = Inner::build(
            settings,
            &self.shared.clock,
            self.shared.injected_clock,
            Some(&old),
        )
        .await?;
        let report = ReloadReport::of(&new, restart_required);
        self.shared.current.store(Arc::new(new));
        self.shared
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(
            scopes = ?report.scopes,
            plugins = ?report.plugins,
            restart_required = ?report.restart_required,
            "reloaded"
        );
        Ok(report)
    }

    /// The configuration's generation: the number of successful reloads since start (0 =
    /// the configuration the gateway started with).
    pub fn generation(&self) -> u64 {
        self.shared
            .generation
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Unix ms now, from the gateway's clock.
    pub fn now_unix_ms(&self) -> i64 {
        self.shared.clock.unix_ms()
    }

    /// A fresh id: a UUIDv7 from the gateway's clock and random source, ordered after every
    /// id it made before (call and attempt ids are made the same way). The proxy gives one
    /// to every response that is not a call's, as its `x-request-id`.
    pub fn new_id(&self) -> String {
        self.inner()
            .entropy
            .uuid_v7(self.shared.clock.unix_ms())
            .to_string()
    }

    /// The model aliases clients can send (`/v1/models`), of the current configuration.
    pub fn model_aliases(&self) -> Vec<String> {
        self.inner()
            .settings
            .scopes
            .iter()
            .flat_map(|s| s.aliases.iter().cloned())
            .collect()
    }

    /// The names of the configured scopes (`LLM`, …), in configuration order.
    pub fn scope_names(&self) -> Vec<String> {
        self.inner()
            .settings
            .scopes
            .iter()
            .map(|s| s.name.to_string())
            .collect()
    }

    /// Telemetry status (for `/healthz`).
    pub fn telemetry_status(&self) -> TelemetryStatus {
        self.shared.telemetry.status()
    }

    /// The metrics registry (`/metrics`); layers report cache lookups and waits here.
    pub fn metrics(&self) -> &crate::telemetry::Metrics {
        self.shared.telemetry.metrics()
    }

    /// Every metric in the Prometheus text format, gauges (breaker states, telemetry
    /// degradation) refreshed first.
    pub fn metrics_text(&self) -> String {
        health::metrics_text(&self.inner())
    }

    /// A JSON snapshot for `/healthz`: scopes, sources, plugins, telemetry, cache.
    pub fn health(&self) -> serde_json::Value {
        health::health(&self.inner())
    }

    /// Wait until every telemetry row of finished calls is written (call before exiting),
    /// and — when traces are on — until their spans are exported, for at most
    /// [`TRACE_FLUSH_WAIT`](crate::telemetry::otel::TRACE_FLUSH_WAIT).
    pub async fn flush_telemetry(&self) {
        self.shared.telemetry.flush().await;
        self.flush_traces(crate::telemetry::otel::TRACE_FLUSH_WAIT)
            .await;
    }

    /// Whether calls are traced (`OTEL_EXPORTER_OTLP_ENDPOINT` set; docs/tracing.md).
    pub fn traces_enabled(&self) -> bool {
        self.shared.current.load().otel.is_some()
    }

    /// Export the spans of finished calls, waiting at most `max_wait` (a collector that is
    /// down never holds the caller longer); whether everything was sent in time. `true` at
    /// once when traces are off.
    pub async fn flush_traces(&self, max_wait: std::time::Duration) -> bool {
        match self.inner().otel.clone() {
            Some(otel) => otel.flush(max_wait).await,
            None => true,
        }
    }

    /// Run one call to its end and return the whole answer.
    pub async fn chat(&self, req: ChatRequest) -> Result<ChatResponse, GatewayError> {
        req.validate()?;
        let mut sink = Sink::Collect;
        // Polled with its own waker (`own_wakes.rs`): the upstream connection hands the
        // answer's bytes to the body reader within the call, a wake that would otherwise
        // reschedule the task (and its connection's dispatcher) for one more poll.
        let mut wakes = OwnWakes::default();
        let mut call = std::pin::pin!(stack::run_call(self.inner(), req, &mut sink));
        std::future::poll_fn(|cx| wakes.poll(cx, |cx| call.as_mut().poll(cx))).await
    }

    /// Run one call as a stream of events: `Start` when the first token is ready (failover
    /// is free until then), then deltas, then `End` with the whole answer. A failure before
    /// `Start` is the stream's only item; a failure after it is its last item, and the answer
    /// must then be treated as incomplete. Dropping the stream cancels the call.
    ///
    /// The call runs inside the stream, as it is polled, in the caller's task: no task is
    /// spawned, so handing a burst of deltas to the caller is not a wake-up of another
    /// thread. Like any Rust stream, nothing happens until it is polled.
    pub fn chat_stream(
        &self,
        req: ChatRequest,
    ) -> impl Stream<Item = CallEvent> + Send + 'static + use<> {
        let (tx, rx) = event_channel(CALL_EVENT_BATCHES);
        let inner = self.inner();
        let call = async move {
            if let Err(e) = req.validate() {
                let _ = tx.send(CallEvent::Failed(e)).await;
                return;
            }
            let mut sink = Sink::Channel(tx.clone());
            if let Err(e) = stack::run_call(inner, req, &mut sink).await {
                let _ = tx.send(CallEvent::Failed(e)).await;
            }
        };
        CallStream {
            rx,
            call: Some(Box::pin(call)),
            wakes: OwnWakes::default(),
        }
    }

    /// Embed `req.input` under the scope's governance: cached inputs are not sent again, the
    /// rest go upstream in batches of at most each source's `MAX_BATCH`; vectors come back in
    /// input order.
    ///
    /// Errors: 400 `invalid_request_error` (empty input, an empty text or token array,
    /// `dimensions` 0, token-id arrays in a scope where no source takes them — naming `input`),
    /// 404 `model_not_found`, 422 `result_invalid` (a batch with the wrong number of vectors
    /// or dimension — the breaker records a success: the service is up), 503
    /// `scope_unavailable`, 504 `deadline_exceeded`, 502 `plugin_fault`.
    pub async fn embed(&self, req: EmbeddingRequest) -> Result<EmbeddingResponse, GatewayError> {
        embed::run_embed(self.inner(), req).await
    }

    /// Recognise the text of `req.image` (MonkeyOCR `POST /ocr/text`) on the scope's
    /// OCR-capable sources, with failover.
    ///
    /// Errors: 400 `invalid_request_error` (empty or oversized image, bad file name),
    /// 404 `model_not_found`, 422 `result_invalid` (the service could not read the image —
    /// the breaker records a success), 503 `scope_unavailable` (no OCR-capable source, or
    /// every attempt failed), 504 `deadline_exceeded`, 502 `plugin_fault`.
    pub async fn recognize_text(&self, req: OcrRequest) -> Result<OcrTextResult, GatewayError> {
        ocr::recognize_text(self.inner(), req).await
    }

    /// Parse the layout of `req.image` (MonkeyOCR `POST /parse` → archive → `*_middle.json`):
    /// elements with boxes in page coordinates and the page sizes. Boxes that are
    /// non-finite, reversed or of zero area are dropped and counted in `dropped_boxes`.
    ///
    /// Errors: as [`recognize_text`](Self::recognize_text); 422 `result_invalid` also for an
    /// archive that is not a ZIP, has no `*_middle.json`, holds unparseable JSON or is larger
    /// than 256 MiB (64 MiB decompressed).
    pub async fn parse_layout(&self, req: OcrRequest) -> Result<OcrLayoutResult, GatewayError> {
        ocr::parse_layout(self.inner(), req).await
    }

    /// Probe the OCR services: `{scope: {source: healthy}}` for every OCR-capable source
    /// whose provider has a health probe (2xx within 2 s = healthy). Never fails; sends the
    /// probes on every call (the proxy's `/healthz` caches them for 5 s).
    pub async fn check_ocr_health(&self) -> OcrHealth {
        ocr::probe_all(&self.inner()).await
    }
}

/// The stream returned by `chat_stream`: the call's future and its event channel. Polling
/// hands out the events already sent; when there are none it drives the call, which sends
/// more (or ends). Dropping the stream drops the call (its guards settle and its terminal
/// row is still written).
///
/// The call is polled with its own waker (`own_wakes.rs`), and that waker is the one the
/// channel holds: every sender is in the call today, so a send happens during a turn and is
/// taken in that turn, with no wake of the task; a sender that lived elsewhere would still
/// wake it.
struct CallStream {
    rx: EventRx,
    /// The call, until it has ended.
    call: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
    wakes: OwnWakes,
}

impl Stream for CallStream {
    type Item = CallEvent;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<CallEvent>> {
        use std::task::Poll;
        // `try_recv` does not spend the task's cooperative budget: an ended call's last event
        // (its failure or its end) is handed out even when the call's reads spent it.
        if let Some(ev) = self.rx.try_recv() {
            return Poll::Ready(Some(ev));
        }
        let this = &mut *self;
        let Some(call) = this.call.as_mut() else {
            // The call ended: its senders are gone and what was queued has been taken.
            return Poll::Ready(None);
        };
        let rx = &mut this.rx;
        let out = this.wakes.poll(cx, |cx| {
            if call.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            // The call waits (upstream, back-off, room in a full channel): hand out what it
            // sent during this turn, or wait for a send with the call's waker.
            match rx.poll_recv(cx) {
                Poll::Ready(Some(ev)) => Poll::Ready(Some(ev)),
                // Every sender gone while the call runs cannot be; the call's wake ends it.
                Poll::Ready(None) | Poll::Pending => Poll::Pending,
            }
        });
        match out {
            Poll::Ready(None) => {
                // Its senders are gone: what it sent comes out, then the end.
                this.call = None;
                Poll::Ready(this.rx.try_recv())
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::Poll;

    use futures_util::Stream;

    use super::CallStream;
    use crate::error::GatewayError;
    use crate::pipeline::own_wakes::OwnWakes;
    use crate::pipeline::sink::{CallEvent, event_channel};

    /// Spend the task's cooperative budget until tokio refuses more.
    fn spend_budget(cx: &mut std::task::Context<'_>) {
        while let Poll::Ready(r) = tokio::task::coop::poll_proceed(cx) {
            r.made_progress();
        }
    }

    /// A call whose reads spent the task's budget and which then ended: its last event is
    /// still handed out (it was once read as "no answer", a 500 to the client).
    #[tokio::test]
    async fn a_call_that_ends_on_a_spent_budget_still_hands_out_its_last_event() {
        let (tx, rx) = event_channel(4);
        let call = async move {
            let _ = tx
                .send(CallEvent::Failed(GatewayError::Internal(
                    "upstream timed out".into(),
                )))
                .await;
            std::future::poll_fn(|cx| {
                spend_budget(cx);
                Poll::Ready(())
            })
            .await;
        };
        let mut stream = CallStream {
            rx,
            call: Some(Box::pin(call)),
            wakes: OwnWakes::default(),
        };
        let first =
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut stream).poll_next(cx))).await;
        match first {
            Poll::Ready(Some(CallEvent::Failed(GatewayError::Internal(m)))) => {
                assert_eq!(m, "upstream timed out");
            }
            other => panic!("expected the call's failure, got {other:?}"),
        }
        let end = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut stream).poll_next(cx))).await;
        assert!(matches!(end, Poll::Ready(None)), "{end:?}");
    }

    /// The events a call sends while the stream polls it come out of that poll, and a
    /// hand-over within the call (here a channel between two halves of the call, in the
    /// proxy the upstream driver feeding its body reader) does not wake the task again (both
    /// used to: one more poll of the whole connection per upstream read); a wake from outside
    /// the call (here a channel fed by the test, in the proxy the upstream socket) still
    /// reaches the task.
    #[test]
    fn the_calls_own_hand_overs_do_not_wake_its_task() {
        use std::sync::atomic::Ordering;
        let (count, waker) = crate::pipeline::own_wakes::tests::task();
        let mut cx = std::task::Context::from_waker(&waker);
        let (tx, rx) = event_channel(4);
        let (outside_tx, mut outside_rx) = tokio::sync::mpsc::unbounded_channel::<&str>();
        let (inner_tx, mut inner_rx) = tokio::sync::mpsc::unbounded_channel::<&str>();
        let call = async move {
            let reader = async {
                while let Some(m) = inner_rx.recv().await {
                    let _ = tx
                        .send(CallEvent::Failed(GatewayError::Internal(m.into())))
                        .await;
                }
            };
            let driver = async {
                while let Some(m) = outside_rx.recv().await {
                    let _ = inner_tx.send(m);
                }
                drop(inner_tx);
            };
            tokio::join!(reader, driver);
        };
        let mut stream = CallStream {
            rx,
            call: Some(Box::pin(call)),
            wakes: OwnWakes::default(),
        };
        let mut next = || Pin::new(&mut stream).poll_next(&mut cx);
        let is = |p: Poll<Option<CallEvent>>, want: &str| matches!(p, Poll::Ready(Some(CallEvent::Failed(GatewayError::Internal(m)))) if m == want);
        assert!(next().is_pending());
        for (i, m) in ["first", "second"].into_iter().enumerate() {
            outside_tx.send(m).unwrap();
            assert_eq!(
                count.0.load(Ordering::SeqCst),
                i + 1,
                "an outside wake reaches the task"
            );
            assert!(is(next(), m));
            assert!(next().is_pending());
            assert_eq!(
                count.0.load(Ordering::SeqCst),
                i + 1,
                "no wake for the call's own"
            );
        }
        drop(outside_tx);
        assert!(matches!(next(), Poll::Ready(None)));
    }
}
