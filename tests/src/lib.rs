//! Test kit shared by the end-to-end tests (`tests/e2e/`, run as the `e2e` test target of the
//! host package so the real `polygateway` binary is built first): the mock upstream over
//! real TCP, a real `polygateway serve` child process, and the official OpenAI Python SDK.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub use polygateway::mock::{MockUpstream, Script, Step};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A data file under `tests/fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    repo_root().join("tests").join("fixtures").join(rel)
}

/// Start a mock upstream on a free port (real TCP, in this process).
pub async fn mock() -> MockUpstream {
    polygateway::mock::serve_mock(SocketAddr::from(([127, 0, 0, 1], 0)), HashMap::new())
        .await
        .expect("mock upstream binds")
}

/// Script a scenario of the mock.
pub async fn script(mock: &MockUpstream, scenario: &str, script: Value) {
    let resp = reqwest::Client::new()
        .put(format!("http://{}/_mock/scenarios/{scenario}", mock.addr))
        .json(&script)
        .send()
        .await
        .expect("mock reachable");
    assert_eq!(
        resp.status().as_u16(),
        204,
        "script accepted: {}",
        resp.text().await.unwrap_or_default()
    );
}

/// The requests a scenario received since it was last scripted (the latest 10,000):
/// `[{"at_ms", "body", "authorization", "completed"}]`.
pub async fn hits(mock: &MockUpstream, scenario: &str) -> Vec<Value> {
    let v: Value = reqwest::get(format!(
        "http://{}/_mock/scenarios/{scenario}/hits",
        mock.addr
    ))
    .await
    .expect("mock reachable")
    .json()
    .await
    .expect("hits json");
    v["hits"].as_array().cloned().unwrap_or_default()
}

/// A running `polygateway serve`, killed on drop. It runs in its own temporary directory
/// (so no `.env` is read from the repository and its SQLite file is private).
pub struct GatewayProcess {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// The working directory of the process.
    pub dir: tempfile::TempDir,
    stderr: tokio::task::JoinHandle<String>,
}

impl GatewayProcess {
    /// Start the binary `bin` with exactly these environment variables (plus PATH and HOME),
    /// listening on a free loopback port, and wait until it is ready.
    pub async fn start<K: AsRef<str>>(bin: &str, env: &[(K, String)]) -> Self {
        match Self::try_start(bin, env).await {
            Ok(g) => g,
            Err(stderr) => panic!("polygateway serve did not start:\n{stderr}"),
        }
    }

    /// Like `start`, but returns the process's stderr when it exits before listening.
    pub async fn try_start<K: AsRef<str>>(bin: &str, env: &[(K, String)]) -> Result<Self, String> {
        Self::try_start_with_files(bin, env, &[]).await
    }

    /// Like `try_start`, with files (relative path, content) written into the working
    /// directory first — e.g. a `.env`.
    pub async fn try_start_with_files<K: AsRef<str>>(
        bin: &str,
        env: &[(K, String)],
        files: &[(&str, &str)],
    ) -> Result<Self, String> {
        let dir = tempfile::tempdir().expect("tempdir");
        for (rel, content) in files {
            std::fs::write(dir.path().join(rel), content).expect("write file");
        }
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", std::env::var("HOME").unwrap_or_default())
            .env("PGW_LISTEN", "127.0.0.1:0")
            .env("PGW_LOG", "info,polygateway=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k.as_ref(), v);
        }
        let mut child = cmd.spawn().expect("spawn polygateway");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let stderr = tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            let mut all = String::new();
            while let Ok(Some(l)) = lines.next_line().await {
                all.push_str(&l);
                all.push('\n');
            }
            all
        });
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(120), lines.next_line()).await;
        match first {
            Ok(Ok(Some(line))) if line.starts_with("polygateway listening on ") => {
                let base_url = line["polygateway listening on ".len()..].trim().to_string();
                tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
                Ok(Self {
                    child,
                    base_url,
                    dir,
                    stderr,
                })
            }
            _ => {
                let _ = child.kill().await;
                let _ = child.wait().await;
                Err(stderr.await.unwrap_or_default())
            }
        }
    }

    /// The process id (for signals).
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// The SQLite telemetry file (default path in the working directory).
    pub fn telemetry_db(&self) -> PathBuf {
        self.dir.path().join("polygateway.db")
    }

    /// Send `SIGTERM` and wait at most `within` for the process to exit: its exit status, or
    /// `None` when it is still running (`stop` then kills it).
    pub async fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status()
            .await;
        tokio::time::timeout(within, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Stop the process and return what it logged.
    pub async fn stop(mut self) -> String {
        let _ = self.child.kill().await;
        let _ = self.child.wait().await;
        (&mut self.stderr).await.unwrap_or_default()
    }
}

/// The Python interpreter with the `openai` package: `POLYGATEWAY_TEST_PYTHON`, else the repo's
/// `.venv` (created by `.ci/run`).
pub fn python() -> PathBuf {
    match std::env::var_os("POLYGATEWAY_TEST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => repo_root().join(".venv").join("bin").join("python"),
    }
}

