//! The embedded API (`polygateway::Gateway`) against the mock upstream over TCP: a collected
//! call fails over on a broken stream (nothing reached the caller yet), `chat_stream` yields
//! Start → deltas → End, and the response carries usage, timings and ids.

use futures_util::StreamExt;
use polygateway::config::settings_from_vars;
use polygateway::plugin::Delta;
use polygateway::{CallEvent, ChatRequest, Gateway, UsageSource};
use serde_json::json;

use polygateway_tests::{hits, mock, script};

async fn gateway(vars: Vec<(String, String)>) -> Gateway {
    let mut vars = vars;
    vars.push(("LLM__SELECTOR".into(), "round-robin".into()));
    let settings = settings_from_vars(vars).unwrap();
    Gateway::from_settings(settings).await.unwrap()
}

#[tokio::test]
async fn a_collected_call_fails_over_on_a_stream_without_done() {
    let m = mock().await;
    script(&m, "emb-nodone", json!({"then": {"missing_done": true}})).await;
    let mut vars = crate::common::source(&m, "openai", 1, "emb-nodone", "gpt-x");
    vars.extend(crate::common::source(&m, "qwen", 2, "emb-ok", "qwen-plus"));
    vars.push(("LLM__RETRY__BASE_DELAY_S".into(), "0.01".into()));
    vars.push(("PGW_TELEMETRY_BACKEND".into(), "none".into()));
    let gw = gateway(vars).await;
    let r = gw
        .chat(ChatRequest::user("llm", "say hello to the test"))
        .await
        .unwrap();
    assert_eq!(r.source_name, "qwen-2");
    assert_eq!(r.attempts, 2);
    assert_eq!(r.content, "Hello from the mock upstream.");
    assert_eq!(
        r.usage.map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((5, 5))
    );
    assert_eq!(r.usage_source, UsageSource::Measured);
    assert_eq!(r.model_reported.as_deref(), Some("qwen-plus"));
    assert!(r.ttft_ms.is_some() && r.max_inter_token_ms.is_some());
    assert_eq!(hits(&m, "emb-nodone").await.len(), 1);
}

#[tokio::test]
async fn chat_stream_yields_start_deltas_and_end() {
    let m = mock().await;
    script(
        &m,
        "emb-s",
        json!({"then": {"content": "a b", "reasoning": "think"}}),
    )
    .await;
    let mut vars = crate::common::source(&m, "deepseek", 1, "emb-s", "deepseek-reasoner");
    vars.push(("PGW_TELEMETRY_BACKEND".into(), "none".into()));
    let gw = gateway(vars).await;
    let events: Vec<CallEvent> = gw
        .chat_stream(ChatRequest::user("llm", "x"))
        .collect()
        .await;
    let mut kinds = Vec::new();
    for e in &events {
        kinds.push(match e {
            CallEvent::Start(s) => format!("start:{}:{}", s.source_name, s.attempts),
            CallEvent::Delta(Delta::Role(r)) => format!("role:{r}"),
            CallEvent::Delta(Delta::Reasoning(r)) => format!("reasoning:{r}"),
            CallEvent::Delta(Delta::Content(c)) => format!("content:{c}"),
            CallEvent::Delta(Delta::Finish(_)) => "finish".into(),
            CallEvent::Delta(other) => format!("other:{other:?}"),
            CallEvent::End(r) => format!("end:{}:{:?}", r.content, r.reasoning),
            CallEvent::Failed(e) => format!("failed:{e}"),
        });
    }
    assert_eq!(
        kinds,
        vec![
            "start:deepseek-1:1",
            "role:assistant",
            "reasoning:think",
            "content:a ",
            "content:b",
            "finish",
            "end:a b:Some(\"think\")",
        ]
    );
}
