//! The strategy suite (`tests/fixtures/strategies/`): `describe` sanity; `prepare` never
//! proposes a native `json-schema` to a provider without native support, and a native schema
//! carries the target's name, schema and strictness; `repair` answers JSON text or a typed
//! repair error, never a trap, with the exact answers a fixture pins for the strategies it
//! lists; hostile raw answers (garbage, 8 MiB, deeply nested, replacement characters).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::fixtures;
use super::provider::valid_name;
use super::report::{Case, Report, shorten, show};
use super::{CheckOptions, selected};
use crate::plugin::{
    Capabilities, JsonTarget, Preparation, RepairError, ResponseFormat,
    SUPPORTED_CONTRACT_VERSIONS, StrategyComponent, ThinkingStyle,
};

/// Run the strategy suite.
pub(super) fn run(c: &Arc<StrategyComponent>, opts: &CheckOptions, report: &mut Report) {
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
    prepare_cases(c, opts, report);
    for path in fixtures::STRATEGY_REPAIR_FILES {
        repair_cases(c, path, opts, report);
    }
    robustness(c, opts, report);
}

fn target(v: &Value) -> JsonTarget {
    JsonTarget {
        name: v["name"].as_str().unwrap_or_default().to_string(),
        schema_json: (!v["schema"].is_null()).then(|| v["schema"].to_string()),
        strict: v["strict"].as_bool().unwrap_or(false),
    }
}

fn capabilities(native_json_schema: bool) -> Capabilities {
    Capabilities {
        streaming: true,
        native_json_schema,
        thinking: ThinkingStyle::None,
        prefill_continuation: false,
        chat: true,
        embedding: false,
        ocr: false,
        audio: false,
    }
}

fn load_json(report: &mut Report, path: &str) -> Option<Value> {
    super::provider::load::<Value>(report, super::fixtures::Source::EMBEDDED, path)
}

fn prepare_cases(c: &Arc<StrategyComponent>, opts: &CheckOptions, report: &mut Report) {
    let Some(fx) = load_json(report, fixtures::STRATEGY_PREPARE) else {
        return;
    };
    let name = c.info().name.clone();
    for (i, case) in fx["prepare"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let native = case["native-json-schema"].as_bool().unwrap_or(false);
        let target_name = case["target"].as_str().unwrap_or_default();
        let case_name = format!(
            "prepare::{i}_{target_name}_target_{}",
            if native { "native" } else { "no_native" }
        );
        if !selected(opts, &case_name) {
            continue;
        }
        let mut out = report.case(case_name);
        let t = target(&fx["targets"][target_name]);
        if let Some(p) = out.call("prepare", || c.prepare_raw(&t, &capabilities(native))) {
            judge_preparation(&p, &t, native, case["expect"].get(&name), &mut out);
        }
        report.finish(out);
    }
}

fn judge_preparation(
    p: &Preparation,
    t: &JsonTarget,
    native: bool,
    want: Option<&Value>,
    out: &mut Case,
) {
    let kind = match &p.response_format {
        None => Value::Null,
        Some(ResponseFormat::JsonObject) => Value::from("json-object"),
        Some(ResponseFormat::JsonSchema(_)) => Value::from("json-schema"),
    };
    if let Some(ResponseFormat::JsonSchema(s)) = &p.response_format {
        if !native {
            out.fail(
                "proposed a native json-schema to a provider without native-json-schema (the host drops it)",
            );
        }
        if s.name != t.name || s.strict != t.strict {
            out.fail(format!(
                "native schema: name {:?} strict {}, expected the target's {:?} strict {}",
                s.name, s.strict, t.name, t.strict
            ));
        }
        let same = match (
            &t.schema_json,
            serde_json::from_str::<Value>(&s.schema_json),
        ) {
            (Some(ts), Ok(got)) => serde_json::from_str::<Value>(ts).ok() == Some(got),
            _ => false,
        };
        if !same {
            out.fail(format!(
                "native schema: schema-json {} is not the target's schema",
                shorten(&s.schema_json, 160)
            ));
        }
    }
    let Some(want) = want else {
        return;
    };
    if want["response-format"] != kind {
        out.fail(format!(
            "response-format: expected {}, got {}",
            show(&want["response-format"]),
            show(&kind)
        ));
    }
    if let Some(instructions) = want["instructions"].as_bool()
        && instructions != p.instructions.is_some()
    {
        out.fail(format!(
            "instructions: expected {}, got {}",
            if instructions { "some" } else { "none" },
            p.instructions
                .as_deref()
                .map_or_else(|| "none".to_string(), |i| format!("{:?}", shorten(i, 80)))
        ));
    }
}

