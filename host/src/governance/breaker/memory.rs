//! The in-process breaker backend: one small mutex per source (no lock shared across
//! sources), time from the injected clock.

use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::future::BoxFuture;

use super::{
    BreakerBackend, BreakerConfig, BreakerError, BreakerSnapshot, BreakerState, Entry, Outcome,
    ProbeLease, open_duration_ms,
};
use crate::config::ConfigKeyed;
use crate::governance::SharedClock;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    index: u64,
    calls: u32,
    failures: u32,
}

#[derive(Debug)]
struct SourceState {
    state: BreakerState,
    epoch: u64,
    consecutive: u32,
    streak: u32,
    open_until: u64,
    probe_until: Option<u64>,
    closed_since: u64,
    buckets: [Bucket; 2],
    threshold: u32,
}

impl SourceState {
    fn window(&self, now: u64, bucket_ms: u64) -> (u32, u32) {
        let cur = now / bucket_ms.max(1);
        self.buckets
            .iter()
            .filter(|b| b.index == cur || b.index + 1 == cur)
            .filter(|b| b.calls > 0)
            .fold((0, 0), |(c, f), b| (c + b.calls, f + b.failures))
    }

    fn sample(&mut self, now: u64, bucket_ms: u64, failed: bool) {
        let cur = now / bucket_ms.max(1);
        let slot = (cur % 2) as usize;
        if self.buckets[slot].index != cur {
            self.buckets[slot] = Bucket {
                index: cur,
                calls: 0,
                failures: 0,
            };
        }
        self.buckets[slot].calls += 1;
        if failed {
            self.buckets[slot].failures += 1;
        }
    }

    fn open(&mut self, now: u64, duration_ms: u64) {
        self.state = BreakerState::Open;
        self.epoch += 1;
        self.open_until = now + duration_ms;
        self.consecutive = 0;
        self.probe_until = None;
        self.buckets = [Bucket::default(); 2];
    }

    fn close(&mut self, now: u64) {
        self.state = BreakerState::Closed;
        self.epoch += 1;
        self.consecutive = 0;
        self.probe_until = None;
        self.closed_since = now;
        self.buckets = [Bucket::default(); 2];
    }

    fn retry_after(&self, now: u64) -> u64 {
        match self.state {
            BreakerState::Open => self.open_until.saturating_sub(now),
            BreakerState::Closed | BreakerState::HalfOpen => 0,
        }
    }
}

/// Breaker state of one scope's sources, in process memory.
pub struct MemoryBreaker {
    cfg: BreakerConfig,
    clock: SharedClock,
    /// Source name → index, looked up on every call.
    index: ConfigKeyed<Arc<str>, usize>,
    sources: Vec<Mutex<SourceState>>,
}

impl MemoryBreaker {
    /// A breaker for `sources` (name, the source's `MAX_CONCURRENCY`).
    pub fn new(cfg: BreakerConfig, clock: SharedClock, sources: &[(Arc<str>, u32)]) -> Self {
        let now = clock.now_ms();
        let mut index = ConfigKeyed::default();
        let mut states = Vec::new();
        for (i, (name, concurrency)) in sources.iter().enumerate() {
            index.insert(name.clone(), i);
            states.push(Mutex::new(SourceState {
                state: BreakerState::Closed,
                epoch: 0,
                consecutive: 0,
                streak: 0,
                open_until: 0,
                probe_until: None,
                closed_since: now,
                buckets: [Bucket::default(); 2],
                threshold: cfg.fail_threshold.max(concurrency.saturating_mul(2)).max(1),
            }));
        }
        Self {
            cfg,
            clock,
            index,
            sources: states,
        }
    }

