//! The selector suite: `describe` sanity, the candidate sets of `tests/fixtures/selectors/`
//! (never an unavailable or unknown index, none exactly when nothing is available, the exact
//! counts and failover answers a fixture pins for this selector's name), pseudo-random
//! candidate sets, determinism in (candidates, seed), and large inputs.

use std::sync::Arc;

use serde_json::Value;

use super::fixtures::{self, SELECTOR_FAILOVER, SELECTOR_FILES};
use super::provider::valid_name;
use super::report::{Case, Report};
use super::{CheckOptions, selected};
use crate::plugin::{Candidate, SUPPORTED_CONTRACT_VERSIONS, SelectorComponent};

/// Pseudo-random candidate sets checked per run.
const RANDOM_SETS: u64 = 2_000;

/// Run the selector suite.
pub(super) fn run(c: &Arc<SelectorComponent>, opts: &CheckOptions, report: &mut Report) {
    let info = c.info().clone();
    if selected(opts, "describe::name") {
        let mut case = report.case("describe::name");
        if !valid_name(&info.name) {
            case.fail(format!(
                "name {:?} must be a short stable identifier: 1–64 of a-z, 0-9, `-`, `_`",
                info.name
            ));
        }
        report.finish(case);
    }
    if selected(opts, "describe::contract_version") {
        let mut case = report.case("describe::contract_version");
        if !SUPPORTED_CONTRACT_VERSIONS.contains(&info.contract_version.as_str()) {
            case.fail(format!(
                "contract-version {:?} is not one this host supports ({})",
                info.contract_version,
                SUPPORTED_CONTRACT_VERSIONS.join(", ")
            ));
        }
        report.finish(case);
    }
    for path in SELECTOR_FILES {
        let stem = path
            .trim_start_matches("selectors/")
            .trim_end_matches(".json");
        let name = format!("fixtures::{stem}");
        if selected(opts, &name) {
            let mut case = report.case(name);
            fixture_case(c, path, &mut case);
            report.finish(case);
        }
    }
    if selected(opts, "fixtures::failover") {
        let mut case = report.case("fixtures::failover");
        failover_case(c, &mut case);
        report.finish(case);
    }
    type Check = fn(&Arc<SelectorComponent>, &mut Case);
    let generic: [(&str, Check); 5] = [
        ("contract::random_candidate_sets", random_sets),
        ("contract::empty_candidate_list", empty_list),
        (
            "contract::deterministic_in_candidates_and_seed",
            deterministic,
        ),
        ("contract::extreme_seeds", extreme_seeds),
        ("robustness::ten_thousand_candidates", large_list),
    ];
    for (name, check) in generic {
        if selected(opts, name) {
            let mut case = report.case(name);
            check(c, &mut case);
            report.finish(case);
        }
    }
}

/// A candidate from a fixture object (WIT field names).
fn candidate(v: &Value) -> Result<Candidate, String> {
    let u = |k: &str| v[k].as_u64().ok_or_else(|| format!("`{k}` in {v}"));
    let f = |k: &str| v[k].as_f64().ok_or_else(|| format!("`{k}` in {v}"));
    let b = |k: &str| v[k].as_bool().ok_or_else(|| format!("`{k}` in {v}"));
    Ok(Candidate {
        index: usize::try_from(u("index")?).map_err(|e| e.to_string())?,
        name: v["name"].as_str().unwrap_or_default().to_string(),
        weight: u32::try_from(u("weight")?).map_err(|e| e.to_string())?,
        in_flight: u32::try_from(u("in-flight")?).map_err(|e| e.to_string())?,
        success_ewma: f("success-ewma")?,
        latency_ewma_ms: f("latency-ewma-ms")?,
        available: b("available")?,
        cooldown_remaining_ms: u("cooldown-remaining-ms")?,
        previous: b("previous")?,
    })
}

fn candidates(v: &Value) -> Result<Vec<Candidate>, String> {
    v["candidates"]
        .as_array()
        .ok_or_else(|| "no `candidates` array".to_string())?
        .iter()
        .map(candidate)
        .collect()
}

/// Ask the plugin and check the answer against the contract; `Some(position)` of the chosen
/// candidate in `cands`, `None` for a legitimate none. Problems are noted on `out`.
fn ask(
    c: &Arc<SelectorComponent>,
    cands: &[Candidate],
    seed: u64,
    out: &mut Case,
) -> Option<Option<usize>> {
    let answer = out.call("choose", || c.choose_raw(cands, seed))?;
    let any_available = cands.iter().any(|c| c.available);
    match answer {
        None if any_available => {
            out.fail(format!(
                "seed {seed}: answered none although {} of {} candidates are available",
                cands.iter().filter(|c| c.available).count(),
                cands.len()
            ));
            None
        }
        None => Some(None),
        Some(i) => match cands.iter().position(|c| c.index == i as usize) {
            None => {
                out.fail(format!(
                    "seed {seed}: chose index {i}, which is not a candidate"
                ));
                None
            }
            Some(pos) if !cands[pos].available => {
                out.fail(format!(
                    "seed {seed}: chose index {i} ({}), which is unavailable",
                    cands[pos].name
                ));
                None
            }
            Some(pos) => Some(Some(pos)),
        },
    }
}

