//! A `polygateway serve` child for the plugin-platform tests (sandbox, reload, start-up
//! cache) that need what `polygateway_tests::GatewayProcess` does not give: its pid (RSS from
//! `/proc`, `SIGHUP`) and files in its working directory the test rewrites while it runs.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A `polygateway serve` child in its own working directory, killed on drop; unlike
/// `polygateway_tests::GatewayProcess` it exposes its pid (for `/proc/<pid>/status` and
/// signals) and lets the test rewrite files in its directory.
pub struct Serve {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// The process's working directory (`.env` lives here).
    pub dir: tempfile::TempDir,
    stderr: tokio::task::JoinHandle<String>,
}

impl Serve {
    /// Start `polygateway serve` with exactly `env` (plus PATH and HOME), the files written
    /// into its working directory first; panics with its stderr when it does not start.
    pub async fn start(env: &[(String, String)], files: &[(&str, &[u8])]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for (rel, content) in files {
            std::fs::write(dir.path().join(rel), content).expect("write file");
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_polygateway"));
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
            cmd.env(k, v);
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
                Self {
                    child,
                    base_url,
                    dir,
                    stderr,
                }
            }
            _ => {
                let _ = child.kill().await;
                let _ = child.wait().await;
                panic!(
                    "polygateway serve did not start:\n{}",
                    stderr.await.unwrap_or_default()
                );
            }
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Resident set size in KiB (`VmRSS` of `/proc/<pid>/status`).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc status")
    }

    /// Send `SIGHUP` (reload).
    pub fn sighup(&self) {
        let status = std::process::Command::new("kill")
            .args(["-HUP", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -HUP failed");
    }

    /// `GET /healthz` as JSON.
    pub async fn health(&self) -> serde_json::Value {
        reqwest::get(format!("{}/healthz", self.base_url))
            .await
            .expect("healthz")
            .json()
            .await
            .expect("healthz JSON")
    }

    /// Stop the process and return what it logged.
    pub async fn stop(mut self) -> String {
        let _ = self.child.kill().await;
        let _ = self.child.wait().await;
        (&mut self.stderr).await.unwrap_or_default()
    }
}

/// `(key, value)` shorthand.
pub fn kv(k: &str, v: impl ToString) -> (String, String) {
    (k.to_string(), v.to_string())
}
