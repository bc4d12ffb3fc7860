//! The health-aware source selector (`health_aware.wasm`), the default: power of two
//! choices. Among the available candidates it draws two distinct ones with a splitmix64
//! generator seeded from the host's `seed` and sends the attempt to the better scored —
//! `success-ewma × weight / (1 + in-flight)` — so traffic leans towards sources that
//! succeed and are not busy without stampeding the single best one. With probability
//! [`EXPLORATION`] it picks a uniformly random available candidate instead, so a source
//! that recovered is noticed again (each of `n` available candidates gets at least
//! `EXPLORATION / n` of the picks). A retry (a candidate has `previous`) keeps its call's
//! seed, so the generator is also keyed on the previous source: the retry draws afresh
//! instead of repeating the failed attempt's draw.

use polygateway_plugin_sdk::{Selector, SelectorCandidate, SplitMix64, available, weight_of};

/// Probability (0..1) that a pick ignores the scores and chooses uniformly among the
/// available candidates (the exploration floor).
pub const EXPLORATION: f64 = 0.05;

/// Power of two choices on `success-ewma × weight / (1 + in-flight)`, with a 5 %
/// exploration floor. Deterministic in (candidates, seed).
pub struct HealthAware;

/// A candidate's score (higher is better): its success rate (clamped to 0..=1, NaN as 0)
/// times its weight (0 as 1), divided by one plus its in-flight attempts.
pub fn score(candidate: &SelectorCandidate) -> f64 {
    let success = if candidate.success_ewma.is_nan() {
        0.0
    } else {
        candidate.success_ewma.clamp(0.0, 1.0)
    };
    success * f64::from(weight_of(candidate)) / (1.0 + f64::from(candidate.in_flight))
}

impl Selector for HealthAware {
    const NAME: &'static str = "health-aware";

    fn choose(candidates: &[SelectorCandidate], seed: u64) -> Option<u32> {
        let pool: Vec<&SelectorCandidate> = available(candidates).collect();
        let n = pool.len() as u64;
        if n <= 1 {
            return pool.first().map(|c| c.index);
        }
        let retry_salt = candidates.iter().find(|c| c.previous).map_or(0, |c| {
            (u64::from(c.index) + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)
        });
        let mut rng = SplitMix64::new(seed ^ retry_salt);
        if rng.unit_f64() < EXPLORATION {
            return pool.get(rng.below(n) as usize).map(|c| c.index);
        }
        let first = rng.below(n) as usize;
        let mut second = rng.below(n - 1) as usize;
        if second >= first {
            second += 1;
        }
        let (a, b) = (pool.get(first)?, pool.get(second)?);
        // Ties go to the first draw, itself uniformly random.
        Some(if score(b) > score(a) {
            b.index
        } else {
            a.index
        })
    }
}

polygateway_plugin_sdk::export_selector!(HealthAware);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn candidate(
        index: u32,
        success_ewma: f64,
        in_flight: u32,
        available: bool,
    ) -> SelectorCandidate {
        SelectorCandidate {
            index,
            name: format!("s{index}"),
            weight: 1,
            in_flight,
            success_ewma,
            latency_ewma_ms: 0.0,
            available,
            cooldown_remaining_ms: 0,
            previous: false,
        }
    }

    #[test]
    fn none_when_nothing_is_available() {
        assert_eq!(HealthAware::choose(&[], 1), None);
        let all_down = [candidate(0, 1.0, 0, false), candidate(1, 1.0, 0, false)];
        assert!((0..1000).all(|s| HealthAware::choose(&all_down, s).is_none()));
    }

    #[test]
    fn the_only_available_candidate_is_chosen() {
        let c = [candidate(0, 1.0, 0, false), candidate(1, 0.0, 9, true)];
        assert!((0..1000).all(|s| HealthAware::choose(&c, s) == Some(1)));
    }

    #[test]
    fn prefers_healthy_idle_sources_and_still_explores() {
        let c = [
            candidate(0, 1.0, 0, true),
            candidate(1, 0.2, 0, true),
            candidate(2, 1.0, 8, true),
            candidate(3, 1.0, 0, false),
        ];
        let mut counts = [0u32; 4];
        for seed in 0..10_000 {
            counts[HealthAware::choose(&c, seed).unwrap() as usize] += 1;
        }
        assert_eq!(counts[3], 0);
        assert!(counts[0] > 5_000, "{counts:?}");
        assert!(counts[1] >= 100 && counts[2] >= 100, "{counts:?}");
    }

    #[test]
    fn a_retry_draws_afresh() {
        let mut c: Vec<SelectorCandidate> = (0..4).map(|i| candidate(i, 1.0, 0, true)).collect();
        let first: Vec<Option<u32>> = (0..200).map(|s| HealthAware::choose(&c, s)).collect();
        c[0].previous = true;
        let retry: Vec<Option<u32>> = (0..200).map(|s| HealthAware::choose(&c, s)).collect();
        assert_ne!(first, retry);
    }

    #[test]
    fn score_clamps_and_scales() {
        let mut c = candidate(0, f64::NAN, 0, true);
        assert_eq!(score(&c), 0.0);
        c.success_ewma = 2.0;
        c.in_flight = 1;
        c.weight = 4;
        assert_eq!(score(&c), 2.0);
    }
}
