//! One contract suite for both budget stores (memory, and Redis at 127.0.0.1:6379 with a
//! prefix of its own per test), plus the period arithmetic with exact values.

use std::sync::Arc;

use std::sync::atomic::{AtomicI64, Ordering};

use futures_util::FutureExt;

use crate::governance::redis_conn::RedisHandle;
use crate::governance::{Clock, Entropy, ManualClock, SharedClock};

use super::*;

const DAY: i64 = 86_400_000;
/// 2026-12-02T12:00:00Z, a Wednesday.
const NOON: i64 = 1_796_212_800_000;

/// A wall clock a test sets to any instant, forwards or back.
#[derive(Debug)]
struct At(AtomicI64);

impl At {
    fn new(unix_ms: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(unix_ms)))
    }
    fn set_unix_ms(&self, unix_ms: i64) {
        self.0.store(unix_ms, Ordering::SeqCst);
    }
}

impl Clock for At {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.0.load(Ordering::SeqCst)).unwrap_or(0)
    }
    fn unix_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A handle on the test Redis with a key prefix of its own (a random draw through the one
/// seeded source, so parallel tests never share keys).
fn redis() -> Arc<RedisHandle> {
    let prefix = format!("pgwtest:budget:{:016x}:", Entropy::from_os().next_u64());
    Arc::new(RedisHandle::new("redis://127.0.0.1:6379", &prefix).unwrap())
}

fn store(kind: &str, clock: SharedClock) -> Arc<dyn BudgetBackend> {
    match kind {
        "memory" => Arc::new(MemoryBudgets::new(clock)),
        _ => Arc::new(RedisBudgets::with_clock(redis(), clock)),
    }
}

fn line(bucket: &str, period: BudgetPeriod, limit: u64, soft: Option<u64>) -> BudgetLine {
    BudgetLine {
        bucket: Arc::from(bucket),
        period,
        limit_micro_usd: limit,
        soft_micro_usd: soft,
    }
}

fn granted(a: BudgetAdmission) -> (Held, Vec<SoftWarning>) {
    match a {
        BudgetAdmission::Granted { held, warnings } => (held, warnings),
        BudgetAdmission::Denied(d) => panic!("denied: {d:?}"),
    }
}

async fn contract(kind: &str) {
    let clock = At::new(NOON);
    let s = store(kind, clock.clone());
    let key = [line("key:k:total", BudgetPeriod::Total, 50_000, None)];

    // 200 concurrent reservations of 1 000 against 50 000: exactly 50 fit.
    let mut tasks = Vec::new();
    for _ in 0..200 {
        let s = s.clone();
        let lines = key.to_vec();
        tasks.push(tokio::spawn(async move {
            s.reserve(&lines, 1_000).await.unwrap()
        }));
    }
    let mut helds = Vec::new();
    let mut denied = 0;
    for t in tasks {
        match t.await.unwrap() {
            BudgetAdmission::Granted { held, .. } => helds.push(held),
            BudgetAdmission::Denied(d) => {
                assert_eq!(d.bucket.as_ref(), "key:k:total");
                assert_eq!(d.limit_micro_usd, 50_000);
                assert_eq!(d.resets_at_ms, None);
                denied += 1;
            }
        }
    }
    assert_eq!((helds.len(), denied), (50, 150), "{kind}");
    assert_eq!(s.totals(&key).await.unwrap(), vec![50_000]);
    let BudgetAdmission::Denied(d) = s.reserve(&key, 1).await.unwrap() else {
        panic!("full budget granted")
    };
    assert_eq!(d.total_micro_usd, 50_000);
    assert_eq!(d.resets_at_ms, None);
    // An amount of 0 is refused only when a line is already over.
    granted(s.reserve(&key, 0).await.unwrap());
    // Ten settle to 400 (a refund of 600 each), one to 1 500 (an extra 500).
    for h in &helds[..10] {
        s.settle(h, 400).await.unwrap();
    }
    assert_eq!(s.totals(&key).await.unwrap(), vec![44_000], "{kind}");
    s.settle(&helds[10], 1_500).await.unwrap();
    assert_eq!(s.totals(&key).await.unwrap(), vec![50_000 - 6_000 + 500]);

    // Two lines: the second has no room, the first is left as it was.
    let both = [
        line("key:a:daily", BudgetPeriod::Daily, 10_000, None),
        line("team:t:monthly", BudgetPeriod::Monthly, 3_000, Some(1_000)),
    ];
    let (_, w) = granted(s.reserve(&both, 1_000).await.unwrap());
    assert!(w.is_empty(), "at the soft limit, not past it: {w:?}");
    // The next one crosses it: warned, still granted.
    let (_, w) = granted(s.reserve(&both, 1_000).await.unwrap());
    assert_eq!(
        w,
        vec![SoftWarning {
            bucket: Arc::from("team:t:monthly"),
            soft_micro_usd: 1_000,
            total_micro_usd: 2_000,
        }]
    );
    let BudgetAdmission::Denied(d) = s.reserve(&both, 2_000).await.unwrap() else {
        panic!("team over its limit")
    };
    assert_eq!(d.bucket.as_ref(), "team:t:monthly");
    assert_eq!(d.period, BudgetPeriod::Monthly);
    assert_eq!((d.limit_micro_usd, d.total_micro_usd), (3_000, 2_000));
    // 2027-01-01T00:00:00Z.
    assert_eq!(d.resets_at_ms, Some(1_798_761_600_000));
    assert_eq!(s.totals(&both).await.unwrap(), vec![2_000, 2_000]);

    // A reservation held across midnight settles into the day it was charged to.
    let daily = [line("key:b:daily", BudgetPeriod::Daily, 5_000, None)];
    let (held, _) = granted(s.reserve(&daily, 4_000).await.unwrap());
    clock.set_unix_ms(NOON + DAY);
    assert_eq!(
        s.totals(&daily).await.unwrap(),
        vec![0],
        "a new day starts empty"
    );
    granted(s.reserve(&daily, 5_000).await.unwrap());
    s.settle(&held, 1_000).await.unwrap();
    assert_eq!(s.totals(&daily).await.unwrap(), vec![5_000]);
    clock.set_unix_ms(NOON);
    assert_eq!(s.totals(&daily).await.unwrap(), vec![1_000]);

    // Seeding sets an absent total and never lowers one.
    let seeded = line("key:c:weekly", BudgetPeriod::Weekly, 100, None);
    let monday = window(BudgetPeriod::Weekly, NOON).start_ms;
    s.seed(&seeded, monday, 70).await.unwrap();
    s.seed(&seeded, monday, 10).await.unwrap();
    assert_eq!(
        s.totals(std::slice::from_ref(&seeded)).await.unwrap(),
        vec![70]
    );
    let BudgetAdmission::Denied(d) = s.reserve(std::slice::from_ref(&seeded), 31).await.unwrap()
    else {
        panic!("seeded spend ignored")
    };
    assert_eq!(d.total_micro_usd, 70);

    // The guard: dropped before sending → refunded; after → kept; settled → actual.
    let g = [line("key:g:total", BudgetPeriod::Total, 10_000, None)];
    let poll = || {
        let s = s.clone();
        let g = g.clone();
        async move { s.totals(&g).await.unwrap() }
    };
    let (h, _) = granted(s.reserve(&g, 3_000).await.unwrap());
    drop(Reservation::new(s.clone(), h));
    assert_eq!(settled_to(poll, vec![0]).await, vec![0], "{kind}: refunded");
    let (h, _) = granted(s.reserve(&g, 3_000).await.unwrap());
    let mut r = Reservation::new(s.clone(), h);
    r.sent();
    drop(r);
    assert_eq!(s.totals(&g).await.unwrap(), vec![3_000], "{kind}: kept");
    let (h, _) = granted(s.reserve(&g, 3_000).await.unwrap());
    Reservation::new(s.clone(), h).settle_now(500).await;
    let totals = settled_to(
        || {
            let s = s.clone();
            let g = g.clone();
            async move { s.totals(&g).await.unwrap() }
        },
        vec![3_500],
    )
    .await;
    assert_eq!(totals, vec![3_500], "{kind}");
}

/// Poll `f` until it returns `want` (a spawned refund lands a moment later), at most 5 s.
async fn settled_to<F, Fut>(f: F, want: Vec<u64>) -> Vec<u64>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Vec<u64>>,
{
    for _ in 0..100 {
        let v = f().await;
        if v == want {
            return v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    f().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn budget_contract_memory() {
    contract("memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn budget_contract_redis() {
    contract("redis").await;
}

#[tokio::test]
async fn redis_down_is_backend_down_at_once() {
    let h = Arc::new(RedisHandle::new("redis://127.0.0.1:1", "pgwtest:down:").unwrap());
    let s = RedisBudgets::new(h);
    let started = std::time::Instant::now();
    let r = s
        .reserve(&[line("k", BudgetPeriod::Daily, 1, None)], 1)
        .await;
    assert!(matches!(r, Err(BudgetError::BackendDown(_))), "{r:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
}

#[tokio::test]
async fn the_server_clock_puts_a_call_in_todays_period() {
    // Without an injected clock the script reads Redis's TIME: today's daily window.
    let s = RedisBudgets::new(redis());
    let (held, _) = granted(
        s.reserve(&[line("k", BudgetPeriod::Daily, 10, None)], 1)
            .await
            .unwrap(),
    );
    let now = crate::governance::SystemClock::shared().unix_ms();
    assert_eq!(held.charges[0].1, window(BudgetPeriod::Daily, now).start_ms);
}

#[test]
fn periods_are_utc_calendar_windows() {
    let w = |p, t| window(p, t);
    // Daily: midnight to midnight.
    assert_eq!(
        w(BudgetPeriod::Daily, NOON),
        PeriodWindow {
            start_ms: NOON - DAY / 2,
            resets_at_ms: Some(NOON + DAY / 2)
        }
    );
    assert_eq!(
        w(BudgetPeriod::Daily, NOON + DAY / 2).start_ms,
        NOON + DAY / 2
    );
    // Weekly: Monday 2026-11-30 to Monday 2026-12-07.
    assert_eq!(
        w(BudgetPeriod::Weekly, NOON),
        PeriodWindow {
            start_ms: 1_795_996_800_000,
            resets_at_ms: Some(1_796_601_600_000)
        }
    );
    // A Monday at midnight starts its own week; the Sunday before is the last week's.
    assert_eq!(
        w(BudgetPeriod::Weekly, 1_795_996_800_000).start_ms,
        1_795_996_800_000
    );
    assert_eq!(
        w(BudgetPeriod::Weekly, 1_795_996_799_999).start_ms,
        1_795_392_000_000
    );
    // Monthly: Jan 31 → Feb 1, Dec → Jan, a leap February.
    // 2027-01-31T23:59:59.999Z is in January; the next ms is February.
    assert_eq!(
        w(BudgetPeriod::Monthly, 1_801_439_999_999),
        PeriodWindow {
            start_ms: 1_798_761_600_000,
            resets_at_ms: Some(1_801_440_000_000)
        }
    );
    assert_eq!(
        w(BudgetPeriod::Monthly, 1_801_440_000_000).start_ms,
        1_801_440_000_000
    );
    assert_eq!(
        w(BudgetPeriod::Monthly, NOON).resets_at_ms,
        Some(1_798_761_600_000)
    );
    // 2028-02-29 (leap) is in February 2028, which ends on 2028-03-01.
    assert_eq!(
        w(BudgetPeriod::Monthly, 1_835_395_200_000),
        PeriodWindow {
            start_ms: 1_832_976_000_000,
            resets_at_ms: Some(1_835_481_600_000)
        }
    );
    assert_eq!(
        w(BudgetPeriod::Total, NOON),
        PeriodWindow {
            start_ms: 0,
            resets_at_ms: None
        }
    );
    assert_eq!(rfc3339(1_798_761_600_000), "2027-01-01T00:00:00Z");
    assert_eq!(rfc3339(1_835_395_200_000 + 1_000), "2028-02-29T00:00:01Z");
}

#[test]
fn usd_rounds_up_to_micro_usd() {
    assert_eq!(usd_to_micro(0.1 + 0.2), 300_000);
    assert_eq!(usd_to_micro(1e-7), 1);
    assert_eq!(usd_to_micro(39.0), 39_000_000);
    assert_eq!(usd_to_micro(-1.0), 0);
    assert_eq!(usd_to_micro(f64::NAN), 0);
    assert_eq!(usd_to_micro(f64::INFINITY), u64::MAX);
}

/// Move a [`ManualClock`] forward until its wall clock reads `unix_ms`.
fn go(clock: &ManualClock, unix_ms: i64) {
    let d = unix_ms - clock.unix_ms();
    assert!(d >= 0, "the manual clock only moves forward");
    clock.advance(u64::try_from(d).unwrap());
}

/// 2030-03-05T00:00:00Z, a Tuesday.
const TUE_2030_03_05: i64 = 1_898_899_200_000;
/// 2030-03-11T00:00:00Z, a Monday.
const MON_2030_03_11: i64 = 1_899_417_600_000;
/// 2031-02-01T00:00:00Z.
const FEB_2031: i64 = 1_927_670_400_000;
/// 2032-01-01T00:00:00Z.
const JAN_2032: i64 = 1_956_528_000_000;
/// 2032-03-01T00:00:00Z (2032-02-29 is the day before).
const MAR_2032: i64 = 1_961_712_000_000;

/// A period's counter fills the last ms before its boundary and is empty from the boundary
/// on; the full limit fits again.
async fn rolls_over_at(s: &Arc<dyn BudgetBackend>, clock: &ManualClock, l: BudgetLine, at: i64) {
    let lines = [l];
    go(clock, at - 1);
    let limit = lines[0].limit_micro_usd;
    granted(s.reserve(&lines, limit).await.unwrap());
    let BudgetAdmission::Denied(d) = s.reserve(&lines, 1).await.unwrap() else {
        panic!("{}: full budget granted", lines[0].bucket)
    };
    assert_eq!(d.resets_at_ms, Some(at), "{}", lines[0].bucket);
    clock.advance(1);
    assert_eq!(
        s.totals(&lines).await.unwrap(),
        vec![0],
        "{}",
        lines[0].bucket
    );
    let (held, _) = granted(s.reserve(&lines, limit).await.unwrap());
    assert_eq!(held.charges[0].1, at, "{}", lines[0].bucket);
}

async fn rollover(kind: &str) {
    let clock = ManualClock::new(0);
    let s = store(kind, clock.clone());
    let daily = line("key:r:daily", BudgetPeriod::Daily, 700, None);
    let weekly = line("key:r:weekly", BudgetPeriod::Weekly, 700, None);
    let monthly = line("team:r:monthly", BudgetPeriod::Monthly, 700, None);
    let total = line("team:r:total", BudgetPeriod::Total, 10_000, None);
    // Midnight UTC; the week does not roll on a Tuesday.
    rolls_over_at(&s, &clock, daily.clone(), TUE_2030_03_05).await;
    let weekly_one = [line("key:r2:weekly", BudgetPeriod::Weekly, 700, None)];
    go(&clock, TUE_2030_03_05);
    granted(s.reserve(&weekly_one, 300).await.unwrap());
    go(&clock, TUE_2030_03_05 + DAY);
    assert_eq!(s.totals(&weekly_one).await.unwrap(), vec![300], "{kind}");
    // Monday 00:00 UTC.
    rolls_over_at(&s, &clock, weekly, MON_2030_03_11).await;
    // Jan 31 → Feb 1, Dec → Jan, Feb 29 (leap) → Mar 1.
    rolls_over_at(&s, &clock, monthly.clone(), FEB_2031).await;
    rolls_over_at(&s, &clock, monthly.clone(), JAN_2032).await;
    rolls_over_at(&s, &clock, monthly, MAR_2032).await;
    // A total budget never resets.
    let total_one = [total];
    granted(s.reserve(&total_one, 10_000).await.unwrap());
    go(&clock, MAR_2032 + 400 * DAY);
    assert_eq!(s.totals(&total_one).await.unwrap(), vec![10_000], "{kind}");
}

#[tokio::test]
async fn budget_rollover_memory() {
    rollover("memory").await;
}

#[tokio::test]
async fn budget_rollover_redis() {
    rollover("redis").await;
}

#[test]
fn the_window_method_gives_exact_calendar_windows() {
    let cases = [
        // (period, instant, start, resets at)
        (
            BudgetPeriod::Daily,
            TUE_2030_03_05 - 1,
            TUE_2030_03_05 - DAY,
            Some(TUE_2030_03_05),
        ),
        (
            BudgetPeriod::Daily,
            TUE_2030_03_05,
            TUE_2030_03_05,
            Some(TUE_2030_03_05 + DAY),
        ),
        // Sunday 2030-03-10 23:59:59.999 is in the week of Monday 2030-03-04.
        (
            BudgetPeriod::Weekly,
            MON_2030_03_11 - 1,
            1_898_812_800_000,
            Some(MON_2030_03_11),
        ),
        (
            BudgetPeriod::Weekly,
            MON_2030_03_11,
            MON_2030_03_11,
            Some(MON_2030_03_11 + 7 * DAY),
        ),
        // 2031-01-31T23:59:59.999Z: January 2031; 2031-02-01 starts February (28 days).
        (
            BudgetPeriod::Monthly,
            FEB_2031 - 1,
            1_924_992_000_000,
            Some(FEB_2031),
        ),
        (
            BudgetPeriod::Monthly,
            FEB_2031,
            FEB_2031,
            Some(1_930_089_600_000),
        ),
        // December 2031 → January 2032.
        (
            BudgetPeriod::Monthly,
            JAN_2032 - 1,
            1_953_849_600_000,
            Some(JAN_2032),
        ),
        // 2032-02-29T12:00Z: February 2032 has 29 days.
        (
            BudgetPeriod::Monthly,
            MAR_2032 - DAY / 2,
            1_959_206_400_000,
            Some(MAR_2032),
        ),
        (BudgetPeriod::Total, MAR_2032, 0, None),
        // Before the epoch: 1969-12-31 is a Wednesday, in the week of Monday 1969-12-29.
        (BudgetPeriod::Daily, -1, -DAY, Some(0)),
        (BudgetPeriod::Weekly, -1, -3 * DAY, Some(4 * DAY)),
        (BudgetPeriod::Monthly, -1, -31 * DAY, Some(0)),
    ];
    for (period, at, start_ms, resets_at_ms) in cases {
        let w = period.window(at);
        assert_eq!(
            w,
            PeriodWindow {
                start_ms,
                resets_at_ms
            },
            "{period:?} at {at}"
        );
        assert_eq!(w, window(period, at));
    }
    assert_eq!(BudgetPeriod::Weekly.as_str(), "weekly");
    assert_eq!(
        serde_json::to_string(&BudgetPeriod::Monthly).unwrap(),
        "\"monthly\""
    );
}

#[test]
fn usd_noise_is_not_a_micro_usd() {
    assert_eq!(usd_to_micro(0.0015), 1_500);
    assert_eq!(usd_to_micro(0.000_001), 1);
    assert_eq!(usd_to_micro(0.000_001_5), 2);
    assert_eq!(usd_to_micro(0.0), 0);
    assert_eq!(usd_to_micro(1e30), u64::MAX);
}

#[test]
fn memory_refunds_inline_even_without_a_runtime() {
    // No tokio runtime here: the memory store settles a dropped reservation in `Drop`.
    let s: Arc<dyn BudgetBackend> = Arc::new(MemoryBudgets::new(ManualClock::new(0)));
    let lines = [line("key:i:total", BudgetPeriod::Total, 100, None)];
    let Some(Ok(BudgetAdmission::Granted { held, .. })) = s.reserve(&lines, 60).now_or_never()
    else {
        panic!("not granted at once")
    };
    drop(Reservation::new(s.clone(), held));
    assert_eq!(s.totals(&lines).now_or_never().unwrap().unwrap(), vec![0]);
}

#[test]
fn memory_drops_a_period_a_day_after_it_ends() {
    let clock = ManualClock::new(0);
    let m = MemoryBudgets::new(clock.clone());
    let lines = [
        line("key:s:daily", BudgetPeriod::Daily, 100, None),
        line("key:s:total", BudgetPeriod::Total, 100, None),
    ];
    go(&clock, TUE_2030_03_05);
    let Some(Ok(BudgetAdmission::Granted { held, .. })) = m.reserve(&lines, 10).now_or_never()
    else {
        panic!("not granted")
    };
    assert_eq!(m.entry_count(), 2);
    // The next day: the old period is kept (a late settlement still corrects it).
    go(&clock, TUE_2030_03_05 + 2 * DAY - 1);
    let _ = m.reserve(&lines, 0).now_or_never();
    assert_eq!(m.entry_count(), 3);
    m.settle(&held, 4).now_or_never().unwrap().unwrap();
    // A day after the period's end it is dropped (the total budget's never is).
    go(&clock, TUE_2030_03_05 + 2 * DAY + 60_000);
    let _ = m.reserve(&lines, 0).now_or_never();
    assert_eq!(m.entry_count(), 3, "2030-03-05 dropped, 2030-03-07 added");
    assert_eq!(
        m.totals(&lines).now_or_never().unwrap().unwrap(),
        vec![0, 4]
    );
}

#[tokio::test]
async fn seed_skips_expired_periods_and_raises_lower_values() {
    for kind in ["memory", "redis"] {
        let clock = ManualClock::new(0);
        let s = store(kind, clock.clone());
        go(&clock, TUE_2030_03_05 + DAY / 2);
        let l = line("key:z:daily", BudgetPeriod::Daily, 1_000, None);
        let one = std::slice::from_ref(&l);
        // Two days ago: its counter would have expired; nothing is stored.
        s.seed(&l, TUE_2030_03_05 - 2 * DAY, 500).await.unwrap();
        // Today: a reservation made before the seed does not hide the ledger's spend.
        granted(s.reserve(one, 100).await.unwrap());
        s.seed(&l, TUE_2030_03_05, 400).await.unwrap();
        assert_eq!(s.totals(one).await.unwrap(), vec![400], "{kind}");
        s.seed(&l, TUE_2030_03_05, 50).await.unwrap();
        assert_eq!(s.totals(one).await.unwrap(), vec![400], "{kind}");
    }
}
