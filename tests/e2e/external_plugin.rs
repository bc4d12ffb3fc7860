//! End-to-end test of the plugin author's path: the out-of-tree example provider
//! (`examples/acme-provider`) is built from scratch for `wasm32-wasip2`, loaded by a real
//! `polygateway serve` through `LLM__ACME__1__PLUGIN`, and a streamed and a non-streamed
//! call go through it to the mock upstream, which shows what the plugin put on the wire.

use std::path::{Path, PathBuf};

use polygateway_tests::{GatewayProcess, MockUpstream, Step, hits, mock, repo_root};
use serde_json::{Value, json};

/// Build `examples/acme-provider` in release for `wasm32-wasip2` with `--locked`, into
/// `$CARGO_TARGET_DIR/acme-example` when the variable is set (a reusable cache), else into
/// `scratch`. The host's flags and wrappers are removed from the child's environment, as
/// `host/build.rs` does for the first-party plugins. Returns the component's path.
async fn build_acme(scratch: &Path) -> PathBuf {
    let target_dir = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join("acme-example"),
        None => scratch.to_path_buf(),
    };
    polygateway_tests::build_guest_component(
        &repo_root()
            .join("examples")
            .join("acme-provider")
            .join("Cargo.toml"),
        &target_dir,
        "acme",
    )
    .await
}

/// A gateway whose only source is the Acme component on the mock's `acme` scenario.
async fn acme_gateway(mock: &MockUpstream, wasm: &Path) -> GatewayProcess {
    GatewayProcess::start(
        env!("CARGO_BIN_EXE_polygateway"),
        &[
            ("LLM__ACME__1__PLUGIN", wasm.display().to_string()),
            ("LLM__ACME__1__BASE_URL", mock.base_url("acme")),
            ("LLM__ACME__1__MODEL", "acme-1".to_string()),
            ("LLM__ACME__1__API_KEY", "sk-acme".to_string()),
            ("PGW_TELEMETRY_BACKEND", "none".to_string()),
        ],
    )
    .await
}

/// POST a chat completion for alias `llm`; returns the `x-pgw-source` header and the body.
async fn post_chat(gw: &GatewayProcess, stream: bool) -> (String, String) {
    let body = json!({
        "model": "llm",
        "messages": [{"role": "user", "content": "Hello Acme"}],
        "stream": stream,
    });
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("gateway reachable");
    let status = resp.status().as_u16();
    let source = resp
        .headers()
        .get("x-pgw-source")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let text = resp.text().await.expect("response body");
    assert_eq!(status, 200, "stream={stream}: {text}");
    (source, text)
}

/// The answer text of an SSE chat-completions stream, and whether it ended with `[DONE]`.
fn sse_content(text: &str) -> (String, bool) {
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .collect();
    let content = data
        .iter()
        .filter(|d| **d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).expect("chunk is JSON"))
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    (content, data.last() == Some(&"[DONE]"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_acme_plugin_builds_loads_and_speaks_its_protocol() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let wasm = build_acme(scratch.path()).await;
    let mock = mock().await;
    let gw = acme_gateway(&mock, &wasm).await;
    let expected = Step::default().content; // "Hello from the mock upstream."
    assert_eq!(expected, "Hello from the mock upstream.");

    // The host loaded the component from the file and describes it by its own name.
    let health: Value = reqwest::get(format!("{}/healthz", gw.base_url))
        .await
        .expect("healthz")
        .text()
        .await
        .map(|t| serde_json::from_str(&t).expect("healthz JSON"))
        .expect("healthz body");
    let source = health["scopes"]
        .as_object()
        .expect("scopes")
        .values()
        .flat_map(|s| s["sources"].as_array().cloned().unwrap_or_default())
        .find(|s| s["name"] == "acme-1")
        .unwrap_or_else(|| panic!("no source acme-1 in {health}"));
    assert_eq!(source["plugin"], "acme", "{source}");
    assert_eq!(source["model"], "acme-1", "{source}");

    // Non-streamed.
    let (source_name, text) = post_chat(&gw, false).await;
    assert_eq!(source_name, "acme-1");
    let answer: Value = serde_json::from_str(&text).expect("answer JSON");
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        expected.as_str()
    );

    // Streamed.
    let (source_name, text) = post_chat(&gw, true).await;
    assert_eq!(source_name, "acme-1");
    let (content, done) = sse_content(&text);
    assert_eq!(content, expected);
    assert!(done, "stream ends with [DONE]: {text}");

    // What the plugin put on the wire, as the upstream saw it.
    let hits = hits(&mock, "acme").await;
    assert_eq!(hits.len(), 2, "{hits:?}");
    for (hit, stream) in hits.iter().zip([false, true]) {
        let body = &hit["body"];
        assert_eq!(body["acme_trace"], json!(true), "{body}");
        assert_eq!(body["model"], "acme-1", "{body}");
        assert_eq!(body["stream"], json!(stream), "{body}");
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": "Hello Acme"}]),
            "{body}"
        );
        let headers = &hit["headers"];
        assert_eq!(headers["x-acme-key"], "sk-acme", "{headers}");
        assert_eq!(headers["content-type"], "application/json", "{headers}");
        assert!(headers.get("authorization").is_none(), "{headers}");
        assert!(hit["authorization"].is_null(), "{hit}");
    }
    assert_eq!(
        hits[1]["body"]["stream_options"],
        json!({"include_usage": true})
    );
    gw.stop().await;
}
