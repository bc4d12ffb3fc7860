//! The mock upstream's embeddings and MonkeyOCR endpoints over real HTTP (an in-process mock
//! on a free port).

use std::collections::HashMap;
use std::io::{Cursor, Read};
use std::net::SocketAddr;

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::*;

pub(super) async fn start() -> MockUpstream {
    match serve_mock(SocketAddr::from(([127, 0, 0, 1], 0)), HashMap::new()).await {
        Ok(m) => m,
        Err(e) => panic!("mock: {e}"),
    }
}

pub(super) async fn script(mock: &MockUpstream, name: &str, script: Value) {
    let r = reqwest::Client::new()
        .put(format!("http://{}/_mock/scenarios/{name}", mock.addr))
        .json(&script)
        .send()
        .await
        .expect("PUT script");
    assert_eq!(r.status(), 204, "{}", r.text().await.unwrap_or_default());
}

async fn hits(mock: &MockUpstream, name: &str) -> Vec<Value> {
    let v: Value = reqwest::get(format!("http://{}/_mock/scenarios/{name}/hits", mock.addr))
        .await
        .expect("GET hits")
        .json()
        .await
        .expect("hits json");
    v["hits"].as_array().cloned().unwrap_or_default()
}

async fn embed(mock: &MockUpstream, name: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/embeddings", mock.base_url(name)))
        .json(&body)
        .send()
        .await
        .expect("POST embeddings");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| serde_json::from_value::<f32>(x.clone()).expect("f32"))
        .collect()
}

#[test]
fn vectors_are_deterministic_and_round_trip_through_json() {
    let a = embedding_vector("hello world", 40);
    assert_eq!(a.len(), 40);
    assert_eq!(a, embedding_vector("hello world", 40));
    assert_eq!(a[..8], embedding_vector("hello world", 8)[..]);
    assert_ne!(a, embedding_vector("hello world!", 40));
    for i in 0..500 {
        for x in embedding_vector(&format!("text {i}"), 64) {
            assert!((-0.5..0.5).contains(&x));
            let text = serde_json::to_string(&x).expect("ser");
            let back32: f32 = serde_json::from_str(&text).expect("f32");
            let back64: f64 = serde_json::from_str(&text).expect("f64");
            assert_eq!(back32.to_bits(), x.to_bits(), "{text}");
            assert_eq!(back64, f64::from(x), "{text}");
            let via_value = serde_json::to_string(&json!(x)).expect("ser");
            assert_eq!(via_value, text);
        }
    }
    assert!(embedding_vector("x", 0).is_empty());
    assert_eq!(embedding_tokens("  "), 1);
    assert_eq!(embedding_tokens("a b  c"), 3);
}

