//! Prometheus metrics (`GET /metrics`, text format 0.0.4) with an explicit registry per
//! `Gateway` (no process-global recorder, so embedded gateways and tests stay separate).
//! Call and attempt metrics are derived from the telemetry rows in one place
//! ([`Metrics::observe_row`]); the cache, the breaker and admission report through the small
//! methods below.
//!
//! | metric | labels |
//! | --- | --- |
//! | `pgw_requests_total` | scope, source, outcome (`success`/`failure`/`cache_hit`), error_class |
//! | `pgw_attempts_total` | scope, source, outcome (`success`/`failure`), error_class |
//! | `pgw_request_duration_seconds` (histogram) | scope, outcome |
//! | `pgw_attempt_duration_seconds`, `pgw_ttft_seconds`, `pgw_max_inter_token_seconds` (histograms) | scope, source |
//! | `pgw_tokens_total` | scope, source, kind (`prompt`/`completion`/`cached_prompt`/`cache_write`/`reasoning`) |
//! | `pgw_cost_total` (pricing-file currency) | scope, source |
//! | `pgw_breaker_state` (gauge: 0 closed, 1 half-open, 2 open) | scope, source |
//! | `pgw_admission_waits_total`, `pgw_admission_wait_seconds_total` | scope, reason |
//! | `pgw_cache_hits_total`, `pgw_cache_misses_total` | scope |
//! | `pgw_ocr_boxes_dropped_total` (layout boxes the numeric defence dropped) | scope, source |
//! | `pgw_telemetry_dropped_rows_total`, `pgw_telemetry_written_rows_total` | — |
//! | `pgw_telemetry_degraded` (gauge: 1 degraded) | — |
//! | `pgw_otel_exported_spans_total`, `pgw_otel_export_failures_total`, `pgw_otel_dropped_spans_total` (docs/tracing.md#export) | — |

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::row::{CallRow, RowKind};
use crate::config::ConfigKeyed;

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    scope: String,
    source: String,
    outcome: String,
    error_class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScopeOutcome {
    scope: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    scope: String,
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    scope: String,
    source: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    scope: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScopeLabels {
    scope: String,
}

type Seconds = Family<SourceLabels, Histogram, fn() -> Histogram>;

/// `pgw_tokens_total`'s `kind` label, in the order of [`SourceSeries::tokens`].
const TOKEN_KINDS: [&str; 5] = [
    "prompt",
    "completion",
    "cached_prompt",
    "cache_write",
    "reasoning",
];

/// One source's series on a call's common path, each the family's own metric (a handle to
/// the same atomic or histogram), taken from the family the first time a row needs it, so a
/// series appears in `/metrics` exactly when it did without this.
#[derive(Default)]
struct SourceSeries {
    attempt_success: OnceLock<Counter>,
    attempt_duration: OnceLock<Histogram>,
    ttft: OnceLock<Histogram>,
    max_inter_token: OnceLock<Histogram>,
    /// Per [`TOKEN_KINDS`].
    tokens: [OnceLock<Counter>; 5],
    cost: OnceLock<FloatCounter>,
    request_success: OnceLock<Counter>,
    request_success_duration: OnceLock<Histogram>,
}

/// Scope → source → series, looked up for every row.
type SeriesMap = ConfigKeyed<String, ConfigKeyed<String, Arc<SourceSeries>>>;

type FloatCounter = Counter<f64, AtomicU64>;

fn latency_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    ])
}

fn gap_histogram() -> Histogram {
    Histogram::new([
        0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ])
}