fn repair_cases(c: &Arc<StrategyComponent>, path: &str, opts: &CheckOptions, report: &mut Report) {
    let Some(fx) = load_json(report, path) else {
        return;
    };
    let name = c.info().name.clone();
    let stem = path
        .trim_start_matches("strategies/")
        .trim_end_matches(".json")
        .replace('-', "_");
    let listed = fx["strategies"]
        .as_array()
        .is_some_and(|s| s.iter().any(|n| n.as_str() == Some(name.as_str())));
    let t = target(&fx["target"]);
    for (i, case) in fx["repair"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let case_name = format!("repair::{stem}_{i}");
        if !selected(opts, &case_name) {
            continue;
        }
        let mut out = report.case(case_name);
        let raw = case["raw"].as_str().unwrap_or_default();
        let want = case["expect-by-strategy"]
            .get(&name)
            .or_else(|| case.get("expect"))
            .filter(|_| listed);
        if let Some(got) = out.call("repair", || c.repair(raw, &t)) {
            judge_repair(&got, want, case["note"].as_str().unwrap_or(""), &mut out);
        }
        report.finish(out);
    }
}

/// Any answer must be JSON text or a typed error; a pinned expectation must match exactly.
fn judge_repair(
    got: &Result<String, RepairError>,
    want: Option<&Value>,
    note: &str,
    out: &mut Case,
) {
    if let Ok(text) = got
        && serde_json::from_str::<Value>(text).is_err()
    {
        out.fail(format!(
            "{note}: repair answered text that is not JSON: {}",
            shorten(text, 160)
        ));
        return;
    }
    let Some(want) = want else {
        return;
    };
    let problem = match (got, want) {
        (Ok(text), w) if w.get("text").is_some() => (w["text"].as_str() != Some(text)).then(|| {
            format!(
                "expected the text {}, got {}",
                show(&w["text"]),
                show(&Value::from(text.as_str()))
            )
        }),
        (Ok(text), w) if w.get("json").is_some() => {
            let parsed = serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
            (parsed != w["json"])
                .then(|| format!("expected JSON {}, got {}", show(&w["json"]), show(&parsed)))
        }
        (Ok(text), w) => Some(format!(
            "expected the error {}, got the text {}",
            show(&w["error"]),
            shorten(text, 120)
        )),
        (Err(e), w) => {
            let kind = match e {
                RepairError::Empty => "empty",
                RepairError::Unrecoverable(_) => "unrecoverable",
            };
            (w["error"].as_str() != Some(kind))
                .then(|| format!("expected {}, got the error {kind} ({e:?})", show(w)))
        }
    };
    if let Some(p) = problem {
        out.fail(format!("{note}: {p}"));
    }
}

fn robustness(c: &Arc<StrategyComponent>, opts: &CheckOptions, report: &mut Report) {
    let t = JsonTarget {
        name: "x".into(),
        schema_json: Some(r#"{"type":"object"}"#.into()),
        strict: false,
    };
    let eight_mib_garbage = "garbage!".repeat(1 << 20);
    let eight_mib_string = format!("{{\"a\": \"{}\"}}", "lorem ip".repeat(1 << 20));
    let nested = "[".repeat(100_000);
    let cases: [(&str, &str, Duration); 4] = [
        (
            "robustness::repair_8_mib_of_garbage",
            &eight_mib_garbage,
            Duration::from_secs(1),
        ),
        (
            "robustness::repair_8_mib_of_json",
            &eight_mib_string,
            Duration::from_secs(1),
        ),
        ("robustness::repair_deeply_nested", &nested, Duration::ZERO),
        (
            "robustness::repair_replacement_characters",
            "\u{fffd}\u{fffd}{\"a\": \"\u{fffd}\"",
            Duration::ZERO,
        ),
    ];
    for (name, raw, budget) in cases {
        if !selected(opts, name) {
            continue;
        }
        let mut out = report.case(name);
        out.allow(budget);
        if let Some(got) = out.call("repair", || c.repair(raw, &t)) {
            judge_repair(&got, None, "any text", &mut out);
        }
        report.finish(out);
    }
    let name = "robustness::prepare_with_a_garbage_schema";
    if selected(opts, name) {
        let mut out = report.case(name);
        let garbage = JsonTarget {
            name: String::new(),
            schema_json: Some("}{ not a schema".into()),
            strict: true,
        };
        for native in [false, true] {
            out.call("prepare", || c.prepare_raw(&garbage, &capabilities(native)));
        }
        report.finish(out);
    }
}
