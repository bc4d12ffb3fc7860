//! The adaptive pacer of one source (docs/limiter.md#adaptive-pacer: back off adaptively on
//! repeated 429s): AIMD on the source's concurrency. A 429 halves the allowed in-flight
//! count (multiplicative decrease, floor 1); every success raises it by one (additive
//! increase); once it exceeds the configured maximum — or, with none configured, twice the
//! peak in-flight seen since the cut, i.e. the cap no longer constrains anything — the cap is
//! lifted. Lock-free: the whole state is one `AtomicU64`.

use std::sync::atomic::{AtomicU64, Ordering};

/// The AIMD pacer of one source. Consulted before the limiter: `admit(in_flight)` → send or
/// treat the source as busy; report `on_rate_limited` for each 429 and `on_success` for each
/// success.
#[derive(Debug)]
pub struct AdaptivePacer {
    /// The source's `MAX_CONCURRENCY` (0 = none).
    configured_max: u32,
    /// High 32 bits: the current cap (0 = no cap). Low 32 bits: the peak in-flight count
    /// admitted since the last cut.
    state: AtomicU64,
}

fn pack(limit: u32, peak: u32) -> u64 {
    (u64::from(limit) << 32) | u64::from(peak)
}

fn unpack(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}

impl AdaptivePacer {
    /// A pacer without a cap, for a source whose configured `MAX_CONCURRENCY` is
    /// `configured_max` (0 = none).
    pub fn new(configured_max: u32) -> Self {
        Self {
            configured_max,
            state: AtomicU64::new(pack(0, 0)),
        }
    }

    /// The current cap on in-flight requests, `None` when no cap applies.
    pub fn limit(&self) -> Option<u32> {
        match unpack(self.state.load(Ordering::Acquire)).0 {
            0 => None,
            n => Some(n),
        }
    }

    /// May one more request start while `in_flight` requests of this source are in flight?
    /// True when there is no cap or `in_flight < cap` (and then records `in_flight + 1` as a
    /// possible peak).
    pub fn admit(&self, in_flight: u32) -> bool {
        let (limit, _) = unpack(self.state.load(Ordering::Acquire));
        if limit == 0 {
            return true;
        }
        if in_flight >= limit {
            return false;
        }
        let now = in_flight.saturating_add(1);
        // Only the peak moves here; a concurrent cut or lift wins (it resets the peak).
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                let (l, p) = unpack(v);
                (l != 0 && now > p).then(|| pack(l, now))
            });
        true
    }

    /// A 429 arrived while `in_flight` requests of this source were in flight (counting the
    /// one that got it): cap = `max(1, in_flight / 2)`. A 429 from traffic admitted under an
    /// older, higher cap (`in_flight` above the current cap) does not cut again: that cap is
    /// already below where the 429 happened, and cutting once per drained request would
    /// collapse it to 1.
    pub fn on_rate_limited(&self, in_flight: u32) {
        let cut = (in_flight / 2).max(1);
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                let (limit, _) = unpack(v);
                if limit != 0 && in_flight > limit {
                    return None;
                }
                let next = if limit == 0 { cut } else { cut.min(limit) };
                Some(pack(next, next))
            });
    }

    /// A request of this source succeeded: cap + 1, and the cap is lifted once it exceeds
    /// the configured maximum (or, with none, twice the peak in-flight since the cut).
    pub fn on_success(&self) {
        let max = self.configured_max;
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                let (limit, peak) = unpack(v);
                if limit == 0 {
                    return None;
                }
                let next = limit.saturating_add(1);
                let ceiling = if max > 0 { max } else { peak.saturating_mul(2) };
                Some(if next > ceiling {
                    pack(0, 0)
                } else {
                    pack(next, peak)
                })
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn uncapped_until_the_first_429() {
        let p = AdaptivePacer::new(10);
        assert_eq!(p.limit(), None);
        assert!(p.admit(1_000));
        p.on_success();
        assert_eq!(p.limit(), None);
    }

    #[test]
    fn a_429_halves_in_flight_with_floor_one() {
        let p = AdaptivePacer::new(10);
        p.on_rate_limited(8);
        assert_eq!(p.limit(), Some(4));
        assert!(p.admit(3));
        assert!(!p.admit(4));
        assert!(!p.admit(9));

        let q = AdaptivePacer::new(0);
        q.on_rate_limited(1);
        assert_eq!(q.limit(), Some(1));
        assert!(q.admit(0));
        assert!(!q.admit(1));
        q.on_rate_limited(0);
        assert_eq!(q.limit(), Some(1));
    }

    #[test]
    fn repeated_429s_cut_from_where_they_happen_but_never_raise() {
        let p = AdaptivePacer::new(0);
        p.on_rate_limited(10); // cap 5
        // stale 429s from the 10 admitted before the cut: no further cut
        p.on_rate_limited(9);
        p.on_rate_limited(6);
        assert_eq!(p.limit(), Some(5));
        // a 429 at a concurrency the cap allows cuts again
        p.on_rate_limited(4);
        assert_eq!(p.limit(), Some(2));
        p.on_rate_limited(2);
        assert_eq!(p.limit(), Some(1));
        p.on_rate_limited(1);
        assert_eq!(p.limit(), Some(1));
    }

    #[test]
    fn successes_add_one_and_lift_past_the_configured_max() {
        let p = AdaptivePacer::new(6);
        p.on_rate_limited(8); // 4
        p.on_success();
        assert_eq!(p.limit(), Some(5));
        p.on_success();
        assert_eq!(p.limit(), Some(6));
        p.on_success(); // 7 > 6: lifted
        assert_eq!(p.limit(), None);
        assert!(p.admit(100));
    }

    #[test]
    fn without_a_max_lifts_past_twice_the_peak_since_the_cut() {
        let p = AdaptivePacer::new(0);
        p.on_rate_limited(6); // cap 3, peak starts at 3
        // demand reaches the cap: 4 in flight after two successes
        p.on_success(); // 4
        assert!(p.admit(3)); // peak 4
        p.on_success(); // 5
        p.on_success(); // 6
        p.on_success(); // 7
        p.on_success(); // 8
        assert_eq!(p.limit(), Some(8));
        p.on_success(); // 9 > 2 × 4: lifted
        assert_eq!(p.limit(), None);
    }

    #[test]
    fn a_cut_resets_the_peak() {
        let p = AdaptivePacer::new(0);
        p.on_rate_limited(20); // 10
        assert!(p.admit(9)); // peak 10
        p.on_rate_limited(4); // 2, peak 2
        p.on_success(); // 3
        p.on_success(); // 4
        assert_eq!(p.limit(), Some(4));
        p.on_success(); // 5 > 4: lifted (the old peak of 10 does not count)
        assert_eq!(p.limit(), None);
    }

    #[test]
    fn concurrent_use_keeps_the_cap_in_range() {
        let p = Arc::new(AdaptivePacer::new(50));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let p = p.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000u32 {
                        match (i + t) % 7 {
                            0 => p.on_rate_limited(i % 40),
                            1..=3 => p.on_success(),
                            _ => {
                                p.admit(i % 60);
                            }
                        }
                        if let Some(l) = p.limit() {
                            assert!((1..=50).contains(&l), "cap {l}");
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}
