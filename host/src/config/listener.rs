//! The listener section: the proxy listener's keys: how long a client may take to send a request head
//! (`PGW_HEADER_READ_TIMEOUT_S`) and its body (`PGW_BODY_READ_TIMEOUT_S`), how long an idle
//! keep-alive connection stays open (`PGW_IDLE_TIMEOUT_S`), how many client connections are
//! open at once (`PGW_MAX_CONNECTIONS`), how long a graceful shutdown drains in-flight calls
//! (`PGW_SHUTDOWN_GRACE_S`), and which browser origins CORS lets in (`PGW_CORS_ORIGINS`).

use std::time::Duration;

use super::problems::Problems;
use super::vars::Vars;

/// Request heads are a few hundred bytes: a client still sending one after 10 s is stuck or
/// hostile (a slow-header attack holds a file descriptor per connection).
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Long enough for a multi-megabyte OCR upload on a slow link, short enough that a client
/// trickling a body cannot hold a connection for good.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Longer than the 60 s idle timeout of common load balancers, so the balancer, not the
/// gateway, closes a pooled connection first and never reuses one the gateway just closed.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);
/// Half of the usual 1024-descriptor soft limit: leaves room for upstream connections,
/// the telemetry file and plugin files.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 512;
/// Enough for a typical streamed answer to finish; below the 30 s most orchestrators wait
/// after `SIGTERM` before `SIGKILL` is added to it (Kubernetes' default grace is 30 s).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Largest `PGW_MAX_CONNECTIONS` (the connection cap is a semaphore of `u32` permits).
pub const MAX_CONNECTIONS_LIMIT: u32 = 1_000_000;

/// The process keys this section parses.
pub(super) const KEYS: &[&str] = &[
    "PGW_HEADER_READ_TIMEOUT_S",
    "PGW_BODY_READ_TIMEOUT_S",
    "PGW_IDLE_TIMEOUT_S",
    "PGW_MAX_CONNECTIONS",
    "PGW_SHUTDOWN_GRACE_S",
    "PGW_CORS_ORIGINS",
];

/// Browser origins whose cross-origin requests are allowed (`PGW_CORS_ORIGINS`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CorsOrigins {
    /// No origin (the default): no CORS headers, `OPTIONS` answers 405.
    #[default]
    None,
    /// `*`: every origin.
    Any,
    /// Exactly these origins (`scheme://host[:port]`, compared as sent by the browser).
    List(Vec<String>),
}

/// The listener and shutdown settings of `polygateway serve`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSettings {
    /// Most time from a connection's first byte of a request (or its accept, for the first
    /// request) to the end of that request's head; the connection is closed at the limit.
    pub header_read_timeout: Duration,
    /// Most time from the end of a request head to the end of its body; 408 at the limit.
    pub body_read_timeout: Duration,
    /// Most time a keep-alive connection waits, idle, for its next request; then closed.
    pub idle_timeout: Duration,
    /// Most client connections open at once; further connections wait in the kernel's
    /// accept queue until one closes.
    pub max_connections: u32,
    /// On `SIGTERM`/`SIGINT`: how long in-flight requests may run before every connection
    /// is closed.
    pub shutdown_grace: Duration,
    /// `PGW_CORS_ORIGINS`.
    pub cors_origins: CorsOrigins,
}

impl Default for ListenerSettings {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            cors_origins: CorsOrigins::None,
        }
    }
}

/// Parse the keys (named by the whole key), reporting problems by key.
pub(super) fn parse(vars: &Vars, problems: &mut Problems) -> ListenerSettings {
    let mut s = ListenerSettings::default();
    let mut seconds = |key: &str, allow_zero: bool, slot: &mut Duration| {
        let Some(v) = vars.get(key) else { return };
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() && (x > 0.0 || (allow_zero && x == 0.0)) && x < 1e7 => {
                *slot = Duration::from_secs_f64(x);
            }
            _ => problems.add(
                key,
                format!(
                    "expected a finite number of seconds {} 0, got `{v}`",
                    if allow_zero { "≥" } else { ">" }
                ),
            ),
        }
    };
    seconds(
        "PGW_HEADER_READ_TIMEOUT_S",
        false,
        &mut s.header_read_timeout,
    );
    seconds("PGW_BODY_READ_TIMEOUT_S", false, &mut s.body_read_timeout);
    seconds("PGW_IDLE_TIMEOUT_S", false, &mut s.idle_timeout);
    seconds("PGW_SHUTDOWN_GRACE_S", true, &mut s.shutdown_grace);
    if let Some(v) = vars.get("PGW_MAX_CONNECTIONS") {
        match v.parse::<u32>() {
            Ok(n) if (1..=MAX_CONNECTIONS_LIMIT).contains(&n) => s.max_connections = n,
            _ => problems.add(
                "PGW_MAX_CONNECTIONS",
                format!("expected an integer in 1..={MAX_CONNECTIONS_LIMIT}, got `{v}`"),
            ),
        }
    }
    if let Some(v) = vars.get("PGW_CORS_ORIGINS") {
        s.cors_origins = parse_origins(v, problems);
    }
    s
}

