//! The in-process limiter backend (docs/limiter.md#backends): one [`MemoryLimiter`]
//! per scope, all six gates behind one `std::sync::Mutex` so an admission is atomic, with a
//! sliding-window log per gate group (scope-wide and each source), pruned on every touch, so
//! that in *any* window of `window_ms` at most `rpm` requests are admitted and at most `tpm`
//! tokens are counted. The log holds runs, not single admissions: the admissions of one
//! millisecond enter and leave the window together, so they are one [`Run`] (its count, its
//! permits' id range, its tokens), and the log's memory follows the milliseconds with
//! admissions, not the calls (at 20k calls a second, a minute's log of one entry per call
//! held 1.2 million 24-byte entries — 29 MB — per group; of runs, at most 60,000).
//! Permits carry a TTL lease: an unsettled permit is released when its lease has expired and
//! the state is next touched (its TPM pre-charge stays), and its later settle is ignored.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures_util::future::BoxFuture;
use tokio::sync::Notify;

use super::{
    Admission, Gate, GateUsage, LimiterBackend, LimiterConfig, LimiterError, LimiterSnapshot,
    Limits, PermitId,
};
use crate::config::ConfigKeyed;
use crate::governance::SharedClock;

/// The admissions of one millisecond in a window log. Every one of them entered at `at_ms`
/// and leaves the window at `at_ms + window`, so counting them as one changes no gate's
/// answer. Ids are issued in admission order, so a run's permits have ids in
/// `first_id ..= first_id + span` (a source's run skips the ids of other sources' permits
/// in between).
#[derive(Debug, Clone, Copy)]
struct Run {
    /// Admission time, ms of the limiter's clock.
    at_ms: u64,
    /// The first permit's id.
    first_id: u64,
    /// The last permit's id minus `first_id`.
    span: u32,
    /// Permits in the run (≥ 1).
    count: u32,
    /// Tokens counted for them: each one's pre-charge, then its settled value.
    tokens: u64,
}

// docs/limiter.md#backends counts a run as 32 bytes.
const _: () = assert!(std::mem::size_of::<Run>() == 32);

/// The live state of one gate group (scope-wide, or one source).
#[derive(Debug, Default)]
struct Group {
    in_flight: u32,
    log: VecDeque<Run>,
    /// Admissions in the window: the sum of `log[..].count`.
    len: u64,
    /// Sum of `log[..].tokens`.
    tokens: u64,
}

/// Log capacity (runs) below which a group's log keeps its buffer however empty it is.
const LOG_KEEP: usize = 4_096;

impl Group {
    /// Drop the runs that left the window: a run admitted at `t` counts while
    /// `now < t + window`. A log three-quarters empty gives half its buffer back (above
    /// [`LOG_KEEP`]): a `VecDeque` never shrinks by itself, and the buffer a burst grew (a
    /// run per millisecond of it, 32 bytes each) would stay resident for the life of the
    /// process after the burst's window had passed. Amortised: a shrink to twice the log's
    /// length copies its `n` runs, and the next one needs `n / 2` more pops first.
    fn prune(&mut self, now: u64, window: u64) {
        while let Some(front) = self.log.front() {
            if front.at_ms.saturating_add(window) > now {
                break;
            }
            self.tokens = self.tokens.saturating_sub(front.tokens);
            self.len = self.len.saturating_sub(u64::from(front.count));
            self.log.pop_front();
        }
        if self.log.capacity() > LOG_KEEP && self.log.len() < self.log.capacity() / 4 {
            self.log.shrink_to(self.log.len() * 2);
        }
    }

    fn concurrency_full(&self, limits: &Limits) -> bool {
        limits.max_concurrency > 0 && self.in_flight >= limits.max_concurrency
    }

    /// `Some(ms until a request fits)` when the RPM gate is full.
    fn rpm_wait(&self, limits: &Limits, now: u64, window: u64) -> Option<u64> {
        let rpm = u64::from(limits.rpm);
        if rpm == 0 || self.len < rpm {
            return None;
        }
        // `len - rpm + 1` admissions must leave; the last of them is the one at position
        // `len - rpm` from the front. The gate denies from `len == rpm` on and admits nothing
        // past it, so the walk stops at the front run (position 0).
        let mut leaving = self.len - rpm;
        for run in &self.log {
            let count = u64::from(run.count);
            if leaving < count {
                return Some(until_gone(run.at_ms, now, window));
            }
            leaving -= count;
        }
        // Unreachable while `len` is the sum of the counts; stay conservative.
        Some(window.max(1))
    }

    /// `Some(ms until est tokens fit)` when the TPM gate is full. An estimate larger than
    /// the whole quota is admitted once the window holds no tokens (otherwise it could never
    /// be admitted).
    fn tpm_wait(&self, limits: &Limits, est: u64, now: u64, window: u64) -> Option<u64> {
        let fits = |used: u64| used == 0 || used.saturating_add(est) <= limits.tpm;
        if limits.tpm == 0 || fits(self.tokens) {
            return None;
        }
        let mut used = self.tokens;
        for run in &self.log {
            used = used.saturating_sub(run.tokens);
            if fits(used) {
                return Some(until_gone(run.at_ms, now, window));
            }
        }
        // Unreachable while `tokens` is the sum of the log; stay conservative.
        Some(window.max(1))
    }