/// The metrics of one gateway.
pub struct Metrics {
    registry: Registry,
    requests: Family<OutcomeLabels, Counter>,
    attempts: Family<OutcomeLabels, Counter>,
    request_duration: Family<ScopeOutcome, Histogram, fn() -> Histogram>,
    attempt_duration: Seconds,
    ttft: Seconds,
    max_inter_token: Seconds,
    tokens: Family<TokenLabels, Counter>,
    cost: Family<SourceLabels, FloatCounter>,
    breaker_state: Family<SourceLabels, Gauge>,
    admission_waits: Family<ReasonLabels, Counter>,
    admission_wait_seconds: Family<ReasonLabels, FloatCounter>,
    cache_hits: Family<ScopeLabels, Counter>,
    cache_misses: Family<ScopeLabels, Counter>,
    ocr_boxes_dropped: Family<SourceLabels, Counter>,
    telemetry_dropped: Counter,
    telemetry_written: Counter,
    telemetry_degraded: Gauge,
    /// The OpenTelemetry exporter's counters (`otel/processor.rs` increments them).
    otel: super::otel::OtelCounters,
    /// The dashboard's running totals (`live.rs`), fed from the same rows.
    live: Arc<super::live::LiveTotals>,
    /// Handles of the series rows of each called source update (see [`Self::observe_row`]).
    series: ArcSwap<SeriesMap>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered (and no samples yet).
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("pgw");
        let requests = Family::<OutcomeLabels, Counter>::default();
        let attempts = Family::<OutcomeLabels, Counter>::default();
        let request_duration: Family<ScopeOutcome, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        let attempt_duration: Seconds = Family::new_with_constructor(latency_histogram);
        let ttft: Seconds = Family::new_with_constructor(latency_histogram);
        let max_inter_token: Seconds = Family::new_with_constructor(gap_histogram);
        let tokens = Family::<TokenLabels, Counter>::default();
        let cost = Family::<SourceLabels, FloatCounter>::default();
        let breaker_state = Family::<SourceLabels, Gauge>::default();
        let admission_waits = Family::<ReasonLabels, Counter>::default();
        let admission_wait_seconds = Family::<ReasonLabels, FloatCounter>::default();
        let cache_hits = Family::<ScopeLabels, Counter>::default();
        let cache_misses = Family::<ScopeLabels, Counter>::default();
        let ocr_boxes_dropped = Family::<SourceLabels, Counter>::default();
        let telemetry_dropped = Counter::default();
        let telemetry_written = Counter::default();
        let telemetry_degraded = Gauge::default();
        registry.register(
            "requests",
            "Logical calls by outcome and error class",
            requests.clone(),
        );
        registry.register(
            "attempts",
            "Upstream attempts by outcome and error class",
            attempts.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Wall time of logical calls",
            request_duration.clone(),
        );
        registry.register(
            "attempt_duration_seconds",
            "Wall time of upstream attempts",
            attempt_duration.clone(),
        );
        registry.register(
            "ttft_seconds",
            "Time from an attempt's request to its first token",
            ttft.clone(),
        );
        registry.register(
            "max_inter_token_seconds",
            "Longest gap between two tokens of an attempt",
            max_inter_token.clone(),
        );
        registry.register(
            "tokens",
            "Tokens reported by the upstream, per kind (reasoning is part of completion)",
            tokens.clone(),
        );
        registry.register(
            "cost",
            "Cost of answered attempts in the pricing file's currency",
            cost.clone(),
        );
        registry.register(
            "breaker_state",
            "Circuit breaker state per source: 0 closed, 1 half-open, 2 open",
            breaker_state.clone(),
        );
        registry.register(
            "admission_waits",
            "Times a call waited at admission (quota full, circuit open)",
            admission_waits.clone(),
        );
        registry.register(
            "admission_wait_seconds",
            "Seconds calls spent waiting at admission",
            admission_wait_seconds.clone(),
        );
        registry.register(
            "cache_hits",
            "Calls answered from the response cache",
            cache_hits.clone(),
        );
        registry.register(
            "cache_misses",
            "Response cache lookups that missed",
            cache_misses.clone(),
        );
        registry.register(
            "ocr_boxes_dropped",
            "OCR layout elements dropped for a non-finite, reversed or zero-area box",
            ocr_boxes_dropped.clone(),
        );
        registry.register(
            "telemetry_dropped_rows",
            "Telemetry rows dropped (queue full, backend down, row refused)",
            telemetry_dropped.clone(),
        );
        registry.register(
            "telemetry_written_rows",
            "Telemetry rows written",
            telemetry_written.clone(),
        );
        let otel = super::otel::OtelCounters::default();
        registry.register(
            "otel_exported_spans",
            "Spans the OpenTelemetry collector accepted",
            otel.exported.clone(),
        );
        registry.register(
            "otel_export_failures",
            "OpenTelemetry export requests that failed (collector unreachable, refusing or too slow)",
            otel.failures.clone(),
        );
        registry.register(
            "otel_dropped_spans",
            "Spans lost: the export queue was full, or their export failed",
            otel.dropped.clone(),
        );
        registry.register(
            "telemetry_degraded",
            "1 while the telemetry backend is degraded or disabled",
            telemetry_degraded.clone(),
        );
        Self {
            registry,
            requests,
            attempts,
            request_duration,
            attempt_duration,
            ttft,
            max_inter_token,
            tokens,
            cost,
            breaker_state,
            admission_waits,
            admission_wait_seconds,
            cache_hits,
            cache_misses,
            ocr_boxes_dropped,
            telemetry_dropped,
            telemetry_written,
            telemetry_degraded,
            otel,
            live: Default::default(),
            series: ArcSwap::default(),
        }
    }

    /// Count a row: requests (terminal and cache-hit rows) or attempts, durations, tokens
    /// and cost (attempt rows).
    ///
    /// Attempt and successful terminal rows go through the source's [`SourceSeries`]: each
    /// series is looked up in its family (labels built and hashed, a lock taken) once, not
    /// once per row. Failed terminal rows (their `error_class` label varies with the error)
    /// and cache hits (their source is the cached answer's) use the families directly.
    pub fn observe_row(&self, row: &CallRow) {
        self.live.observe(row);
        let source = row.source_name.as_deref().unwrap_or_default();
        let labels = || SourceLabels {
            scope: row.scope.clone(),
            source: source.to_owned(),
        };
        let outcome_labels = |outcome: &str| OutcomeLabels {
            scope: row.scope.clone(),
            source: source.to_owned(),
            outcome: outcome.into(),
            error_class: row.error_type.clone().unwrap_or_default(),
        };
        let seconds = |ms: f64| ms / 1000.0;
        match row.kind {
            RowKind::Attempt => {
                let series = self.series(&row.scope, source);
                if row.error_type.is_none() {
                    series
                        .attempt_success
                        .get_or_init(|| {
                            self.attempts
                                .get_or_create(&outcome_labels("success"))
                                .clone()
                        })
                        .inc();
                } else {
                    self.attempts
                        .get_or_create(&outcome_labels("failure"))
                        .inc();
                }
                if let Some(ms) = row.latency_ms {
                    series
                        .attempt_duration
                        .get_or_init(|| self.attempt_duration.get_or_create(&labels()).clone())
                        .observe(seconds(ms as f64));
                }
                if let Some(ms) = row.ttft_ms {
                    series
                        .ttft
                        .get_or_init(|| self.ttft.get_or_create(&labels()).clone())
                        .observe(seconds(ms));
                }
                if let Some(ms) = row.max_inter_token_ms {
                    series
                        .max_inter_token
                        .get_or_init(|| self.max_inter_token.get_or_create(&labels()).clone())
                        .observe(seconds(ms));
                }
                let counts = [
                    row.prompt_tokens,
                    row.completion_tokens,
                    row.cached_prompt_tokens,
                    row.cache_write_tokens,
                    row.reasoning_tokens,
                ];
                for ((kind, n), cell) in TOKEN_KINDS.iter().zip(counts).zip(&series.tokens) {
                    if let Some(n) = n {
                        cell.get_or_init(|| {
                            self.tokens
                                .get_or_create(&TokenLabels {
                                    scope: row.scope.clone(),
                                    source: source.to_owned(),
                                    kind: (*kind).into(),
                                })
                                .clone()
                        })
                        .inc_by(n);
                    }
                }
                if let Some(c) = row.cost {
                    series
                        .cost
                        .get_or_init(|| self.cost.get_or_create(&labels()).clone())
                        .inc_by(c);
                }
            }
            RowKind::TerminalSuccess if row.error_type.is_none() => {
                let series = self.series(&row.scope, source);
                series
                    .request_success
                    .get_or_init(|| {
                        self.requests
                            .get_or_create(&outcome_labels("success"))
                            .clone()
                    })
                    .inc();
                if let Some(ms) = row.total_latency_ms {
                    series
                        .request_success_duration
                        .get_or_init(|| {
                            self.request_duration
                                .get_or_create(&ScopeOutcome {
                                    scope: row.scope.clone(),
                                    outcome: "success".into(),
                                })
                                .clone()
                        })
                        .observe(seconds(ms as f64));
                }
            }
            RowKind::TerminalSuccess | RowKind::TerminalFailure | RowKind::CacheHit => {
                let outcome = match row.kind {
                    RowKind::CacheHit => "cache_hit",
                    _ if row.error_type.is_none() => "success",
                    _ => "failure",
                };
                self.requests.get_or_create(&outcome_labels(outcome)).inc();
                if let Some(ms) = row.total_latency_ms {
                    self.request_duration
                        .get_or_create(&ScopeOutcome {
                            scope: row.scope.clone(),
                            outcome: outcome.into(),
                        })
                        .observe(seconds(ms as f64));
                }
            }
        }
    }

    /// The series of `source` in `scope`, added (empty) on its first row. A lock-free read;
    /// adding copies the map, once per source.
    fn series(&self, scope: &str, source: &str) -> Arc<SourceSeries> {
        if let Some(s) = self.series.load().get(scope).and_then(|m| m.get(source)) {
            return Arc::clone(s);
        }
        let mut added = None;
        self.series.rcu(|all| {
            let mut all = SeriesMap::clone(all);
            let s = all
                .entry(scope.to_owned())
                .or_default()
                .entry(source.to_owned())
                .or_default();
            added = Some(Arc::clone(s));
            all
        });
        added.unwrap_or_default()
    }

    /// The running totals the dashboard's live series samples.
    pub fn live(&self) -> Arc<super::live::LiveTotals> {
        self.live.clone()
    }

    /// A response-cache lookup of `scope` hit or missed (for the cache layer).
    pub fn cache_lookup(&self, scope: &str, hit: bool) {
        let l = ScopeLabels {
            scope: scope.to_string(),
        };
        if hit {
            self.cache_hits.get_or_create(&l).inc();
        } else {
            self.cache_misses.get_or_create(&l).inc();
        }
    }

    /// `n` OCR layout elements from `source` of `scope` were dropped by the numeric defence.
    pub fn ocr_boxes_dropped(&self, scope: &str, source: &str, n: u64) {
        self.ocr_boxes_dropped
            .get_or_create(&SourceLabels {
                scope: scope.to_string(),
                source: source.to_string(),
            })
            .inc_by(n);
    }

    /// A call of `scope` waited `waited` at admission for `reason` (`quota_exhausted`,
    /// `circuit_open`).
    pub fn admission_wait(&self, scope: &str, reason: &str, waited: Duration) {
        let l = ReasonLabels {
            scope: scope.to_string(),
            reason: reason.to_string(),
        };
        self.admission_waits.get_or_create(&l).inc();
        self.admission_wait_seconds
            .get_or_create(&l)
            .inc_by(waited.as_secs_f64());
    }

    /// The breaker state of a source: 0 closed, 1 half-open, 2 open.
    pub fn set_breaker_state(&self, scope: &str, source: &str, state: i64) {
        self.breaker_state
            .get_or_create(&SourceLabels {
                scope: scope.to_string(),
                source: source.to_string(),
            })
            .set(state);
    }

    /// Whether telemetry is degraded (set before encoding).
    pub fn set_telemetry_degraded(&self, degraded: bool) {
        self.telemetry_degraded.set(i64::from(degraded));
    }

    /// The counter of dropped telemetry rows (incremented by the recorder).
    pub(crate) fn telemetry_dropped(&self) -> Counter {
        self.telemetry_dropped.clone()
    }

    /// The counter of written telemetry rows (incremented by the recorder).
    pub(crate) fn telemetry_written(&self) -> Counter {
        self.telemetry_written.clone()
    }

    /// The OpenTelemetry exporter's counters (handed to the exporter when traces are on).
    pub fn otel_counters(&self) -> super::otel::OtelCounters {
        self.otel.clone()
    }

    /// Everything in the Prometheus text format (0.0.4).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            tracing::error!(error = %e, "cannot encode metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_counters() {
        let m = Metrics::new();
        let mut a = CallRow::new(RowKind::Attempt, "a", "l", "LLM", 0);
        a.source_name = Some("openai-1".into());
        a.error_type = Some("transient".into());
        a.latency_ms = Some(20);
        m.observe_row(&a);
        let mut b = CallRow::new(RowKind::Attempt, "b", "l", "LLM", 0);
        b.source_name = Some("openai-2".into());
        b.prompt_tokens = Some(5);
        b.completion_tokens = Some(7);
        b.cost = Some(0.25);
        m.observe_row(&b);
        let mut t = CallRow::new(RowKind::TerminalSuccess, "l", "l", "LLM", 0);
        t.source_name = Some("openai-2".into());
        t.total_latency_ms = Some(30);
        m.observe_row(&t);
        m.cache_lookup("LLM", false);
        let text = m.encode();
        for line in [
            r#"pgw_attempts_total{scope="LLM",source="openai-1",outcome="failure",error_class="transient"} 1"#,
            r#"pgw_attempts_total{scope="LLM",source="openai-2",outcome="success",error_class=""} 1"#,
            r#"pgw_requests_total{scope="LLM",source="openai-2",outcome="success",error_class=""} 1"#,
            r#"pgw_tokens_total{scope="LLM",source="openai-2",kind="completion"} 7"#,
            r#"pgw_cost_total{scope="LLM",source="openai-2"} 0.25"#,
            r#"pgw_cache_misses_total{scope="LLM"} 1"#,
            r#"pgw_request_duration_seconds_count{scope="LLM",outcome="success"} 1"#,
            "pgw_telemetry_dropped_rows_total 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing `{line}` in\n{text}"
            );
        }
    }

    #[test]
    fn a_sources_series_are_the_families_and_appear_only_once_observed() {
        let m = Metrics::new();
        let attempt = |scope: &str, source: &str, ttft: Option<f64>| {
            let mut a = CallRow::new(RowKind::Attempt, "a", "l", scope, 0);
            a.source_name = Some(source.into());
            a.latency_ms = Some(20);
            a.ttft_ms = ttft;
            a.prompt_tokens = Some(5);
            a.completion_tokens = Some(7);
            a
        };
        let terminal = |scope: &str, source: &str| {
            let mut t = CallRow::new(RowKind::TerminalSuccess, "l", "l", scope, 0);
            t.source_name = Some(source.into());
            t.total_latency_ms = Some(30);
            t
        };
        for _ in 0..3 {
            m.observe_row(&attempt("LLM", "openai-1", None));
            m.observe_row(&terminal("LLM", "openai-1"));
        }
        // The same source name in another scope is another series.
        m.observe_row(&attempt("VLM", "openai-1", Some(40.0)));
        m.observe_row(&terminal("VLM", "openai-1"));
        let mut failed = attempt("LLM", "openai-1", None);
        failed.error_type = Some("transient".into());
        failed.prompt_tokens = None;
        failed.completion_tokens = None;
        m.observe_row(&failed);
        // A terminal row of the success kind that carries an error counts by its error.
        let mut odd = terminal("LLM", "openai-1");
        odd.error_type = Some("result_invalid".into());
        m.observe_row(&odd);
        let text = m.encode();
        let has = |line: &str| text.lines().any(|l| l == line);
        for line in [
            r#"pgw_attempts_total{scope="LLM",source="openai-1",outcome="success",error_class=""} 3"#,
            r#"pgw_attempts_total{scope="LLM",source="openai-1",outcome="failure",error_class="transient"} 1"#,
            r#"pgw_attempts_total{scope="VLM",source="openai-1",outcome="success",error_class=""} 1"#,
            r#"pgw_requests_total{scope="LLM",source="openai-1",outcome="success",error_class=""} 3"#,
            r#"pgw_requests_total{scope="VLM",source="openai-1",outcome="success",error_class=""} 1"#,
            r#"pgw_tokens_total{scope="LLM",source="openai-1",kind="prompt"} 15"#,
            r#"pgw_tokens_total{scope="LLM",source="openai-1",kind="completion"} 21"#,
            r#"pgw_tokens_total{scope="VLM",source="openai-1",kind="completion"} 7"#,
            r#"pgw_attempt_duration_seconds_count{scope="LLM",source="openai-1"} 4"#,
            r#"pgw_request_duration_seconds_count{scope="LLM",outcome="success"} 3"#,
            r#"pgw_request_duration_seconds_count{scope="VLM",outcome="success"} 1"#,
            r#"pgw_ttft_seconds_count{scope="VLM",source="openai-1"} 1"#,
            r#"pgw_requests_total{scope="LLM",source="openai-1",outcome="failure",error_class="result_invalid"} 1"#,
            r#"pgw_request_duration_seconds_count{scope="LLM",outcome="failure"} 1"#,
        ] {
            assert!(has(line), "missing `{line}` in\n{text}");
        }
        // Series no row fed are not written (as before the handles were kept).
        for absent in [
            r#"pgw_ttft_seconds_count{scope="LLM",source="openai-1"}"#,
            r#"kind="reasoning""#,
            "pgw_cost_total{",
        ] {
            assert!(!text.contains(absent), "unexpected `{absent}` in\n{text}");
        }
    }
}
