//! Selector conformance: the three first-party selector components (`health-aware`,
//! `round-robin`, `least-inflight`) run in the real wasm runtime over 10,000 picks with fixed
//! seeds on the candidate sets of `tests/fixtures/selectors/`: none ever picks an unavailable
//! candidate, each answers none when nothing is available, round-robin splits exactly evenly
//! (and by weight), least-inflight always takes the minimum, health-aware favours the healthy
//! idle source while still exploring; counts are exact because the selectors are
//! deterministic in (candidates, seed). A hand-written rogue component shows the host
//! overriding contract violations and surviving traps and runaway loops.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use polygateway::plugin::{
    BUILTIN_SELECTORS, Candidate, PluginEngine, PluginError, PluginLimits,
    SUPPORTED_CONTRACT_VERSIONS, SelectSource, SelectorComponent, builtin_provider_bytes,
    builtin_selector_bytes,
};
use polygateway_tests::fixture;
use serde_json::Value;

const PICKS: u64 = 10_000;

/// The three built-in selectors, loaded once for the whole test binary.
fn selectors() -> &'static [(String, Arc<SelectorComponent>)] {
    static LOADED: OnceLock<Vec<(String, Arc<SelectorComponent>)>> = OnceLock::new();
    LOADED.get_or_init(|| {
        let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
        BUILTIN_SELECTORS
            .iter()
            .map(|name| {
                let bytes = builtin_selector_bytes(name).unwrap();
                let c =
                    SelectorComponent::load(&engine, &format!("builtin:{name}"), bytes).unwrap();
                (name.to_string(), c)
            })
            .collect()
    })
}

fn selector(name: &str) -> &'static Arc<SelectorComponent> {
    &selectors().iter().find(|(n, _)| n == name).unwrap().1
}

