//! `PGW_PLUGIN_PROFILER=perfmap`: the serving process names its compiled guest code in
//! `/tmp/perf-<pid>.map` (the file `perf report` reads for JIT code), even though `serve`
//! compiles components in a child process; unset, no such file is written; a value it does
//! not know stops start-up naming the key.
//!
//! A map is named by pid and never removed by its writer, so a file left by an earlier
//! process with the same pid is told apart by its modification time.

use std::time::SystemTime;

use polygateway_tests::{GatewayProcess, mock};

use crate::plugin_serve::{Serve, kv};

fn env(mock: &polygateway_tests::MockUpstream) -> Vec<(String, String)> {
    vec![
        kv("LLM__OPENAI__1__BASE_URL", mock.base_url("profiler")),
        kv("LLM__OPENAI__1__MODEL", "gpt-x"),
        kv("PGW_TELEMETRY_BACKEND", "none"),
    ]
}

fn perf_map(pid: u32) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/tmp/perf-{pid}.map"))
}

/// Whether `path` exists and was written at or after `since`.
fn written_since(path: &std::path::Path, since: SystemTime) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t >= since)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perfmap_names_the_guest_code_of_the_serving_process() {
    let mock = mock().await;
    let mut with = env(&mock);
    with.push(kv("PGW_PLUGIN_PROFILER", "perfmap"));
    let before = SystemTime::now();
    let gw = Serve::start(&with, &[]).await;
    let map = perf_map(gw.pid());
    assert!(written_since(&map, before), "{} not written", map.display());
    let text = std::fs::read_to_string(&map).expect("the perf map of the serving process");
    let _ = std::fs::remove_file(&map);
    gw.stop().await;

    // perf's format (linux tools/perf/Documentation/jit-interface.txt): `START SIZE name`,
    // both in hex, one function per line. The first-party components are stripped of their
    // `name` section, so a guest function is named by its index in its core module.
    let mut guest = 0;
    for line in text.lines() {
        let mut parts = line.splitn(3, ' ');
        let (start, size, name) = (parts.next(), parts.next(), parts.next());
        let Some(name) = name.filter(|n| n.starts_with("wasm[") && n.contains("::function["))
        else {
            continue;
        };
        let start = start.and_then(|s| s.strip_prefix("0x"));
        assert!(
            start.is_some_and(|s| u64::from_str_radix(s, 16).is_ok_and(|a| a > 0)),
            "start address of `{line}`"
        );
        assert!(
            size.is_some_and(|s| u64::from_str_radix(s, 16).is_ok_and(|n| n > 0)),
            "size of `{line}` ({name})"
        );
        guest += 1;
    }
    // The openai provider alone has hundreds of functions (serde_json, the SDK, std).
    assert!(guest > 100, "{guest} guest functions named:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_key_no_perf_map_is_written() {
    let mock = mock().await;
    let before = SystemTime::now();
    let gw = Serve::start(&env(&mock), &[]).await;
    let map = perf_map(gw.pid());
    let written = written_since(&map, before);
    gw.stop().await;
    assert!(
        !written,
        "{} written without PGW_PLUGIN_PROFILER",
        map.display()
    );
}

#[tokio::test]
async fn an_unknown_profiler_stops_start_up_naming_the_key() {
    let mock = mock().await;
    let mut with = env(&mock);
    with.push(kv("PGW_PLUGIN_PROFILER", "jitdump"));
    let err = match GatewayProcess::try_start(env!("CARGO_BIN_EXE_polygateway"), &with).await {
        Ok(_) => panic!("polygateway serve started with PGW_PLUGIN_PROFILER=jitdump"),
        Err(stderr) => stderr,
    };
    assert!(
        err.contains("PGW_PLUGIN_PROFILER")
            && err.contains("expected `none` or `perfmap`, got `jitdump`"),
        "{err}"
    );
}
