//! OCR under chat's governance (docs/ocr.md#governance) through a real `polygateway serve` process
//! and the embedded API, with the `monkeyocr` component on the mock's MonkeyOCR endpoints over TCP:
//! the exact elements and page sizes of the fixture archive (relative and absolute download URLs),
//! the numeric defence (bad boxes dropped and counted), text through a `curl` multipart upload and
//! JSON base64, failover from a 503 source, a bad archive as 422 `result_invalid` with the breaker
//! closed, TPM settled to 0, telemetry rows with measured zero usage and the image's digest instead
//! of its bytes, and the health probe.

use std::time::Duration;

use polygateway::config::settings_from_vars;
use polygateway::{Gateway, OcrRequest, UsageSource};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::{bin, kv};
use polygateway_tests::{
    GatewayProcess, MockUpstream, eventually, hits, mock, script, telemetry_rows,
};

/// A tiny "PNG": the signature and an IHDR chunk start, then filler (sniffed as image/png).
fn png(len: usize) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    b.resize(len, 7);
    b
}

/// Env of MonkeyOCR source `n` of scope `OCR` on a mock scenario.
fn ocr_source(m: &MockUpstream, n: u32, scenario: &str) -> Vec<(String, String)> {
    let p = format!("OCR__MONKEYOCR__{n}__");
    vec![
        (format!("{p}BASE_URL"), m.ocr_base_url(scenario)),
        (format!("{p}MODEL"), "monkeyocr".into()),
    ]
}

fn common_env(mut env: Vec<(String, String)>) -> Vec<(String, String)> {
    if !env.iter().any(|(k, _)| k.starts_with("PGW_TELEMETRY")) {
        env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    }
    env.push(kv("OCR__SELECTOR", "round-robin"));
    env.push(kv("OCR__RETRY__BASE_DELAY_S", "0.01"));
    env
}

async fn start(env: Vec<(String, String)>) -> GatewayProcess {
    GatewayProcess::start(bin(), &common_env(env)).await
}

async fn embedded(env: Vec<(String, String)>) -> Gateway {
    Gateway::from_settings(settings_from_vars(common_env(env)).unwrap())
        .await
        .unwrap()
}

/// POST a multipart upload (`file` part named `file_name`, field `model`).
async fn post_multipart(
    gw: &GatewayProcess,
    op: &str,
    image: Vec<u8>,
    file_name: &str,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let part = reqwest::multipart::Part::bytes(image).file_name(file_name.to_string());
    let form = reqwest::multipart::Form::new()
        .text("model", "ocr")
        .part("file", part);
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/ocr/{op}", gw.base_url))
        .multipart(form)
        .send()
        .await
        .expect("gateway reachable");
    let status = resp.status().as_u16();
    let h = resp.headers().clone();
    (status, h, resp.json().await.expect("JSON body"))
}

