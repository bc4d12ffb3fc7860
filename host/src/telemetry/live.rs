//! The dashboard's live series (docs/dashboard.md#overview): process-wide running totals of
//! calls, errors by class, latency and TTFT distributions, tokens and spend, fed by
//! [`super::Metrics::observe_row`] with relaxed atomic adds (no lock, no allocation on the
//! call path), and a ring of snapshots taken every [`SAMPLE_EVERY`] for the last hour, from
//! which the overview's rates and percentiles are the differences of consecutive snapshots
//! — the way Prometheus computes `rate()` and `histogram_quantile()` over counters.
//!
//! Percentiles come from fixed buckets whose bounds grow by 25 % (0.25 ms to ~10 min), so a
//! reported p50 or p99 is within one bucket (±12 %) of the exact value, interpolated
//! geometrically inside the bucket.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Serialize;

use super::row::{CallRow, RowKind};

/// How often the ring takes a snapshot.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Snapshots kept: one hour at [`SAMPLE_EVERY`], plus the one the first interval starts at.
const RING: usize = 721;

/// The `error_type` values of terminal rows, in the overview's order; anything else counts
/// as `other`.
pub const ERROR_CLASSES: &[&str] = &[
    "scope_unavailable",
    "deadline_exceeded",
    "request_rejected",
    "result_invalid",
    "plugin_fault",
    "stream_interrupted",
    "invalid_request",
    "model_not_found",
    "model_not_allowed",
    "key_rate_limited",
    "budget_exceeded",
    "cancelled",
    "internal",
    "other",
];

/// Bucket count of a distribution: `bound(i) = 0.25 ms × 1.25^i` for `i < BUCKETS - 1`
/// (the last of those ≈ 10 min), then one bucket for everything above.
const BUCKETS: usize = 80;
const FIRST_BOUND_MS: f64 = 0.25;
const GROWTH: f64 = 1.25;

fn bound_ms(i: usize) -> f64 {
    FIRST_BOUND_MS * GROWTH.powi(i as i32)
}

/// The bucket of a value in milliseconds: the first whose bound is ≥ it.
fn bucket_of(ms: f64) -> usize {
    if ms.is_nan() || ms == f64::INFINITY {
        return BUCKETS - 1;
    }
    if ms <= FIRST_BOUND_MS {
        return 0;
    }
    let i = ((ms / FIRST_BOUND_MS).ln() / GROWTH.ln()).ceil() as usize;
    // Floating point may land one bucket low at an exact bound.
    let i = if i < BUCKETS - 1 && bound_ms(i) < ms {
        i + 1
    } else {
        i
    };
    i.min(BUCKETS - 1)
}

fn class_of(error_type: &str) -> usize {
    ERROR_CLASSES
        .iter()
        .position(|c| *c == error_type)
        .unwrap_or(ERROR_CLASSES.len() - 1)
}

/// Running totals since the process started (the counters the ring snapshots).
pub struct LiveTotals {
    requests: AtomicU64,
    failures: AtomicU64,
    cache_hits: AtomicU64,
    attempts: AtomicU64,
    failed_attempts: AtomicU64,
    errors: [AtomicU64; ERROR_CLASSES.len()],
    latency: [AtomicU64; BUCKETS],
    ttft: [AtomicU64; BUCKETS],
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    /// Spend in billionths of the pricing file's currency unit.
    cost_nanos: AtomicU64,
}

impl Default for LiveTotals {
    fn default() -> Self {
        Self {
            requests: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
            attempts: AtomicU64::new(0),
            failed_attempts: AtomicU64::new(0),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
            latency: std::array::from_fn(|_| AtomicU64::new(0)),
            ttft: std::array::from_fn(|_| AtomicU64::new(0)),
            prompt_tokens: AtomicU64::new(0),
            completion_tokens: AtomicU64::new(0),
            cost_nanos: AtomicU64::new(0),
        }
    }
}

fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

