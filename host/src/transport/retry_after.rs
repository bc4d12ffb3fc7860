//! `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP-date. Non-finite, negative,
//! unparseable and absurd (over 24 h) values are ignored; the non-finite and absurd ones with
//! a warning naming the source, never echoing the header (docs/retry.md#retry-after).

use std::time::{Duration, SystemTime};

/// Longest hint honoured; anything above is treated as no hint.
const ABSURD: Duration = Duration::from_secs(24 * 3600);

/// Parse a `Retry-After` value at time `now`. `None` = no usable hint.
pub fn parse_retry_after(raw: &str, now: SystemTime, source_name: &str) -> Option<Duration> {
    let raw = raw.trim();
    if raw.is_empty() {
        return None;
    }
    if raw.bytes().all(|b| {
        b.is_ascii_digit() || b == b'.' || b == b'-' || b == b'+' || b == b'e' || b == b'E'
    }) || raw.eq_ignore_ascii_case("inf")
        || raw.eq_ignore_ascii_case("infinity")
        || raw.eq_ignore_ascii_case("nan")
    {
        let secs: f64 = raw.parse().ok()?;
        if secs.is_infinite() {
            tracing::warn!(source = source_name, "retry_after_not_finite: ignored");
            return None;
        }
        if secs.is_nan() || secs < 0.0 {
            return None; // NaN or negative: noise, silently ignored
        }
        let d = Duration::from_secs_f64(secs.min(ABSURD.as_secs_f64() + 1.0));
        if d > ABSURD {
            tracing::warn!(
                source = source_name,
                "retry_after_absurd: over 24 h, ignored"
            );
            return None;
        }
        return Some(d);
    }
    let at = httpdate::parse_http_date(raw).ok()?;
    let d = at.duration_since(now).unwrap_or(Duration::ZERO);
    if d > ABSURD {
        tracing::warn!(
            source = source_name,
            "retry_after_absurd: over 24 h, ignored"
        );
        return None;
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let p = |s: &str| parse_retry_after(s, now, "src");
        assert_eq!(p("2"), Some(Duration::from_secs(2)));
        assert_eq!(p(" 0 "), Some(Duration::ZERO));
        assert_eq!(p("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(p("inf"), None);
        assert_eq!(p("1e999"), None);
        assert_eq!(p("nan"), None);
        assert_eq!(p("-3"), None);
        assert_eq!(p("90000"), None);
        assert_eq!(p(""), None);
        assert_eq!(p("soon"), None);
        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(p(&date), Some(Duration::from_secs(30)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(p(&past), Some(Duration::ZERO));
    }
}
