//! Claude Code (`@anthropic-ai/claude-code`, installed into `tests/node/` by `.ci/run`) in
//! print mode with `ANTHROPIC_BASE_URL` at a real `polygateway serve` whose only source is an
//! OpenAI-compatible mock: it answers from the mock. Claude Code sends what the Anthropic SDK
//! alone does not — 20-odd tools, `thinking: adaptive`, `context_management`,
//! `output_config`, system turns in the conversation, a JSON `metadata.user_id` — so this is
//! the Messages dialect against a real agent's requests.

use polygateway_tests::{hits, mock, repo_root, script};
use serde_json::json;

use crate::common::{gateway, kv, source};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_answers_from_the_mock() {
    let claude = repo_root().join("tests/node/node_modules/.bin/claude");
    assert!(
        claude.exists(),
        "{} not found: run `.ci/run` (or `npm ci --prefix tests/node`)",
        claude.display()
    );
    let m = mock().await;
    script(
        &m,
        "claude-code",
        json!({"then": {"content": "Hello from the mock upstream"}}),
    )
    .await;
    let mut env = source(&m, "openai", 1, "claude-code", "gpt-test");
    env.push(kv("PGW_API_KEYS", "cc-key"));
    let gw = gateway(env).await;
    let home = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(&claude)
        .args(["-p", "Say hello", "--model", "llm"])
        .current_dir(home.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("ANTHROPIC_BASE_URL", &gw.base_url)
        .env("ANTHROPIC_API_KEY", "cc-key")
        .env("ANTHROPIC_MODEL", "llm")
        .env("ANTHROPIC_SMALL_FAST_MODEL", "llm")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), out)
        .await
        .expect("claude -p finishes")
        .expect("claude runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim_end(), "Hello from the mock upstream");
    // Every request reached the source as a chat completion with Claude Code's prompt and
    // tools translated; none was refused before the mock.
    let h = hits(&m, "claude-code").await;
    assert!(!h.is_empty());
    let main = h
        .iter()
        .find(|x| x["body"]["tools"].as_array().is_some_and(|t| t.len() > 5))
        .unwrap_or_else(|| panic!("no request with Claude Code's tools: {h:?}"));
    assert_eq!(main["path"], "/sc/claude-code/v1/chat/completions");
    assert_eq!(main["body"]["model"], "gpt-test");
    assert_eq!(main["body"]["stream"], true);
    // The OpenAI-compatible provider has no thinking switch: Claude Code's `thinking` is
    // not passed on.
    assert_eq!(main["body"].get("thinking"), None);
    // Claude Code's prompt-cache breakpoints are Anthropic's: OpenAI refuses unknown message
    // properties, so none reaches this source.
    let body_text = main["body"].to_string();
    assert!(!body_text.contains("cache_control"), "{body_text}");
    assert_eq!(main["body"]["messages"][0]["role"], "system");
    let asked = main["body"]["messages"].to_string();
    assert!(asked.contains("Say hello"), "{asked}");
}