impl LiveTotals {
    /// Count one row: a logical call (terminal and cache-hit rows) or an attempt.
    pub(crate) fn observe(&self, row: &CallRow) {
        match row.kind {
            RowKind::Attempt => {
                add(&self.attempts, 1);
                if row.error_type.is_some() {
                    add(&self.failed_attempts, 1);
                }
                if let Some(ms) = row.ttft_ms {
                    add(&self.ttft[bucket_of(ms)], 1);
                }
                add(&self.prompt_tokens, row.prompt_tokens.unwrap_or(0));
                add(&self.completion_tokens, row.completion_tokens.unwrap_or(0));
                if let Some(c) = row.cost.filter(|c| c.is_finite() && *c > 0.0) {
                    add(&self.cost_nanos, (c * 1e9).round() as u64);
                }
            }
            RowKind::TerminalSuccess | RowKind::TerminalFailure | RowKind::CacheHit => {
                add(&self.requests, 1);
                if row.kind == RowKind::CacheHit {
                    add(&self.cache_hits, 1);
                    // A cache hit is billed at the attempt's price when pricing applies.
                    if let Some(c) = row.cost.filter(|c| c.is_finite() && *c > 0.0) {
                        add(&self.cost_nanos, (c * 1e9).round() as u64);
                    }
                }
                if let Some(e) = row.error_type.as_deref() {
                    add(&self.failures, 1);
                    add(&self.errors[class_of(e)], 1);
                }
                if let Some(ms) = row.total_latency_ms {
                    add(&self.latency[bucket_of(ms as f64)], 1);
                }
            }
        }
    }

    fn snapshot(&self) -> Totals {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Totals {
            requests: load(&self.requests),
            failures: load(&self.failures),
            cache_hits: load(&self.cache_hits),
            attempts: load(&self.attempts),
            failed_attempts: load(&self.failed_attempts),
            errors: std::array::from_fn(|i| load(&self.errors[i])),
            latency: std::array::from_fn(|i| load(&self.latency[i])),
            ttft: std::array::from_fn(|i| load(&self.ttft[i])),
            prompt_tokens: load(&self.prompt_tokens),
            completion_tokens: load(&self.completion_tokens),
            cost_nanos: load(&self.cost_nanos),
        }
    }
}

/// A copy of the totals at one instant.
#[derive(Clone, Copy)]
struct Totals {
    requests: u64,
    failures: u64,
    cache_hits: u64,
    attempts: u64,
    failed_attempts: u64,
    errors: [u64; ERROR_CLASSES.len()],
    latency: [u64; BUCKETS],
    ttft: [u64; BUCKETS],
    prompt_tokens: u64,
    completion_tokens: u64,
    cost_nanos: u64,
}

/// The `q`-quantile (0..1) in ms of the bucket counts `d`, `None` when they are all zero.
fn quantile(d: &[u64; BUCKETS], q: f64) -> Option<f64> {
    let total: u64 = d.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut below = 0u64;
    for (i, &n) in d.iter().enumerate() {
        if n > 0 && (below + n) as f64 >= rank {
            let lo = if i == 0 { 0.0 } else { bound_ms(i - 1) };
            if i == BUCKETS - 1 {
                return Some(lo);
            }
            let hi = bound_ms(i);
            let frac = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
            // Geometric inside the bucket (its bounds are a ratio apart); linear in the first.
            return Some(if i == 0 {
                hi * frac
            } else {
                lo * (hi / lo).powf(frac)
            });
        }
        below += n;
    }
    None
}

/// One interval of the overview: rates over `[t_ms - seconds, t_ms)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverviewPoint {
    /// End of the interval, Unix ms.
    pub t_ms: i64,
    /// Length of the interval in seconds.
    pub seconds: f64,
    /// Logical calls per second (cache hits included).
    pub requests_per_s: f64,
    /// Failed calls / calls; `None` when there were no calls.
    pub error_rate: Option<f64>,
    /// Failed calls per class (only classes that occurred).
    pub errors: std::collections::BTreeMap<&'static str, u64>,
    /// Calls answered from the response cache.
    pub cache_hits: u64,
    /// Upstream attempts, and the failed ones.
    pub attempts: u64,
    pub failed_attempts: u64,
    /// Call latency percentiles in ms (`None` without calls).
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// Time to first token percentiles in ms over the attempts that had one.
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Spend in the pricing file's currency.
    pub cost: f64,
}

