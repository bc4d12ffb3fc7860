//! The round-robin source selector (`round_robin.wasm`): the host's per-scope `seed` (a
//! counter advancing once per call) is the cursor. A call's first attempt goes to position
//! `seed mod W` of the available candidates laid out in index order, each taking `weight`
//! consecutive positions (W = the sum of their weights; with equal weights this is simply
//! the `seed mod n`-th available candidate), so every W successive calls split exactly by
//! weight. A retry (a candidate has `previous`) fails over in order: the next available
//! candidate after the previous one, wrapping around.

use polygateway_plugin_sdk::{Selector, SelectorCandidate, available, weight_of};

/// Weighted round robin by the host's rotating seed, in-order failover on retries.
pub struct RoundRobin;

impl Selector for RoundRobin {
    const NAME: &'static str = "round-robin";

    fn choose(candidates: &[SelectorCandidate], seed: u64) -> Option<u32> {
        if let Some(previous) = candidates.iter().find(|c| c.previous) {
            return available(candidates)
                .find(|c| c.index > previous.index)
                .or_else(|| available(candidates).next())
                .map(|c| c.index);
        }
        let total: u64 = available(candidates).map(|c| u64::from(weight_of(c))).sum();
        if total == 0 {
            return None;
        }
        let mut position = seed % total;
        for c in available(candidates) {
            let w = u64::from(weight_of(c));
            if position < w {
                return Some(c.index);
            }
            position -= w;
        }
        None
    }
}

polygateway_plugin_sdk::export_selector!(RoundRobin);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn candidate(index: u32, weight: u32, available: bool, previous: bool) -> SelectorCandidate {
        SelectorCandidate {
            index,
            name: format!("s{index}"),
            weight,
            in_flight: 0,
            success_ewma: 1.0,
            latency_ewma_ms: 0.0,
            available,
            cooldown_remaining_ms: 0,
            previous,
        }
    }

    #[test]
    fn rotates_over_available_candidates_in_order() {
        let c = [
            candidate(0, 1, true, false),
            candidate(1, 1, false, false),
            candidate(2, 1, true, false),
            candidate(3, 1, true, false),
        ];
        let picks: Vec<u32> = (0..6).map(|s| RoundRobin::choose(&c, s).unwrap()).collect();
        assert_eq!(picks, [0, 2, 3, 0, 2, 3]);
    }

    #[test]
    fn weights_take_consecutive_positions() {
        let c = [candidate(0, 3, true, false), candidate(1, 0, true, false)];
        let picks: Vec<u32> = (0..8).map(|s| RoundRobin::choose(&c, s).unwrap()).collect();
        assert_eq!(picks, [0, 0, 0, 1, 0, 0, 0, 1]);
    }

    #[test]
    fn fails_over_to_the_next_available_after_previous() {
        let c = [
            candidate(0, 1, true, false),
            candidate(1, 1, true, true),
            candidate(2, 1, false, false),
            candidate(3, 1, true, false),
        ];
        assert_eq!(RoundRobin::choose(&c, 0), Some(3));
        let c = [
            candidate(0, 1, true, false),
            candidate(1, 1, false, false),
            candidate(2, 1, false, true),
        ];
        assert_eq!(RoundRobin::choose(&c, 5), Some(0));
        let c = [candidate(0, 1, false, false), candidate(1, 1, true, true)];
        assert_eq!(RoundRobin::choose(&c, 5), Some(1));
        let c = [candidate(0, 1, false, true)];
        assert_eq!(RoundRobin::choose(&c, 5), None);
    }
}
