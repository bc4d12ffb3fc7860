//! Whether telemetry is being written (docs/telemetry.md#status): degraded / fatal, why,
//! since when, rows dropped and written. Backend-neutral: the writer reports facts (a row
//! written, rows dropped, the backend failed, the backend recovered) and this is the one
//! place that logs them — one line when degradation starts, one when it ends, and throttled
//! reminders in between.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;

/// Repeat the degradation warning after this many more dropped rows…
const REMIND_EVERY_ROWS: u64 = 100;
/// …or after this long, whichever comes first.
const REMIND_EVERY: Duration = Duration::from_secs(300);

/// A snapshot of the recorder's health, shown in `/healthz` and by
/// `Gateway::telemetry_status`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TelemetryStatus {
    /// `sqlite`, `postgres` or `none`.
    pub backend: &'static str,
    /// The backend is failing (environment-level: unreachable, refusing connections, no
    /// permission, table missing and not creatable); rows are dropped until it recovers.
    pub degraded: bool,
    /// The backend can never work in this process (an unparseable DSN); rows are dropped.
    pub fatal: bool,
    /// Why it is degraded or fatal.
    pub reason: Option<String>,
    /// Seconds since degradation started.
    pub degraded_for_s: Option<f64>,
    /// Seconds until the next attempt to reconnect.
    pub retry_after_s: Option<f64>,
    /// Rows dropped so far (queue full, backend down, row rejected).
    pub dropped_rows: u64,
    /// Rows written so far.
    pub written_rows: u64,
    /// Columns of the table's definition that the existing table lacks (manual schema
    /// mode); rows are written without them.
    pub missing_columns: Vec<String>,
}

struct Degradation {
    fatal: bool,
    reason: String,
    since: Instant,
    retry_at: Option<Instant>,
    dropped_at_start: u64,
    last_reminder: Instant,
    dropped_at_reminder: u64,
}

/// Tracks the status; shared by the recorder handle and its writer task.
pub(crate) struct StatusTracker {
    backend: &'static str,
    written: AtomicU64,
    dropped: AtomicU64,
    dropped_counter: Counter,
    written_counter: Counter,
    degradation: Mutex<Option<Degradation>>,
    missing: Mutex<Vec<String>>,
}

impl StatusTracker {
    /// A healthy tracker; the counters are those of `/metrics`.
    pub(crate) fn new(
        backend: &'static str,
        dropped_counter: Counter,
        written_counter: Counter,
    ) -> Self {
        Self {
            backend,
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            dropped_counter,
            written_counter,
            degradation: Mutex::new(None),
            missing: Mutex::new(Vec::new()),
        }
    }

    /// `n` rows were written. The first success after a degradation ends it.
    pub(crate) fn written(&self, n: u64) {
        self.written.fetch_add(n, Ordering::Relaxed);
        self.written_counter.inc_by(n);
        if let Ok(mut d) = self.degradation.lock()
            && let Some(was) = d.take_if(|d| !d.fatal)
        {
            let dropped = self.dropped.load(Ordering::Relaxed) - was.dropped_at_start;
            tracing::info!(
                backend = self.backend,
                degraded_for_s = was.since.elapsed().as_secs_f64(),
                dropped_rows = dropped,
                "telemetry writes recovered"
            );
        }
    }

    /// `n` rows were dropped (`why` is logged only while degraded, throttled).
    pub(crate) fn dropped(&self, n: u64) {
        let total = self.dropped.fetch_add(n, Ordering::Relaxed) + n;
        self.dropped_counter.inc_by(n);
        if let Ok(mut d) = self.degradation.lock()
            && let Some(d) = d.as_mut()
            && (total - d.dropped_at_reminder >= REMIND_EVERY_ROWS
                || d.last_reminder.elapsed() >= REMIND_EVERY)
        {
            d.last_reminder = Instant::now();
            d.dropped_at_reminder = total;
            tracing::warn!(
                backend = self.backend,
                reason = %d.reason,
                dropped_rows = total - d.dropped_at_start,
                degraded_for_s = d.since.elapsed().as_secs_f64(),
                "telemetry still degraded; rows are being dropped"
            );
        }
    }

    /// The backend failed for every row alike; writes are retried after `retry_in`, or
    /// never when `fatal`.
    pub(crate) fn degraded(&self, reason: String, fatal: bool, retry_in: Option<Duration>) {
        let now = Instant::now();
        let Ok(mut d) = self.degradation.lock() else {
            return;
        };
        match d.as_mut() {
            Some(cur) => {
                cur.reason = reason;
                cur.fatal = fatal;
                cur.retry_at = retry_in.map(|r| now + r);
            }
            None => {
                if fatal {
                    tracing::error!(backend = self.backend, %reason, "telemetry disabled: rows will be dropped");
                } else {
                    tracing::warn!(
                        backend = self.backend,
                        %reason,
                        retry_in_s = retry_in.map(|r| r.as_secs_f64()),
                        "telemetry degraded: rows are dropped until the backend recovers"
                    );
                }
                let dropped = self.dropped.load(Ordering::Relaxed);
                *d = Some(Degradation {
                    fatal,
                    reason,
                    since: now,
                    retry_at: retry_in.map(|r| now + r),
                    dropped_at_start: dropped,
                    last_reminder: now,
                    dropped_at_reminder: dropped,
                });
            }
        }
    }

    /// The columns the table lacks (manual schema mode).
    pub(crate) fn set_missing_columns(&self, missing: Vec<String>) {
        if let Ok(mut m) = self.missing.lock() {
            *m = missing;
        }
    }

    /// A snapshot.
    pub(crate) fn snapshot(&self) -> TelemetryStatus {
        let now = Instant::now();
        let d = self.degradation.lock().ok();
        let d = d.as_ref().and_then(|d| d.as_ref());
        TelemetryStatus {
            backend: self.backend,
            degraded: d.is_some(),
            fatal: d.is_some_and(|d| d.fatal),
            reason: d.map(|d| d.reason.clone()),
            degraded_for_s: d.map(|d| now.duration_since(d.since).as_secs_f64()),
            retry_after_s: d
                .and_then(|d| d.retry_at)
                .map(|at| at.saturating_duration_since(now).as_secs_f64()),
            dropped_rows: self.dropped.load(Ordering::Relaxed),
            written_rows: self.written.load(Ordering::Relaxed),
            missing_columns: self.missing.lock().map(|m| m.clone()).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degradation_starts_counts_and_ends() {
        let t = StatusTracker::new("postgres", Counter::default(), Counter::default());
        t.written(2);
        assert!(!t.snapshot().degraded);
        t.degraded(
            "connection refused".into(),
            false,
            Some(Duration::from_secs(1)),
        );
        t.dropped(3);
        let s = t.snapshot();
        assert!(s.degraded && !s.fatal);
        assert_eq!(s.reason.as_deref(), Some("connection refused"));
        assert_eq!((s.dropped_rows, s.written_rows), (3, 2));
        assert!(s.retry_after_s.is_some());
        t.written(1);
        let s = t.snapshot();
        assert!(!s.degraded && s.reason.is_none());
        assert_eq!((s.dropped_rows, s.written_rows), (3, 3));
    }

    #[test]
    fn fatal_never_recovers() {
        let t = StatusTracker::new("postgres", Counter::default(), Counter::default());
        t.degraded("bad DSN".into(), true, None);
        t.written(1);
        let s = t.snapshot();
        assert!(s.degraded && s.fatal);
        assert_eq!(s.retry_after_s, None);
    }
}