    /// Count permit `id` (above every id counted before) admitted at `now` with `tokens`.
    fn charge(&mut self, id: u64, now: u64, tokens: u64) {
        self.in_flight = self.in_flight.saturating_add(1);
        self.len = self.len.saturating_add(1);
        self.tokens = self.tokens.saturating_add(tokens);
        if let Some(back) = self.log.back_mut()
            && back.at_ms == now
            && let Some(count) = back.count.checked_add(1)
            && let Some(span) = id
                .checked_sub(back.first_id)
                .and_then(|d| u32::try_from(d).ok())
            && span > back.span
        {
            back.span = span;
            back.count = count;
            back.tokens = back.tokens.saturating_add(tokens);
            return;
        }
        self.log.push_back(Run {
            at_ms: now,
            first_id: id,
            span: 0,
            count: 1,
            tokens,
        });
    }

    /// The position of the run whose id range holds `id`, if it is still in the window. A
    /// permit settles soon after its admission, so its run is near the back of a log that
    /// can hold a whole window of runs: the search gallops back from the end (1, 2, 4, …
    /// runs) and bisects only the last stretch, touching a few cache lines near the back
    /// instead of probing across the whole log.
    fn find(&self, id: u64) -> Option<usize> {
        let len = self.log.len();
        let first_at = |i: usize| self.log.get(i).map_or(u64::MAX, |r| r.first_id);
        // Invariant: runs at `hi..` start above `id`; the answer, if any, is in `lo..hi`.
        let (mut lo, mut hi) = (0, len);
        let mut step = 1;
        while step <= len {
            let i = len - step;
            if first_at(i) <= id {
                lo = i;
                break;
            }
            hi = i;
            step = step.saturating_mul(2);
        }
        // The last run in `lo..hi` that starts at or below `id`.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if first_at(mid) <= id {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let run = self.log.get(lo)?;
        let offset = id.checked_sub(run.first_id)?;
        (offset <= u64::from(run.span)).then_some(lo)
    }

    /// Replace permit `id`'s tokens, `charged` (its pre-charge), with `tokens`, if its run is
    /// still in the log.
    fn recharge(&mut self, id: u64, charged: u64, tokens: u64) {
        if let Some(i) = self.find(id)
            && let Some(run) = self.log.get_mut(i)
        {
            run.tokens = run.tokens.saturating_sub(charged).saturating_add(tokens);
            self.tokens = self.tokens.saturating_sub(charged).saturating_add(tokens);
        }
    }

    fn usage(&self, limits: Limits) -> GateUsage {
        GateUsage {
            in_flight: self.in_flight,
            requests_in_window: self.len,
            tokens_in_window: self.tokens,
            limits,
        }
    }
}

/// ms from `now` until what was admitted at `at_ms` leaves the window (≥ 1 while it is in
/// the window).
fn until_gone(at_ms: u64, now: u64, window: u64) -> u64 {
    at_ms.saturating_add(window).saturating_sub(now).max(1)
}

/// An open permit.
#[derive(Debug, Clone, Copy)]
struct Lease {
    source: usize,
    expires_at_ms: u64,
    /// The pre-charge counted for it in its runs (replaced when it settles).
    tokens: u64,
}

#[derive(Debug)]
struct State {
    next_id: u64,
    global: Group,
    sources: Vec<Group>,
    /// Open permits by id. With one TTL and a monotonic clock, id order is expiry order.
    leases: BTreeMap<u64, Lease>,
}

impl State {
    /// Release every permit whose lease has expired; returns how many.
    fn reap(&mut self, now: u64) -> u64 {
        let mut n = 0;
        while let Some((_, lease)) = self.leases.first_key_value() {
            if lease.expires_at_ms > now {
                break;
            }
            let source = lease.source;
            self.leases.pop_first();
            self.release_slot(source);
            n += 1;
        }
        n
    }

    fn release_slot(&mut self, source: usize) {
        self.global.in_flight = self.global.in_flight.saturating_sub(1);
        if let Some(g) = self.sources.get_mut(source) {
            g.in_flight = g.in_flight.saturating_sub(1);
        }
    }
}

/// The in-process limiter of one scope. Cheap to call from many tasks: each call takes the
/// mutex once, for a few comparisons and a push; nothing awaits while it is held.
#[derive(Debug)]
pub struct MemoryLimiter {
    window_ms: u64,
    lease_ttl_ms: u64,
    global_limits: Limits,
    source_names: Vec<Arc<str>>,
    source_limits: Vec<Limits>,
    /// Source name → index, looked up on every call.
    source_index: ConfigKeyed<Arc<str>, usize>,
    clock: SharedClock,
    state: Mutex<State>,
    released: Arc<Notify>,
    expired_leases: AtomicU64,
    settle_failures: AtomicU64,
}

