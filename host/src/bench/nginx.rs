//! The floor the gateway is measured against: nginx (Debian's package) as a bare reverse
//! proxy in front of the bench upstream, started by the bench with a configuration it writes —
//! one process serving (`master_process off`, so its CPU and RSS are one pid's), keepalive
//! connections to the upstream, `proxy_buffering off` (each SSE chunk is passed on as it
//! arrives, as the gateway does), access log off. No governance, no parsing: the cost of one
//! HTTP/1.1 hop done well.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::process::ProcStats;

/// Where nginx is looked for when `--nginx` is not given: Debian's path, then the usual
/// other one (the bench reads no environment to find it).
const DEFAULT_PATHS: [&str; 2] = ["/usr/sbin/nginx", "/usr/bin/nginx"];

/// A running nginx.
pub struct NginxChild {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    pub pid: u32,
    _dir: tempfile::TempDir,
}

/// The nginx binary: `explicit` if given, else the first of [`DEFAULT_PATHS`] that exists.
/// `None` when there is none.
pub fn find(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    DEFAULT_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// The configuration: one process listening on `listen`, proxying everything to `upstream`
/// over a pool of kept-alive HTTP/1.1 connections, temp files under `dir`.
pub fn config(listen: SocketAddr, upstream: SocketAddr, dir: &Path) -> String {
    let d = dir.display();
    let max_connections = super::MAX_CONNECTIONS;
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
worker_rlimit_nofile 16384;
events {{
    worker_connections {max_connections};
    multi_accept on;
}}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests 1000000;
    tcp_nodelay on;
    upstream bench_upstream {{
        server {upstream};
        keepalive 1024;
        keepalive_requests 1000000;
    }}
    server {{
        listen {listen} backlog=4096;
        location / {{
            proxy_pass http://bench_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering off;
            proxy_request_buffering off;
        }}
    }}
}}
"
    )
}

impl NginxChild {
    /// Write the configuration to a temporary directory and start `binary` on a free
    /// loopback port in front of `upstream`; waits (up to 10 s) until it accepts connections.
    ///
    /// Errors: the binary cannot be run, the configuration is refused (nginx's own message
    /// from its error log), or it never listens.
    pub async fn start(binary: &Path, upstream: SocketAddr) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        // A free port: bound and released, then given to nginx (the window is tiny on a
        // loopback no one else is binding).
        let listen = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?;
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, config(listen, upstream, dir.path()))
            .map_err(|e| format!("{}: {e}", conf.display()))?;
        let log = dir.path().join("error.log");
        let mut child = Command::new(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(&log)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e}", binary.display()))?;
        let pid = child.id().unwrap_or(0);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if tokio::net::TcpStream::connect(listen).await.is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!(
                    "nginx exited ({status}) before listening: {}",
                    log.trim()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!("nginx did not listen on {listen} within 10 s"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self {
            child,
            base_url: format!("http://{listen}"),
            pid,
            _dir: dir,
        })
    }

    /// What `/proc` says of the nginx process.
    pub fn proc(&self) -> ProcStats {
        ProcStats(self.pid)
    }

    /// Stop nginx.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_proxies_with_keepalive_and_no_buffering() {
        let c = config(
            "127.0.0.1:9001".parse().unwrap(),
            "127.0.0.1:9002".parse().unwrap(),
            Path::new("/tmp/x"),
        );
        for line in [
            "master_process off;",
            "worker_processes 1;",
            "pid /tmp/x/nginx.pid;",
            "        server 127.0.0.1:9002;",
            "        keepalive 1024;",
            "        listen 127.0.0.1:9001 backlog=4096;",
            "            proxy_buffering off;",
            "            proxy_http_version 1.1;",
            "            proxy_set_header Connection \"\";",
            "    access_log off;",
        ] {
            assert!(c.lines().any(|l| l == line), "missing `{line}` in:\n{c}");
        }
    }

    /// Debian's nginx with the bench's configuration in front of the paced upstream: every
    /// stream whole, its first delta passed on at once and the next ones as they come (with
    /// buffering on, the first chunk would wait for the whole 140 ms answer and the gaps
    /// would vanish).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nginx_passes_each_paced_delta_on_as_it_comes() {
        let bin = find(None).expect("nginx not found: `.ci/run` installs Debian's nginx");
        let pacing = super::super::upstream::Pacing {
            deltas: 8,
            pace: Duration::from_millis(20),
        };
        let up = super::super::upstream::start(4, pacing).await.unwrap();
        let n = NginxChild::start(&bin, up).await.unwrap();
        let url = format!("{}/v1/chat/completions", n.base_url);
        let s = super::super::paced::run(&url, None, 4, 2).await;
        assert_eq!((s.streams, s.errors, s.stalled), (8, 0, 0), "{s:?}");
        assert!(s.ttft_p99_us < 100_000.0, "first delta held back: {s:?}");
        assert!(
            (15_000.0..100_000.0).contains(&s.max_gap_p50_us),
            "deltas not paced through: {s:?}"
        );
        assert!(n.proc().cpu_seconds().is_some() && n.proc().rss_mib().is_some());
        n.stop().await;
    }

    #[tokio::test]
    async fn a_binary_that_exits_is_an_error_not_a_hang() {
        let up: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let err = NginxChild::start(Path::new("/bin/false"), up)
            .await
            .err()
            .expect("/bin/false never listens");
        assert!(
            err.starts_with("nginx exited (exit status: 1) before listening"),
            "{err}"
        );
        let err = NginxChild::start(Path::new("/no/such/nginx"), up)
            .await
            .err()
            .expect("no binary");
        assert!(err.starts_with("/no/such/nginx: "), "{err}");
    }

    #[test]
    fn an_explicit_binary_wins() {
        assert_eq!(
            find(Some(Path::new("/opt/nginx/sbin/nginx"))),
            Some(PathBuf::from("/opt/nginx/sbin/nginx"))
        );
    }
}