#[tokio::test]
async fn embeddings_float_dims_and_usage() {
    let mock = start().await;
    let (s, v) = embed(
        &mock,
        "e",
        json!({"model": "text-embedding-3-small", "input": ["one two three", "four"]}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["object"], "list");
    assert_eq!(v["model"], "text-embedding-3-small");
    assert_eq!(v["usage"], json!({"prompt_tokens": 4, "total_tokens": 4}));
    let data = v["data"].as_array().expect("data");
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["object"], "embedding");
    assert_eq!(data[0]["index"], 0);
    assert_eq!(data[1]["index"], 1);
    assert_eq!(
        floats(&data[0]["embedding"]),
        embedding_vector("one two three", DEFAULT_EMBEDDING_DIMS)
    );
    assert_eq!(floats(&data[1]["embedding"]), embedding_vector("four", 8));

    // A single string, `dimensions`.
    let (s, v) = embed(
        &mock,
        "e",
        json!({"model": "m", "input": "solo", "dimensions": 20}),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(v["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        floats(&v["data"][0]["embedding"]),
        embedding_vector("solo", 20)
    );
    assert_eq!(v["usage"]["prompt_tokens"], 1);

    // The default scenario at the root; the hit records the body and path.
    let r: Value = reqwest::Client::new()
        .post(format!("http://{}/v1/embeddings", mock.addr))
        .bearer_auth("sk-e")
        .json(&json!({"model": "m", "input": "x"}))
        .send()
        .await
        .expect("POST")
        .json()
        .await
        .expect("json");
    assert_eq!(r["data"][0]["index"], 0);
    let h = hits(&mock, "default").await;
    assert_eq!(h.len(), 1);
    assert_eq!(h[0]["path"], "/v1/embeddings");
    assert_eq!(h[0]["body"]["input"], "x");
    assert_eq!(h[0]["authorization"], "Bearer sk-e");
    assert_eq!(h[0]["completed"], true);
    let h = hits(&mock, "e").await;
    assert_eq!(h.len(), 2);
    assert_eq!(h[1]["path"], "/sc/e/v1/embeddings");

    // Malformed requests.
    for bad in [
        json!({"model": "m"}),
        json!({"model": "m", "input": []}),
        json!({"model": "m", "input": [1, "a"]}),
        json!({"model": "m", "input": [[]]}),
        json!({"model": "m", "input": [[1], [-2]]}),
        json!({"model": "m", "input": "x", "dimensions": 0}),
        json!({"model": "m", "input": "x", "encoding_format": "hex"}),
    ] {
        let (s, v) = embed(&mock, "e", bad.clone()).await;
        assert_eq!(s, 400, "{bad}");
        assert_eq!(v["error"]["type"], "invalid_request_error");
    }
}

#[tokio::test]
async fn embeddings_base64() {
    let mock = start().await;
    let (s, v) = embed(
        &mock,
        "b",
        json!({"model": "m", "input": ["a", "b c"], "encoding_format": "base64", "dimensions": 5}),
    )
    .await;
    assert_eq!(s, 200);
    for (i, text) in ["a", "b c"].iter().enumerate() {
        let b64 = v["data"][i]["embedding"].as_str().expect("base64 string");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64");
        let got: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(got, embedding_vector(text, 5));
        assert_eq!(b64, embedding_base64(&embedding_vector(text, 5)));
    }
}

#[tokio::test]
async fn embeddings_shaped_by_steps() {
    let mock = start().await;
    script(
        &mock,
        "s",
        json!({"steps": [
            {"shuffle": true},
            {"embedding_dims": 3},
            {"drop_vectors": 1, "embedding_usage": false},
            {"status": 429, "headers": {"retry-after": "1"}},
            {"status": 200, "body": "{\"object\":\"list\"}"},
            {"first_token_delay_ms": 150},
        ]}),
    )
    .await;
    let req = json!({"model": "m", "input": ["a", "b", "c"], "dimensions": 4});

    let (_, v) = embed(&mock, "s", req.clone()).await;
    let idx: Vec<i64> = v["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|d| d["index"].as_i64())
        .collect();
    assert_eq!(idx, vec![2, 1, 0]);
    assert_eq!(floats(&v["data"][0]["embedding"]), embedding_vector("c", 4));

    let (_, v) = embed(&mock, "s", req.clone()).await;
    assert_eq!(floats(&v["data"][1]["embedding"]), embedding_vector("b", 3));

    let (_, v) = embed(&mock, "s", req.clone()).await;
    assert_eq!(v["data"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["data"][1]["index"], 1);
    assert!(v.get("usage").is_none());

    let r = reqwest::Client::new()
        .post(format!("{}/embeddings", mock.base_url("s")))
        .json(&req)
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "1");
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["message"], "mock error 429");

    let (s, v) = embed(&mock, "s", req.clone()).await;
    assert_eq!((s, v), (200, json!({"object": "list"})));

    let t = std::time::Instant::now();
    let (s, _) = embed(&mock, "s", req.clone()).await;
    assert_eq!(s, 200);
    assert!(t.elapsed() >= std::time::Duration::from_millis(150));
    assert_eq!(hits(&mock, "s").await.len(), 6);
}

fn image_part(bytes: Vec<u8>) -> reqwest::multipart::Part {
    reqwest::multipart::Part::bytes(bytes)
        .file_name("scan page.png")
        .mime_str("image/png")
        .expect("mime")
}

async fn ocr_post(
    mock: &MockUpstream,
    name: &str,
    op: &str,
    form: reqwest::multipart::Form,
) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/{op}", mock.ocr_base_url(name)))
        .multipart(form)
        .send()
        .await
        .expect("POST ocr");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn ocr_text_multipart() {
    let mock = start().await;
    let image: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let sha = hex::encode(Sha256::digest(&image));
    let form = reqwest::multipart::Form::new()
        .text("lang", "en")
        .part("file", image_part(image.clone()));
    let (s, v) = ocr_post(&mock, "o", "ocr/text", form).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v, json!({"content": "Recognised text of 70000 bytes"}));
    let h = hits(&mock, "o").await;
    assert_eq!(h.len(), 1);
    assert_eq!(h[0]["path"], "/sc/o/ocr/text");
    assert_eq!(h[0]["completed"], true);
    assert_eq!(h[0]["multipart"]["fields"], json!({"lang": "en"}));
    assert_eq!(
        h[0]["multipart"]["files"],
        json!([{"field": "file", "file_name": "scan page.png", "content_type": "image/png", "size": 70000, "sha256": sha}])
    );

    // Scripted text, an error step, a delay.
    script(
        &mock,
        "o",
        json!({"steps": [{"content": "Line 1\nLine 2"}, {"status": 503}, {"status": 500, "body": "boom"}]}),
    )
    .await;
    let form = || reqwest::multipart::Form::new().part("file", image_part(vec![1, 2, 3]));
    let (s, v) = ocr_post(&mock, "o", "ocr/text", form()).await;
    assert_eq!((s, v), (200, json!({"content": "Line 1\nLine 2"})));
    let (s, v) = ocr_post(&mock, "o", "ocr/text", form()).await;
    assert_eq!((s, v), (503, json!({"detail": "mock error 503"})));
    let r = reqwest::Client::new()
        .post(format!("{}/ocr/text", mock.ocr_base_url("o")))
        .multipart(form())
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 500);
    assert_eq!(r.text().await.expect("text"), "boom");

    // The default scenario at the root.
    let r: Value = reqwest::Client::new()
        .post(format!("http://{}/ocr/text", mock.addr))
        .multipart(form())
        .send()
        .await
        .expect("POST")
        .json()
        .await
        .expect("json");
    assert_eq!(r["content"], "Recognised text of 3 bytes");
}

