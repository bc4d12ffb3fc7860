//! The conformance kit (`polygateway plugin check`, `polygateway::plugin::conformance`):
//! every first-party plugin and the out-of-tree example pass it; a deliberately broken
//! provider (`tests/fixtures/plugins/broken-provider`) fails it with readable differences;
//! a component checked against another world fails its load case, and a component of no
//! known world or no component at all is refused cleanly.

use polygateway::config::FirstParty;
use polygateway::plugin::conformance::{CheckOptions, World, check_component};
use polygateway::plugin::{
    BUILTIN_SELECTORS, BUILTIN_STRATEGIES, PluginEngine, PluginLimits, ProviderComponent,
    builtin_provider_bytes, builtin_selector_bytes, builtin_strategy_bytes,
};

use crate::plugin_fixtures::{acme_example, broken_provider, plugin_check};

fn rendered(report: &polygateway::plugin::conformance::Report) -> String {
    let mut out = Vec::new();
    report.render(&mut out, true).unwrap();
    String::from_utf8(out).unwrap()
}

/// A generous per-call budget: the tests share two cores with everything else; the budget
/// itself is exercised by `a_call_over_the_budget_fails_its_case`.
fn opts() -> CheckOptions {
    CheckOptions {
        budget: std::time::Duration::from_secs(1),
        ..CheckOptions::default()
    }
}

#[test]
fn every_first_party_plugin_passes_the_kit() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let opts = opts();
    for p in FirstParty::ALL {
        let origin = format!("builtin:{}", p.name());
        let report = check_component(&engine, &origin, builtin_provider_bytes(p), &opts).unwrap();
        assert_eq!(report.world, World::Provider);
        assert!(report.success(), "{}", rendered(&report));
        // Every group that applies ran: the chat groups for a chat provider, the embedding
        // and OCR groups for all (their build checks where declared).
        let caps = ProviderComponent::load(&engine, &origin, builtin_provider_bytes(p))
            .unwrap()
            .info()
            .capabilities;
        let chat_groups = ["requests::", "streams::", "responses::", "robustness::"];
        let mut groups = vec!["describe::", "errors::", "embedding::", "ocr::"];
        if caps.chat {
            groups.extend(chat_groups);
        }
        for group in groups {
            assert!(
                report.cases.iter().any(|c| c.name.starts_with(group)),
                "{origin}: no {group} cases"
            );
        }
        for group in chat_groups.into_iter().filter(|_| !caps.chat) {
            assert!(
                !report.cases.iter().any(|c| c.name.starts_with(group)),
                "{origin}: {group} cases ran on a provider that serves no chat"
            );
        }
        let declared: Vec<&str> = report
            .cases
            .iter()
            .map(|c| c.name.as_str())
            .filter(|n| *n == "embedding::build" || *n == "ocr::build")
            .collect();
        let want: Vec<&str> = [
            (caps.embedding, "embedding::build"),
            (caps.ocr, "ocr::build"),
        ]
        .into_iter()
        .filter_map(|(on, n)| on.then_some(n))
        .collect();
        assert_eq!(declared, want, "{origin}");
        let least = if caps.chat { 80 } else { 20 };
        assert!(
            report.cases.len() > least,
            "{origin}: {}",
            report.cases.len()
        );
    }
    for name in BUILTIN_SELECTORS {
        let origin = format!("builtin:{name}");
        let bytes = builtin_selector_bytes(name).unwrap();
        let report = check_component(&engine, &origin, bytes, &opts).unwrap();
        assert_eq!(report.world, World::Selector);
        assert!(report.success(), "{}", rendered(&report));
        assert!(
            report
                .cases
                .iter()
                .any(|c| c.name == "fixtures::mixed" && c.failure.is_none()),
            "{origin}"
        );
    }
    for name in BUILTIN_STRATEGIES {
        let origin = format!("builtin:{name}");
        let bytes = builtin_strategy_bytes(name).unwrap();
        let report = check_component(&engine, &origin, bytes, &opts).unwrap();
        assert_eq!(report.world, World::Strategy);
        assert!(report.success(), "{}", rendered(&report));
        for group in ["prepare::", "repair::", "robustness::"] {
            assert!(
                report.cases.iter().any(|c| c.name.starts_with(group)),
                "{origin}: no {group} cases"
            );
        }
    }
}