    fn lock(&self, source: &str) -> Result<MutexGuard<'_, SourceState>, BreakerError> {
        let i = *self
            .index
            .get(source)
            .ok_or_else(|| BreakerError::UnknownSource(source.to_string()))?;
        match self.sources[i].lock() {
            Ok(g) => Ok(g),
            // State is plain data updated in small steps: a panic elsewhere cannot leave it
            // half-written in a way that matters more than losing it.
            Err(poisoned) => Ok(poisoned.into_inner()),
        }
    }

    /// Synchronous `try_enter`.
    pub fn enter_now(&self, source: &str) -> Result<Entry, BreakerError> {
        let now = self.clock.now_ms();
        let mut s = self.lock(source)?;
        Ok(match s.state {
            BreakerState::Closed => Entry::Allowed { epoch: s.epoch },
            BreakerState::Open if now < s.open_until => Entry::Rejected {
                retry_after_ms: s.open_until - now,
            },
            BreakerState::Open | BreakerState::HalfOpen => {
                if s.state == BreakerState::HalfOpen && s.probe_until.is_some_and(|t| now < t) {
                    Entry::Rejected { retry_after_ms: 0 }
                } else {
                    s.state = BreakerState::HalfOpen;
                    s.epoch += 1;
                    s.probe_until = Some(now + self.cfg.probe_ttl_ms);
                    Entry::Probe(ProbeLease { epoch: s.epoch })
                }
            }
        })
    }

    /// Synchronous `record`.
    pub fn record_now(
        &self,
        source: &str,
        outcome: Outcome,
        epoch: u64,
        probe: bool,
    ) -> Result<(), BreakerError> {
        let now = self.clock.now_ms();
        let cfg = &self.cfg;
        let mut s = self.lock(source)?;
        if probe {
            if s.state != BreakerState::HalfOpen || s.epoch != epoch {
                return Ok(()); // fenced: a newer generation already decided
            }
            match outcome {
                Outcome::Success | Outcome::ResultInvalid => s.close(now),
                Outcome::Failure | Outcome::SourceDead => {
                    s.streak += 1;
                    let d = open_duration_ms(cfg, s.streak);
                    s.open(now, d);
                }
                Outcome::RateLimited => s.probe_until = None,
            }
            return Ok(());
        }
        match outcome {
            Outcome::Success | Outcome::ResultInvalid => {
                if outcome == Outcome::Success {
                    s.sample(now, cfg.bucket_ms, false);
                }
                if s.state == BreakerState::Closed {
                    s.consecutive = 0;
                    let stable = 2 * open_duration_ms(cfg, s.streak);
                    if s.streak > 0 && now.saturating_sub(s.closed_since) >= stable {
                        s.streak = 0;
                    }
                }
            }
            Outcome::RateLimited => {}
            Outcome::Failure => {
                s.sample(now, cfg.bucket_ms, true);
                // Only a report from the current closed generation can trip it.
                if s.state == BreakerState::Closed && s.epoch == epoch {
                    s.consecutive += 1;
                    let (calls, failures) = s.window(now, cfg.bucket_ms);
                    if s.consecutive >= s.threshold {
                        s.open(now, cfg.cooldown_ms);
                    } else if calls >= cfg.min_calls
                        && f64::from(failures) >= cfg.fail_rate * f64::from(calls)
                    {
                        s.streak += 1;
                        let d = open_duration_ms(cfg, s.streak);
                        s.open(now, d);
                    }
                }
            }
            Outcome::SourceDead => {
                s.streak += 1;
                let d = open_duration_ms(cfg, s.streak);
                s.open(now, d);
            }
        }
        Ok(())
    }

    /// Synchronous `release_probe`.
    pub fn release_now(&self, source: &str, lease: ProbeLease) -> Result<(), BreakerError> {
        let mut s = self.lock(source)?;
        if s.state == BreakerState::HalfOpen && s.epoch == lease.epoch {
            s.probe_until = None;
        }
        Ok(())
    }
}

impl BreakerBackend for MemoryBreaker {
    fn try_enter<'a>(&'a self, source: &'a str) -> BoxFuture<'a, Result<Entry, BreakerError>> {
        let r = self.enter_now(source);
        Box::pin(async move { r })
    }