#[tokio::test]
async fn ocr_rejects_bad_uploads_without_consuming_a_step() {
    let mock = start().await;
    script(&mock, "r", json!({"steps": [{"content": "first"}]})).await;
    for op in ["ocr/text", "parse"] {
        // No `file` part.
        let form = reqwest::multipart::Form::new().part("image", image_part(vec![1]));
        let (s, v) = ocr_post(&mock, "r", op, form).await;
        assert_eq!(s, 400);
        assert_eq!(v["detail"], "file: field required");
        // `file` without a file name.
        let form = reqwest::multipart::Form::new().text("file", "abc");
        let (s, v) = ocr_post(&mock, "r", op, form).await;
        assert_eq!(s, 400);
        assert!(
            v["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("text field"),
            "{v}"
        );
        // Not multipart.
        let r = reqwest::Client::new()
            .post(format!("{}/{op}", mock.ocr_base_url("r")))
            .json(&json!({"file": "abc"}))
            .send()
            .await
            .expect("POST");
        assert_eq!(r.status(), 400);
        let v: Value = r.json().await.expect("json");
        assert!(
            v["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("multipart"),
            "{v}"
        );
    }
    let h = hits(&mock, "r").await;
    assert_eq!(h.len(), 6);
    assert!(h.iter().all(|h| h["error"].is_string()));
    let form = reqwest::multipart::Form::new().part("file", image_part(vec![1]));
    let (_, v) = ocr_post(&mock, "r", "ocr/text", form).await;
    assert_eq!(v["content"], "first");
}

/// The member names and contents of a ZIP archive.
fn unzip(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).expect("a zip archive");
    (0..archive.len())
        .map(|i| {
            let mut f = archive.by_index(i).expect("member");
            let mut data = Vec::new();
            f.read_to_end(&mut data).expect("read member");
            (f.name().expect("member name").to_string(), data)
        })
        .collect()
}

async fn parse_and_download(mock: &MockUpstream, name: &str) -> (String, reqwest::Response) {
    let form = reqwest::multipart::Form::new().part("file", image_part(vec![9; 10]));
    let (s, v) = ocr_post(mock, name, "parse", form).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["success"], true);
    let url = v["download_url"]
        .as_str()
        .expect("download_url")
        .to_string();
    let full = if url.starts_with('/') {
        format!("{}{url}", mock.ocr_base_url(name))
    } else {
        url.clone()
    };
    let r = reqwest::get(full).await.expect("GET archive");
    (url, r)
}

