//! One contract suite for both budget stores (memory, and Redis at 127.0.0.1:6379 with a
//! prefix of its own per test), plus the period arithmetic with exact values.

use std::sync::Arc;

use std::sync::atomic::{AtomicI64, Ordering};

use crate::governance::redis_conn::RedisHandle;
use crate::governance::{Clock, SharedClock};

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

fn store(kind: &str, clock: SharedClock) -> Arc<dyn BudgetBackend> {
    match kind {
        "memory" => Arc::new(MemoryBudgets::new(clock)),
        _ => {
            let prefix = format!("pgwtest:{}:", uuid::Uuid::new_v4());
            let h = Arc::new(RedisHandle::new("redis://127.0.0.1:6379", &prefix).unwrap());
            Arc::new(RedisBudgets::with_clock(h, clock))
        }
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
    // Ten settle to 400 (a refund of 600 each), one to 1 500 (an extra 500).
    for h in &helds[..10] {
        s.settle(h, 400).await.unwrap();
    }
    s.settle(&helds[10], 1_500).await.unwrap();
    assert_eq!(s.totals(&key).await.unwrap(), vec![50_000 - 6_000 + 500]);

    // Two lines: the second has no room, the first is left as it was.
    let both = [
        line("key:a:daily", BudgetPeriod::Daily, 10_000, None),
        line("team:t:monthly", BudgetPeriod::Monthly, 3_000, Some(1_000)),
    ];
    let (_, w) = granted(s.reserve(&both, 2_000).await.unwrap());
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
    let (h, _) = granted(s.reserve(&g, 3_000).await.unwrap());
    drop(Reservation::new(s.clone(), h));
    let (h, _) = granted(s.reserve(&g, 3_000).await.unwrap());
    let mut r = Reservation::new(s.clone(), h);
    r.sent();
    drop(r);
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
    let prefix = format!("pgwtest:{}:", uuid::Uuid::new_v4());
    let h = Arc::new(RedisHandle::new("redis://127.0.0.1:6379", &prefix).unwrap());
    let s = RedisBudgets::new(h);
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