/// How many problems one case reports before it stops asking (the rest would repeat them).
const MAX_PROBLEMS: usize = 5;

fn fixture_case(c: &Arc<SelectorComponent>, path: &str, out: &mut Case) {
    let fx: Value = match fixtures::json(path) {
        Ok(v) => v,
        Err(e) => {
            out.fail(e);
            return;
        }
    };
    let cands = match candidates(&fx) {
        Ok(c) => c,
        Err(e) => {
            out.fail(format!("{path}: {e}"));
            return;
        }
    };
    let first = fx["seeds"]["first"].as_u64().unwrap_or(0);
    let count = fx["seeds"]["count"].as_u64().unwrap_or(1000);
    let mut counts = vec![0u64; cands.len()];
    let mut problems = 0;
    for seed in first..first.saturating_add(count) {
        match ask(c, &cands, seed, out) {
            Some(Some(pos)) => counts[pos] += 1,
            Some(None) => {}
            None => {
                problems += 1;
                if problems >= MAX_PROBLEMS {
                    out.fail("(stopped after 5 problems)");
                    return;
                }
            }
        }
    }
    let name = &c.info().name;
    if let Some(want) = fx["expected-counts"][name.as_str()].as_array() {
        let want: Vec<u64> = want.iter().filter_map(Value::as_u64).collect();
        if want != counts {
            out.fail(format!(
                "{path} pins the counts of `{name}` per candidate over seeds {first}..{}: expected {want:?}, got {counts:?}",
                first.saturating_add(count)
            ));
        }
    }
}

fn failover_case(c: &Arc<SelectorComponent>, out: &mut Case) {
    let fx: Value = match fixtures::json(SELECTOR_FAILOVER) {
        Ok(v) => v,
        Err(e) => {
            out.fail(e);
            return;
        }
    };
    let name = c.info().name.clone();
    for case in fx["cases"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let cands = match candidates(case) {
            Ok(c) => c,
            Err(e) => {
                out.fail(e);
                continue;
            }
        };
        let seed = case["seed"].as_u64().unwrap_or(0);
        let Some(answer) = ask(c, &cands, seed, out) else {
            continue;
        };
        // Only the first-party selectors' answers are pinned; any valid answer passes.
        if let Some(want) = case["expect"].get(&name) {
            let got = answer.map(|pos| cands[pos].index as u64);
            if got != want.as_u64() {
                out.fail(format!(
                    "{}: expected index {want}, got {}",
                    case["note"].as_str().unwrap_or("case"),
                    got.map_or_else(|| "none".to_string(), |g| g.to_string())
                ));
            }
        }
    }
}

/// splitmix64, for deterministic pseudo-random candidate sets.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A pseudo-random candidate set: 1–8 sources, about a third unavailable (sometimes all),
/// random load, health, weights and previous flag.
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

fn random_sets(c: &Arc<SelectorComponent>, out: &mut Case) {
    let mut problems = 0;
    for seed in 0..RANDOM_SETS {
        if ask(c, &random_candidates(seed), seed, out).is_none() {
            problems += 1;
            if problems >= MAX_PROBLEMS {
                out.fail("(stopped after 5 problems)");
                return;
            }
        }
    }
}

fn empty_list(c: &Arc<SelectorComponent>, out: &mut Case) {
    if let Some(Some(i)) = out.call("choose", || c.choose_raw(&[], 7)) {
        out.fail(format!("an empty candidate list must give none, got {i}"));
    }
}

fn deterministic(c: &Arc<SelectorComponent>, out: &mut Case) {
    for seed in 0..200 {
        let cands = random_candidates(seed);
        let first = out.call("choose", || c.choose_raw(&cands, seed));
        let again = out.call("choose", || c.choose_raw(&cands, seed));
        if let (Some(a), Some(b)) = (first, again)
            && a != b
        {
            out.fail(format!(
                "seed {seed}: the same candidates and seed gave {a:?}, then {b:?} (a selector derives any randomness from the seed)"
            ));
            return;
        }
    }
}

fn extreme_seeds(c: &Arc<SelectorComponent>, out: &mut Case) {
    let cands = random_candidates(3);
    for seed in [0, 1, u64::MAX, u64::MAX - 1, 1 << 63, u32::MAX as u64 + 1] {
        ask(c, &cands, seed, out);
    }
}

fn large_list(c: &Arc<SelectorComponent>, out: &mut Case) {
    let cands: Vec<Candidate> = (0..10_000)
        .map(|i| Candidate {
            available: i % 7 == 3,
            in_flight: (i % 13) as u32,
            success_ewma: (i % 100) as f64 / 100.0,
            ..Candidate::new(i, format!("source-{i}"))
        })
        .collect();
    ask(c, &cands, 42, out);
}
