//! RFC 3339 timestamps and `YYYY-MM-DD` dates ↔ Unix milliseconds, in UTC, for the admin
//! API (`expires_at`, the spend window) — a few lines instead of a date crate.

const DAY_MS: i64 = 86_400_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn digits(s: &str) -> Option<u32> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// `YYYY-MM-DD` → Unix ms of its midnight UTC.
pub fn parse_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y = i64::from(digits(&s[0..4])?);
    let m = digits(&s[5..7])?;
    let d = digits(&s[8..10])?;
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    Some(days_from_civil(y, m, d) * DAY_MS)
}

/// A query's `from` or `to` instant: an RFC 3339 timestamp, or a `YYYY-MM-DD` date — its
/// midnight UTC, or with `end` the next midnight (a `to` date includes that whole day).
pub fn parse_range_bound(s: &str, end: bool) -> Option<i64> {
    parse_rfc3339(s).or_else(|| parse_date(s).map(|d| if end { d + DAY_MS } else { d }))
}

/// The message of a `from`/`to` value [`parse_range_bound`] refuses.
pub fn range_bound_error(s: &str) -> String {
    format!("expected an RFC 3339 timestamp or a YYYY-MM-DD date, got `{s}`")
}

/// An RFC 3339 timestamp (`2026-12-02T10:00:00Z`, `…T10:00:00.250+01:00`) → Unix ms
/// (fractions below a millisecond are dropped).
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    if s.len() < 20 || !s.is_char_boundary(10) {
        return None;
    }
    let day = parse_date(&s[..10])?;
    let rest = &s[10..];
    let sep = rest.as_bytes()[0];
    if !matches!(sep, b'T' | b't' | b' ') {
        return None;
    }
    let rest = &rest[1..];
    let b = rest.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let (h, mi, sec) = (
        i64::from(digits(&rest[0..2])?),
        i64::from(digits(&rest[3..5])?),
        i64::from(digits(&rest[6..8])?),
    );
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &rest[8..];
    let mut ms = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let padded = format!("{:0<3}", &frac[..n.min(3)]);
        ms = i64::from(digits(&padded)?);
        rest = &frac[n..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        _ => {
            let b = rest.as_bytes();
            if b.len() != 6 || b[3] != b':' || !matches!(b[0], b'+' | b'-') {
                return None;
            }
            let oh = i64::from(digits(&rest[1..3])?);
            let om = i64::from(digits(&rest[4..6])?);
            if oh > 23 || om > 59 {
                return None;
            }
            let m = oh * 60 + om;
            if b[0] == b'-' { -m } else { m }
        }
    };
    Some(day + ((h * 60 + mi - offset_min) * 60 + sec) * 1000 + ms)
}

/// Unix ms → RFC 3339 UTC: `2026-12-02T10:00:00Z`, with `.mmm` when not whole seconds.
pub fn format_rfc3339(unix_ms: i64) -> String {
    let (y, m, d) = civil_from_days(unix_ms.div_euclid(DAY_MS));
    let in_day = unix_ms.rem_euclid(DAY_MS);
    let (h, mi, s, ms) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    if ms == 0 {
        format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
    }
}

/// One day in ms.
pub const ONE_DAY_MS: i64 = DAY_MS;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_dates() {
        let cases: &[(&str, Option<i64>)] = &[
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2026-12-02T00:00:00Z", Some(1_796_169_600_000)),
            ("2026-12-02T01:00:00.25+01:00", Some(1_796_169_600_250)),
            ("2026-12-01T23:00:00-01:00", Some(1_796_169_600_000)),
            ("2024-02-29T12:00:00z", Some(1_709_208_000_000)),
            ("2025-02-29T12:00:00Z", None),
            ("2026-12-02", None),
            ("2026-12-02T00:00:00", None),
            ("2026-13-02T00:00:00Z", None),
            ("tomorrow", None),
            ("2026-12-02T00:00:00.Z", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_rfc3339(s), *want, "{s}");
        }
        assert_eq!(parse_date("2026-12-02"), Some(1_796_169_600_000));
        assert_eq!(parse_date("2026-2-02"), None);
        assert_eq!(format_rfc3339(1_796_169_600_000), "2026-12-02T00:00:00Z");
        assert_eq!(
            format_rfc3339(1_796_169_600_250),
            "2026-12-02T00:00:00.250Z"
        );
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59.999Z");
    }
}