impl MemoryLimiter {
    /// A limiter for one scope, reading time from `clock` (ms).
    pub fn new(config: LimiterConfig, clock: SharedClock) -> Self {
        let mut source_names = Vec::with_capacity(config.sources.len());
        let mut source_limits = Vec::with_capacity(config.sources.len());
        let mut source_index =
            ConfigKeyed::with_capacity_and_hasher(config.sources.len(), Default::default());
        for (name, limits) in config.sources {
            if source_index.contains_key(&name) {
                continue;
            }
            source_index.insert(name.clone(), source_names.len());
            source_names.push(name);
            source_limits.push(limits);
        }
        let sources = source_names.iter().map(|_| Group::default()).collect();
        Self {
            window_ms: config.window_ms.max(1),
            lease_ttl_ms: config.lease_ttl_ms.max(1),
            global_limits: config.global,
            source_names,
            source_limits,
            source_index,
            clock,
            state: Mutex::new(State {
                next_id: 1,
                global: Group::default(),
                sources,
                leases: BTreeMap::new(),
            }),
            released: Arc::new(Notify::new()),
            expired_leases: AtomicU64::new(0),
            settle_failures: AtomicU64::new(0),
        }
    }

    /// The state, recovering from a poisoned mutex (every mutation keeps the state
    /// consistent at each step, so a panic elsewhere cannot leave it half-updated).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// [`LimiterBackend::try_acquire`] without the future: the memory backend never awaits.
    pub fn try_acquire_now(
        &self,
        source: &str,
        est_tokens: u64,
    ) -> Result<Admission, LimiterError> {
        let Some(&si) = self.source_index.get(source) else {
            return Err(LimiterError::UnknownSource(source.to_owned()));
        };
        let sl = self.source_limits.get(si).copied().unwrap_or_default();
        let gl = self.global_limits;
        let w = self.window_ms;
        let (admission, expired) = {
            let mut st = self.lock();
            let now = self.clock.now_ms();
            let expired = st.reap(now);
            let State {
                next_id,
                global,
                sources,
                leases,
            } = &mut *st;
            let Some(src) = sources.get_mut(si) else {
                return Err(LimiterError::UnknownSource(source.to_owned()));
            };
            global.prune(now, w);
            src.prune(now, w);
            let denied = if global.concurrency_full(&gl) {
                Some((Gate::GlobalConcurrency, None))
            } else if src.concurrency_full(&sl) {
                Some((Gate::SourceConcurrency, None))
            } else if let Some(ms) = global.rpm_wait(&gl, now, w) {
                Some((Gate::GlobalRpm, Some(ms)))
            } else if let Some(ms) = src.rpm_wait(&sl, now, w) {
                Some((Gate::SourceRpm, Some(ms)))
            } else if let Some(ms) = global.tpm_wait(&gl, est_tokens, now, w) {
                Some((Gate::GlobalTpm, Some(ms)))
            } else {
                src.tpm_wait(&sl, est_tokens, now, w)
                    .map(|ms| (Gate::SourceTpm, Some(ms)))
            };
            let admission = match denied {
                Some((gate, retry_after_ms)) => Admission::Denied {
                    gate,
                    retry_after_ms,
                },
                None => {
                    let id = *next_id;
                    *next_id += 1;
                    global.charge(id, now, est_tokens);
                    src.charge(id, now, est_tokens);
                    leases.insert(
                        id,
                        Lease {
                            source: si,
                            expires_at_ms: now.saturating_add(self.lease_ttl_ms),
                            tokens: est_tokens,
                        },
                    );
                    Admission::Granted(PermitId(id))
                }
            };
            (admission, expired)
        };
        self.finish(expired, false);
        Ok(admission)
    }

    /// [`LimiterBackend::settle`] without the future. Returns true when the permit was open
    /// (this call settled it), false when it was unknown, already settled or expired.
    pub fn settle_inline(&self, permit: PermitId, actual_tokens: u64) -> bool {
        let (settled, expired) = {
            let mut st = self.lock();
            let now = self.clock.now_ms();
            let expired = st.reap(now);
            let settled = match st.leases.remove(&permit.0) {
                Some(lease) => {
                    st.global.recharge(permit.0, lease.tokens, actual_tokens);
                    if let Some(g) = st.sources.get_mut(lease.source) {
                        g.recharge(permit.0, lease.tokens, actual_tokens);
                    }
                    st.release_slot(lease.source);
                    true
                }
                None => false,
            };
            (settled, expired)
        };
        self.finish(expired, settled);
        settled
    }

    /// After unlocking: count and log expired leases, and wake waiters when slots freed.
    fn finish(&self, expired: u64, settled: bool) {
        if expired > 0 {
            self.expired_leases.fetch_add(expired, Ordering::Relaxed);
            tracing::warn!(
                count = expired,
                "limiter leases expired unsettled; their slots are freed"
            );
        }
        if expired > 0 || settled {
            self.released.notify_waiters();
        }
    }
}