fn load_fixture(name: &str) -> Value {
    let path = fixture(&format!("selectors/{name}"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn candidate_from_json(v: &Value) -> Candidate {
    let u = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    let b = |k: &str| v[k].as_bool().unwrap_or_else(|| panic!("{k} in {v}"));
    Candidate {
        index: u("index") as usize,
        name: v["name"].as_str().unwrap().to_string(),
        weight: u("weight") as u32,
        in_flight: u("in-flight") as u32,
        success_ewma: f("success-ewma"),
        latency_ewma_ms: f("latency-ewma-ms"),
        available: b("available"),
        cooldown_remaining_ms: u("cooldown-remaining-ms"),
        previous: b("previous"),
    }
}

fn candidates(v: &Value) -> Vec<Candidate> {
    v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(candidate_from_json)
        .collect()
}

fn seeds(v: &Value) -> std::ops::Range<u64> {
    let first = v["seeds"]["first"].as_u64().unwrap();
    first..first + v["seeds"]["count"].as_u64().unwrap()
}

/// Per-candidate pick counts (by position) of the plugin's own answers over `seeds`,
/// checking on every pick that the answer names an available candidate.
fn counts(sel: &SelectorComponent, cands: &[Candidate], seeds: std::ops::Range<u64>) -> Vec<u64> {
    let mut counts = vec![0u64; cands.len()];
    for seed in seeds {
        let answer = sel.choose_raw(cands, seed).unwrap();
        let i = answer.unwrap_or_else(|| panic!("{}: none at seed {seed}", sel.info().name));
        let pos = cands
            .iter()
            .position(|c| c.index == i as usize)
            .unwrap_or_else(|| panic!("{}: unknown index {i} at seed {seed}", sel.info().name));
        assert!(
            cands[pos].available,
            "{}: picked unavailable {i} at seed {seed}",
            sel.info().name
        );
        counts[pos] += 1;
    }
    counts
}

/// splitmix64, to vary candidate sets per pick deterministically.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A pseudo-random candidate set for pick `seed`: 1–8 sources, random availability (about a
/// third unavailable, sometimes all), in-flight 0–5, success 0–1, random weights and
/// previous flag.
fn random_candidates(seed: u64) -> Vec<Candidate> {
    let r = mix(seed ^ 0xA5A5_A5A5);
    let n = 1 + (r % 8) as usize;
    let previous = (r >> 8) % 10;
    (0..n)
        .map(|i| {
            let h = mix(r.wrapping_add(i as u64));
            let down = h.is_multiple_of(3);
            Candidate {
                available: !down,
                in_flight: ((h >> 8) % 6) as u32,
                success_ewma: ((h >> 16) % 1001) as f64 / 1000.0,
                weight: ((h >> 32) % 4) as u32,
                latency_ewma_ms: ((h >> 40) % 2000) as f64,
                cooldown_remaining_ms: if down { (h >> 20) % 60_000 } else { 0 },
                previous: previous == i as u64,
                ..Candidate::new(i, format!("s{i}"))
            }
        })
        .collect()
}

#[test]
fn builtin_selectors_load_and_describe_themselves() {
    let names: Vec<&str> = selectors().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["health-aware", "round-robin", "least-inflight"]);
    for (name, c) in selectors() {
        assert_eq!(&c.info().name, name);
        assert_eq!(c.info().contract_version, SUPPORTED_CONTRACT_VERSIONS[1]);
        assert_eq!(SelectSource::name(c), name);
        assert_eq!(c.origin(), format!("builtin:{name}"));
    }
    assert!(builtin_selector_bytes("random").is_none());
    assert!(builtin_selector_bytes("").is_none());
}

#[test]
fn no_selector_ever_picks_an_unavailable_candidate() {
    let mixed = load_fixture("mixed.json");
    let cands = candidates(&mixed);
    for (name, sel) in selectors() {
        let got = counts(sel, &cands, seeds(&mixed));
        assert_eq!(got.iter().sum::<u64>(), PICKS, "{name}");
        for (c, n) in cands.iter().zip(&got) {
            if !c.available {
                assert_eq!(*n, 0, "{name} picked {}", c.name);
            }
        }
        // Random candidate sets: the answer is available, and none exactly when nothing is.
        for seed in 0..PICKS {
            let cands = random_candidates(seed);
            let answer = sel.choose_raw(&cands, seed).unwrap();
            match answer {
                Some(i) => {
                    let c = cands.iter().find(|c| c.index == i as usize);
                    assert!(
                        c.is_some_and(|c| c.available),
                        "{name}: picked {i} at seed {seed}: {cands:?}"
                    );
                }
                None => assert!(
                    cands.iter().all(|c| !c.available),
                    "{name}: none at seed {seed} with available candidates: {cands:?}"
                ),
            }
            // The host-side adapter agrees with a conforming plugin.
            let adapted = SelectSource::choose(sel, &cands, seed).unwrap();
            assert_eq!(adapted, answer.map(|i| i as usize), "{name} at seed {seed}");
        }
        assert_eq!(sel.contract_violations(), 0, "{name}");
    }
}

#[test]
fn every_selector_answers_none_when_nothing_is_available() {
    let none = load_fixture("none_available.json");
    let cands = candidates(&none);
    for (name, sel) in selectors() {
        for seed in seeds(&none) {
            assert_eq!(
                sel.choose_raw(&cands, seed).unwrap(),
                None,
                "{name} at {seed}"
            );
        }
        assert_eq!(sel.choose_raw(&[], 0).unwrap(), None, "{name}, empty list");
        assert_eq!(
            SelectSource::choose(sel, &cands, 0).unwrap(),
            None,
            "{name}"
        );
        assert_eq!(SelectSource::choose(sel, &[], 0).unwrap(), None, "{name}");
    }
}

#[test]
fn fixture_counts_are_exact() {
    for file in ["mixed.json", "health.json", "weighted.json"] {
        let fx = load_fixture(file);
        let cands = candidates(&fx);
        let mut actual = BTreeMap::new();
        for (name, sel) in selectors() {
            actual.insert(name.clone(), counts(sel, &cands, seeds(&fx)));
        }
        for (name, got) in &actual {
            let want: Option<Vec<u64>> = fx["expected-counts"][name]
                .as_array()
                .map(|a| a.iter().map(|n| n.as_u64().unwrap()).collect());
            assert_eq!(Some(got), want.as_ref(), "{file}, {name}; all: {actual:?}");
        }
    }
}

#[test]
fn round_robin_spreads_exactly_evenly_over_available_candidates() {
    let rr = selector("round-robin");
    let mixed = load_fixture("mixed.json");
    let cands = candidates(&mixed);
    for first in [0, 12_345, u64::MAX - PICKS] {
        let got = counts(rr, &cands, first..first + PICKS);
        let on: Vec<u64> = cands
            .iter()
            .zip(&got)
            .filter(|(c, _)| c.available)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(on.len(), 4);
        let (min, max) = (on.iter().min().unwrap(), on.iter().max().unwrap());
        assert!(max - min <= 1, "from seed {first}: {got:?}");
    }
    // Successive seeds walk the available candidates in index order.
    let walk: Vec<u32> = (0..8)
        .map(|s| rr.choose_raw(&cands, s).unwrap().unwrap())
        .collect();
    assert_eq!(walk, [0, 2, 4, 5, 0, 2, 4, 5]);
}

#[test]
fn round_robin_honours_weights_exactly_per_cycle() {
    let rr = selector("round-robin");
    let fx = load_fixture("weighted.json");
    let cands = candidates(&fx);
    // Weights 3, 0 (as 1), 2; the weight-5 source is unavailable: 6 positions per cycle.
    assert_eq!(counts(rr, &cands, 0..6000), [3000, 1000, 2000, 0]);
    assert_eq!(counts(rr, &cands, 7..13), [3, 1, 2, 0]);
}

#[test]
fn failover_cases_choose_the_expected_source() {
    let fx = load_fixture("failover.json");
    for case in fx["cases"].as_array().unwrap() {
        let cands = candidates(case);
        let seed = case["seed"].as_u64().unwrap();
        for (name, want) in case["expect"].as_object().unwrap() {
            let got = selector(name).choose_raw(&cands, seed).unwrap();
            assert_eq!(
                got.map(u64::from),
                want.as_u64(),
                "{name}: {}",
                case["note"]
            );
        }
    }
}

#[test]
fn least_inflight_always_picks_the_minimum() {
    let li = selector("least-inflight");
    let mut tie_picks = BTreeMap::<u32, u64>::new();
    for seed in 0..PICKS {
        let cands = random_candidates(seed);
        let Some(min) = cands
            .iter()
            .filter(|c| c.available)
            .map(|c| c.in_flight)
            .min()
        else {
            continue;
        };
        let i = li.choose_raw(&cands, seed).unwrap().unwrap();
        let c = &cands[i as usize];
        assert!(
            c.available && c.in_flight == min,
            "seed {seed}: {i} in {cands:?}"
        );
    }
    // Idle sources: ties rotate with the seed instead of piling onto index 0.
    let idle: Vec<Candidate> = (0..3).map(|i| Candidate::new(i, format!("s{i}"))).collect();
    for seed in 0..3000 {
        *tie_picks
            .entry(li.choose_raw(&idle, seed).unwrap().unwrap())
            .or_default() += 1;
    }
    assert_eq!(
        tie_picks.into_values().collect::<Vec<_>>(),
        [1000, 1000, 1000]
    );
}

#[test]
fn health_aware_favours_the_healthy_idle_source_and_keeps_exploring() {
    let ha = selector("health-aware");
    let fx = load_fixture("health.json");
    let cands = candidates(&fx);
    let got = counts(ha, &cands, seeds(&fx));
    let by_name = |n: &str| got[cands.iter().position(|c| c.name == n).unwrap()];
    let (healthy, unhealthy, busy, loaded) = (
        by_name("healthy-idle"),
        by_name("unhealthy"),
        by_name("busy"),
        by_name("slightly-loaded"),
    );
    assert_eq!(by_name("unavailable"), 0);
    assert!(healthy > 2 * unhealthy && healthy > 2 * busy, "{got:?}");
    assert!(healthy > loaded && loaded > unhealthy, "{got:?}");
    // Exploration floor: every available source gets at least 1 % of the picks.
    for (c, n) in cands.iter().zip(&got) {
        if c.available {
            assert!(*n >= PICKS / 100, "{} got {n}: {got:?}", c.name);
        }
    }
    // Deterministic: the same seeds give the same counts.
    assert_eq!(counts(ha, &cands, seeds(&fx)), got);
}

/// A hand-written selector component that breaks the contract on purpose: `choose` answers
/// `some(seed)` (so any index, known or not, available or not), none for seed 999, traps
/// for seed 666 and loops forever for seed 777. `describe` reports `rogue`, `version`.
fn rogue_component(version: &str) -> Vec<u8> {
    let describe = format!(
        "\\10\\00\\00\\00\\05\\00\\00\\00\\20\\00\\00\\00\\{:02x}\\00\\00\\00",
        version.len()
    );
    wat::parse_str(format!(
        r#"(component
  (core module $m
    (memory (export "memory") 1)
    (global $heap (mut i32) (i32.const 1024))
    (data (i32.const 16) "rogue")
    (data (i32.const 32) "{version}")
    (data (i32.const 64) "{describe}")
    (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p (i32.and
        (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get 2))))
      (global.set $heap (i32.add (local.get $p) (local.get 3)))
      (local.get $p))
    (func (export "describe") (result i32) (i32.const 64))
    (func (export "choose") (param i32 i32 i64) (result i32)
      (global.set $heap (i32.const 1024))
      (if (i64.eq (local.get 2) (i64.const 666)) (then unreachable))
      (if (i64.eq (local.get 2) (i64.const 777)) (then (loop $l (br $l))))
      (if (i64.eq (local.get 2) (i64.const 999))
        (then (i32.store8 (i32.const 128) (i32.const 0)) (return (i32.const 128))))
      (i32.store8 (i32.const 128) (i32.const 1))
      (i32.store (i32.const 132) (i32.wrap_i64 (local.get 2)))
      (i32.const 128)))
  (core instance $i (instantiate $m))
  (alias core export $i "memory" (core memory $mem))
  (alias core export $i "cabi_realloc" (core func $realloc))
  (type $info (record (field "name" string) (field "contract-version" string)))
  (type $cand (record
    (field "index" u32) (field "name" string) (field "weight" u32) (field "in-flight" u32)
    (field "success-ewma" f64) (field "latency-ewma-ms" f64) (field "available" bool)
    (field "cooldown-remaining-ms" u64) (field "previous" bool)))
  (type $cands (list $cand))
  (type $answer (option u32))
  (func $describe (result $info)
    (canon lift (core func $i "describe") (memory $mem) (realloc $realloc)))
  (func $choose (param "candidates" $cands) (param "seed" u64) (result $answer)
    (canon lift (core func $i "choose") (memory $mem) (realloc $realloc)))
  (instance $api
    (export "selector-info" (type $info))
    (export "candidate" (type $cand))
    (export "describe" (func $describe))
    (export "choose" (func $choose)))
  (export "polygateway:plugin/source-selector@{version}" (instance $api)))"#
    ))
    .unwrap()
}

