//! Loading provider components: a component built for another contract version is refused
//! with a message naming both versions; a component of another world is refused too; the
//! first-party components describe themselves with the supported version.

use polygateway::config::FirstParty;
use polygateway::plugin::{
    PluginEngine, PluginError, PluginLimits, ProviderComponent, SUPPORTED_CONTRACT_VERSIONS,
    ThinkingStyle, builtin_provider_bytes,
};

fn component_exporting(name: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(component
             (core module $m (func (export "describe")))
             (core instance $i (instantiate $m))
             (func $describe (canon lift (core func $i "describe")))
             (instance $api (export "describe" (func $describe)))
             (export "{name}" (instance $api)))"#
    ))
    .unwrap()
}

#[test]
fn another_contract_version_is_refused_naming_both() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let bytes = component_exporting("polygateway:plugin/chat-provider@0.3.0");
    let err = ProviderComponent::load(&engine, "future.wasm", &bytes).unwrap_err();
    assert!(matches!(err, PluginError::Version { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "plugin future.wasm exports polygateway:plugin/chat-provider@0.3.0; this host supports polygateway:plugin/chat-provider versions 0.1.0 and 0.2.0"
    );
}

#[test]
fn a_chat_only_provider_of_the_older_draft_is_refused_with_a_rebuild_hint() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let bytes = component_exporting("polygateway:plugin/chat-provider@0.1.0");
    let err = ProviderComponent::load(&engine, "old.wasm", &bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot load plugin old.wasm: it exports chat-provider@0.1.0 but not embedding-provider and ocr-provider: it was built with an older draft of the provider world; rebuild it with the current polygateway-plugin-sdk"
    );
}

#[test]
fn a_component_of_another_world_is_refused() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let bytes = component_exporting("acme:other/thing@1.0.0");
    let err = ProviderComponent::load(&engine, "other.wasm", &bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot load plugin other.wasm: it does not export polygateway:plugin/chat-provider (is it a chat-provider component?)"
    );
    let err = ProviderComponent::load(&engine, "garbage.wasm", b"\0asm garbage").unwrap_err();
    assert!(matches!(err, PluginError::Load { .. }), "{err:?}");
}

#[test]
fn first_party_components_describe_themselves() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let mut seen = Vec::new();
    for p in FirstParty::ALL {
        let c = ProviderComponent::load(&engine, p.name(), builtin_provider_bytes(p)).unwrap();
        let info = c.info();
        assert_eq!(info.name, p.name());
        assert_eq!(info.contract_version, "0.2.0");
        assert_eq!(c.contract_version(), SUPPORTED_CONTRACT_VERSIONS[1]);
        let caps = &info.capabilities;
        assert!(!caps.audio, "audio is reserved");
        seen.push((
            info.name.clone(),
            [caps.chat, caps.streaming, caps.embedding, caps.ocr],
            caps.native_json_schema,
            matches!(caps.thinking, ThinkingStyle::ReasoningField),
            caps.prefill_continuation,
        ));
    }
    assert_eq!(
        seen,
        vec![
            (
                "openai".to_string(),
                [true, true, true, false],
                true,
                false,
                false
            ),
            (
                "deepseek".to_string(),
                [true, true, false, false],
                false,
                true,
                true
            ),
            (
                "qwen".to_string(),
                [true, true, false, false],
                true,
                true,
                true
            ),
            (
                "monkeyocr".to_string(),
                [false, false, false, true],
                false,
                false,
                false
            ),
            (
                "anthropic".to_string(),
                [true, true, false, false],
                false,
                false,
                true
            ),
            (
                "gemini".to_string(),
                [true, true, true, false],
                true,
                false,
                false
            ),
        ]
    );
}