fn point(a: &Totals, b: &Totals, t_ms: i64, seconds: f64) -> OverviewPoint {
    let d = |x: u64, y: u64| y.saturating_sub(x);
    let latency: [u64; BUCKETS] = std::array::from_fn(|i| d(a.latency[i], b.latency[i]));
    let ttft: [u64; BUCKETS] = std::array::from_fn(|i| d(a.ttft[i], b.ttft[i]));
    let requests = d(a.requests, b.requests);
    let failures = d(a.failures, b.failures);
    let errors = ERROR_CLASSES
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let n = d(a.errors[i], b.errors[i]);
            (n > 0).then_some((*c, n))
        })
        .collect();
    OverviewPoint {
        t_ms,
        seconds,
        requests_per_s: if seconds > 0.0 {
            requests as f64 / seconds
        } else {
            0.0
        },
        error_rate: (requests > 0).then(|| failures as f64 / requests as f64),
        errors,
        cache_hits: d(a.cache_hits, b.cache_hits),
        attempts: d(a.attempts, b.attempts),
        failed_attempts: d(a.failed_attempts, b.failed_attempts),
        latency_p50_ms: quantile(&latency, 0.5),
        latency_p99_ms: quantile(&latency, 0.99),
        ttft_p50_ms: quantile(&ttft, 0.5),
        ttft_p99_ms: quantile(&ttft, 0.99),
        prompt_tokens: d(a.prompt_tokens, b.prompt_tokens),
        completion_tokens: d(a.completion_tokens, b.completion_tokens),
        cost: d(a.cost_nanos, b.cost_nanos) as f64 / 1e9,
    }
}

/// The overview: one point per sampled interval of the last hour, oldest first, and the
/// totals of the whole window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overview {
    /// Seconds between points.
    pub step_s: f64,
    pub points: Vec<OverviewPoint>,
    /// From the oldest snapshot to now (the last interval may be shorter than a step).
    pub window: OverviewPoint,
    /// Calls since the process started.
    pub requests_total: u64,
}

/// The ring of snapshots over one [`LiveTotals`].
pub struct LiveSeries {
    totals: Arc<LiveTotals>,
    ring: Mutex<VecDeque<(i64, Totals)>>,
}

impl LiveSeries {
    /// A ring with its first snapshot taken at `now_ms`.
    pub fn new(totals: Arc<LiveTotals>, now_ms: i64) -> Self {
        let first = totals.snapshot();
        let mut ring = VecDeque::with_capacity(RING);
        ring.push_back((now_ms, first));
        Self {
            totals,
            ring: Mutex::new(ring),
        }
    }

    /// Take a snapshot at `now_ms`, dropping the oldest beyond an hour.
    pub fn sample(&self, now_ms: i64) {
        let snap = self.totals.snapshot();
        if let Ok(mut ring) = self.ring.lock() {
            if ring.len() == RING {
                ring.pop_front();
            }
            ring.push_back((now_ms, snap));
        }
    }

    /// The overview at `now_ms`: the sampled intervals, plus one from the last snapshot to
    /// now when it is at least a second long.
    pub fn overview(&self, now_ms: i64) -> Overview {
        let now = self.totals.snapshot();
        let ring: Vec<(i64, Totals)> = match self.ring.lock() {
            Ok(r) => r.iter().copied().collect(),
            Err(_) => Vec::new(),
        };
        let secs = |a: i64, b: i64| (b - a).max(0) as f64 / 1000.0;
        let mut points: Vec<OverviewPoint> = ring
            .windows(2)
            .map(|w| point(&w[0].1, &w[1].1, w[1].0, secs(w[0].0, w[1].0)))
            .collect();
        let (first_t, first) = ring.first().copied().unwrap_or((now_ms, now));
        if let Some((last_t, last)) = ring.last().copied()
            && now_ms - last_t >= 1000
        {
            points.push(point(&last, &now, now_ms, secs(last_t, now_ms)));
        }
        Overview {
            step_s: SAMPLE_EVERY.as_secs_f64(),
            points,
            window: point(&first, &now, now_ms, secs(first_t, now_ms)),
            requests_total: now.requests,
        }
    }

