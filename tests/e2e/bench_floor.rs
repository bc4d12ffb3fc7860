//! The benchmark's floor, `polygateway bench-passthrough`, as the benchmark runs it: its own
//! process in front of the real mock upstream. A floor that changed or lost bytes would make
//! every ratio of the benchmark meaningless, so its answers must equal the upstream's exactly.

use std::process::Stdio;
use std::time::Duration;

use polygateway_tests::{hits, mock};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Status, `content-type`, `content-length` (absent on a chunked body) and the body's bytes.
async fn post(url: &str, stream: bool) -> (u16, String, Option<String>, Vec<u8>) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(&json!({
            "model": "m",
            "messages": [{"role": "user", "content": "floor"}],
            "stream": stream,
        }))
        .send()
        .await
        .expect("request");
    let status = resp.status().as_u16();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().expect("a text header").to_string())
    };
    let ctype = header("content-type").expect("content-type");
    let length = header("content-length");
    (
        status,
        ctype,
        length,
        resp.bytes().await.expect("body").to_vec(),
    )
}

/// Start `polygateway bench-passthrough` in front of `upstream`; the child and its base URL.
async fn floor(upstream: &str) -> (tokio::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_polygateway"))
        .args(["bench-passthrough", "--upstream", upstream])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the floor");
    let stdout = child.stdout.take().expect("stdout");
    let line = tokio::time::timeout(
        Duration::from_secs(60),
        BufReader::new(stdout).lines().next_line(),
    )
    .await
    .expect("the floor starts")
    .expect("stdout readable")
    .expect("a first line");
    let base = line
        .strip_prefix("polygateway listening on ")
        .expect("the listening line")
        .trim()
        .to_string();
    (child, base)
}

#[tokio::test]
async fn the_floor_forwards_answers_byte_for_byte() {
    let m = mock().await;
    let upstream = format!("http://{}/sc/floor", m.addr);
    let (mut child, floor) = floor(&upstream).await;

    for stream in [false, true] {
        let direct = post(&format!("{upstream}/v1/chat/completions"), stream).await;
        let through = post(&format!("{floor}/v1/chat/completions"), stream).await;
        assert_eq!(direct.0, 200);
        // The upstream sends its non-streamed answer with a length, its stream chunked.
        assert_eq!(direct.2.is_some(), !stream, "stream: {stream}");
        assert_eq!(through, direct, "stream: {stream}");
    }
    // Two calls each way, one upstream hit per call.
    assert_eq!(hits(&m, "floor").await.len(), 4);
    let _ = child.kill().await;
}

#[tokio::test]
async fn the_floor_answers_502_when_the_upstream_is_down() {
    // A port that was just free: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let upstream = format!("http://127.0.0.1:{port}");
    let (mut child, floor) = floor(&upstream).await;
    let resp = reqwest::Client::new()
        .post(format!("{floor}/v1/chat/completions"))
        .json(&json!({"model": "m", "messages": []}))
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 502);
    assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    let text = resp.text().await.expect("body");
    let named = format!("connect to http://127.0.0.1:{port}/v1/chat/completions: ");
    assert!(
        text.starts_with(&named),
        "the error names the upstream: {text}"
    );
    let _ = child.kill().await;
}
