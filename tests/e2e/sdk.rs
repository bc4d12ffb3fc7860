//! The official OpenAI Python SDK against `polygateway serve`: streamed and non-streamed
//! answers, `reasoning_content` for the deepseek (reasoning field) and qwen (inline
//! `<think>` tags) providers, usage present.

use serde_json::json;

use crate::common::{gateway, source};
use polygateway_tests::{hits, mock, run_python, script};

const REASONING: &str = "The user wants a greeting. Keep it short.";
const ANSWER: &str = "Hello, test! Nice to meet you.";

#[tokio::test]
async fn deepseek_reasoning_streamed_and_not() {
    let m = mock().await;
    script(
        &m,
        "sdk-ds",
        json!({"then": {"content": ANSWER, "reasoning": REASONING}}),
    )
    .await;
    let mut env = source(&m, "deepseek", 1, "sdk-ds", "deepseek-reasoner");
    env.push(("LLM__DEEPSEEK__1__ENABLE_THINKING".into(), "true".into()));
    let gw = gateway(env).await;
    for mode in ["stream", "nonstream"] {
        let out = run_python("sdk_chat.py", &[&gw.base_url, "llm", mode]).await;
        assert_eq!(out["content"], ANSWER, "{mode}");
        assert_eq!(out["reasoning"], REASONING, "{mode}");
        assert_eq!(out["finish_reason"], "stop", "{mode}");
        assert_eq!(out["model"], "deepseek-reasoner", "{mode}");
        assert_eq!(
            out["usage"],
            json!({"prompt_tokens": 5, "completion_tokens": 14, "total_tokens": 19,
                   "completion_tokens_details": {"reasoning_tokens": 8}}),
            "{mode}"
        );
    }
    // The provider plugin expressed ENABLE_THINKING its own way; the host added the key.
    let h = hits(&m, "sdk-ds").await;
    assert_eq!(h.len(), 2);
    assert_eq!(h[0]["body"]["thinking"], json!({"type": "enabled"}));
    assert_eq!(h[0]["body"]["stream"], json!(true));
    assert_eq!(
        h[0]["body"]["stream_options"],
        json!({"include_usage": true})
    );
    assert_eq!(h[1]["body"]["stream"], json!(false));
    assert_eq!(h[0]["authorization"], "Bearer sk-sdk-ds");
}

#[tokio::test]
async fn qwen_inline_think_tags_become_reasoning() {
    let m = mock().await;
    script(
        &m,
        "sdk-qw",
        json!({"then": {"content": ANSWER, "reasoning": REASONING, "reasoning_style": "think_tags"}}),
    )
    .await;
    let mut env = source(&m, "qwen", 1, "sdk-qw", "qwen3-32b");
    env.push(("LLM__QWEN__1__ENABLE_THINKING".into(), "true".into()));
    let gw = gateway(env).await;
    for mode in ["stream", "nonstream"] {
        let out = run_python("sdk_chat.py", &[&gw.base_url, "llm", mode]).await;
        assert_eq!(out["content"], ANSWER, "{mode}");
        assert_eq!(out["reasoning"], REASONING, "{mode}");
        assert_eq!(out["usage"]["prompt_tokens"], 5, "{mode}");
    }
    let h = hits(&m, "sdk-qw").await;
    assert_eq!(h[0]["body"]["enable_thinking"], json!(true));
}
