//! Budget periods in UTC (docs/budgets.md#periods): a day from midnight, a week from Monday
//! midnight, a month from the 1st; a total budget never resets. The Redis script computes the
//! same windows from the server's clock (`reserve.lua`); the tests pin both to these values.

use super::BudgetPeriod;

const DAY_MS: i64 = 86_400_000;

/// The period containing an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeriodWindow {
    /// Unix ms of the period's start (0 for a total budget).
    pub start_ms: i64,
    /// Unix ms of the next period's start; `None` for a total budget.
    pub resets_at_ms: Option<i64>,
}

/// The window of `period` that contains `unix_ms`.
pub fn window(period: BudgetPeriod, unix_ms: i64) -> PeriodWindow {
    let day = unix_ms.div_euclid(DAY_MS);
    let (start_day, next_day) = match period {
        BudgetPeriod::Total => {
            return PeriodWindow {
                start_ms: 0,
                resets_at_ms: None,
            };
        }
        BudgetPeriod::Daily => (day, day + 1),
        BudgetPeriod::Weekly => {
            // 1970-01-01 was a Thursday: Monday is day 4 of the epoch's week.
            let monday = day - (day + 3).rem_euclid(7);
            (monday, monday + 7)
        }
        BudgetPeriod::Monthly => {
            let (y, m, _) = civil_from_days(day);
            let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
            (days_from_civil(y, m, 1), days_from_civil(ny, nm, 1))
        }
    };
    PeriodWindow {
        start_ms: start_day * DAY_MS,
        resets_at_ms: Some(next_day * DAY_MS),
    }
}

/// Days since 1970-01-01 → (year, month 1–12, day 1–31), proleptic Gregorian (H. Hinnant's
/// `civil_from_days`).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
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

/// (year, month, day) → days since 1970-01-01 (H. Hinnant's `days_from_civil`).
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix ms as RFC 3339 UTC, whole seconds (`2026-12-03T00:00:00Z`).
pub fn rfc3339(unix_ms: i64) -> String {
    let secs = unix_ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}