fn three_with_middle_down() -> Vec<Candidate> {
    vec![
        Candidate::new(0, "a"),
        Candidate {
            available: false,
            cooldown_remaining_ms: 5000,
            ..Candidate::new(1, "b")
        },
        Candidate::new(2, "c"),
    ]
}

#[test]
fn the_host_overrides_contract_violations() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let rogue = SelectorComponent::load(&engine, "rogue.wasm", &rogue_component("0.1.0")).unwrap();
    assert_eq!(rogue.info().name, "rogue");
    let cands = three_with_middle_down();
    // The plugin's own answers.
    assert_eq!(rogue.choose_raw(&cands, 1).unwrap(), Some(1));
    assert_eq!(rogue.choose_raw(&cands, 999).unwrap(), None);
    // What the host does with them: a valid answer stands …
    assert_eq!(SelectSource::choose(&rogue, &cands, 2).unwrap(), Some(2));
    assert_eq!(rogue.contract_violations(), 0);
    // … an unavailable index, an unknown index, or none while a source is available become
    // the first available source.
    assert_eq!(SelectSource::choose(&rogue, &cands, 1).unwrap(), Some(0));
    assert_eq!(SelectSource::choose(&rogue, &cands, 7).unwrap(), Some(0));
    assert_eq!(SelectSource::choose(&rogue, &cands, 999).unwrap(), Some(0));
    let first_down = [
        Candidate {
            available: false,
            ..Candidate::new(0, "a")
        },
        Candidate::new(1, "b"),
    ];
    assert_eq!(
        SelectSource::choose(&rogue, &first_down, 0).unwrap(),
        Some(1)
    );
    assert_eq!(rogue.contract_violations(), 4);
    // Nothing available: none, without asking the plugin (seed 666 would trap).
    let none = [Candidate {
        available: false,
        ..Candidate::new(0, "a")
    }];
    assert_eq!(SelectSource::choose(&rogue, &none, 666).unwrap(), None);
    // Usable behind the trait object the retry loop holds.
    let dynamic: Arc<dyn SelectSource> = rogue.clone();
    assert_eq!(dynamic.choose(&cands, 2).unwrap(), Some(2));
    assert_eq!(dynamic.name(), "rogue");
}

