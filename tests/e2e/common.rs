//! Helpers for building gateway configurations in the end-to-end tests.

use polygateway_tests::{GatewayProcess, MockUpstream};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_polygateway")
}

/// Env of one source `LLM__{PROVIDER}__{n}__*` on a mock scenario.
pub fn source(
    mock: &MockUpstream,
    provider: &str,
    n: u32,
    scenario: &str,
    model: &str,
) -> Vec<(String, String)> {
    let p = format!("LLM__{}__{n}__", provider.to_ascii_uppercase());
    vec![
        (format!("{p}BASE_URL"), mock.base_url(scenario)),
        (format!("{p}MODEL"), model.to_string()),
        (format!("{p}API_KEY"), format!("sk-{scenario}")),
    ]
}

/// Start a gateway with these env entries (telemetry off unless given).
pub async fn gateway(env: Vec<(String, String)>) -> GatewayProcess {
    let mut env = env;
    if !env.iter().any(|(k, _)| k.starts_with("PGW_TELEMETRY")) {
        env.push(("PGW_TELEMETRY_BACKEND".into(), "none".into()));
    }
    // Deterministic order (first call → first source) unless a test picks a selector.
    if !env.iter().any(|(k, _)| k == "LLM__SELECTOR") {
        env.push(("LLM__SELECTOR".into(), "round-robin".into()));
    }
    GatewayProcess::start(bin(), &env).await
}

/// `(key, value)` shorthand.
pub fn kv(k: &str, v: impl ToString) -> (String, String) {
    (k.to_string(), v.to_string())
}

/// POST a chat completion; returns status, headers and body text.
pub async fn post_chat(
    gw: &GatewayProcess,
    body: serde_json::Value,
) -> (u16, reqwest::header::HeaderMap, String) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .json(&body)
        .send()
        .await
        .expect("gateway reachable");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.expect("body"))
}

/// POST a chat completion `body` and return its body as it arrives, after checking the
/// status is 200 (the head of a stream comes once the call has committed).
pub async fn open_stream(
    gw: &GatewayProcess,
    body: &serde_json::Value,
) -> impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + use<> {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .json(body)
        .send()
        .await
        .expect("gateway reachable");
    assert_eq!(resp.status().as_u16(), 200);
    resp.bytes_stream()
}

/// The `delta.content` of each SSE chunk of choice 0 in `body`, in order (events that are
/// not JSON, such as `[DONE]`, and chunks without content are skipped).
pub fn sse_contents(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// A user message body for the `llm` scope.
pub fn chat_body(stream: bool) -> serde_json::Value {
    let mut b = serde_json::json!({
        "model": "llm",
        "messages": [{"role": "user", "content": "say hello to the test"}],
        "stream": stream,
    });
    if stream {
        b["stream_options"] = serde_json::json!({"include_usage": true});
    }
    b
}
