//! The servers under test as child processes of this executable — the gateway (`serve`) and
//! the pass-through floor (`bench-passthrough`), so both pay the same process boundary — and
//! what `/proc` says about them and about nginx: CPU seconds (utime + stime), current and
//! peak RSS, context switches.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Linux reports CPU times in /proc in USER_HZ ticks, 100 per second on every mainstream
/// architecture.
const USER_HZ: f64 = 100.0;

/// How long `exe bench-micro` may run (it takes seconds; a build that hangs is named).
const MICRO_TIMEOUT: Duration = Duration::from_secs(600);

/// The plugin microbenchmark run by the executable `exe` (`exe bench-micro`, for `bench
/// --server-bin`), so that the wasm host side and the native code it is compared with are the
/// build under test's: its JSON read from stdout. Errors name the command: it could not start,
/// exited with a failure (with the end of its stderr), ran past [`MICRO_TIMEOUT`], or printed
/// something that is not the microbenchmark's JSON.
pub async fn micro(exe: &Path, iters: u32, chunks: usize) -> Result<super::Micro, String> {
    let (iters, chunks) = (iters.to_string(), chunks.to_string());
    let args = ["bench-micro", "--iters", &iters, "--chunks", &chunks];
    let named = format!("`{} {}`", exe.display(), args.join(" "));
    let run = Command::new(exe)
        .args(args)
        .env("PGW_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(MICRO_TIMEOUT, run)
        .await
        .map_err(|_| {
            format!(
                "{named} did not finish within {} s",
                MICRO_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("{named}: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = &lines[lines.len().saturating_sub(3)..];
        return Err(format!(
            "{named} failed ({}): {}",
            out.status,
            tail.join(" | ")
        ));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{named} printed no microbenchmark JSON: {e}"))
}

/// A running child server (gateway or pass-through).
pub struct GatewayChild {
    child: Child,
    pub base_url: String,
    pub pid: u32,
    _dir: tempfile::TempDir,
}

impl GatewayChild {
    /// Start `serve` from the executable `exe` (this one, or `bench --server-bin`) with
    /// `env` (plus PATH/HOME), on a free port.
    pub async fn start(exe: &Path, env: &[(String, String)]) -> Result<Self, String> {
        Self::spawn(exe, &["serve"], env).await
    }

    /// Start the bare pass-through proxy (`exe bench-passthrough`) forwarding to `upstream`.
    pub async fn passthrough(exe: &Path, upstream: &str) -> Result<Self, String> {
        Self::spawn(exe, &["bench-passthrough", "--upstream", upstream], &[]).await
    }

    /// Start `exe` with `args` and `env` (plus PATH/HOME); its first stdout line must be
    /// `polygateway listening on <base URL>`.
    async fn spawn(exe: &Path, args: &[&str], env: &[(String, String)]) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", std::env::var("HOME").unwrap_or_default())
            // Runtime and allocator tuning, the plugin sandbox's keys (`PGW_PLUGIN_*`: an
            // A/B of `PGW_PLUGIN_STREAMS_PER_INSTANCE` with one binary), and the
            // OpenTelemetry variables (a run with `OTEL_EXPORTER_OTLP_ENDPOINT` set measures
            // the gateways with tracing on) reach the servers under test.
            .envs(std::env::vars().filter(|(k, _)| {
                k == "TOKIO_WORKER_THREADS"
                    || k == "MALLOC_CONF"
                    || k == "_RJEM_MALLOC_CONF"
                    || k.starts_with("PGW_PLUGIN_")
                    || k.starts_with("OTEL_")
            }))
            .env("PGW_LISTEN", "127.0.0.1:0")
            .env("PGW_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let named = format!("`{} {}`", exe.display(), args.join(" "));
        let mut child = cmd.spawn().map_err(|e| format!("{named}: {e}"))?;
        let pid = child.id().unwrap_or(0);
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .map_err(|_| format!("{named} did not start within 60 s"))?
            .map_err(|e| format!("{named}: {e}"))?
            .ok_or_else(|| format!("{named} exited before listening"))?;
        let base_url = line
            .strip_prefix("polygateway listening on ")
            .ok_or_else(|| format!("{named}: unexpected first line: {line}"))?
            .trim()
            .to_string();
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            child,
            base_url,
            pid,
            _dir: dir,
        })
    }

    /// What `/proc` says of the process.
    pub fn proc(&self) -> ProcStats {
        ProcStats(self.pid)
    }

    /// CPU seconds used so far (user + system).
    pub fn cpu_seconds(&self) -> Option<f64> {
        self.proc().cpu_seconds()
    }

    /// Peak resident set size in MiB (`VmHWM`).
    pub fn peak_rss_mib(&self) -> Option<f64> {
        self.proc().peak_rss_mib()
    }

    /// Current resident set size in MiB (`VmRSS`).
    pub fn rss_mib(&self) -> Option<f64> {
        self.proc().rss_mib()
    }

    /// Stop the process.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// CPU seconds of a process: in user space, and in the kernel on its behalf.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTimes {
    pub user_s: f64,
    pub system_s: f64,
}

/// Now, in seconds of the system's `CLOCK_MONOTONIC` — the clock `perf record -k
/// CLOCK_MONOTONIC` stamps its samples with — or `None` off Linux.
pub fn monotonic_s() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        Some(t.tv_sec as f64 + t.tv_nsec as f64 / 1e9)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// `/proc` readings of one process by pid (the gateway, the pass-through or nginx).
#[derive(Debug, Clone, Copy)]
pub struct ProcStats(pub u32);

impl ProcStats {
    /// CPU seconds used so far (user + system).
    pub fn cpu_seconds(&self) -> Option<f64> {
        self.cpu_times().map(|t| t.user_s + t.system_s)
    }

    /// CPU seconds used so far, in user space and in the kernel (`utime`, `stime` of
    /// `/proc/<pid>/stat`, all threads).
    pub fn cpu_times(&self) -> Option<CpuTimes> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0)).ok()?;
        // Fields after the `(comm)`: state is field 3; utime 14, stime 15 (1-based).
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = f.get(11)?.parse().ok()?;
        let stime: f64 = f.get(12)?.parse().ok()?;
        Some(CpuTimes {
            user_s: utime / USER_HZ,
            system_s: stime / USER_HZ,
        })
    }

    /// Peak resident set size in MiB (`VmHWM`), since start or the last [`Self::reset_peak`].
    pub fn peak_rss_mib(&self) -> Option<f64> {
        self.status_kib("VmHWM:").map(|kb| kb / 1024.0)
    }

    /// Current resident set size in MiB (`VmRSS`).
    pub fn rss_mib(&self) -> Option<f64> {
        self.status_kib("VmRSS:").map(|kb| kb / 1024.0)
    }

    /// Voluntary plus involuntary context switches of each live thread so far, by thread id
    /// (`/proc/<pid>/task/*/status`). Compare two samples with [`switches_between`]: a plain
    /// sum is not monotonic, since a thread that exits (an idle blocking-pool thread) takes
    /// its count with it.
    pub fn context_switches(&self) -> Option<HashMap<u64, u64>> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.0)).ok()?;
        let mut out = HashMap::new();
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<u64>().ok())
            else {
                continue;
            };
            let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            let mut total = 0u64;
            for line in status.lines() {
                if let Some(v) = line
                    .strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
                {
                    total += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
            out.insert(tid, total);
        }
        Some(out)
    }

    /// Resets `VmHWM` to the current RSS (`echo 5 > /proc/<pid>/clear_refs`, Linux ≥ 4.0),
    /// so that the next [`Self::peak_rss_mib`] is the peak of what follows. False when the
    /// kernel refused.
    pub fn reset_peak(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.0), "5").is_ok()
    }

    /// A `kB` field of `/proc/<pid>/status`.
    fn status_kib(&self, field: &str) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0)).ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

