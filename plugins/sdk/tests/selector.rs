//! The selector half of the SDK: `selector.wit` is the same contract version, the
//! `Selector` trait implements the generated exports, and `SplitMix64` is the reference
//! splitmix64 sequence (selectors' determinism depends on it never changing).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::{
    CONTRACT_VERSION, Selector, SelectorCandidate, SelectorGuest, SplitMix64, available,
};

#[test]
fn selector_wit_is_the_sdk_contract_version() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wit/selector.wit");
    let text = std::fs::read_to_string(path).unwrap();
    let package = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("package "))
        .unwrap();
    assert_eq!(package, format!("polygateway:plugin@{CONTRACT_VERSION};"));
    assert!(text.contains("world selector {"));
    assert!(text.contains("export source-selector;"));
}

struct Last;

impl Selector for Last {
    const NAME: &'static str = "last";

    fn choose(candidates: &[SelectorCandidate], _seed: u64) -> Option<u32> {
        available(candidates).last().map(|c| c.index)
    }
}

fn candidate(index: u32, available: bool) -> SelectorCandidate {
    SelectorCandidate {
        index,
        name: format!("s{index}"),
        weight: 1,
        in_flight: 0,
        success_ewma: 1.0,
        latency_ewma_ms: 0.0,
        available,
        cooldown_remaining_ms: 0,
        previous: false,
    }
}

#[test]
fn a_selector_implements_the_generated_exports() {
    let info = <Last as SelectorGuest>::describe();
    assert_eq!(info.name, "last");
    assert_eq!(info.contract_version, CONTRACT_VERSION);
    let c = vec![candidate(0, true), candidate(4, true), candidate(7, false)];
    assert_eq!(<Last as SelectorGuest>::choose(c, 0), Some(4));
    assert_eq!(<Last as SelectorGuest>::choose(Vec::new(), 0), None);
}

#[test]
fn splitmix64_is_the_reference_sequence() {
    // Reference outputs of splitmix64 (Vigna's splitmix64.c) for seed 1234567.
    let mut r = SplitMix64::new(1_234_567);
    let got: Vec<u64> = (0..5).map(|_| r.next_u64()).collect();
    assert_eq!(
        got,
        [
            6_457_827_717_110_365_317,
            3_203_168_211_198_807_973,
            9_817_491_932_198_370_423,
            4_593_380_528_125_082_431,
            16_408_922_859_458_223_821,
        ]
    );
}

#[test]
fn below_and_unit_stay_in_range_and_spread() {
    let mut r = SplitMix64::new(42);
    let mut counts = [0u32; 3];
    for _ in 0..30_000 {
        counts[r.below(3) as usize] += 1;
        let x = r.unit_f64();
        assert!((0.0..1.0).contains(&x));
    }
    assert!(
        counts.iter().all(|&c| (9_500..10_500).contains(&c)),
        "{counts:?}"
    );
}
