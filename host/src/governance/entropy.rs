//! The gateway's one source of randomness ([`Entropy`]): back-off jitter and the ids of
//! calls and attempts (UUIDv7, from the injected clock's wall time). Seeded once — from the
//! operating system in production, from a fixed seed in a test — and lock-free: each draw is
//! one atomic add and a SplitMix64 mix, so the hot path never waits on it.

use std::sync::atomic::{AtomicU64, Ordering};

/// The SplitMix64 increment (the golden ratio in 64 bits).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A seeded, lock-free random source, and the monotonic UUIDv7 generator built on it.
#[derive(Debug)]
pub struct Entropy {
    state: AtomicU64,
    /// The last id's `(unix ms << 16) | counter`: ids made in the same millisecond count
    /// up, so ids sort in the order they were made (RFC 9562 §6.2, method 1).
    last_id: AtomicU64,
}

impl Entropy {
    /// A source with this seed: the same seed gives the same draws.
    pub fn seeded(seed: u64) -> Self {
        Self {
            state: AtomicU64::new(seed),
            last_id: AtomicU64::new(0),
        }
    }

    /// A source seeded from the operating system's randomness (one draw, at start).
    pub fn from_os() -> Self {
        Self::seeded(rand::random::<u64>())
    }

    /// The next 64 random bits.
    pub fn next_u64(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(GOLDEN, Ordering::Relaxed)
            .wrapping_add(GOLDEN);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw from `[0, 1)`.
    pub fn unit(&self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A new UUIDv7 at `unix_ms` (the injected clock's wall time): later than every id this
    /// source made before, even when the wall clock stands still or steps back.
    pub fn uuid_v7(&self, unix_ms: i64) -> uuid::Uuid {
        let ms = u64::try_from(unix_ms).unwrap_or(0) & ((1 << 48) - 1);
        let mut next = 0;
        let _ = self
            .last_id
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                next = if ms > last >> 16 {
                    ms << 16
                } else {
                    last.wrapping_add(1)
                };
                Some(next)
            });
        let (ms, counter) = (next >> 16, (next & 0xFFFF) as u16);
        let r = self.next_u64().to_be_bytes();
        // The counter's top 12 bits are `rand_a`, its low 4 bits head `rand_b` (whose first
        // 6 bits the builder keeps), then random bits.
        let mut tail = [0u8; 10];
        tail[0] = (counter >> 12) as u8;
        tail[1] = (counter >> 4) as u8;
        tail[2] = ((counter as u8 & 0x0F) << 2) | (r[0] & 0x03);
        tail[3..].copy_from_slice(&r[1..8]);
        uuid::Builder::from_unix_timestamp_millis(ms, &tail).into_uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_fixes_the_draws_and_units_stay_in_range() {
        let (a, b) = (Entropy::seeded(7), Entropy::seeded(7));
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], xs[1]);
        let e = Entropy::seeded(1);
        assert!(
            (0..10_000)
                .map(|_| e.unit())
                .all(|u| (0.0..1.0).contains(&u))
        );
    }

    #[test]
    fn ids_are_v7_at_the_given_time_and_sort_in_the_order_made() {
        let e = Entropy::seeded(3);
        let t = 1_700_000_000_123;
        let ids: Vec<uuid::Uuid> = (0..5000).map(|_| e.uuid_v7(t)).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "same millisecond: counted up"
        );
        assert_eq!(ids[0].get_version_num(), 7);
        let (secs, nanos) = ids[0]
            .get_timestamp()
            .map(|ts| ts.to_unix())
            .unwrap_or_default();
        assert_eq!((secs, nanos / 1_000_000), (1_700_000_000, 123));
        let back = e.uuid_v7(t - 1_000);
        assert!(
            back > ids[4999],
            "a wall clock that steps back still gives a later id"
        );
        assert!(e.uuid_v7(t + 1) > back);
    }
}