async fn healthz(gw: &GatewayProcess) -> Value {
    reqwest::get(format!("{}/healthz", gw.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn header<'a>(h: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The elements of the mock's `layout_good.json` (host/src/mock/fixtures/README.md).
fn good_elements() -> Value {
    json!([
        {"type": "title", "text": "Quarterly Report", "bbox": [72.0, 64.5, 540.0, 96.0], "page_index": 0},
        {"type": "text", "text": "Revenue grew in every region.\nCosts stayed flat.", "bbox": [72.0, 112.0, 540.0, 160.0], "page_index": 0},
        {"type": "table", "text": "<table><tr><td>Region</td><td>Revenue</td></tr><tr><td>North</td><td>120</td></tr><tr><td>South</td><td>95</td></tr></table>", "bbox": [72.0, 180.0, 540.0, 300.25], "page_index": 0},
        {"type": "image", "text": "", "bbox": [100.0, 80.0, 495.0, 380.0], "page_index": 1},
        {"type": "text", "text": "Figure 1 shows revenue by region.", "bbox": [100.0, 400.0, 495.0, 430.0], "page_index": 1},
    ])
}

fn good_pages() -> Value {
    json!([
        {"page_index": 0, "width": 612.0, "height": 792.0},
        {"page_index": 1, "width": 595.0, "height": 842.0},
    ])
}

fn zero_usage() -> Value {
    json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
}

#[tokio::test]
async fn layout_returns_the_fixture_elements_via_relative_and_absolute_urls_and_drops_bad_boxes() {
    let m = mock().await;
    script(
        &m,
        "ocr-layout",
        json!({"steps": [{}, {"absolute_url": true}, {"layout": "bad_box"}]}),
    )
    .await;
    let gw = start(ocr_source(&m, 1, "ocr-layout")).await;

    let expected = |dropped: u32| {
        json!({
            "object": "ocr.layout",
            "model": "ocr",
            "elements": good_elements(),
            "page_sizes": good_pages(),
            "dropped_boxes": dropped,
            "usage": zero_usage(),
            "source": "monkeyocr-1",
        })
    };
    // Relative `download_url` (`/static/page_parsed_1.zip`, resolved against the base URL).
    let (status, h, body) = post_multipart(&gw, "layout", png(300), "page.png").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, expected(0));
    assert_eq!(header(&h, "x-pgw-source"), "monkeyocr-1");
    assert_eq!(header(&h, "x-pgw-attempts"), "1");
    assert_eq!(header(&h, "x-pgw-call-id").len(), 36);
    // Absolute `download_url`.
    let (status, _, body) = post_multipart(&gw, "layout", png(300), "page.png").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, expected(0));
    // Three bad boxes (reversed, zero width, three numbers): dropped and counted.
    let (status, _, body) = post_multipart(&gw, "layout", png(300), "page.png").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, expected(3));

    let sent = hits(&m, "ocr-layout").await;
    let paths: Vec<&str> = sent
        .iter()
        .map(|h| h["path"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        paths,
        [
            "/sc/ocr-layout/parse",
            "/sc/ocr-layout/static/page_parsed_1.zip",
            "/sc/ocr-layout/parse",
            "/sc/ocr-layout/static/page_parsed_2.zip",
            "/sc/ocr-layout/parse",
            "/sc/ocr-layout/static/page_parsed_3.zip",
        ]
    );
    // The upload: one file part `file` with the sniffed type, no other field.
    assert_eq!(
        sent[0]["multipart"],
        json!({"fields": {}, "files": [{
            "field": "file",
            "file_name": "page.png",
            "content_type": "image/png",
            "size": 300,
            "sha256": hex::encode(Sha256::digest(png(300))),
        }]})
    );
    let metrics = reqwest::get(format!("{}/metrics", gw.base_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"pgw_ocr_boxes_dropped_total{scope="OCR",source="monkeyocr-1"} 3"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_bad_archive_is_result_invalid_without_failover_and_the_breaker_stays_closed() {
    let m = mock().await;
    script(
        &m,
        "ocr-badzip",
        json!({"steps": [{"layout": "no_middle"}, {"layout": "bad_json"}, {"layout": "not_zip"}]}),
    )
    .await;
    // Two sources on one scenario: a retry or failover would show as a second upload.
    let mut env = ocr_source(&m, 1, "ocr-badzip");
    env.extend(ocr_source(&m, 2, "ocr-badzip"));
    let gw = start(env).await;
    let mut messages = Vec::new();
    for _ in 0..3 {
        let (status, _, body) = post_multipart(&gw, "layout", png(64), "bad.png").await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["type"], "result_invalid");
        messages.push(body["error"]["message"].as_str().unwrap_or("").to_string());
    }
    assert!(
        messages[0].contains("the layout archive has no *_middle.json member"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("layout document is not a middle.json"),
        "{messages:?}"
    );
    assert!(
        messages[2].contains("the layout download is not a ZIP archive"),
        "{messages:?}"
    );
    // A bad image is not a bad service: no retry, no failover.
    let paths: Vec<String> = hits(&m, "ocr-badzip")
        .await
        .iter()
        .map(|h| h["path"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "/sc/ocr-badzip/parse",
            "/sc/ocr-badzip/static/bad_parsed_1.zip",
            "/sc/ocr-badzip/parse",
            "/sc/ocr-badzip/static/bad_parsed_2.zip",
            "/sc/ocr-badzip/parse",
            "/sc/ocr-badzip/static/bad_parsed_3.zip",
        ],
        "one upload and one download per call"
    );
    let health = healthz(&gw).await;
    for src in health["scopes"]["OCR"]["sources"].as_array().unwrap() {
        assert_eq!(src["breaker"], "closed", "{health}");
        assert_eq!(src["consecutive_failures"], 0, "{health}");
    }
    assert_eq!(
        health["ocr_health"],
        json!({"OCR": {"monkeyocr-1": true, "monkeyocr-2": true}})
    );
}

#[tokio::test]
async fn text_through_curl_multipart_and_json_with_zero_usage_and_digest_rows() {
    let m = mock().await;
    let mut env = ocr_source(&m, 1, "ocr-text");
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    env.push(kv("OCR__MONKEYOCR__1__TPM", 6000));
    let gw = start(env).await;
    let image = png(1234);
    let path = gw.dir.path().join("scan.png");
    std::fs::write(&path, &image).unwrap();
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "-D", "-", "-F"])
        .arg(format!("file=@{}", path.display()))
        .args(["-F", "model=ocr"])
        .arg(format!("{}/v1/ocr/text", gw.base_url))
        .output()
        .await
        .expect("curl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n").expect("head and body");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let call_id = head
        .lines()
        .find_map(|l| l.strip_prefix("x-pgw-call-id: "))
        .expect("x-pgw-call-id")
        .trim()
        .to_string();
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        body,
        json!({
            "object": "ocr.text",
            "model": "ocr",
            "text": "Recognised text of 1234 bytes",
            "usage": zero_usage(),
            "source": "monkeyocr-1",
        })
    );
    let sent = hits(&m, "ocr-text").await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["path"], "/sc/ocr-text/ocr/text");
    assert_eq!(sent[0]["multipart"]["files"][0]["file_name"], "scan.png");
    assert_eq!(
        sent[0]["multipart"]["files"][0]["content_type"],
        "image/png"
    );
    assert_eq!(sent[0]["multipart"]["files"][0]["size"], 1234);

    // JSON with base64 (a data URL), and the missing-field errors name the field.
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(png(10));
    let client = reqwest::Client::new();
    let post = |body: Value| {
        client
            .post(format!("{}/v1/ocr/text", gw.base_url))
            .json(&body)
            .send()
    };
    let resp = post(json!({"model": "ocr", "image": format!("data:image/png;base64,{b64}")}))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["text"], "Recognised text of 10 bytes");
    let resp = post(json!({"image": b64})).await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["param"], "model");
    let form = reqwest::multipart::Form::new().text("model", "ocr");
    let resp = client
        .post(format!("{}/v1/ocr/text", gw.base_url))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["param"], "file");

    // TPM settles to 0: nothing stays charged in the window.
    let health = healthz(&gw).await;
    let src = &health["scopes"]["OCR"]["sources"][0];
    assert_eq!(src["limiter"]["tokens_in_window"], 0, "{health}");
    assert_eq!(src["limiter"]["requests_in_window"], 2, "{health}");

    // Telemetry: one attempt and one terminal row, measured zero usage, the digest.
    let db = gw.telemetry_db();
    let cols = [
        "logical_call_id",
        "event",
        "source_name",
        "prompt_tokens",
        "completion_tokens",
        "usage_source",
        "messages",
        "response",
    ];
    let rows = eventually(10, || {
        let db = db.clone();
        let call_id = call_id.clone();
        async move {
            let rows: Vec<Value> = telemetry_rows(&db, &cols)
                .await
                .into_iter()
                .filter(|r| r["logical_call_id"] == call_id.as_str())
                .collect();
            (rows.len() == 2).then_some(rows)
        }
    })
    .await;
    let messages = json!([{"role": "user", "content": [{
        "type": "image",
        "sha256": hex::encode(Sha256::digest(&image)),
        "bytes": 1234,
    }]}]);
    let mut events: Vec<&str> = rows.iter().map(|r| r["event"].as_str().unwrap()).collect();
    events.sort();
    assert_eq!(events, ["attempt", "terminal_success"]);
    for r in &rows {
        assert_eq!(r["source_name"], "monkeyocr-1");
        assert_eq!(r["prompt_tokens"], 0);
        assert_eq!(r["completion_tokens"], 0);
        assert_eq!(r["usage_source"], "measured");
        assert_eq!(r["response"], "Recognised text of 1234 bytes");
        let stored: Value = serde_json::from_str(r["messages"].as_str().unwrap()).unwrap();
        assert_eq!(stored, messages);
    }
}