#[test]
fn the_thinking_transcripts_run_only_where_they_apply() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let names = |p: FirstParty| {
        let r = check_component(
            &engine,
            p.name(),
            builtin_provider_bytes(p),
            &CheckOptions {
                filter: Some("streams::".into()),
                ..opts()
            },
        )
        .unwrap();
        r.cases.into_iter().map(|c| c.name).collect::<Vec<_>>()
    };
    let openai = names(FirstParty::OpenAi);
    let qwen = names(FirstParty::Qwen);
    assert!(!openai.iter().any(|n| n == "streams::qwen_thinking"));
    assert!(!openai.iter().any(|n| n == "streams::deepseek_reasoner"));
    assert!(qwen.iter().any(|n| n == "streams::qwen_thinking"));
    assert!(qwen.iter().any(|n| n == "streams::deepseek_reasoner"));
    for generic in [
        "streams::usage_only_chunk_with_empty_choices",
        "streams::tool_call_deltas_interleaved",
        "streams::keep_alives_and_empty_events",
        "streams::missing_done",
        "streams::error_chunk_mid_stream",
    ] {
        assert!(openai.iter().any(|n| n == generic), "{generic}");
        assert!(qwen.iter().any(|n| n == generic), "{generic}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_check_prints_like_a_test_runner_and_exits_zero_on_builtins() {
    for builtin in [
        "builtin:openai",
        "builtin:round-robin",
        "builtin:unwrap-parameters",
    ] {
        let (code, stdout, stderr) =
            plugin_check(&[builtin, "--timing", "--budget-ms", "1000"]).await;
        assert_eq!(code, 0, "{builtin}\n{stdout}\n{stderr}");
        assert!(
            stdout.starts_with(&format!("checking {builtin} against the ")),
            "{stdout}"
        );
        assert!(stdout.contains("test load::component ... ok"), "{stdout}");
        assert!(stdout.contains("  loaded in "), "{stdout}");
        let summary = stdout.lines().last().unwrap();
        assert!(summary.starts_with("test result: ok. "), "{summary}");
        assert!(summary.contains(" 0 failed; "), "{summary}");
    }
    // An explicit, matching world; a filter.
    let (code, stdout, _) = plugin_check(&[
        "builtin:deepseek",
        "--world",
        "provider",
        "--filter",
        "errors::429",
    ])
    .await;
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("test errors::429_insufficient_quota ... ok"));
    assert!(!stdout.contains("requests::"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_over_the_budget_fails_its_case() {
    // Lowering ten thousand candidates into the sandbox alone takes longer than 1 ms.
    let (code, stdout, _) = plugin_check(&[
        "builtin:least-inflight",
        "--budget-ms",
        "1",
        "--filter",
        "robustness::ten_thousand_candidates",
    ])
    .await;
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("test robustness::ten_thousand_candidates ... FAILED"),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("    choose took ")
            && l.ends_with(" ms, over the budget of 1 ms per call")),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_check_refuses_what_it_cannot_check() {
    // A provider checked as a strategy: its load case says what is missing.
    let (code, stdout, stderr) = plugin_check(&["builtin:openai", "--world", "strategy"]).await;
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("test load::component ... FAILED"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "cannot load plugin builtin:openai: it does not export polygateway:plugin/structured-strategy (is it a structured-strategy component?)"
        ),
        "{stdout}"
    );

    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.wasm");
    std::fs::write(
        &other,
        wat::parse_str(
            r#"(component
                 (core module $m (func (export "f")))
                 (core instance $i (instantiate $m))
                 (func $f (canon lift (core func $i "f")))
                 (instance $api (export "f" (func $f)))
                 (export "acme:other/thing@1.0.0" (instance $api)))"#,
        )
        .unwrap(),
    )
    .unwrap();
    let (code, _, stderr) = plugin_check(&[other.to_str().unwrap()]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("unknown world: it exports no polygateway:plugin interface"),
        "{stderr}"
    );

    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"\0asm not really").unwrap();
    let (code, _, stderr) = plugin_check(&[garbage.to_str().unwrap()]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cannot load plugin"), "{stderr}");

    let (code, _, stderr) = plugin_check(&["/nonexistent/plugin.wasm"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("cannot read /nonexistent/plugin.wasm"),
        "{stderr}"
    );
    let (code, _, stderr) = plugin_check(&["builtin:mistral"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no first-party component `mistral`"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_plugin_built_from_scratch_passes_the_kit() {
    let wasm = acme_example().await;
    let (code, stdout, stderr) =
        plugin_check(&[wasm.to_str().unwrap(), "--budget-ms", "1000"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("plugin `acme`, contract 0.2.0"), "{stdout}");
    assert!(
        stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("test result: ok.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_provider_fails_with_readable_differences() {
    let wasm = broken_provider().await;
    let (code, stdout, stderr) = plugin_check(&[wasm.to_str().unwrap()]).await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    for expected in [
        // Request building: the model, stream_options, protected keys, the credential header.
        "test requests::non_streamed_request_sets_model_and_stream_false ... FAILED",
        "    body.model: expected \"conformance-model\", got \"gpt-4o\"",
        "    body.stream_options: expected {\"include_usage\":true}, got null",
        "    body.model: expected \"conformance-model\", got \"evil-model\"",
        "    header authorization is set by the plugin, but the auth scheme makes the host put the credential there",
        // Error classification.
        "test errors::429_insufficient_quota ... FAILED",
        "    HTTP 429 classified as request-rejected, expected source-dead (message: \"You exceeded your current quota, please check your plan and billing details.\", code: Some(\"insufficient_quota\"))",
        "    HTTP 401 classified as request-rejected, expected source-dead (message: \"HTTP 401\", code: None)",
        // A missing `done`, as a delta-list difference.
        "    parse-response: deltas differ from #5 (expected 6 deltas, got 5):",
        "      - #5  \"done\"",
        "      + #5  (nothing)",
        // A trap on non-UTF-8 input is reported, and the run goes on.
        "    plugin fault (a trap is never an answer): plugin broken faulted in parse-response: wasm trap: unreachable code executed (a Rust guest panicked)",
        "test robustness::parse_response_8_mib_answer ... ok",
    ] {
        assert!(
            stdout.lines().any(|l| l == expected),
            "missing line {expected:?} in:\n{stdout}"
        );
    }
    // What it gets right still passes.
    assert!(stdout.contains("test errors::500_internal_error ... ok"));
    assert!(stdout.contains("test streams::openai_usage_chunk ... ok"));
    let summary = stdout.lines().last().unwrap();
    assert!(summary.starts_with("test result: FAILED. "), "{summary}");
    // The failed cases are listed again at the end, like cargo test does.
    assert!(stdout.contains("\nfailures:\n    requests::"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_openai_component_runs_its_own_fixtures() {
    use polygateway::config::FirstParty;
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("anthropic.wasm");
    std::fs::write(&wasm, builtin_provider_bytes(FirstParty::Anthropic)).unwrap();
    let wasm = wasm.to_str().unwrap();
    let own = polygateway_tests::repo_root().join("plugins/anthropic/conformance");
    let own = own.to_str().unwrap();
    // With its own set: every case passes, its own transcripts among them.
    let (code, stdout, stderr) =
        plugin_check(&[wasm, "--fixtures", own, "--budget-ms", "1000"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("test streams::docs_extended_thinking_streaming ... ok"),
        "{stdout}"
    );
    assert!(stdout.contains("test robustness::"), "{stdout}");
    // The same file against the embedded OpenAI-shaped set: its transcripts do not apply.
    let (code, stdout, _) = plugin_check(&[wasm, "--budget-ms", "1000"]).await;
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("test streams::openai_usage_chunk ... FAILED"),
        "{stdout}"
    );
    // A first-party one finds its set embedded.
    let (code, stdout, _) = plugin_check(&["builtin:anthropic", "--budget-ms", "1000"]).await;
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("test streams::docs_tool_use_streaming ... ok"),
        "{stdout}"
    );
    // A directory without the files: each missing file is a failed case naming it.
    let empty = tempfile::tempdir().unwrap();
    let (code, stdout, _) =
        plugin_check(&[wasm, "--fixtures", empty.path().to_str().unwrap()]).await;
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("test fixtures::conformance/provider/requests.json ... FAILED"),
        "{stdout}"
    );
    assert!(stdout.contains("requests.json: No such file"), "{stdout}");
}