#[test]
fn a_trap_or_a_runaway_selector_fails_only_that_call() {
    let limits = PluginLimits {
        call_timeout: Duration::from_millis(50),
        ..PluginLimits::default()
    };
    let engine = PluginEngine::new(limits, None).unwrap();
    let rogue = SelectorComponent::load(&engine, "rogue.wasm", &rogue_component("0.1.0")).unwrap();
    let cands = three_with_middle_down();
    assert_eq!(rogue.idle_instances(), 1);
    let err = SelectSource::choose(&rogue, &cands, 666).unwrap_err();
    assert!(
        matches!(&err, PluginError::Fault { plugin, function: "choose", .. } if plugin == "rogue"),
        "{err:?}"
    );
    // The trapped instance was discarded; the next call gets a fresh one.
    assert_eq!(rogue.idle_instances(), 0);
    assert_eq!(SelectSource::choose(&rogue, &cands, 2).unwrap(), Some(2));
    assert_eq!(rogue.idle_instances(), 1);
    let started = std::time::Instant::now();
    let err = rogue.choose_raw(&cands, 777).unwrap_err();
    assert!(
        err.to_string().contains("exceeded its time budget"),
        "{err}"
    );
    // Stopped, and within the wall-clock backstop. The 50 ms budget is CPU time, and past its
    // first slice the call runs on a thread at nice +10, which a machine busy with the rest
    // of the suite gives a tenth of a core's share: seconds of wall-clock time are its CPU
    // budget there, not a runaway (without the budget this call never returns).
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(rogue.choose_raw(&cands, 0).unwrap(), Some(0));
}

#[test]
fn selectors_of_another_version_or_world_are_refused() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let err =
        SelectorComponent::load(&engine, "future.wasm", &rogue_component("0.3.0")).unwrap_err();
    assert!(matches!(err, PluginError::Version { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "plugin future.wasm exports polygateway:plugin/source-selector@0.3.0; this host supports polygateway:plugin/source-selector versions 0.1.0 and 0.2.0"
    );
    let provider = builtin_provider_bytes(polygateway::config::FirstParty::OpenAi);
    let err = SelectorComponent::load(&engine, "openai.wasm", provider).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot load plugin openai.wasm: it does not export polygateway:plugin/source-selector (is it a source-selector component?)"
    );
}