/// `*`, or a comma-separated list of `http(s)://host[:port]` origins.
fn parse_origins(v: &str, problems: &mut Problems) -> CorsOrigins {
    if v == "*" {
        return CorsOrigins::Any;
    }
    let mut list = Vec::new();
    for o in v.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let rest = o
            .strip_prefix("https://")
            .or_else(|| o.strip_prefix("http://"));
        let ok = match rest {
            Some(host) => {
                !host.is_empty()
                    && host
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c))
            }
            None => false,
        };
        if ok {
            list.push(o.to_string());
        } else {
            problems.add(
                "PGW_CORS_ORIGINS",
                format!(
                    "expected `*` or comma-separated origins like `https://app.example.com:8443` (scheme, host, optional port; no path), got `{o}`"
                ),
            );
        }
    }
    if list.is_empty() {
        CorsOrigins::None
    } else {
        CorsOrigins::List(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(vars: &[(&str, &str)]) -> (ListenerSettings, Vec<String>) {
        let mut problems = Problems::new();
        let s = parse(&Vars::from_pairs("", vars), &mut problems);
        (s, problems.into_list().into_iter().map(|p| p.key).collect())
    }

    #[test]
    fn defaults_and_overrides() {
        let (s, p) = run(&[]);
        assert!(p.is_empty());
        assert_eq!(s, ListenerSettings::default());
        assert_eq!(s.header_read_timeout, Duration::from_secs(10));
        assert_eq!(s.body_read_timeout, Duration::from_secs(60));
        assert_eq!(s.idle_timeout, Duration::from_secs(75));
        assert_eq!(s.shutdown_grace, Duration::from_secs(30));
        let (s, p) = run(&[
            ("PGW_HEADER_READ_TIMEOUT_S", "1.5"),
            ("PGW_BODY_READ_TIMEOUT_S", "2"),
            ("PGW_IDLE_TIMEOUT_S", "3"),
            ("PGW_MAX_CONNECTIONS", "7"),
            ("PGW_SHUTDOWN_GRACE_S", "0"),
            (
                "PGW_CORS_ORIGINS",
                "https://app.example.com, http://localhost:3000",
            ),
        ]);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(s.header_read_timeout, Duration::from_millis(1500));
        assert_eq!(s.body_read_timeout, Duration::from_secs(2));
        assert_eq!(s.idle_timeout, Duration::from_secs(3));
        assert_eq!(s.max_connections, 7);
        assert_eq!(s.shutdown_grace, Duration::ZERO);
        assert_eq!(
            s.cors_origins,
            CorsOrigins::List(vec![
                "https://app.example.com".into(),
                "http://localhost:3000".into()
            ])
        );
        assert_eq!(
            run(&[("PGW_CORS_ORIGINS", "*")]).0.cors_origins,
            CorsOrigins::Any
        );
    }

    #[test]
    fn every_bad_value_names_its_key() {
        let (_, p) = run(&[
            ("PGW_HEADER_READ_TIMEOUT_S", "0"),
            ("PGW_BODY_READ_TIMEOUT_S", "-1"),
            ("PGW_IDLE_TIMEOUT_S", "soon"),
            ("PGW_MAX_CONNECTIONS", "0"),
            ("PGW_SHUTDOWN_GRACE_S", "inf"),
            (
                "PGW_CORS_ORIGINS",
                "https://ok.example,app.example.com/path",
            ),
        ]);
        assert_eq!(
            p,
            vec![
                "PGW_HEADER_READ_TIMEOUT_S",
                "PGW_BODY_READ_TIMEOUT_S",
                "PGW_IDLE_TIMEOUT_S",
                "PGW_SHUTDOWN_GRACE_S",
                "PGW_MAX_CONNECTIONS",
                "PGW_CORS_ORIGINS",
            ]
        );
        assert_eq!(run(&[("PGW_MAX_CONNECTIONS", "1000001")]).1.len(), 1);
        assert_eq!(
            run(&[("PGW_CORS_ORIGINS", "https://a.example/")]).1,
            vec!["PGW_CORS_ORIGINS"]
        );
    }
}
