//! The proxy's HTTP surface: a non-streamed answer with its headers, 400s naming the field,
//! 404 for an unknown model, 413 over the body limit, client keys, `/v1/models`, and start-up
//! refusals that name the bad key.

use serde_json::{Value, json};

use crate::common::{bin, chat_body, gateway, kv, post_chat, source};
use polygateway_tests::{GatewayProcess, mock};

#[tokio::test]
async fn a_non_streamed_answer_with_usage_and_headers() {
    let m = mock().await;
    let gw = gateway(source(&m, "deepseek", 1, "plain", "deepseek-chat")).await;
    let (status, headers, body) = post_chat(&gw, chat_body(false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-pgw-source"], "deepseek-1");
    assert_eq!(headers["x-pgw-attempts"], "1");
    assert_eq!(headers["x-pgw-cache-hit"], "false");
    assert_eq!(headers["x-pgw-usage-source"], "measured");
    assert!(
        headers["x-pgw-overhead-us"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .is_ok()
    );
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "deepseek-chat");
    assert_eq!(
        v["choices"][0]["message"],
        json!({"role": "assistant", "content": "Hello from the mock upstream."})
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10})
    );
}

#[tokio::test]
async fn bad_requests_name_the_field() {
    let m = mock().await;
    let gw = gateway(source(&m, "openai", 1, "bad", "gpt-x")).await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", gw.base_url);
    let cases: Vec<(&str, u16, Value)> = vec![
        ("{not json", 400, Value::Null),
        (r#"{"model":"llm","messages":"hi"}"#, 400, json!("messages")),
        (
            r#"{"model":"llm","messages":[{"role":"user","content":"x"}],"temperature":"warm"}"#,
            400,
            json!("temperature"),
        ),
        (
            r#"{"model":"llm","messages":[{"role":"user","content":"x"}],"stream":1}"#,
            400,
            json!("stream"),
        ),
        (
            r#"{"model":"nope","messages":[{"role":"user","content":"x"}]}"#,
            404,
            json!("model"),
        ),
    ];
    for (body, want_status, want_param) in cases {
        let resp = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), want_status, "{body}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["param"], want_param, "{body}: {v}");
    }
    let long_tenant = "t".repeat(129);
    for (header, value) in [
        ("x-pgw-call-deadline-s", "NaN"),
        ("x-pgw-call-deadline-s", "0"),
        ("x-pgw-tenant-id", long_tenant.as_str()),
        ("x-pgw-meta", r#"{"pg_x": 1}"#),
        ("x-pgw-meta", "[1]"),
        ("x-pgw-cache", "sometimes"),
    ] {
        let resp = client
            .post(&url)
            .header(header, value)
            .json(&chat_body(false))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{header}: {value}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["param"], header, "{v}");
    }
}

#[tokio::test]
async fn body_limit_keys_and_models() {
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "keys", "gpt-x");
    env.push(kv("PGW_API_KEYS", "client-key-1,client-key-2"));
    env.push(kv("PGW_MAX_BODY_BYTES", "300"));
    env.push(kv("LLM__ALIASES", "llm,gpt-4o-mini"));
    let gw = gateway(env).await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", gw.base_url);
    let no_key = client
        .post(&url)
        .json(&chat_body(false))
        .send()
        .await
        .unwrap();
    assert_eq!(no_key.status().as_u16(), 401);
    let wrong = client
        .post(&url)
        .bearer_auth("client-key-3")
        .json(&chat_body(false))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let ok = client
        .post(&url)
        .bearer_auth("client-key-2")
        .json(&chat_body(false))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let mut big = chat_body(false);
    big["messages"][0]["content"] = json!("x".repeat(400));
    let too_big = client
        .post(&url)
        .bearer_auth("client-key-1")
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(too_big.status().as_u16(), 413);
    let v: Value = too_big.json().await.unwrap();
    assert_eq!(v["error"]["type"], "request_too_large");
    let anonymous = client
        .get(format!("{}/v1/models", gw.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let models: Value = client
        .get(format!("{}/v1/models", gw.base_url))
        .bearer_auth("client-key-1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["llm", "gpt-4o-mini"]);
}

#[tokio::test]
async fn start_up_refuses_bad_configuration_naming_the_key() {
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "cfg", "gpt-x");
    env.push(kv("LLM__OPENAI__1__COLOR", "blue"));
    env.push(kv("LLM__OPENAI__1__RPM", "many"));
    env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    let err = GatewayProcess::try_start(bin(), &env)
        .await
        .err()
        .expect("start-up refused");
    assert!(
        err.contains("LLM__OPENAI__1__COLOR: unknown source field `COLOR`"),
        "{err}"
    );
    assert!(
        err.contains("LLM__OPENAI__1__RPM: expected a non-negative integer, got `many`"),
        "{err}"
    );

    let mut env = source(&m, "openai", 1, "cfg", "gpt-x");
    env.push(kv("PGW_LISTEN", "0.0.0.0:0"));
    env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    let err = GatewayProcess::try_start(bin(), &env)
        .await
        .err()
        .expect("open bind refused");
    assert!(err.contains("without PGW_API_KEYS"), "{err}");
}

#[tokio::test]
async fn dot_env_is_read_and_the_process_environment_wins() {
    let m = mock().await;
    let dotenv = format!(
        "LLM__OPENAI__1__BASE_URL={}\nLLM__OPENAI__1__MODEL=from-dotenv\nLLM__ALIASES=from-file\nPGW_TELEMETRY_BACKEND=none\n",
        m.base_url("dotenv")
    );
    // The process environment overrides the alias from the file.
    let env = vec![kv("LLM__ALIASES", "from-env")];
    let gw = GatewayProcess::try_start_with_files(bin(), &env, &[(".env", &dotenv)])
        .await
        .unwrap();
    let mut body = chat_body(false);
    body["model"] = json!("from-env");
    let (status, _, text) = post_chat(&gw, body).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["model"], "from-dotenv");
    let mut body = chat_body(false);
    body["model"] = json!("from-file");
    let (status, _, _) = post_chat(&gw, body).await;
    assert_eq!(status, 404);

    // A malformed .env stops start-up naming the file.
    let err = GatewayProcess::try_start_with_files(
        bin(),
        &Vec::<(String, String)>::new(),
        &[(".env", "NOT A VALID LINE\n")],
    )
    .await
    .err()
    .expect("refused");
    assert!(err.contains(".env"), "{err}");
}
