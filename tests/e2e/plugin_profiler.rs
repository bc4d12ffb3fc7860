//! `PGW_PLUGIN_PROFILER=perfmap`: the serving process names its compiled guest code in
//! `/tmp/perf-<pid>.map` (the file `perf report` reads for JIT code), even though `serve`
//! compiles components in a child process; unset, no such file is written; a value it does
//! not know stops start-up naming the key.

use polygateway_tests::mock;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perfmap_names_the_guest_code_of_the_serving_process() {
    let mock = mock().await;
    let mut with = env(&mock);
    with.push(kv("PGW_PLUGIN_PROFILER", "perfmap"));
    let gw = Serve::start(&with, &[]).await;
    let map = perf_map(gw.pid());
    let text = std::fs::read_to_string(&map).expect("the perf map of the serving process");
    let _ = std::fs::remove_file(&map);
    gw.stop().await;

    // perf's format (linux tools/perf/Documentation/jit-interface.txt): `START SIZE name`,
    // both in hex, one function per line.
    let mut guest = 0;
    for line in text.lines() {
        let mut parts = line.splitn(3, ' ');
        let (start, size, name) = (parts.next(), parts.next(), parts.next());
        let start = start.and_then(|s| s.strip_prefix("0x"));
        assert!(
            start.is_some_and(|s| u64::from_str_radix(s, 16).is_ok_and(|a| a > 0)),
            "start address of `{line}`"
        );
        assert!(
            size.is_some_and(|s| u64::from_str_radix(s, 16).is_ok_and(|n| n > 0)),
            "size of `{line}`"
        );
        let name = name.unwrap_or_default();
        assert!(!name.is_empty(), "name of `{line}`");
        // The first-party components are stripped of their `name` section, so a guest
        // function is named by its index in its core module.
        if name.starts_with("wasm[") && name.contains("::function[") {
            guest += 1;
        }
    }
    // The openai provider alone has hundreds of functions (serde_json, the SDK, std).
    assert!(guest > 100, "{guest} guest functions named:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_key_no_perf_map_is_written() {
    let mock = mock().await;
    let gw = Serve::start(&env(&mock), &[]).await;
    let map = perf_map(gw.pid());
    let exists = map.exists();
    gw.stop().await;
    assert!(
        !exists,
        "{} written without PGW_PLUGIN_PROFILER",
        map.display()
    );
}
