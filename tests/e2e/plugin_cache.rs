//! Start-up with plugins: the on-disk compilation cache (`PGW_PLUGIN_CACHE_DIR`, keyed by
//! the component's content and the engine's compatibility hash) is filled by the first start
//! and only read by the next; a `PLUGIN_SHA256` pin that does not match stops start-up,
//! naming the key; a component importing what the sandbox does not provide is refused.

use std::path::Path;

use polygateway::plugin::{PluginEngine, PluginLimits, ProviderComponent};
use polygateway_tests::mock;
use sha2::Digest;

use crate::plugin_fixtures::{acme_example, cache_files};
use crate::plugin_serve::{Serve, kv};

/// Every file under `dir` (recursively) with its length, except wasmtime's cache statistics.
fn artifacts(dir: &Path) -> Vec<(String, u64)> {
    cache_files(dir)
        .into_iter()
        .map(|p| {
            let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            (p.to_string_lossy().into_owned(), len)
        })
        .collect()
}

fn acme_env(mock: &polygateway_tests::MockUpstream, wasm: &Path) -> Vec<(String, String)> {
    vec![
        kv("LLM__ACME__1__PLUGIN", wasm.display()),
        kv("LLM__ACME__1__BASE_URL", mock.base_url("cache")),
        kv("LLM__ACME__1__MODEL", "acme-1"),
        kv("LLM__ACME__1__API_KEY", "sk-acme"),
        kv("LLM__OPENAI__2__BASE_URL", mock.base_url("cache")),
        kv("LLM__OPENAI__2__MODEL", "gpt-x"),
        kv("PGW_TELEMETRY_BACKEND", "none"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_start_fills_the_compile_cache_and_the_second_only_reads_it() {
    let wasm = acme_example().await;
    let mock = mock().await;
    let cache = tempfile::tempdir().unwrap();
    let mut env = acme_env(&mock, &wasm);
    env.push(kv("PGW_PLUGIN_CACHE_DIR", cache.path().display()));

    let gw = Serve::start(&env, &[]).await;
    let first = artifacts(cache.path());
    // acme, openai, and the default selector at least.
    assert!(first.len() >= 3, "{first:?}");
    gw.stop().await;

    let gw = Serve::start(&env, &[]).await;
    let health = gw.health().await;
    assert_eq!(health["scopes"]["LLM"]["sources"][0]["plugin"], "acme");
    gw.stop().await;
    assert_eq!(
        artifacts(cache.path()),
        first,
        "the second start compiled something again"
    );

    // Another component (different bytes) gets its own entry.
    let engine =
        PluginEngine::new(PluginLimits::default(), Some(cache.path().to_path_buf())).unwrap();
    let mut bytes = std::fs::read(&wasm).unwrap();
    // A custom section appended to a component changes its hash, not its behaviour.
    bytes.extend_from_slice(&[0x00, 0x05, 0x04, b'p', b'g', b'w', b'!']);
    ProviderComponent::load(&engine, "acme-variant.wasm", &bytes).unwrap();
    assert_eq!(artifacts(cache.path()).len(), first.len() + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_sha256_pin_is_checked_at_start_up() {
    let wasm = acme_example().await;
    let mock = mock().await;
    let digest = hex::encode(sha2::Sha256::digest(std::fs::read(&wasm).unwrap()));

    let mut env = acme_env(&mock, &wasm);
    env.push(kv("LLM__ACME__1__PLUGIN_SHA256", &digest));
    let gw = Serve::start(&env, &[]).await;
    gw.stop().await;

    let mut env = acme_env(&mock, &wasm);
    let wrong = format!("{}0", &digest[..63]);
    let wrong = if wrong == digest {
        format!("{}1", &digest[..63])
    } else {
        wrong
    };
    env.push(kv("LLM__ACME__1__PLUGIN_SHA256", &wrong));
    let stderr =
        polygateway_tests::GatewayProcess::try_start(env!("CARGO_BIN_EXE_polygateway"), &env)
            .await
            .err()
            .expect("a wrong pin stops start-up");
    assert!(
        stderr.contains(&format!(
            "LLM__ACME__1__PLUGIN_SHA256: plugin {}: sha256 is {digest}, but PLUGIN_SHA256 pins {wrong}",
            wasm.display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_component_importing_a_clock_is_refused() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let bytes = wat::parse_str(
        r#"(component
             (import "wasi:clocks/monotonic-clock@0.2.6" (instance $clock
               (export "now" (func (result u64)))))
             (core module $m (func (export "describe")))
             (core instance $i (instantiate $m))
             (func $describe (canon lift (core func $i "describe")))
             (instance $api (export "describe" (func $describe)))
             (export "polygateway:plugin/chat-provider@0.1.0" (instance $api)))"#,
    )
    .unwrap();
    let err = ProviderComponent::load(&engine, "clock.wasm", &bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot load plugin clock.wasm: it imports wasi:clocks/monotonic-clock@0.2.6, which the plugin sandbox does not provide (plugins get no clock, files, sockets or environment; only wasi:io, wasi:cli with an empty context, and wasi:random)"
    );
}
