//! Contract 0.1 keeps working on a 0.2 host: the released 0.1 components of
//! `tests/fixtures/contract-0.1/` (built from the frozen `wit-frozen/0.1.0/` WIT, never
//! rebuilt) load through the host's 0.1 binding, pass `plugin check` unchanged, and serve
//! real calls through `polygateway serve`; a component of an unknown version is refused
//! naming the versions the host has.

use std::path::PathBuf;

use polygateway::config::FirstParty;
use polygateway::plugin::conformance::{CheckOptions, World, check_component};
use polygateway::plugin::{
    PluginEngine, PluginError, PluginLimits, ProviderComponent, SelectorComponent,
    StrategyComponent, builtin_provider_bytes, builtin_selector_bytes, builtin_strategy_bytes,
};
use polygateway_tests::{fixture, hits, mock, script};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::common::{chat_body, gateway, kv, post_chat, source};
use crate::plugin_fixtures::plugin_check;

fn v01(file: &str) -> PathBuf {
    fixture(&format!("contract-0.1/{file}"))
}

fn bytes(file: &str) -> Vec<u8> {
    std::fs::read(v01(file)).unwrap()
}

#[test]
fn the_fixtures_are_the_binaries_the_readme_pins() {
    let readme = std::fs::read_to_string(v01("README.md")).unwrap();
    for file in ["openai.wasm", "round_robin.wasm", "json_repair.wasm"] {
        let digest = hex::encode(Sha256::digest(bytes(file)));
        assert!(
            readme.contains(&format!("| `{file}` |")) && readme.contains(&digest),
            "{file}: sha256 {digest} is not the one tests/fixtures/contract-0.1/README.md pins"
        );
    }
}

#[test]
fn each_world_loads_through_the_0_1_binding() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let provider = ProviderComponent::load(&engine, "openai-0.1", &bytes("openai.wasm")).unwrap();
    assert_eq!(provider.contract_version(), "0.1.0");
    assert_eq!(provider.info().contract_version, "0.1.0");
    assert_eq!(provider.info().name, "openai");
    let selector = SelectorComponent::load(&engine, "rr-0.1", &bytes("round_robin.wasm")).unwrap();
    assert_eq!(selector.info().contract_version, "0.1.0");
    let strategy = StrategyComponent::load(&engine, "jr-0.1", &bytes("json_repair.wasm")).unwrap();
    assert_eq!(strategy.info().contract_version, "0.1.0");
}

#[test]
fn the_0_1_components_pass_the_kit_unchanged() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let opts = CheckOptions {
        budget: std::time::Duration::from_secs(1),
        ..CheckOptions::default()
    };
    let names = |r: &polygateway::plugin::conformance::Report| {
        r.cases.iter().map(|c| c.name.clone()).collect::<Vec<_>>()
    };
    for (file, world, today) in [
        (
            "openai.wasm",
            World::Provider,
            builtin_provider_bytes(FirstParty::OpenAi),
        ),
        (
            "round_robin.wasm",
            World::Selector,
            builtin_selector_bytes("round-robin").unwrap(),
        ),
        (
            "json_repair.wasm",
            World::Strategy,
            builtin_strategy_bytes("json-repair").unwrap(),
        ),
    ] {
        let report = check_component(&engine, file, &bytes(file), &opts).unwrap();
        assert_eq!(report.world, world, "{file}");
        let failed: Vec<_> = report
            .cases
            .iter()
            .filter(|c| c.failure.is_some())
            .map(|c| format!("{}: {}", c.name, c.failure.as_deref().unwrap_or_default()))
            .collect();
        assert!(report.success(), "{file}: failed {failed:?}");
        // Exactly the suite today's 0.2 build of the same component runs.
        let current = check_component(&engine, "today", today, &opts).unwrap();
        assert!(current.success(), "today's {file}");
        assert_eq!(names(&report), names(&current), "{file}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_check_passes_a_0_1_file() {
    let path = v01("openai.wasm");
    // The kit's default budget (250 ms) is wall time: the 8 MiB cases need headroom on a
    // loaded CI machine, as in the kit's other end-to-end runs.
    let (code, stdout, stderr) =
        plugin_check(&[path.to_str().unwrap(), "--budget-ms", "1000"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("test load::component ... ok"), "{stdout}");
    let summary = stdout.lines().last().unwrap();
    assert!(summary.starts_with("test result: ok. "), "{summary}");
}

#[test]
fn an_unknown_version_is_refused_naming_every_supported_one() {
    // The released 0.1 provider with its contract version rewritten in place (same length,
    // so the binary stays well-formed): a component of a contract this host never had.
    let mut b = bytes("openai.wasm");
    let (from, to) = (b"polygateway:plugin/".as_slice(), b"@0.1.0".as_slice());
    let mut rewritten = 0;
    let mut i = 0;
    while let Some(at) = b[i..].windows(from.len()).position(|w| w == from) {
        let start = i + at;
        if let Some(v) = b[start..].windows(to.len()).position(|w| w == to)
            && v < 64
        {
            b[start + v + 3] = b'7';
            rewritten += 1;
        }
        i = start + from.len();
    }
    assert!(rewritten > 0);
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let err = ProviderComponent::load(&engine, "future.wasm", &b).unwrap_err();
    assert!(matches!(err, PluginError::Version { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "plugin future.wasm exports polygateway:plugin/chat-provider@0.7.0; this host supports polygateway:plugin/chat-provider versions 0.1.0 and 0.2.0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_1_provider_serves_streamed_and_whole_answers() {
    let mock = mock().await;
    script(&mock, "v01", json!({"steps": []})).await;
    let mut env = source(&mock, "acme", 1, "v01", "acme-model");
    env.push(kv(
        "LLM__ACME__1__PLUGIN",
        v01("openai.wasm").display().to_string(),
    ));
    env.push(kv("LLM__ACME__1__MAX_TOKENS", "77"));
    let gw = gateway(env).await;
    let (status, _, body) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Hello from the mock upstream."
    );
    let (status, _, body) = post_chat(&gw, chat_body(true)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    // The 0.1 component never heard of MAX_TOKENS: its requests are what 0.1 sent.
    let h = hits(&mock, "v01").await;
    assert_eq!(h.len(), 2);
    for hit in &h {
        assert!(hit["body"].get("max_tokens").is_none(), "{hit}");
        assert_eq!(hit["body"]["model"], "acme-model");
    }
}
