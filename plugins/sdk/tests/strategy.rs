//! The strategy half of the SDK: `strategy.wit` is the same contract version and shares the
//! provider's `types` (one `Capabilities` type), the `Strategy` trait implements the
//! generated exports, and `repair_json_text` never panics — every prefix of a JSON
//! document (a truncated answer) and mutated answers come back as JSON or as a typed error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::{
    CONTRACT_VERSION, Capabilities, JsonTarget, Preparation, RepairError, Strategy, StrategyGuest,
    ThinkingStyle, instructions_for, repair_json_text,
};

#[test]
fn strategy_wit_is_the_sdk_contract_version() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wit/strategy.wit");
    let text = std::fs::read_to_string(path).unwrap();
    let package = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("package "))
        .unwrap();
    assert_eq!(package, format!("polygateway:plugin@{CONTRACT_VERSION};"));
    assert!(text.contains("world strategy {"));
    assert!(text.contains("export structured-strategy;"));
}

struct Echo;

impl Strategy for Echo {
    const NAME: &'static str = "echo";

    fn prepare(target: &JsonTarget, provider: &Capabilities) -> Preparation {
        Preparation {
            response_format: None,
            instructions: provider
                .native_json_schema
                .then(|| instructions_for(target)),
        }
    }

    fn repair(raw: &str, _target: &JsonTarget) -> Result<String, RepairError> {
        Ok(raw.to_string())
    }
}

#[test]
fn the_trait_implements_the_exports() {
    let info = <Echo as StrategyGuest>::describe();
    assert_eq!(info.name, "echo");
    assert_eq!(info.contract_version, CONTRACT_VERSION);
    let target = JsonTarget {
        name: "t".into(),
        schema_json: None,
        strict: false,
    };
    // The provider's `Capabilities` is the type the strategy world takes.
    let caps = Capabilities {
        streaming: true,
        native_json_schema: true,
        thinking: ThinkingStyle::None,
        prefill_continuation: false,
        chat: true,
        embedding: false,
        ocr: false,
        audio: false,
    };
    let p = <Echo as StrategyGuest>::prepare(target.clone(), caps);
    assert!(p.instructions.is_some());
    assert_eq!(
        <Echo as StrategyGuest>::repair("x".into(), target),
        Ok("x".to_string())
    );
}

const DOC: &str = r#"Sure! ```json
{"name": "Ada Lovelace", "tags": ["math", 'poet', ], "born": {year: 1815, "place": "London"},
 "note": "a \"quoted\" word, a comma, and 日本語", "ok": true, "n": null, "x": -1.5e3,}
```"#;

#[test]
fn every_truncation_of_an_answer_repairs_or_fails_typed() {
    let mut repaired = 0;
    for (i, _) in DOC.char_indices() {
        match repair_json_text(&DOC[..i]) {
            Ok(json) => {
                serde_json::from_str::<serde_json::Value>(&json)
                    .unwrap_or_else(|e| panic!("prefix {i}: {json}: {e}"));
                repaired += 1;
            }
            Err(RepairError::Empty | RepairError::Unrecoverable(_)) => {}
        }
    }
    // Once the opening brace is in, a truncated answer is repaired.
    assert!(repaired > DOC.len() / 2, "{repaired}");
    let full: serde_json::Value = serde_json::from_str(&repair_json_text(DOC).unwrap()).unwrap();
    assert_eq!(full["tags"], serde_json::json!(["math", "poet"]));
    assert_eq!(full["born"]["year"], 1815);
}

#[test]
fn mutated_answers_never_panic() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let alphabet: Vec<char> = "{}[]\"':,\\ \n`0123456789.eE-+truefalsnl日"
        .chars()
        .collect();
    for _ in 0..3000 {
        let mut s: Vec<char> = DOC.chars().collect();
        for _ in 0..=(next() % 10) {
            let i = (next() as usize) % s.len().max(1);
            match next() % 3 {
                0 if !s.is_empty() => {
                    s.remove(i);
                }
                1 => s.insert(i, alphabet[(next() as usize) % alphabet.len()]),
                _ => s.truncate(i),
            }
        }
        let text: String = s.into_iter().collect();
        if let Ok(json) = repair_json_text(&text) {
            serde_json::from_str::<serde_json::Value>(&json)
                .unwrap_or_else(|e| panic!("{text:?} -> {json}: {e}"));
        }
    }
}