    /// Sample every [`SAMPLE_EVERY`] until `series` is dropped; `now_ms` reads the clock.
    pub fn spawn_sampler(series: &Arc<LiveSeries>, now_ms: impl Fn() -> i64 + Send + 'static) {
        let weak: Weak<LiveSeries> = Arc::downgrade(series);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(series) = weak.upgrade() else { return };
                series.sample(now_ms());
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terminal(kind: RowKind, latency_ms: u64, error: Option<&str>) -> CallRow {
        let mut row = CallRow::new(kind, "c", "c", "LLM", 0);
        row.total_latency_ms = Some(latency_ms);
        row.error_type = error.map(str::to_string);
        row
    }

    #[test]
    fn buckets_hold_their_bounds() {
        assert_eq!(bucket_of(0.0), 0);
        assert_eq!(bucket_of(0.25), 0);
        assert_eq!(bucket_of(0.26), 1);
        for i in 1..BUCKETS - 1 {
            assert_eq!(bucket_of(bound_ms(i)), i, "bound {i}");
            assert_eq!(bucket_of(bound_ms(i) * 1.01), i + 1, "above bound {i}");
        }
        assert_eq!(bucket_of(1e12), BUCKETS - 1);
        assert_eq!(bucket_of(f64::INFINITY), BUCKETS - 1);
    }

    #[test]
    fn the_overview_reports_rates_classes_and_percentiles_per_interval() {
        let totals = Arc::new(LiveTotals::default());
        let series = LiveSeries::new(totals.clone(), 0);
        // First interval: 99 calls of 10 ms and one failed call of 1 s.
        for _ in 0..99 {
            totals.observe(&terminal(RowKind::TerminalSuccess, 10, None));
        }
        totals.observe(&terminal(
            RowKind::TerminalFailure,
            1000,
            Some("scope_unavailable"),
        ));
        let mut attempt = CallRow::new(RowKind::Attempt, "a", "c", "LLM", 0);
        attempt.ttft_ms = Some(40.0);
        attempt.prompt_tokens = Some(12);
        attempt.completion_tokens = Some(30);
        attempt.cost = Some(0.5);
        totals.observe(&attempt);
        series.sample(5_000);
        // Second interval: one cache hit, one unknown error class.
        totals.observe(&terminal(RowKind::CacheHit, 1, None));
        totals.observe(&terminal(RowKind::TerminalFailure, 3, Some("new_kind")));
        let o = series.overview(7_000);
        assert_eq!(o.points.len(), 2);
        let p = &o.points[0];
        assert_eq!((p.t_ms, p.seconds), (5_000, 5.0));
        assert_eq!(p.requests_per_s, 20.0);
        assert_eq!(p.error_rate, Some(0.01));
        assert_eq!(p.errors.get("scope_unavailable"), Some(&1));
        assert_eq!(
            (p.attempts, p.prompt_tokens, p.completion_tokens),
            (1, 12, 30)
        );
        assert_eq!(p.cost, 0.5);
        let p50 = p.latency_p50_ms.unwrap();
        assert!((10.0 / 1.25..=10.0 * 1.25).contains(&p50), "{p50}");
        let p99 = p.latency_p99_ms.unwrap();
        assert!((8.0..=12.5).contains(&p99), "99 of 100 are 10 ms: {p99}");
        let ttft = p.ttft_p50_ms.unwrap();
        assert!((32.0..=50.0).contains(&ttft), "{ttft}");
        let q = &o.points[1];
        assert_eq!((q.t_ms, q.seconds), (7_000, 2.0));
        assert_eq!(q.requests_per_s, 1.0);
        assert_eq!(q.cache_hits, 1);
        assert_eq!(q.errors.get("other"), Some(&1));
        assert_eq!(q.ttft_p50_ms, None);
        assert_eq!(o.window.requests_per_s, 102.0 / 7.0);
        assert_eq!(o.requests_total, 102);
    }

    #[test]
    fn the_ring_keeps_an_hour() {
        let series = LiveSeries::new(Arc::new(LiveTotals::default()), 0);
        for i in 1..=2000 {
            series.sample(i * 5_000);
        }
        let o = series.overview(2000 * 5_000);
        assert_eq!(o.points.len(), RING - 1);
        assert_eq!(o.points[0].t_ms, (2000 - 719) * 5_000);
    }
}
