//! The upstream-limits section: the process-wide bounds on what an upstream may send (`PGW_UPSTREAM_MAX_BODY_BYTES`,
//! `PGW_SSE_MAX_EVENT_BYTES`): their defaults and parsing.

use super::problems::Problems;
use super::vars::Vars;

/// The process keys this section parses.
pub(super) const KEYS: &[&str] = &["PGW_UPSTREAM_MAX_BODY_BYTES", "PGW_SSE_MAX_EVENT_BYTES"];

/// Default of `PGW_UPSTREAM_MAX_BODY_BYTES`: twice the largest chat or embedding answer seen
/// in practice, and a bound on what one attempt can make the gateway hold.
pub const DEFAULT_UPSTREAM_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Default of `PGW_SSE_MAX_EVENT_BYTES`: far above any real stream chunk (a few KiB), so
/// only a hostile or broken stream meets it.
pub const DEFAULT_SSE_MAX_EVENT_BYTES: usize = crate::transport::DEFAULT_MAX_EVENT_BYTES;

/// Bounds on upstream answers, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamLimits {
    /// `PGW_UPSTREAM_MAX_BODY_BYTES`: most bytes of a non-streamed answer or an error
    /// answer; past it the attempt fails `transient` while the body is being read.
    pub max_body_bytes: usize,
    /// `PGW_SSE_MAX_EVENT_BYTES`: most bytes of one server-sent event (its data lines and
    /// the line being read); past it the attempt fails `transient`.
    pub sse_max_event_bytes: usize,
}

impl Default for UpstreamLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_UPSTREAM_MAX_BODY_BYTES,
            sse_max_event_bytes: DEFAULT_SSE_MAX_EVENT_BYTES,
        }
    }
}

/// The two keys; a bad value is a problem naming its key.
pub(super) fn parse(vars: &Vars, problems: &mut Problems) -> UpstreamLimits {
    let mut bytes = |key: &str, default: usize| match vars.get(key) {
        None => default,
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                problems.add(
                    key,
                    format!("expected a positive number of bytes, got `{v}`"),
                );
                default
            }
        },
    };
    UpstreamLimits {
        max_body_bytes: bytes(
            "PGW_UPSTREAM_MAX_BODY_BYTES",
            DEFAULT_UPSTREAM_MAX_BODY_BYTES,
        ),
        sse_max_event_bytes: bytes("PGW_SSE_MAX_EVENT_BYTES", DEFAULT_SSE_MAX_EVENT_BYTES),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_vars(list: &[(&str, &str)]) -> (UpstreamLimits, Vec<String>) {
        let mut p = Problems::new();
        let l = parse(&Vars::from_pairs("", list), &mut p);
        (l, p.into_list().into_iter().map(|p| p.key).collect())
    }

    #[test]
    fn defaults_values_and_problems_naming_the_key() {
        assert_eq!(parse_vars(&[]), (UpstreamLimits::default(), vec![]));
        assert_eq!(UpstreamLimits::default().max_body_bytes, 32 * 1024 * 1024);
        assert_eq!(
            UpstreamLimits::default().sse_max_event_bytes,
            4 * 1024 * 1024
        );
        let (l, p) = parse_vars(&[
            ("PGW_UPSTREAM_MAX_BODY_BYTES", "1000"),
            ("PGW_SSE_MAX_EVENT_BYTES", " 64 "),
        ]);
        assert!(p.is_empty());
        assert_eq!((l.max_body_bytes, l.sse_max_event_bytes), (1000, 64));
        let (_, p) = parse_vars(&[
            ("PGW_UPSTREAM_MAX_BODY_BYTES", "0"),
            ("PGW_SSE_MAX_EVENT_BYTES", "4MiB"),
        ]);
        assert_eq!(
            p,
            ["PGW_UPSTREAM_MAX_BODY_BYTES", "PGW_SSE_MAX_EVENT_BYTES"]
        );
    }
}
