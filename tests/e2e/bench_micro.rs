//! `polygateway bench-micro`, the plugin microbenchmark alone, as `bench --server-bin` runs
//! it in the build under test: it must print the figures as one JSON object, measured on the
//! answer of the chunks asked for, and refuse an empty run.

use tokio::process::Command;

#[tokio::test]
async fn the_microbenchmark_prints_its_figures_as_json() {
    let out = Command::new(env!("CARGO_BIN_EXE_polygateway"))
        .args(["bench-micro", "--iters", "30", "--chunks", "4"])
        .output()
        .await
        .expect("run bench-micro");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    // The benchmark upstream's answer of 4 chunks: a role event, the 4 chunks, the finish,
    // the usage and `[DONE]`.
    assert_eq!(m["attempt_events"], 8);
    for key in [
        "request_wasm_ns",
        "request_native_ns",
        "chunk_wasm_ns",
        "chunk_native_ns",
        "attempt_wasm_ns",
        "attempt_native_ns",
        "anthropic_event_wasm_ns",
        "gemini_event_wasm_ns",
    ] {
        let ns = m[key].as_f64().unwrap_or(-1.0);
        assert!(ns > 0.0 && ns.is_finite(), "{key}: {}", m[key]);
    }

    let empty = Command::new(env!("CARGO_BIN_EXE_polygateway"))
        .args(["bench-micro", "--iters", "0"])
        .output()
        .await
        .expect("run bench-micro");
    assert!(!empty.status.success());
    assert!(empty.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&empty.stderr).contains("--iters and --chunks must be at least 1"),
        "{}",
        String::from_utf8_lossy(&empty.stderr)
    );
}