impl LimiterBackend for MemoryLimiter {
    fn try_acquire<'a>(
        &'a self,
        source: &'a str,
        est_tokens: u64,
    ) -> BoxFuture<'a, Result<Admission, LimiterError>> {
        Box::pin(std::future::ready(self.try_acquire_now(source, est_tokens)))
    }

    fn settle(
        &self,
        permit: PermitId,
        actual_tokens: u64,
    ) -> BoxFuture<'_, Result<(), LimiterError>> {
        self.settle_inline(permit, actual_tokens);
        Box::pin(std::future::ready(Ok(())))
    }

    fn settle_sync(self: Arc<Self>, permit: PermitId, actual_tokens: u64) {
        self.settle_inline(permit, actual_tokens);
    }

    fn record_settle_failure(&self) {
        self.settle_failures.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> LimiterSnapshot {
        let w = self.window_ms;
        let (global, sources, expired) = {
            let mut st = self.lock();
            let now = self.clock.now_ms();
            let expired = st.reap(now);
            st.global.prune(now, w);
            let global = st.global.usage(self.global_limits);
            let sources = st
                .sources
                .iter_mut()
                .zip(self.source_names.iter().zip(&self.source_limits))
                .map(|(g, (name, limits))| {
                    g.prune(now, w);
                    (name.clone(), g.usage(*limits))
                })
                .collect();
            (global, sources, expired)
        };
        self.finish(expired, false);
        LimiterSnapshot {
            window_ms: w,
            global,
            sources,
            expired_leases: self.expired_leases.load(Ordering::Relaxed),
            settle_failures: self.settle_failures.load(Ordering::Relaxed),
        }
    }

    fn released(&self) -> Arc<Notify> {
        self.released.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::ManualClock;

    const W: u64 = 1_000;

    /// A log a burst grew gives its buffer back once the window has passed, in steps that
    /// keep what is still in the window, and a small log keeps its buffer.
    #[test]
    fn a_burst_s_log_gives_its_buffer_back_when_its_window_passes() {
        let mut g = Group::default();
        // One admission a millisecond: one run each.
        for k in 0..100_000u64 {
            g.charge(k, k, 1);
        }
        let grown = g.log.capacity();
        assert!(grown >= 100_000);
        assert_eq!(g.log.len(), 100_000);
        // Half the burst still in the window: half empty, kept.
        g.prune(49_999 + W * 100, W * 100);
        assert_eq!((g.log.len(), g.len), (50_000, 50_000));
        assert_eq!(g.log.capacity(), grown);
        // 10,000 left (of a buffer of at least 100,000): shrunk to twice that.
        g.prune(89_999 + W * 100, W * 100);
        assert_eq!((g.log.len(), g.len), (10_000, 10_000));
        assert!(
            (20_000..grown / 4).contains(&g.log.capacity()),
            "{}",
            g.log.capacity()
        );
        assert_eq!(g.tokens, 10_000);
        assert_eq!(g.find(99_999), Some(9_999));
        assert_eq!(g.find(90_000), Some(0));
        assert_eq!(g.find(89_999), None);
        // All gone.
        g.prune(100_000 + W * 100, W * 100);
        assert!(g.log.is_empty());
        assert_eq!((g.len, g.tokens), (0, 0));
        assert!(g.log.capacity() <= LOG_KEEP, "{}", g.log.capacity());
        // A log that never outgrew `LOG_KEEP` keeps its buffer.
        let mut small = Group::default();
        for k in 0..3_000u64 {
            small.charge(k, k, 1);
        }
        let cap = small.log.capacity();
        small.prune(3_000 + W * 100, W * 100);
        assert!(small.log.is_empty());
        assert_eq!(small.log.capacity(), cap);
    }

    /// The admissions of one millisecond are one run, however many: a burst of 100,000 in
    /// 1,000 ms is 1,000 runs, counted, found, re-charged and pruned exactly as 100,000
    /// single entries were.
    #[test]
    fn a_millisecond_s_admissions_are_one_run() {
        let mut g = Group::default();
        // Ids 0, 2, 4, …: another source's permits in between; 100 a millisecond.
        for k in 0..100_000u64 {
            g.charge(2 * k, k / 100, 3);
        }
        assert_eq!(g.log.len(), 1_000);
        assert!(g.log.capacity() < 2_048, "{}", g.log.capacity());
        assert_eq!((g.len, g.tokens, g.in_flight), (100_000, 300_000, 100_000));
        let run = g.log[7];
        assert_eq!(
            (run.at_ms, run.first_id, run.span, run.count, run.tokens),
            (7, 1_400, 198, 100, 300)
        );
        // Every id of the run's range finds it (the odd ones belong to no permit of this
        // group and are never looked up); ids past the last run find nothing.
        for id in 1_400..=1_598 {
            assert_eq!(g.find(id), Some(7), "id {id}");
        }
        assert_eq!(g.find(1_599), None);
        assert_eq!(g.find(199_998), Some(999));
        assert_eq!(g.find(199_999), None);
        // Settling one permit replaces its pre-charge in its run and the group's sum.
        g.recharge(1_402, 3, 10);
        assert_eq!((g.log[7].tokens, g.tokens), (307, 300_007));
        // The RPM gate, 100,000 in the window, at 900: (limit, the wait). 99,950: the 51st
        // oldest admission (in the run of ms 0) must leave, at 0 + W; 99,850: the 151st (in
        // the run of ms 1), at 1 + W. At the runs' boundaries: the 100th oldest is the last
        // of ms 0, the 101st the first of ms 1; a full gate at its limit waits for the
        // oldest; a limit of one waits for the newest (ms 999); one over the count admits.
        let l = Limits {
            max_concurrency: 0,
            rpm: 0,
            tpm: 0,
        };
        for (rpm, wait) in [
            (99_950, Some(100)),
            (99_850, Some(101)),
            (99_901, Some(100)),
            (99_900, Some(101)),
            (100_000, Some(100)),
            (1, Some(1_099)),
            (100_001, None),
        ] {
            assert_eq!(g.rpm_wait(&Limits { rpm, ..l }, 900, W), wait, "rpm {rpm}");
        }
        // The TPM gate: 300,007 counted, a limit of 299,500 and 200 more wanted: the runs
        // of ms 0, 1 and 2 (900 tokens) must leave: at 2 + W.
        let l = Limits { tpm: 299_500, ..l };
        assert_eq!(g.tpm_wait(&l, 200, 900, W), Some(102));
        // The first 500 ms leave as 500 runs of 100, the re-charged one among them.
        g.prune(499 + W, W);
        assert_eq!((g.log.len(), g.len, g.tokens), (500, 50_000, 150_000));
        assert_eq!(g.find(1_402), None);
        assert_eq!(g.find(100_000), Some(0));
    }

    /// A group's runs as (millisecond, first id, count), oldest first.
    fn runs(g: &Group) -> Vec<(u64, u64, u32)> {
        g.log
            .iter()
            .map(|r| (r.at_ms, r.first_id, r.count))
            .collect()
    }

    /// A run ends where the millisecond ends, and where its id range or count would no
    /// longer fit its fields.
    #[test]
    fn a_run_ends_with_its_millisecond_or_its_id_range() {
        let mut g = Group::default();
        g.charge(1, 5, 1);
        g.charge(2, 5, 1);
        g.charge(3, 6, 1);
        // An id more than `u32::MAX` past the run's first starts a run of its own.
        g.charge(4 + u64::from(u32::MAX), 6, 1);
        assert_eq!(
            runs(&g),
            [(5, 1, 2), (6, 3, 1), (6, 4 + u64::from(u32::MAX), 1)]
        );
        assert_eq!(g.len, 4);
        // A span of exactly `u32::MAX` still fits: one run, found at both ends only.
        let mut g = Group::default();
        g.charge(3, 6, 1);
        g.charge(3 + u64::from(u32::MAX), 6, 1);
        assert_eq!(runs(&g), [(6, 3, 2)]);
        assert_eq!(g.find(3 + u64::from(u32::MAX)), Some(0));
        assert_eq!(g.find(4 + u64::from(u32::MAX)), None);
        assert_eq!(g.find(2), None);
        // A run whose count is full starts another in the same millisecond.
        let mut g = Group::default();
        g.log.push_back(Run {
            at_ms: 6,
            first_id: 0,
            span: 10,
            count: u32::MAX,
            tokens: 0,
        });
        g.charge(11, 6, 1);
        assert_eq!(g.log.len(), 2);
        assert_eq!((g.log[1].first_id, g.log[1].count), (11, 1));
    }

    /// `find` gives the run of every id in the log and `None` for every id before, between
    /// and after the runs: ids with gaps (a source's log holds only its own permits), at the
    /// ends, in logs of every length up to a few galloping steps, and after the front was
    /// pruned (a deque that wrapped around).
    #[test]
    fn find_locates_every_run_and_only_those() {
        for len in 0..40u64 {
            let mut g = Group::default();
            // Ids 10, 13, 16, …: gaps of two between runs of one (one a millisecond).
            for k in 0..len {
                g.charge(10 + 3 * k, k, 1);
            }
            for k in 0..len {
                assert_eq!(
                    g.find(10 + 3 * k),
                    Some(k as usize),
                    "len {len} id {}",
                    10 + 3 * k
                );
            }
            for id in (0..10).chain((0..=len).flat_map(|k| [11 + 3 * k, 12 + 3 * k])) {
                assert_eq!(g.find(id), None, "len {len} absent id {id}");
            }
            assert_eq!(g.find(u64::MAX), None);
        }
        let mut g = Group::default();
        for k in 0..100u64 {
            g.charge(k * 2, k, 1);
        }
        g.prune(60 + W, W);
        assert_eq!(g.log.len(), 39);
        for k in 0..100u64 {
            let want = (k > 60).then(|| (k - 61) as usize);
            assert_eq!(g.find(k * 2), want, "id {}", k * 2);
        }
    }

    fn limits(max_concurrency: u32, rpm: u32, tpm: u64) -> Limits {
        Limits {
            max_concurrency,
            rpm,
            tpm,
        }
    }

    fn limiter(
        global: Limits,
        sources: &[(&str, Limits)],
        lease_ttl_ms: u64,
    ) -> (MemoryLimiter, Arc<ManualClock>) {
        let clock = ManualClock::new(0);
        let config = LimiterConfig {
            window_ms: W,
            lease_ttl_ms,
            global,
            sources: sources.iter().map(|(n, l)| (Arc::from(*n), *l)).collect(),
        };
        (MemoryLimiter::new(config, clock.clone()), clock)
    }

    fn grant(l: &MemoryLimiter, source: &str, est: u64) -> PermitId {
        match l.try_acquire_now(source, est).unwrap() {
            Admission::Granted(id) => id,
            other => panic!("expected a grant on {source}, got {other:?}"),
        }
    }

    fn denial(l: &MemoryLimiter, source: &str, est: u64) -> (Gate, Option<u64>) {
        match l.try_acquire_now(source, est).unwrap() {
            Admission::Denied {
                gate,
                retry_after_ms,
            } => (gate, retry_after_ms),
            other => panic!("expected a denial on {source}, got {other:?}"),
        }
    }

    fn source_usage(s: &LimiterSnapshot, name: &str) -> GateUsage {
        s.sources
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, u)| u.clone())
            .unwrap()
    }

    #[test]
    fn concurrency_gates_deny_exactly_at_the_limit() {
        // global: 3 across two sources; source a: 2
        let (l, _) = limiter(
            limits(3, 0, 0),
            &[("a", limits(2, 0, 0)), ("b", limits(0, 0, 0))],
            60_000,
        );
        let a1 = grant(&l, "a", 0);
        grant(&l, "a", 0);
        assert_eq!(denial(&l, "a", 0), (Gate::SourceConcurrency, None));
        grant(&l, "b", 0);
        assert_eq!(denial(&l, "b", 0), (Gate::GlobalConcurrency, None));
        // the global gate is checked first
        assert_eq!(denial(&l, "a", 0), (Gate::GlobalConcurrency, None));
        assert!(l.settle_inline(a1, 0));
        grant(&l, "b", 0);
        let s = l.snapshot();
        assert_eq!(s.global.in_flight, 3);
        assert_eq!(source_usage(&s, "a").in_flight, 1);
        assert_eq!(source_usage(&s, "b").in_flight, 2);
    }

    #[test]
    fn rpm_gates_deny_exactly_at_the_limit() {
        let (l, clock) = limiter(
            limits(0, 4, 0),
            &[("a", limits(0, 2, 0)), ("b", limits(0, 0, 0))],
            60_000,
        );
        let p = grant(&l, "a", 0);
        l.settle_inline(p, 0); // settled requests still count in the window
        clock.advance(10);
        grant(&l, "a", 0);
        clock.advance(10);
        // a's two requests at 0 and 10: the first leaves at 1000
        assert_eq!(denial(&l, "a", 0), (Gate::SourceRpm, Some(980)));
        grant(&l, "b", 0);
        clock.advance(10);
        grant(&l, "b", 0);
        // global: 4 requests at 0, 10, 20, 30
        assert_eq!(denial(&l, "b", 0), (Gate::GlobalRpm, Some(970)));
        assert_eq!(denial(&l, "a", 0), (Gate::GlobalRpm, Some(970)));
    }

    #[test]
    fn tpm_gates_deny_exactly_at_the_limit() {
        let (l, _) = limiter(
            limits(0, 0, 100),
            &[("a", limits(0, 0, 50)), ("b", limits(0, 0, 0))],
            60_000,
        );
        grant(&l, "a", 30);
        grant(&l, "a", 20); // a at exactly 50
        assert_eq!(denial(&l, "a", 1).0, Gate::SourceTpm);
        grant(&l, "b", 50); // global at exactly 100
        assert_eq!(denial(&l, "b", 1).0, Gate::GlobalTpm);
        // a zero pre-charge still fits a full (not over-full) window
        grant(&l, "b", 0);
    }

    #[test]
    fn a_denial_changes_nothing() {
        let (l, clock) = limiter(limits(10, 10, 1_000), &[("a", limits(5, 5, 100))], 60_000);
        grant(&l, "a", 80);
        clock.advance(5);
        let before = l.snapshot();
        // passes both concurrency and RPM gates and the global TPM gate, fails the last one
        assert_eq!(denial(&l, "a", 30), (Gate::SourceTpm, Some(995)));
        assert_eq!(l.snapshot(), before);
        assert_eq!(before.global.requests_in_window, 1);
        assert_eq!(before.global.tokens_in_window, 80);
        assert_eq!(before.global.in_flight, 1);
        // and the next permit id is unaffected: ids stay dense
        assert_eq!(grant(&l, "a", 20), PermitId(2));
    }

    #[test]
    fn rpm_six_of_five_waits_the_exact_remaining_time() {
        let (l, clock) = limiter(limits(0, 0, 0), &[("a", limits(0, 5, 0))], 60_000);
        for _ in 0..5 {
            let p = grant(&l, "a", 0);
            l.settle_inline(p, 0);
            clock.advance(100); // admitted at 0, 100, 200, 300, 400
        }
        clock.set(600);
        assert_eq!(denial(&l, "a", 0), (Gate::SourceRpm, Some(400)));
        clock.set(999);
        assert_eq!(denial(&l, "a", 0), (Gate::SourceRpm, Some(1)));
        clock.set(1_000);
        grant(&l, "a", 0);
        // now 100, 200, 300, 400, 1000 in the window: 100 leaves at 1100
        assert_eq!(denial(&l, "a", 0), (Gate::SourceRpm, Some(100)));
        assert_eq!(l.snapshot().global.requests_in_window, 5);
    }

    #[test]
    fn tpm_precharge_then_refund_and_overcharge() {
        let (l, clock) = limiter(
            limits(0, 0, 1_000),
            &[("a", limits(0, 0, 500)), ("b", limits(0, 0, 0))],
            60_000,
        );
        let usage = |l: &MemoryLimiter| {
            let s = l.snapshot();
            (
                s.global.tokens_in_window,
                source_usage(&s, "a").tokens_in_window,
                source_usage(&s, "b").tokens_in_window,
            )
        };
        let p1 = grant(&l, "a", 200); // t = 0
        assert_eq!(usage(&l), (200, 200, 0));
        assert!(l.settle_inline(p1, 50)); // refund 150
        assert_eq!(usage(&l), (50, 50, 0));
        clock.set(100);
        let p2 = grant(&l, "a", 200);
        assert_eq!(usage(&l), (250, 250, 0));
        assert!(l.settle_inline(p2, 450)); // 250 more than pre-charged
        assert_eq!(usage(&l), (500, 500, 0));
        // a is full: 50 (t=0) must leave for 1 token to fit: at 1000
        clock.set(200);
        assert_eq!(denial(&l, "a", 1), (Gate::SourceTpm, Some(800)));
        let p3 = grant(&l, "b", 400);
        assert_eq!(usage(&l), (900, 500, 400));
        clock.set(300);
        // global 900 + 200 > 1000: 50 (t=0) leaving is not enough, 450 (t=100) too: 1100
        assert_eq!(denial(&l, "b", 200), (Gate::GlobalTpm, Some(800)));
        assert!(l.settle_inline(p3, 0)); // b's refund frees the global window
        assert_eq!(usage(&l), (500, 500, 0));
        grant(&l, "b", 200);
        // the window slides: at 1000 the first entry (50) leaves
        clock.set(1_000);
        assert_eq!(usage(&l), (650, 450, 200));
        clock.set(1_100);
        assert_eq!(usage(&l), (200, 0, 200));
    }

    #[test]
    fn an_estimate_above_the_quota_is_admitted_alone() {
        let (l, clock) = limiter(limits(0, 0, 0), &[("a", limits(0, 0, 100))], 60_000);
        grant(&l, "a", 10);
        assert_eq!(denial(&l, "a", 500), (Gate::SourceTpm, Some(1_000)));
        clock.set(1_000);
        grant(&l, "a", 500);
        assert_eq!(denial(&l, "a", 0), (Gate::SourceTpm, Some(1_000)));
    }

    /// Permits of two sources admitted in one millisecond share the scope's run; settling
    /// one of them changes only its own tokens, in its source's run and in the scope's, and
    /// the TPM wait is the run's leaving time.
    #[test]
    fn a_settle_in_a_shared_millisecond_changes_only_its_own_tokens() {
        let (l, clock) = limiter(
            limits(0, 0, 0),
            &[("a", limits(0, 0, 500)), ("b", limits(0, 0, 0))],
            60_000,
        );
        let _p1 = grant(&l, "a", 100); // t = 0, all three in one millisecond
        let _p2 = grant(&l, "b", 100);
        let p3 = grant(&l, "a", 100);
        assert!(l.settle_inline(p3, 10));
        let s = l.snapshot();
        assert_eq!(s.global.tokens_in_window, 210);
        assert_eq!(s.global.requests_in_window, 3);
        assert_eq!(source_usage(&s, "a").tokens_in_window, 110);
        assert_eq!(source_usage(&s, "b").tokens_in_window, 100);
        clock.set(10);
        // a holds 110 of 500: 400 more must wait for the run of t = 0 to leave, at W.
        assert_eq!(denial(&l, "a", 400), (Gate::SourceTpm, Some(W - 10)));
        grant(&l, "a", 390);
    }

    /// An expired lease's pre-charge stays in the run it shares with a permit that settles.
    #[test]
    fn an_expired_lease_s_precharge_stays_in_its_shared_run() {
        let (l, clock) = limiter(limits(0, 0, 0), &[("a", limits(0, 0, 0))], 50);
        let _p1 = grant(&l, "a", 100); // t = 0
        let p2 = grant(&l, "a", 100);
        clock.set(60); // both leases have expired
        assert!(!l.settle_inline(p2, 5));
        let s = l.snapshot();
        assert_eq!(s.global.in_flight, 0);
        assert_eq!(s.global.tokens_in_window, 200);
        assert_eq!(s.expired_leases, 2);
    }

    #[test]
    fn settle_is_idempotent() {
        let (l, _) = limiter(limits(0, 0, 1_000), &[("a", limits(0, 0, 0))], 60_000);
        let p1 = grant(&l, "a", 100);
        let _p2 = grant(&l, "a", 100);
        assert!(l.settle_inline(p1, 30));
        assert!(!l.settle_inline(p1, 999));
        assert!(!l.settle_inline(p1, 0));
        assert!(!l.settle_inline(PermitId(12_345), 7));
        let s = l.snapshot();
        assert_eq!(s.global.in_flight, 1);
        assert_eq!(s.global.tokens_in_window, 130);
    }

    #[test]
    fn an_expired_lease_frees_the_slot_and_ignores_the_late_settle() {
        let (l, clock) = limiter(limits(0, 0, 0), &[("a", limits(1, 0, 1_000))], 500);
        let p1 = grant(&l, "a", 100);
        clock.set(499);
        assert_eq!(denial(&l, "a", 100), (Gate::SourceConcurrency, None));
        clock.set(500);
        let p2 = grant(&l, "a", 100);
        let s = l.snapshot();
        assert_eq!(s.expired_leases, 1);
        assert_eq!(source_usage(&s, "a").in_flight, 1);
        // the expired permit's pre-charge stays; its settle is ignored
        assert!(!l.settle_inline(p1, 0));
        assert_eq!(l.snapshot().global.tokens_in_window, 200);
        assert_eq!(l.snapshot().global.in_flight, 1);
        assert!(l.settle_inline(p2, 10));
        assert_eq!(l.snapshot().global.tokens_in_window, 110);
        assert_eq!(l.snapshot().global.in_flight, 0);
    }

    #[test]
    fn unknown_source_is_an_error() {
        let (l, _) = limiter(limits(0, 0, 0), &[("a", limits(0, 0, 0))], 500);
        assert_eq!(
            l.try_acquire_now("nope", 1),
            Err(LimiterError::UnknownSource("nope".into()))
        );
    }

    #[test]
    fn a_poisoned_mutex_is_recovered() {
        let (l, _) = limiter(limits(0, 0, 0), &[("a", limits(1, 0, 0))], 500);
        let l = Arc::new(l);
        let l2 = l.clone();
        let _ = std::thread::spawn(move || {
            let _guard = l2.state.lock().unwrap();
            panic!("poison the limiter");
        })
        .join();
        assert!(l.state.is_poisoned());
        let p = grant(&l, "a", 0);
        assert_eq!(denial(&l, "a", 0), (Gate::SourceConcurrency, None));
        assert!(l.settle_inline(p, 0));
        assert_eq!(l.snapshot().global.in_flight, 0);
    }

    /// Many tasks race for an RPM of 7 (global) and 4 (per source) while the manual clock
    /// moves in uneven steps: every window holds exactly 7 admissions, no source more than 4.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rpm_holds_exactly_across_many_tasks() {
        let (l, clock) = limiter(
            limits(0, 7, 0),
            &[
                ("a", limits(0, 4, 0)),
                ("b", limits(0, 4, 0)),
                ("c", limits(0, 4, 0)),
            ],
            60_000,
        );
        let l = Arc::new(l);
        let names = ["a", "b", "c"];
        let mut log: Vec<(u64, [u64; 3])> = Vec::new();
        let mut t = 0;
        while t < 10_000 {
            clock.set(t);
            let tasks: Vec<_> = (0..60)
                .map(|i| {
                    let l = l.clone();
                    tokio::spawn(async move {
                        let source = names[i % 3];
                        match l.try_acquire(source, 0).await.unwrap() {
                            Admission::Granted(id) => {
                                l.settle(id, 0).await.unwrap();
                                Some(i % 3)
                            }
                            Admission::Denied { .. } => None,
                        }
                    })
                })
                .collect();
            let mut per = [0u64; 3];
            for task in tasks {
                if let Some(s) = task.await.unwrap() {
                    per[s] += 1;
                }
            }
            log.push((t, per));
            t += 130;
        }
        let mut bursts = 0;
        for &(end, _) in &log {
            let mut total = 0;
            let mut per = [0u64; 3];
            for &(at, counts) in &log {
                if at + W > end && at <= end {
                    total += counts.iter().sum::<u64>();
                    for (p, c) in per.iter_mut().zip(counts) {
                        *p += c;
                    }
                }
            }
            assert_eq!(total, 7, "window ending at {end}");
            assert!(
                per.iter().all(|&n| n <= 4),
                "window ending at {end}: {per:?}"
            );
            if log
                .iter()
                .any(|&(at, c)| at == end && c.iter().sum::<u64>() > 0)
            {
                bursts += 1;
            }
        }
        // bursts at 0, 1040, 2080, … : 7 each, nothing in between
        assert_eq!(bursts, 10);
        let admitted: u64 = log.iter().map(|(_, c)| c.iter().sum::<u64>()).sum();
        assert_eq!(admitted, 70);
        assert_eq!(l.snapshot().global.in_flight, 0);
    }
}
