//! The `native-schema` structured-output strategy (`native_schema.wasm`,
//! docs/structured-output.md#strategies): when every source of the scope declares
//! `capabilities.native-json-schema`, the schema goes to the provider as a native
//! `response_format` (`json_schema` with the caller's name and `strict`; `json_object` plus a
//! one-line prompt instruction for a schema-less target, since OpenAI's JSON mode requires
//! the word "JSON" in the messages). Otherwise it falls back to prompt instructions, like
//! `json-repair`. The answer is repaired either way ([`repair_json_text`]): a native
//! constraint rarely fails, but a fallback answer often needs it.

use polygateway_plugin_sdk::{
    Capabilities, JsonTarget, Preparation, RepairError, ResponseFormat, Strategy, instructions_for,
    native_format, repair_json_text,
};

/// Native `response_format` where the provider supports it, prompt instructions elsewhere.
pub struct NativeSchema;

impl Strategy for NativeSchema {
    const NAME: &'static str = "native-schema";

    fn prepare(target: &JsonTarget, provider: &Capabilities) -> Preparation {
        if !provider.native_json_schema {
            return Preparation {
                response_format: None,
                instructions: Some(instructions_for(target)),
            };
        }
        let format = native_format(target);
        let instructions = match format {
            ResponseFormat::JsonObject => Some(instructions_for(target)),
            ResponseFormat::JsonSchema(_) => None,
        };
        Preparation {
            response_format: Some(format),
            instructions,
        }
    }

    fn repair(raw: &str, _target: &JsonTarget) -> Result<String, RepairError> {
        repair_json_text(raw)
    }
}

polygateway_plugin_sdk::export_strategy!(NativeSchema);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use polygateway_plugin_sdk::ThinkingStyle;

    fn caps(native: bool) -> Capabilities {
        Capabilities {
            streaming: true,
            native_json_schema: native,
            thinking: ThinkingStyle::ReasoningField,
            prefill_continuation: false,
            chat: true,
            embedding: false,
            ocr: false,
            audio: false,
        }
    }

    fn target(schema: Option<&str>) -> JsonTarget {
        JsonTarget {
            name: "person".into(),
            schema_json: schema.map(str::to_string),
            strict: true,
        }
    }

    #[test]
    fn native_schema_only_for_a_native_provider() {
        let t = target(Some(r#"{"type":"object"}"#));
        let native = NativeSchema::prepare(&t, &caps(true));
        match native.response_format {
            Some(ResponseFormat::JsonSchema(s)) => {
                assert_eq!((s.name.as_str(), s.strict), ("person", true));
                assert_eq!(s.schema_json, r#"{"type":"object"}"#);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(native.instructions, None);
        let fallback = NativeSchema::prepare(&t, &caps(false));
        assert_eq!(fallback.response_format, None);
        assert!(fallback.instructions.unwrap().contains("JSON Schema"));
    }

    #[test]
    fn json_object_mode_keeps_the_word_json_in_the_prompt() {
        let p = NativeSchema::prepare(&target(None), &caps(true));
        assert_eq!(p.response_format, Some(ResponseFormat::JsonObject));
        assert!(p.instructions.unwrap().contains("JSON"));
    }
}
