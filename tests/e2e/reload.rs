//! Hot reload through a real `polygateway serve`: `POST /admin/reload` (admin keys only) and
//! `SIGHUP` re-read `.env`, swap the plugin components and the configuration; a call in
//! flight finishes on the set it started with while new calls use the new one; a reload that
//! fails validation keeps serving the old set and names the key at fault.

use std::time::Duration;

use futures_util::StreamExt;
use polygateway::config::FirstParty;
use polygateway::plugin::builtin_provider_bytes;
use polygateway_tests::{MockUpstream, eventually, hits, mock, script};
use serde_json::{Value, json};

use crate::plugin_fixtures::acme_example;
use crate::plugin_serve::{Serve, kv};

const ADMIN_KEY: &str = "admin-secret-1";

/// The `.env` of a gateway whose one source uses the component at `plugin.wasm`.
fn dotenv(mock: &MockUpstream, model: &str, extra: &str) -> String {
    format!(
        "LLM__ACME__1__PLUGIN=plugin.wasm\nLLM__ACME__1__BASE_URL={}\nLLM__ACME__1__MODEL={model}\nLLM__ACME__1__API_KEY=sk-acme\n{extra}",
        mock.base_url("reload")
    )
}

async fn reload(gw: &Serve, key: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().post(format!("{}/admin/reload", gw.base_url));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let resp = req.send().await.expect("gateway reachable");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn chat(gw: &Serve) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .json(&json!({"model": "llm", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("gateway reachable");
    (
        resp.status().as_u16(),
        resp.text().await.unwrap_or_default(),
    )
}

/// What the upstream saw last: (model, whether the Acme plugin built it, authorization).
async fn last_hit(mock: &MockUpstream) -> (Value, bool, Value) {
    let hits = hits(mock, "reload").await;
    let h = hits.last().cloned().unwrap_or(Value::Null);
    (
        h["body"]["model"].clone(),
        h["body"]["acme_trace"] == json!(true) && h["headers"]["x-acme-key"] == "sk-acme",
        h["authorization"].clone(),
    )
}

fn write_atomically(dir: &std::path::Path, name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reload_swaps_plugins_and_config_while_calls_in_flight_finish_on_the_old_set() {
    let acme = std::fs::read(acme_example().await).unwrap();
    let mock = mock().await;
    let gw = Serve::start(
        &[
            kv("PGW_ADMIN_KEYS", ADMIN_KEY),
            kv("PGW_TELEMETRY_BACKEND", "none"),
        ],
        &[
            ("plugin.wasm", &acme),
            (".env", dotenv(&mock, "acme-1", "").as_bytes()),
        ],
    )
    .await;
    let (status, body) = chat(&gw).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(last_hit(&mock).await, (json!("acme-1"), true, Value::Null));

    // A slow stream is in flight when the reload happens.
    script(
        &mock,
        "reload",
        json!({"steps": [{"content": "one two three four five six", "inter_chunk_delay_ms": 150}]}),
    )
    .await;
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .json(&json!({"model": "llm", "stream": true,
                      "messages": [{"role": "user", "content": "slowly"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut stream = resp.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(!first.is_empty());

    // Swap the component (the built-in OpenAI provider) and the model, then reload.
    write_atomically(
        gw.dir.path(),
        "plugin.wasm",
        builtin_provider_bytes(FirstParty::OpenAi),
    );
    write_atomically(
        gw.dir.path(),
        ".env",
        dotenv(&mock, "acme-2", "").as_bytes(),
    );
    let (status, report) = reload(&gw, Some(ADMIN_KEY)).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["status"], "reloaded", "{report}");
    assert_eq!(report["scopes"], json!(["LLM"]), "{report}");
    assert_eq!(report["restart_required"], json!([]), "{report}");

    // The in-flight stream finishes whole, on the old instances.
    let mut rest = first.to_vec();
    while let Some(chunk) = stream.next().await {
        rest.extend_from_slice(&chunk.unwrap());
    }
    let text = String::from_utf8(rest).unwrap();
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    let content: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(content, "one two three four five six");
    let streamed = hits(&mock, "reload").await;
    assert_eq!(streamed.last().unwrap()["body"]["acme_trace"], json!(true));

    // New calls use the new component and configuration.
    let (status, body) = chat(&gw).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        last_hit(&mock).await,
        (json!("acme-2"), false, json!("Bearer sk-acme"))
    );
    let health = gw.health().await;
    let source = &health["scopes"]["LLM"]["sources"][0];
    assert_eq!(source["plugin"], "openai", "{source}");
    assert_eq!(source["model"], "acme-2", "{source}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_reload_keeps_the_old_set_and_names_the_key() {
    let acme = std::fs::read(acme_example().await).unwrap();
    let mock = mock().await;
    let gw = Serve::start(
        &[
            kv("PGW_ADMIN_KEYS", ADMIN_KEY),
            kv("PGW_TELEMETRY_BACKEND", "none"),
        ],
        &[
            ("plugin.wasm", &acme),
            (".env", dotenv(&mock, "acme-1", "").as_bytes()),
        ],
    )
    .await;

    // A component that is not one.
    write_atomically(
        gw.dir.path(),
        "plugin.wasm",
        b"\0asm definitely not a component",
    );
    let (status, body) = reload(&gw, Some(ADMIN_KEY)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "reload_failed", "{body}");
    assert_eq!(
        body["error"]["problems"][0]["key"], "LLM__ACME__1__PLUGIN",
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("reload refused, still serving the previous configuration: "),
        "{message}"
    );
    assert!(
        message.contains("cannot load plugin plugin.wasm"),
        "{message}"
    );
    // Still serving, with the old component.
    let (status, body) = chat(&gw).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(last_hit(&mock).await, (json!("acme-1"), true, Value::Null));

    // Configuration errors: every key at fault is named.
    write_atomically(gw.dir.path(), "plugin.wasm", &acme);
    write_atomically(
        gw.dir.path(),
        ".env",
        dotenv(
            &mock,
            "acme-3",
            "LLM__ACME__1__TIMEOUT_S=soon\nPGW_NOT_A_KEY=1\n",
        )
        .as_bytes(),
    );
    let (status, body) = reload(&gw, Some(ADMIN_KEY)).await;
    assert_eq!(status, 400, "{body}");
    let keys: Vec<&str> = body["error"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["key"].as_str())
        .collect();
    assert!(keys.contains(&"LLM__ACME__1__TIMEOUT_S"), "{body}");
    assert!(keys.contains(&"PGW_NOT_A_KEY"), "{body}");
    let (status, _) = chat(&gw).await;
    assert_eq!(status, 200);
    assert_eq!(last_hit(&mock).await.0, json!("acme-1"));

    // Fixed: the reload goes through.
    write_atomically(
        gw.dir.path(),
        ".env",
        dotenv(&mock, "acme-3", "").as_bytes(),
    );
    let (status, body) = reload(&gw, Some(ADMIN_KEY)).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = chat(&gw).await;
    assert_eq!(status, 200);
    assert_eq!(last_hit(&mock).await.0, json!("acme-3"));

    let log = gw.stop().await;
    assert!(
        log.contains("reload refused; still serving the previous configuration"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_reload_needs_an_admin_key() {
    let mock = mock().await;
    let env_text = dotenv(&mock, "m", "");
    let files: [(&str, &[u8]); 2] = [
        (".env", env_text.as_bytes()),
        ("plugin.wasm", builtin_provider_bytes(FirstParty::OpenAi)),
    ];
    let gw = Serve::start(
        &[
            kv("PGW_ADMIN_KEYS", ADMIN_KEY),
            kv("PGW_API_KEYS", "client-key"),
            kv("PGW_TELEMETRY_BACKEND", "none"),
        ],
        &files,
    )
    .await;
    let (status, body) = reload(&gw, None).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = reload(&gw, Some("wrong")).await;
    assert_eq!(status, 401, "{body}");
    // A client key is not an admin key.
    let (status, body) = reload(&gw, Some("client-key")).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = reload(&gw, Some(ADMIN_KEY)).await;
    assert_eq!(status, 200, "{body}");
    gw.stop().await;

    // Without PGW_ADMIN_KEYS, /admin/* is off.
    let gw = Serve::start(&[kv("PGW_TELEMETRY_BACKEND", "none")], &files).await;
    let (status, body) = reload(&gw, Some(ADMIN_KEY)).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["type"], "permission_error", "{body}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_plugins_and_config() {
    let acme = std::fs::read(acme_example().await).unwrap();
    let mock = mock().await;
    let gw = Serve::start(
        &[kv("PGW_TELEMETRY_BACKEND", "none")],
        &[
            ("plugin.wasm", &acme),
            (".env", dotenv(&mock, "acme-1", "").as_bytes()),
        ],
    )
    .await;
    write_atomically(
        gw.dir.path(),
        "plugin.wasm",
        builtin_provider_bytes(FirstParty::OpenAi),
    );
    write_atomically(
        gw.dir.path(),
        ".env",
        dotenv(&mock, "after-hup", "").as_bytes(),
    );
    gw.sighup();
    let source = eventually(20, || async {
        let health = gw.health().await;
        let s = health["scopes"]["LLM"]["sources"][0].clone();
        (s["plugin"] == "openai").then_some(s)
    })
    .await;
    assert_eq!(source["model"], "after-hup", "{source}");
    let (status, body) = chat(&gw).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        last_hit(&mock).await,
        (json!("after-hup"), false, json!("Bearer sk-acme"))
    );
    // A bad SIGHUP reload is logged and changes nothing.
    write_atomically(gw.dir.path(), "plugin.wasm", b"garbage");
    gw.sighup();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, _) = chat(&gw).await;
    assert_eq!(status, 200);
    let log = gw.stop().await;
    assert!(log.contains("SIGHUP: reloading"), "{log}");
    assert!(
        log.contains("reload refused; still serving the previous configuration"),
        "{log}"
    );
}
