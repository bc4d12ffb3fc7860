//! The `json-repair` structured-output strategy (`json_repair.wasm`), the default of every
//! scope: it asks for JSON in the prompt (a system message quoting the schema) whatever the
//! provider can do, and repairs the answer with the SDK's [`repair_json_text`] — Markdown
//! fences and prose stripped, trailing commas, single quotes, unquoted keys, comments and
//! truncated tails fixed (docs/structured-output.md#strategies).

use polygateway_plugin_sdk::{
    Capabilities, JsonTarget, Preparation, RepairError, Strategy, instructions_for,
    repair_json_text,
};

/// Prompt instructions for every provider; JSON repair of the answer.
pub struct JsonRepair;

impl Strategy for JsonRepair {
    const NAME: &'static str = "json-repair";

    fn prepare(target: &JsonTarget, _provider: &Capabilities) -> Preparation {
        Preparation {
            response_format: None,
            instructions: Some(instructions_for(target)),
        }
    }

    fn repair(raw: &str, _target: &JsonTarget) -> Result<String, RepairError> {
        repair_json_text(raw)
    }
}

polygateway_plugin_sdk::export_strategy!(JsonRepair);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use polygateway_plugin_sdk::ThinkingStyle;

    fn caps(native: bool) -> Capabilities {
        Capabilities {
            streaming: true,
            native_json_schema: native,
            thinking: ThinkingStyle::None,
            prefill_continuation: false,
            chat: true,
            embedding: false,
            ocr: false,
            audio: false,
        }
    }

    #[test]
    fn prompts_even_when_the_provider_is_native() {
        let t = JsonTarget {
            name: "person".into(),
            schema_json: Some(r#"{"type":"object"}"#.into()),
            strict: true,
        };
        for native in [false, true] {
            let p = JsonRepair::prepare(&t, &caps(native));
            assert_eq!(p.response_format, None);
            assert!(p.instructions.unwrap().contains(r#"{"type":"object"}"#));
        }
    }

    #[test]
    fn repairs_the_common_breakages() {
        let t = JsonTarget {
            name: "response".into(),
            schema_json: None,
            strict: false,
        };
        assert_eq!(
            JsonRepair::repair("```json\n{\"a\": [1, 2,],}\n```", &t).unwrap(),
            r#"{"a":[1,2]}"#
        );
        assert_eq!(
            JsonRepair::repair("{\"a\": \"trunc", &t).unwrap(),
            r#"{"a":"trunc"}"#
        );
        assert_eq!(JsonRepair::repair("\n", &t), Err(RepairError::Empty));
    }
}
