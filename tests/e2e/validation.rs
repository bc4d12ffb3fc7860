//! Typed settings go through the same validation as the environment: `Gateway::from_settings`
//! refuses a bad value and `Gateway::reload_with` refuses it too, keeping the previous
//! configuration serving; the problems are those `settings_from_vars` reports.

use std::time::Duration;

use polygateway::config::{ConfigError, Settings, settings_from_vars};
use polygateway::{ChatRequest, Gateway, StartError};

use crate::common::{kv, source};
use polygateway_tests::mock;

fn problems_of_start(e: &StartError) -> Vec<(String, String)> {
    match e {
        StartError::Config(ConfigError::Invalid(p)) => p
            .iter()
            .map(|p| (p.key.clone(), p.message.clone()))
            .collect(),
        other => panic!("expected a configuration error, got {other}"),
    }
}

#[tokio::test]
async fn bad_typed_values_are_refused_at_start_and_on_reload_as_in_the_environment() {
    let m = mock().await;
    let mut vars = source(&m, "openai", 1, "default", "gpt-x");
    vars.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    let good = settings_from_vars(vars.clone()).unwrap();
    type Edit = fn(&mut Settings);
    let cases: [(&str, &str, Edit); 5] = [
        ("LLM__CALL_DEADLINE_S", "0", |s| {
            s.scopes[0].call_deadline = Some(Duration::ZERO)
        }),
        ("LLM__RETRY__MAX_ATTEMPTS", "0", |s| {
            s.scopes[0].retry.max_attempts = 0
        }),
        ("LLM__OPENAI__1__TTFT_TIMEOUT_S", "500", |s| {
            s.scopes[0].sources[0].timeouts.ttft = Duration::from_secs(500)
        }),
        ("PGW_TELEMETRY_TEXT_CAP", "0", |s| {
            s.process.telemetry.text_cap = Some(0)
        }),
        ("LLM__BREAKER__FAIL_RATE", "1.01", |s| {
            s.scopes[0].governance.fail_rate = 1.01
        }),
    ];
    let gw = Gateway::from_settings(good.clone()).await.unwrap();
    for (key, value, edit) in cases {
        let mut env = vars.clone();
        env.push(kv(key, value));
        let from_env = match settings_from_vars(env) {
            Err(ConfigError::Invalid(p)) => p
                .into_iter()
                .map(|p| (p.key, p.message))
                .collect::<Vec<_>>(),
            other => panic!("{key}={value} accepted: {other:?}"),
        };
        assert_eq!(from_env.len(), 1, "{from_env:?}");
        let mut typed = good.clone();
        edit(&mut typed);
        let start = Gateway::from_settings(typed.clone()).await.unwrap_err();
        assert_eq!(problems_of_start(&start), from_env, "start, {key}");
        let reload = gw.reload_with(typed).await.unwrap_err();
        assert_eq!(reload.problems(), from_env, "reload, {key}");
        // The previous configuration keeps serving.
        let r = gw.chat(ChatRequest::user("llm", "hi")).await.unwrap();
        assert_eq!(r.source_name, "openai-1");
    }
}