/// Run `tests/python/<script>` with `args`; it prints one JSON document on stdout.
pub async fn run_python(script: &str, args: &[&str]) -> Value {
    let py = python();
    assert!(
        py.exists(),
        "{} not found: run `.ci/run` (or `python3 -m venv .venv && .venv/bin/pip install openai`)",
        py.display()
    );
    let out = Command::new(&py)
        .arg(repo_root().join("tests").join("python").join(script))
        .args(args)
        .output()
        .await
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{script} printed no JSON ({e}): {stdout}"))
}

/// Poll `f` until it returns `Some`, for at most `secs` seconds (a bound on something that
/// would otherwise hang, not a timing assertion).
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "condition not met within {secs} s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Rows of the `llm_calls` table of a SQLite telemetry file, as JSON objects of the chosen
/// columns, ordered by `created_at` then `event`.
pub async fn telemetry_rows(db: &Path, columns: &[&str]) -> Vec<Value> {
    use sqlx::{Column, Row, ValueRef};
    if !db.exists() {
        return Vec::new();
    }
    let url = format!("sqlite://{}?mode=ro", db.display());
    let Ok(pool) = sqlx::SqlitePool::connect(&url).await else {
        return Vec::new();
    };
    let sql = format!(
        "SELECT {} FROM llm_calls ORDER BY created_at, event",
        columns.join(", ")
    );
    let rows = sqlx::query(&sql).fetch_all(&pool).await.unwrap_or_default();
    pool.close().await;
    rows.iter()
        .map(|r| {
            let mut obj = serde_json::Map::new();
            for (i, c) in r.columns().iter().enumerate() {
                let raw = r.try_get_raw(i).unwrap();
                let v = if raw.is_null() {
                    Value::Null
                } else if let Ok(n) = r.try_get::<i64, _>(i) {
                    Value::from(n)
                } else if let Ok(f) = r.try_get::<f64, _>(i) {
                    Value::from(f)
                } else {
                    Value::from(r.try_get::<String, _>(i).unwrap_or_default())
                };
                obj.insert(c.name().to_string(), v);
            }
            Value::Object(obj)
        })
        .collect()
}

/// A TCP forwarder to a real service (Redis, Postgres) that a test can stop and restart on
/// the same port, to simulate the service going away without touching the shared server.
pub struct TcpForwarder {
    /// The forwarder's address (point the gateway here).
    pub addr: SocketAddr,
    target: SocketAddr,
    tasks: Option<tokio::task::JoinSet<()>>,
}

impl TcpForwarder {
    /// Forward a free local port to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut me = Self {
            addr,
            target,
            tasks: None,
        };
        me.run(listener);
        me
    }

    fn run(&mut self, listener: tokio::net::TcpListener) {
        let target = self.target;
        let mut set = tokio::task::JoinSet::new();
        let conns = std::sync::Arc::new(tokio::sync::Mutex::new(tokio::task::JoinSet::new()));
        let conns2 = conns.clone();
        set.spawn(async move {
            let _keep = conns2.clone();
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                let mut guard = conns2.lock().await;
                guard.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        // Aborting the accept task drops the listener; aborting this one drops every
        // forwarded connection.
        set.spawn(async move {
            let _conns = conns;
            std::future::pending::<()>().await;
        });
        self.tasks = Some(set);
    }

    /// Stop accepting and cut every forwarded connection.
    pub async fn stop(&mut self) {
        if let Some(mut set) = self.tasks.take() {
            set.abort_all();
            while set.join_next().await.is_some() {}
        }
    }

    /// Listen again on the same port.
    pub async fn restart(&mut self) {
        self.stop().await;
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .expect("rebind");
        self.run(listener);
    }
}

/// Build a guest crate (`manifest`) for `wasm32-wasip2` in release with `--locked` into
/// `target_dir`, with the host's flags and wrappers removed from the child's environment as
/// `host/build.rs` does for the first-party plugins. Returns the path of `<wasm_name>.wasm`;
/// panics with cargo's stderr when the build fails.
pub async fn build_guest_component(manifest: &Path, target_dir: &Path, wasm_name: &str) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    if let Some(dir) = manifest.parent() {
        cmd.current_dir(dir);
    }
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(manifest)
        .args(["--target", "wasm32-wasip2", "--release", "--locked"])
        .arg("--target-dir")
        .arg(target_dir);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_LLVM_COV",
        "LLVM_PROFILE_FILE",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd.output().await.expect("run cargo for a guest crate");
    assert!(
        out.status.success(),
        "building {} failed ({}):\n{}",
        manifest.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let wasm = target_dir
        .join("wasm32-wasip2")
        .join("release")
        .join(format!("{wasm_name}.wasm"));
    assert!(wasm.is_file(), "{} was not built", wasm.display());
    wasm
}