#[tokio::test]
async fn embedded_text_fails_over_from_a_503_source_and_reports_health() {
    let m = mock().await;
    script(&m, "ocr-down", json!({"then": {"status": 503}})).await;
    script(&m, "ocr-up", json!({"then": {"content": "Hello OCR"}})).await;
    let mut env = ocr_source(&m, 1, "ocr-down");
    env.extend(ocr_source(&m, 2, "ocr-up"));
    let gw = embedded(env).await;

    let mut req = OcrRequest::new("ocr", png(50));
    req.file_name = Some("doc.png".into());
    let r = gw.recognize_text(req).await.unwrap();
    assert_eq!(r.text, "Hello OCR");
    assert_eq!(r.source_name, "monkeyocr-2");
    assert_eq!(r.model, "monkeyocr");
    assert_eq!(r.attempts, 2);
    assert_eq!(r.scope, "OCR");
    assert_eq!((r.usage.prompt_tokens, r.usage.completion_tokens), (0, 0));
    assert_eq!(r.usage.usage_source, UsageSource::Measured);
    assert_eq!(hits(&m, "ocr-down").await.len(), 1);
    assert_eq!(hits(&m, "ocr-up").await.len(), 1);

    // Layout through the embedded API on the healthy source.
    let l = gw
        .parse_layout(OcrRequest::new("ocr", png(50)))
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(&l.elements).unwrap(), good_elements());
    assert_eq!(serde_json::to_value(&l.page_sizes).unwrap(), good_pages());
    assert_eq!(l.dropped_boxes, 0);

    // Health: the probe's answer per source, unhealthy once the service says 503.
    let mut want = std::collections::BTreeMap::new();
    want.insert(
        "OCR".to_string(),
        [
            ("monkeyocr-1".to_string(), true),
            ("monkeyocr-2".to_string(), true),
        ]
        .into_iter()
        .collect(),
    );
    assert_eq!(gw.check_ocr_health().await, want);
    let resp = reqwest::Client::new()
        .put(format!("http://{}/_mock/scenarios/ocr-down/health", m.addr))
        .json(&json!({"status": 503}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    want.get_mut("OCR")
        .unwrap()
        .insert("monkeyocr-1".into(), false);
    assert_eq!(gw.check_ocr_health().await, want);
}

#[tokio::test]
async fn an_unknown_model_and_an_empty_image_are_refused_before_any_upstream_call() {
    let m = mock().await;
    let gw = embedded(ocr_source(&m, 1, "ocr-refuse")).await;
    let e = gw
        .recognize_text(OcrRequest::new("nope", png(5)))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "model_not_found");
    let e = gw
        .parse_layout(OcrRequest::new("ocr", Vec::new()))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "invalid_request");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(hits(&m, "ocr-refuse").await.len(), 0);
}