    fn record<'a>(
        &'a self,
        source: &'a str,
        outcome: Outcome,
        epoch: u64,
        probe: bool,
    ) -> BoxFuture<'a, Result<(), BreakerError>> {
        let r = self.record_now(source, outcome, epoch, probe);
        Box::pin(async move { r })
    }

    fn release_probe<'a>(
        &'a self,
        source: &'a str,
        lease: ProbeLease,
    ) -> BoxFuture<'a, Result<(), BreakerError>> {
        let r = self.release_now(source, lease);
        Box::pin(async move { r })
    }

    fn snapshot(&self, source: &str) -> Option<BreakerSnapshot> {
        let now = self.clock.now_ms();
        let s = self.lock(source).ok()?;
        let (window_calls, window_failures) = s.window(now, self.cfg.bucket_ms);
        // An open breaker whose cooldown passed reports half-open: the next caller probes.
        let state = if s.state == BreakerState::Open && now >= s.open_until {
            BreakerState::HalfOpen
        } else {
            s.state
        };
        Some(BreakerSnapshot {
            state,
            retry_after_ms: s.retry_after(now),
            consecutive_failures: s.consecutive,
            streak: s.streak,
            window_calls,
            window_failures,
            effective_threshold: s.threshold,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::ManualClock;

    fn breaker(cfg: BreakerConfig, concurrency: u32) -> (MemoryBreaker, Arc<ManualClock>) {
        let clock = ManualClock::new(1_000_000);
        let b = MemoryBreaker::new(cfg, clock.clone(), &[(Arc::from("a"), concurrency)]);
        (b, clock)
    }

    fn cfg() -> BreakerConfig {
        BreakerConfig {
            fail_threshold: 3,
            cooldown_ms: 1000,
            max_cooldown_ms: 8000,
            fail_rate: 0.6,
            min_calls: 10,
            bucket_ms: 30_000,
            probe_ttl_ms: 5000,
        }
    }

    fn fail(b: &MemoryBreaker) {
        if let Ok(Entry::Allowed { epoch }) = b.enter_now("a") {
            b.record_now("a", Outcome::Failure, epoch, false).unwrap();
        }
    }

    #[test]
    fn consecutive_failures_open_then_one_probe_then_close() {
        let (b, clock) = breaker(cfg(), 0);
        fail(&b);
        fail(&b);
        assert_eq!(b.snapshot("a").unwrap().state, BreakerState::Closed);
        fail(&b);
        let s = b.snapshot("a").unwrap();
        assert_eq!((s.state, s.retry_after_ms), (BreakerState::Open, 1000));
        clock.advance(400);
        assert_eq!(
            b.enter_now("a").unwrap(),
            Entry::Rejected {
                retry_after_ms: 600
            }
        );
        clock.advance(600);
        let Entry::Probe(lease) = b.enter_now("a").unwrap() else {
            panic!("expected a probe")
        };
        // Exactly one probe: everyone else is turned away with retry-after 0.
        assert_eq!(
            b.enter_now("a").unwrap(),
            Entry::Rejected { retry_after_ms: 0 }
        );
        assert_eq!(b.snapshot("a").unwrap().retry_after_ms, 0);
        b.record_now("a", Outcome::Success, lease.epoch, true)
            .unwrap();
        assert!(matches!(b.enter_now("a").unwrap(), Entry::Allowed { .. }));
        assert_eq!(b.snapshot("a").unwrap().state, BreakerState::Closed);
    }

    #[test]
    fn a_failed_probe_reopens_for_longer_and_a_dead_probe_lease_expires() {
        let (b, clock) = breaker(cfg(), 0);
        for _ in 0..3 {
            fail(&b);
        }
        clock.advance(1000);
        let Entry::Probe(lease) = b.enter_now("a").unwrap() else {
            panic!("probe")
        };
        b.record_now("a", Outcome::Failure, lease.epoch, true)
            .unwrap();
        // streak 1 → cooldown; second probe failure → streak 2 → 2 × cooldown.
        assert_eq!(b.snapshot("a").unwrap().retry_after_ms, 1000);
        clock.advance(1000);
        let Entry::Probe(lease) = b.enter_now("a").unwrap() else {
            panic!("probe")
        };
        b.record_now("a", Outcome::Failure, lease.epoch, true)
            .unwrap();
        assert_eq!(b.snapshot("a").unwrap().retry_after_ms, 2000);
        clock.advance(2000);
        let Entry::Probe(_) = b.enter_now("a").unwrap() else {
            panic!("probe")
        };
        // The probe holder dies: after the lease another caller may probe.
        clock.advance(4999);
        assert_eq!(
            b.enter_now("a").unwrap(),
            Entry::Rejected { retry_after_ms: 0 }
        );
        clock.advance(1);
        assert!(matches!(b.enter_now("a").unwrap(), Entry::Probe(_)));
    }

    #[test]
    fn failure_rate_opens_even_without_a_consecutive_run() {
        let mut c = cfg();
        c.fail_threshold = 100;
        let (b, _clock) = breaker(c, 0);
        // 10% success: success, then 9 failures, repeated.
        let mut opened_after = None;
        for i in 0..40 {
            let Ok(Entry::Allowed { epoch }) = b.enter_now("a") else {
                opened_after = Some(i);
                break;
            };
            let outcome = if i % 10 == 0 {
                Outcome::Success
            } else {
                Outcome::Failure
            };
            b.record_now("a", outcome, epoch, false).unwrap();
        }
        // After 10 samples (1 success, 9 failures) the rate is 0.9 ≥ 0.6.
        assert_eq!(opened_after, Some(10));
        let s = b.snapshot("a").unwrap();
        assert_eq!((s.state, s.streak), (BreakerState::Open, 1));
    }

    #[test]
    fn rate_limits_and_invalid_results_are_not_failures() {
        let (b, _) = breaker(cfg(), 0);
        for _ in 0..20 {
            let Entry::Allowed { epoch } = b.enter_now("a").unwrap() else {
                panic!("closed")
            };
            b.record_now("a", Outcome::RateLimited, epoch, false)
                .unwrap();
            b.record_now("a", Outcome::ResultInvalid, epoch, false)
                .unwrap();
        }
        let s = b.snapshot("a").unwrap();
        assert_eq!(
            (s.state, s.window_calls, s.consecutive_failures),
            (BreakerState::Closed, 0, 0)
        );
    }

    #[test]
    fn source_dead_forces_open_and_threshold_follows_concurrency() {
        let (b, _) = breaker(cfg(), 4);
        assert_eq!(b.snapshot("a").unwrap().effective_threshold, 8);
        let Entry::Allowed { epoch } = b.enter_now("a").unwrap() else {
            panic!("closed")
        };
        b.record_now("a", Outcome::SourceDead, epoch, false)
            .unwrap();
        let s = b.snapshot("a").unwrap();
        assert_eq!((s.state, s.retry_after_ms), (BreakerState::Open, 1000));
    }

    #[test]
    fn late_reports_of_an_old_generation_are_fenced() {
        let (b, clock) = breaker(cfg(), 0);
        let Entry::Allowed { epoch: old } = b.enter_now("a").unwrap() else {
            panic!("closed")
        };
        for _ in 0..3 {
            fail(&b);
        }
        clock.advance(1000);
        let Entry::Probe(lease) = b.enter_now("a").unwrap() else {
            panic!("probe")
        };
        b.record_now("a", Outcome::Success, lease.epoch, true)
            .unwrap();
        // The old attempt's failure arrives after recovery: it must not count toward opening.
        b.record_now("a", Outcome::Failure, old, false).unwrap();
        b.record_now("a", Outcome::Failure, old, false).unwrap();
        b.record_now("a", Outcome::Failure, old, false).unwrap();
        assert_eq!(b.snapshot("a").unwrap().state, BreakerState::Closed);
        // A stale probe report is ignored too.
        b.record_now("a", Outcome::Failure, lease.epoch, true)
            .unwrap();
        assert_eq!(b.snapshot("a").unwrap().state, BreakerState::Closed);
        assert!(b.enter_now("nope").is_err());
    }
}
