//! The least-in-flight source selector (`least_inflight.wasm`): the available candidate with
//! the fewest attempts in flight. Ties go first to candidates other than the call's previous
//! attempt's, then rotate by the host's `seed` (the `seed mod k`-th of the `k` tied
//! candidates in index order), so an idle scope still spreads its calls. Weights, success
//! rates and latencies are ignored.

use polygateway_plugin_sdk::{Selector, SelectorCandidate, available};

/// Fewest in-flight attempts; ties avoid the previous source, then rotate by seed.
pub struct LeastInflight;

impl Selector for LeastInflight {
    const NAME: &'static str = "least-inflight";

    fn choose(candidates: &[SelectorCandidate], seed: u64) -> Option<u32> {
        let fewest = available(candidates).map(|c| c.in_flight).min()?;
        let tied: Vec<&SelectorCandidate> = available(candidates)
            .filter(|c| c.in_flight == fewest)
            .collect();
        let fresh: Vec<&SelectorCandidate> = tied.iter().copied().filter(|c| !c.previous).collect();
        let pool = if fresh.is_empty() { tied } else { fresh };
        let k = pool.len() as u64;
        if k == 0 {
            return None;
        }
        pool.get((seed % k) as usize).map(|c| c.index)
    }
}

polygateway_plugin_sdk::export_selector!(LeastInflight);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn candidate(index: u32, in_flight: u32, available: bool, previous: bool) -> SelectorCandidate {
        SelectorCandidate {
            index,
            name: format!("s{index}"),
            weight: 1,
            in_flight,
            success_ewma: 1.0,
            latency_ewma_ms: 0.0,
            available,
            cooldown_remaining_ms: 0,
            previous,
        }
    }

    #[test]
    fn picks_the_fewest_in_flight_among_available() {
        let c = [
            candidate(0, 0, false, false),
            candidate(1, 4, true, false),
            candidate(2, 2, true, false),
            candidate(3, 3, true, false),
        ];
        assert!((0..100).all(|s| LeastInflight::choose(&c, s) == Some(2)));
    }

    #[test]
    fn ties_rotate_by_seed_and_avoid_previous() {
        let c = [
            candidate(0, 1, true, false),
            candidate(1, 1, true, false),
            candidate(2, 1, true, true),
        ];
        let picks: Vec<u32> = (0..4)
            .map(|s| LeastInflight::choose(&c, s).unwrap())
            .collect();
        assert_eq!(picks, [0, 1, 0, 1]);
        let c = [candidate(0, 1, true, true), candidate(1, 2, true, false)];
        assert_eq!(LeastInflight::choose(&c, 3), Some(0));
    }

    #[test]
    fn none_when_nothing_is_available() {
        let c = [candidate(0, 0, false, false)];
        assert_eq!(LeastInflight::choose(&c, 0), None);
        assert_eq!(LeastInflight::choose(&[], 0), None);
    }
}