#[tokio::test]
async fn trust_env_sends_through_the_process_proxy_only_where_set() {
    let m = mock().await;
    // A proxy address that refuses connections.
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut env = ocr_source(&m, 1, "ocr-proxied");
    env.push(kv("OCR__MONKEYOCR__1__TRUST_ENV", "true"));
    env.extend(ocr_source(&m, 2, "ocr-direct"));
    env.push(kv("HTTP_PROXY", format!("http://{refused}")));
    env.push(kv("http_proxy", format!("http://{refused}")));
    let gw = start(env).await;
    let (status, h, body) = post_multipart(&gw, "text", png(20), "a.png").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["source"], "monkeyocr-2");
    assert_eq!(header(&h, "x-pgw-attempts"), "2");
    // Source 1 went to the (dead) proxy, never to the mock; source 2 went direct.
    assert_eq!(hits(&m, "ocr-proxied").await.len(), 0);
    assert_eq!(hits(&m, "ocr-direct").await.len(), 1);
}

#[tokio::test]
async fn client_auth_body_limit_and_deadline_apply_to_ocr() {
    let m = mock().await;
    script(
        &m,
        "ocr-guard",
        json!({"steps": [{}, {"first_token_delay_ms": 3000}]}),
    )
    .await;
    let mut env = ocr_source(&m, 1, "ocr-guard");
    env.push(kv("PGW_API_KEYS", "k-ocr"));
    env.push(kv("PGW_MAX_BODY_BYTES", 2000));
    let gw = start(env).await;
    let send = |image: Vec<u8>, key: Option<&str>, deadline: Option<&str>| {
        let part = reqwest::multipart::Part::bytes(image).file_name("a.png");
        let form = reqwest::multipart::Form::new()
            .text("model", "ocr")
            .part("file", part);
        let mut rb = reqwest::Client::new()
            .post(format!("{}/v1/ocr/text", gw.base_url))
            .multipart(form);
        if let Some(k) = key {
            rb = rb.bearer_auth(k);
        }
        if let Some(d) = deadline {
            rb = rb.header("x-pgw-call-deadline-s", d);
        }
        async move {
            let resp = rb.send().await.expect("gateway reachable");
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.expect("JSON body"))
        }
    };
    let (status, body) = send(png(10), None, None).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = send(png(3000), Some("k-ocr"), None).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["type"], "request_too_large");
    assert_eq!(hits(&m, "ocr-guard").await.len(), 0);
    let (status, body) = send(png(10), Some("k-ocr"), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["text"], "Recognised text of 10 bytes");
    let started = std::time::Instant::now();
    let (status, body) = send(png(10), Some("k-ocr"), Some("0.3")).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["type"], "deadline_exceeded");
    assert!(started.elapsed() < Duration::from_secs(2));
}