#[tokio::test]
async fn ocr_parse_urls_and_layouts() {
    let mock = start().await;
    script(
        &mock,
        "p",
        json!({"steps": [
            {},
            {"absolute_url": true},
            {"layout": "bad_box"},
            {"layout": "no_middle"},
            {"layout": "bad_json"},
            {"layout": "not_zip"},
        ]}),
    )
    .await;

    // good, relative URL.
    let (url, r) = parse_and_download(&mock, "p").await;
    assert_eq!(url, "/static/scanpage_parsed_1.zip");
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/zip");
    let members = unzip(&r.bytes().await.expect("bytes"));
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "scanpage_parsed_1/scanpage_parsed_1_middle.json",
            "scanpage_parsed_1/scanpage_parsed_1.md",
            "scanpage_parsed_1/images/fig1.jpg",
        ]
    );
    assert_eq!(members[0].1, LAYOUT_GOOD_MIDDLE_JSON.as_bytes());
    assert_eq!(members[1].1, LAYOUT_MARKDOWN.as_bytes());

    // good, absolute URL.
    let (url, r) = parse_and_download(&mock, "p").await;
    assert_eq!(
        url,
        format!("http://{}/sc/p/static/scanpage_parsed_2.zip", mock.addr)
    );
    assert_eq!(unzip(&r.bytes().await.expect("bytes")).len(), 3);

    let (_, r) = parse_and_download(&mock, "p").await;
    let members = unzip(&r.bytes().await.expect("bytes"));
    assert_eq!(members.len(), 3);
    assert!(members[0].0.ends_with("_parsed_3_middle.json"));
    assert_eq!(members[0].1, LAYOUT_BAD_BOX_MIDDLE_JSON.as_bytes());

    let (_, r) = parse_and_download(&mock, "p").await;
    let members = unzip(&r.bytes().await.expect("bytes"));
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["scanpage_parsed_4/scanpage_parsed_4.md"]);

    let (_, r) = parse_and_download(&mock, "p").await;
    let members = unzip(&r.bytes().await.expect("bytes"));
    assert_eq!(members.len(), 2);
    assert!(members[0].0.ends_with("_middle.json"));
    assert!(serde_json::from_slice::<Value>(&members[0].1).is_err());

    let (_, r) = parse_and_download(&mock, "p").await;
    let bytes = r.bytes().await.expect("bytes");
    assert_eq!(&bytes[..], NOT_ZIP_BYTES);
    assert!(zip::ZipArchive::new(Cursor::new(&bytes[..])).is_err());

    // Unknown archive; relative URL resolved against the host root is not the scenario's.
    let r = reqwest::get(format!("{}/static/nope.zip", mock.ocr_base_url("p")))
        .await
        .expect("GET");
    assert_eq!(r.status(), 404);
    let r = reqwest::get(format!("http://{}/static/scanpage_parsed_1.zip", mock.addr))
        .await
        .expect("GET");
    assert_eq!(r.status(), 404);

    let h = hits(&mock, "p").await;
    let count = |p: &str| {
        h.iter()
            .filter(|h| h["path"].as_str().is_some_and(|x| x.contains(p)))
            .count()
    };
    assert_eq!(count("/sc/p/parse"), 6);
    assert_eq!(count("/sc/p/static/"), 7);

    // Archives survive a new script; the default scenario at the root.
    script(&mock, "p", json!({})).await;
    let r = reqwest::get(format!(
        "{}/static/scanpage_parsed_1.zip",
        mock.ocr_base_url("p")
    ))
    .await
    .expect("GET");
    assert_eq!(r.status(), 200);
    let form = reqwest::multipart::Form::new().part("file", image_part(vec![1]));
    let v: Value = reqwest::Client::new()
        .post(format!("http://{}/parse", mock.addr))
        .multipart(form)
        .send()
        .await
        .expect("POST")
        .json()
        .await
        .expect("json");
    let url = v["download_url"].as_str().expect("url");
    let r = reqwest::get(format!("http://{}{url}", mock.addr))
        .await
        .expect("GET");
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn ocr_health_default_and_set() {
    let mock = start().await;
    let get = |name: &'static str| {
        let url = format!("{}/health", mock.ocr_base_url(name));
        async move {
            let r = reqwest::get(url).await.expect("GET health");
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    assert_eq!(get("h").await, (200, json!({"status": "healthy"})));
    let put = |body: Value| {
        reqwest::Client::new()
            .put(format!("http://{}/_mock/scenarios/h/health", mock.addr))
            .json(&body)
            .send()
    };
    assert_eq!(
        put(json!({"status": 503})).await.expect("PUT").status(),
        204
    );
    assert_eq!(get("h").await, (503, json!({"status": "unhealthy"})));
    assert_eq!(get("other").await.0, 200);
    assert_eq!(
        put(json!({"status": "x"})).await.expect("PUT").status(),
        400
    );
    // Health survives a new script and consumes no step.
    script(&mock, "h", json!({"steps": [{"content": "kept"}]})).await;
    assert_eq!(get("h").await.0, 503);
    assert_eq!(
        put(json!({"status": 200})).await.expect("PUT").status(),
        204
    );
    assert_eq!(get("h").await.0, 200);
    let form = reqwest::multipart::Form::new().part("file", image_part(vec![1]));
    let (_, v) = ocr_post(&mock, "h", "ocr/text", form).await;
    assert_eq!(v["content"], "kept");
    let h = hits(&mock, "h").await;
    assert_eq!(h.iter().filter(|h| h["path"] == "/sc/h/health").count(), 2);
    let r = reqwest::get(format!("http://{}/health", mock.addr))
        .await
        .expect("GET");
    assert_eq!(r.status(), 200);
}

#[test]
fn fixtures_match_their_readme() {
    let good: Value = serde_json::from_str(LAYOUT_GOOD_MIDDLE_JSON).expect("good json");
    let bad: Value = serde_json::from_str(LAYOUT_BAD_BOX_MIDDLE_JSON).expect("bad_box json");
    let pages = good["pdf_info"].as_array().expect("pages");
    assert_eq!(pages.len(), 2);
    assert_eq!(pages[0]["page_size"], json!([612, 792]));
    assert_eq!(pages[1]["page_size"], json!([595, 842]));
    let summary: Vec<(i64, String, Value)> = pages
        .iter()
        .flat_map(|p| {
            let idx = p["page_idx"].as_i64().unwrap_or(-1);
            p["para_blocks"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |b| {
                    (
                        idx,
                        b["type"].as_str().unwrap_or("").to_string(),
                        b["bbox"].clone(),
                    )
                })
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, "title".into(), json!([72, 64.5, 540, 96])),
            (0, "text".into(), json!([72, 112, 540, 160])),
            (0, "table".into(), json!([72, 180, 540, 300.25])),
            (1, "image".into(), json!([100, 80, 495, 380])),
            (1, "text".into(), json!([100, 400, 495, 430])),
        ]
    );
    // bad_box = good + three bad text blocks at the end of page 0.
    let mut trimmed = bad.clone();
    let blocks = trimmed["pdf_info"][0]["para_blocks"]
        .as_array_mut()
        .expect("blocks");
    let extra = blocks.split_off(3);
    assert_eq!(trimmed, good);
    let boxes: Vec<Value> = extra.iter().map(|b| b["bbox"].clone()).collect();
    assert_eq!(
        boxes,
        vec![
            json!([300, 400, 100, 450]),
            json!([100, 500, 100, 550]),
            json!([1, 2, 3])
        ]
    );
    for layout in [
        Layout::Good,
        Layout::BadBox,
        Layout::NoMiddle,
        Layout::BadJson,
    ] {
        let zip = build_archive(layout, "x").expect("archive");
        assert!(!unzip(&zip).is_empty());
    }
}