/// Context switches made between two samples of [`ProcStats::context_switches`]: per thread,
/// the later count minus the earlier one (a thread born in between counts whole). A thread
/// that exited in between is missing from `after`, and what it did in between is not
/// counted: an undercount, never a negative or zeroed total.
pub fn switches_between(before: &HashMap<u64, u64>, after: &HashMap<u64, u64>) -> u64 {
    after
        .iter()
        .map(|(tid, n)| n.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{GatewayChild, micro, switches_between};

    /// `bench --server-bin`: the floor and the gateways are started from the executable given,
    /// with the subcommand's arguments. The stand-in executable records its arguments and the
    /// listen address the bench sets, then announces an address the way `serve` does.
    #[tokio::test]
    async fn a_server_is_started_from_the_executable_given() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("args.txt");
        let exe = dir.path().join("other-build");
        stand_in(
            &exe,
            &format!(
                "echo \"$* PGW_LISTEN=$PGW_LISTEN\" >> '{}'\n\
                 echo 'polygateway listening on http://127.0.0.1:1'\nexec sleep 30",
                log.display()
            ),
        );

        let floor = GatewayChild::passthrough(&exe, "http://127.0.0.1:9")
            .await
            .expect("the floor starts");
        let env = [("PGW_TELEMETRY_BACKEND".to_string(), "none".to_string())];
        let gateway = GatewayChild::start(&exe, &env)
            .await
            .expect("the gateway starts");
        assert_eq!(floor.base_url, "http://127.0.0.1:1");
        assert_eq!(gateway.base_url, "http://127.0.0.1:1");
        assert_ne!(floor.pid, gateway.pid);
        assert_eq!(
            std::fs::read_to_string(&log).expect("the stand-in ran"),
            "bench-passthrough --upstream http://127.0.0.1:9 PGW_LISTEN=127.0.0.1:0\n\
             serve PGW_LISTEN=127.0.0.1:0\n"
        );
        floor.stop().await;
        gateway.stop().await;

        // An executable that is not a polygateway build: the error names it.
        let other = dir.path().join("not-a-gateway");
        stand_in(&other, "exit 0");
        let Err(e) = GatewayChild::start(&other, &env).await else {
            panic!("a process that prints nothing is not a gateway");
        };
        assert_eq!(
            e,
            format!("`{} serve` exited before listening", other.display())
        );
    }

    /// A stand-in executable at `path` running `body` (a shell script's lines).
    fn stand_in(path: &std::path::Path, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("write the stand-in");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// `bench --server-bin`'s microbenchmark runs in the executable given, with these
    /// arguments, and its JSON is read back as it was printed; a failing run, a hung one's
    /// timeout aside, and one that prints something else are named.
    #[tokio::test]
    async fn the_microbenchmark_is_run_by_the_executable_given() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("args.txt");
        let exe = dir.path().join("other-build");
        let expected = crate::bench::Micro {
            request_wasm_ns: 3500.5,
            request_native_ns: 600.0,
            chunk_wasm_ns: 1770.0,
            chunk_native_ns: 310.0,
            attempt_wasm_ns: 60460.0,
            attempt_native_ns: 20350.0,
            attempt_events: 68,
            anthropic_request_wasm_ns: 1.0,
            anthropic_request_native_ns: 2.0,
            anthropic_event_wasm_ns: 3.0,
            anthropic_event_native_ns: 4.0,
            gemini_request_wasm_ns: 5.0,
            gemini_request_native_ns: 6.0,
            gemini_event_wasm_ns: 7.0,
            gemini_event_native_ns: 8.0,
            anthropic_vs_openai_event: 1.1,
            gemini_vs_openai_event: 1.3,
        };
        let json = serde_json::to_string(&expected).expect("json");
        stand_in(
            &exe,
            &format!("echo \"$*\" >> '{}'\necho '{json}'", log.display()),
        );
        let got = micro(&exe, 20_000, 64)
            .await
            .expect("the stand-in's figures");
        assert_eq!(got, expected);
        assert_eq!(
            std::fs::read_to_string(&log).expect("the stand-in ran"),
            "bench-micro --iters 20000 --chunks 64\n"
        );

        let failing = dir.path().join("failing");
        stand_in(
            &failing,
            "echo 'first' >&2\necho >&2\necho 'no engine here' >&2\necho >&2\nexit 3",
        );
        assert_eq!(
            micro(&failing, 10, 4).await.expect_err("a failed run"),
            format!(
                "`{} bench-micro --iters 10 --chunks 4` failed (exit status: 3): first | no engine here",
                failing.display()
            )
        );

        let other = dir.path().join("not-a-gateway");
        stand_in(&other, "echo 'usage: something else'");
        let e = micro(&other, 10, 4).await.expect_err("not the figures");
        assert!(
            e.starts_with(&format!(
                "`{} bench-micro --iters 10 --chunks 4` printed no microbenchmark JSON: ",
                other.display()
            )),
            "{e}"
        );
    }

    #[test]
    fn switches_are_counted_per_thread_and_an_exited_thread_does_not_zero_the_total() {
        let before = HashMap::from([(1, 100), (2, 50), (3, 4_000)]);
        // Thread 3 (with most of the count) exited; thread 4 was born.
        let after = HashMap::from([(1, 130), (2, 55), (4, 7)]);
        assert_eq!(switches_between(&before, &after), 30 + 5 + 7);
        // The old plain sums: 192 after against 4,150 before, read as 0.
        let plain = |m: &HashMap<u64, u64>| m.values().sum::<u64>();
        assert_eq!(plain(&after).saturating_sub(plain(&before)), 0);
    }
}
