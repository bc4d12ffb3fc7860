//! One contract test suite for the limiter and one for the breaker, each run against the
//! memory and the Redis backend with the same assertions (exact retry-after values, lease
//! expiry, idempotent settlement, probe leases, fencing). Redis is the real server at
//! 127.0.0.1:6379; every test uses its own key prefix so tests run in parallel.

use std::sync::Arc;

use super::breaker::{
    BreakerBackend, BreakerConfig, BreakerSnapshot, BreakerState, Entry, MemoryBreaker, Outcome,
    RedisBreaker,
};
use super::limiter::{
    Admission, Gate, LimiterBackend, LimiterConfig, LimiterSnapshot, Limits, MemoryLimiter,
    PermitId, RedisLimiter,
};
use super::redis_conn::RedisHandle;
use super::{ManualClock, SharedClock};

fn redis() -> Arc<RedisHandle> {
    let prefix = format!("pgwtest:{}:", uuid::Uuid::new_v4());
    Arc::new(RedisHandle::new("redis://127.0.0.1:6379", &prefix).unwrap())
}

// ----- limiter -----

enum Lim {
    Mem(Arc<MemoryLimiter>),
    Redis(Arc<RedisLimiter>),
}

impl Lim {
    fn backend(&self) -> Arc<dyn LimiterBackend> {
        match self {
            Lim::Mem(m) => m.clone(),
            Lim::Redis(r) => r.clone(),
        }
    }
    async fn snapshot(&self) -> LimiterSnapshot {
        match self {
            Lim::Mem(m) => m.snapshot(),
            Lim::Redis(r) => r.fetch_snapshot().await.unwrap(),
        }
    }
}

fn lim(kind: &str, cfg: LimiterConfig, clock: SharedClock) -> Lim {
    match kind {
        "memory" => Lim::Mem(Arc::new(MemoryLimiter::new(cfg, clock))),
        _ => Lim::Redis(RedisLimiter::new(redis(), "LLM", cfg, Some(clock)).unwrap()),
    }
}

fn limits(c: u32, rpm: u32, tpm: u64) -> Limits {
    Limits {
        max_concurrency: c,
        rpm,
        tpm,
    }
}

fn config(global: Limits, a: Limits, window_ms: u64, lease_ttl_ms: u64) -> LimiterConfig {
    LimiterConfig {
        window_ms,
        lease_ttl_ms,
        global,
        sources: vec![(Arc::from("a"), a), (Arc::from("b"), Limits::default())],
    }
}

async fn grant(l: &Arc<dyn LimiterBackend>, source: &str, est: u64) -> PermitId {
    match l.try_acquire(source, est).await.unwrap() {
        Admission::Granted(id) => id,
        other => panic!("expected a grant, got {other:?}"),
    }
}

async fn denial(l: &Arc<dyn LimiterBackend>, source: &str, est: u64) -> (Gate, Option<u64>) {
    match l.try_acquire(source, est).await.unwrap() {
        Admission::Denied {
            gate,
            retry_after_ms,
        } => (gate, retry_after_ms),
        other => panic!("expected a denial, got {other:?}"),
    }
}

async fn limiter_contract(kind: &str) {
    // Concurrency per source and globally; settle frees a slot; idempotent settle.
    let clock = ManualClock::new(1_000);
    let l = lim(
        kind,
        config(limits(3, 0, 0), limits(2, 0, 0), 1_000, 10_000),
        clock.clone(),
    );
    let b = l.backend();
    let p1 = grant(&b, "a", 0).await;
    let _p2 = grant(&b, "a", 0).await;
    assert_eq!(denial(&b, "a", 0).await, (Gate::SourceConcurrency, None));
    let _p3 = grant(&b, "b", 0).await;
    assert_eq!(denial(&b, "b", 0).await, (Gate::GlobalConcurrency, None));
    b.settle(p1, 0).await.unwrap();
    b.settle(p1, 0).await.unwrap();
    let snap = l.snapshot().await;
    assert_eq!(snap.global.in_flight, 2, "{kind}");
    let _p4 = grant(&b, "a", 0).await;
    assert_eq!(denial(&b, "b", 0).await, (Gate::GlobalConcurrency, None));

    // RPM: five in the window, the sixth waits exactly until the oldest leaves.
    let clock = ManualClock::new(1_000);
    let l = lim(
        kind,
        config(Limits::default(), limits(0, 5, 0), 1_000, 10_000),
        clock.clone(),
    );
    let b = l.backend();
    for _ in 0..5 {
        let p = grant(&b, "a", 0).await;
        b.settle(p, 0).await.unwrap();
        clock.advance(100);
    }
    // Entries at 1000, 1100, 1200, 1300, 1400; now 1500: the first leaves at 2000.
    assert_eq!(
        denial(&b, "a", 0).await,
        (Gate::SourceRpm, Some(500)),
        "{kind}"
    );
    assert_eq!(l.snapshot().await.sources[0].1.requests_in_window, 5);
    clock.advance(500);
    let _ = grant(&b, "a", 0).await;

    // TPM: pre-charge, denial with the exact wait, settle refunds, and over-charges.
    let clock = ManualClock::new(1_000);
    let l = lim(
        kind,
        config(limits(0, 0, 1_000), limits(0, 0, 500), 1_000, 10_000),
        clock.clone(),
    );
    let b = l.backend();
    let p1 = grant(&b, "a", 300).await;
    clock.advance(10);
    assert_eq!(
        denial(&b, "a", 300).await,
        (Gate::SourceTpm, Some(990)),
        "{kind}"
    );
    b.settle(p1, 100).await.unwrap();
    let p2 = grant(&b, "a", 300).await;
    let snap = l.snapshot().await;
    assert_eq!(snap.sources[0].1.tokens_in_window, 400, "{kind}");
    assert_eq!(snap.global.tokens_in_window, 400, "{kind}");
    b.settle(p2, 350).await.unwrap();
    assert_eq!(l.snapshot().await.global.tokens_in_window, 450, "{kind}");
    // A second settle of the same permit changes nothing.
    b.settle(p2, 5).await.unwrap();
    assert_eq!(l.snapshot().await.global.tokens_in_window, 450, "{kind}");
    // Once the window passes, the tokens are gone.
    clock.advance(1_000);
    assert_eq!(l.snapshot().await.global.tokens_in_window, 0, "{kind}");

    // Admissions of one millisecond, across sources: each counts, a settle changes only its
    // own tokens, and they leave the window together (the memory backend keeps them as one
    // run of its log).
    let clock = ManualClock::new(1_000);
    let l = lim(
        kind,
        config(limits(0, 4, 1_000), Limits::default(), 1_000, 10_000),
        clock.clone(),
    );
    let b = l.backend();
    let _p1 = grant(&b, "a", 300).await;
    let _p2 = grant(&b, "b", 300).await;
    let p3 = grant(&b, "a", 300).await;
    b.settle(p3, 100).await.unwrap();
    let snap = l.snapshot().await;
    assert_eq!(snap.global.requests_in_window, 3, "{kind}");
    assert_eq!(snap.global.tokens_in_window, 700, "{kind}");
    assert_eq!(snap.sources[0].1.tokens_in_window, 400, "{kind}");
    assert_eq!(snap.sources[1].1.tokens_in_window, 300, "{kind}");
    clock.advance(10);
    assert_eq!(
        denial(&b, "b", 400).await,
        (Gate::GlobalTpm, Some(990)),
        "{kind}"
    );
    let _p4 = grant(&b, "b", 300).await;
    assert_eq!(
        denial(&b, "a", 0).await,
        (Gate::GlobalRpm, Some(990)),
        "{kind}"
    );
    clock.advance(990);
    let snap = l.snapshot().await;
    assert_eq!(snap.global.requests_in_window, 1, "{kind}");
    assert_eq!(snap.global.tokens_in_window, 300, "{kind}");
    assert_eq!(snap.sources[0].1.tokens_in_window, 0, "{kind}");

    // Lease expiry: an unsettled permit's slot frees at its TTL; its late settle is ignored.
    let clock = ManualClock::new(1_000);
    let l = lim(
        kind,
        config(Limits::default(), limits(1, 0, 1_000), 60_000, 2_000),
        clock.clone(),
    );
    let b = l.backend();
    let p1 = grant(&b, "a", 50).await;
    clock.advance(1_999);
    assert_eq!(
        denial(&b, "a", 50).await,
        (Gate::SourceConcurrency, None),
        "{kind}"
    );
    clock.advance(1);
    let _p2 = grant(&b, "a", 50).await;
    b.settle(p1, 999).await.unwrap();
    let snap = l.snapshot().await;
    assert_eq!(snap.sources[0].1.in_flight, 1, "{kind}");
    assert_eq!(snap.sources[0].1.tokens_in_window, 100, "{kind}");
}

#[tokio::test]
async fn limiter_contract_memory() {
    limiter_contract("memory").await;
}

#[tokio::test]
async fn limiter_contract_redis() {
    limiter_contract("redis").await;
}

// ----- breaker -----

enum Brk {
    Mem(Arc<MemoryBreaker>),
    Redis(Arc<RedisBreaker>),
}

impl Brk {
    fn backend(&self) -> Arc<dyn BreakerBackend> {
        match self {
            Brk::Mem(m) => m.clone(),
            Brk::Redis(r) => r.clone(),
        }
    }
    async fn snapshot(&self) -> BreakerSnapshot {
        match self {
            Brk::Mem(m) => m.snapshot("a").unwrap(),
            Brk::Redis(r) => r.fetch_snapshot("a").await.unwrap(),
        }
    }
}

fn brk(kind: &str, cfg: BreakerConfig, concurrency: u32) -> (Brk, Arc<ManualClock>) {
    let clock = ManualClock::new(1_000_000);
    let sources = [(Arc::from("a"), concurrency)];
    let b = match kind {
        "memory" => Brk::Mem(Arc::new(MemoryBreaker::new(cfg, clock.clone(), &sources))),
        _ => Brk::Redis(RedisBreaker::new(
            redis(),
            "LLM",
            cfg,
            &sources,
            Some(clock.clone()),
        )),
    };
    (b, clock)
}

fn bcfg() -> BreakerConfig {
    BreakerConfig {
        fail_threshold: 3,
        cooldown_ms: 1000,
        max_cooldown_ms: 8000,
        fail_rate: 0.6,
        min_calls: 10,
        bucket_ms: 30_000,
        probe_ttl_ms: 5000,
    }
}

async fn fail(b: &Arc<dyn BreakerBackend>) {
    if let Entry::Allowed { epoch } = b.try_enter("a").await.unwrap() {
        b.record("a", Outcome::Failure, epoch, false).await.unwrap();
    }
}

async fn probe(b: &Arc<dyn BreakerBackend>) -> u64 {
    match b.try_enter("a").await.unwrap() {
        Entry::Probe(lease) => lease.epoch,
        other => panic!("expected a probe, got {other:?}"),
    }
}

async fn breaker_contract(kind: &str) {
    // Consecutive failures open it; remaining cooldown; one probe; success closes.
    let (bk, clock) = brk(kind, bcfg(), 0);
    let b = bk.backend();
    fail(&b).await;
    fail(&b).await;
    assert_eq!(bk.snapshot().await.state, BreakerState::Closed, "{kind}");
    fail(&b).await;
    let s = bk.snapshot().await;
    assert_eq!(
        (s.state, s.retry_after_ms),
        (BreakerState::Open, 1000),
        "{kind}"
    );
    clock.advance(400);
    assert_eq!(
        b.try_enter("a").await.unwrap(),
        Entry::Rejected {
            retry_after_ms: 600
        }
    );
    clock.advance(600);
    let ep = probe(&b).await;
    assert_eq!(
        b.try_enter("a").await.unwrap(),
        Entry::Rejected { retry_after_ms: 0 }
    );
    assert_eq!(bk.snapshot().await.retry_after_ms, 0);
    b.record("a", Outcome::Success, ep, true).await.unwrap();
    assert!(matches!(
        b.try_enter("a").await.unwrap(),
        Entry::Allowed { .. }
    ));

    // Failed probes reopen for longer; a dead probe's lease expires.
    let (bk, clock) = brk(kind, bcfg(), 0);
    let b = bk.backend();
    for _ in 0..3 {
        fail(&b).await;
    }
    clock.advance(1000);
    let ep = probe(&b).await;
    b.record("a", Outcome::Failure, ep, true).await.unwrap();
    assert_eq!(bk.snapshot().await.retry_after_ms, 1000, "{kind}");
    clock.advance(1000);
    let ep = probe(&b).await;
    b.record("a", Outcome::Failure, ep, true).await.unwrap();
    assert_eq!(bk.snapshot().await.retry_after_ms, 2000, "{kind}");
    clock.advance(2000);
    let _ = probe(&b).await;
    clock.advance(4999);
    assert_eq!(
        b.try_enter("a").await.unwrap(),
        Entry::Rejected { retry_after_ms: 0 }
    );
    clock.advance(1);
    let ep = probe(&b).await;
    // A probe given back without a verdict frees the slot at once.
    b.release_probe("a", super::breaker::ProbeLease { epoch: ep })
        .await
        .unwrap();
    let _ = probe(&b).await;

    // The failure rate opens it at 10% success.
    let mut c = bcfg();
    c.fail_threshold = 100;
    let (bk, _) = brk(kind, c, 0);
    let b = bk.backend();
    let mut opened_after = None;
    for i in 0..40 {
        let Entry::Allowed { epoch } = b.try_enter("a").await.unwrap() else {
            opened_after = Some(i);
            break;
        };
        let outcome = if i % 10 == 0 {
            Outcome::Success
        } else {
            Outcome::Failure
        };
        b.record("a", outcome, epoch, false).await.unwrap();
    }
    assert_eq!(opened_after, Some(10), "{kind}");
    let s = bk.snapshot().await;
    assert_eq!((s.state, s.streak), (BreakerState::Open, 1), "{kind}");

    // 429 and invalid results are not failures; source-dead forces it open; the threshold
    // follows the source's concurrency.
    let (bk, _) = brk(kind, bcfg(), 4);
    let b = bk.backend();
    for _ in 0..20 {
        let Entry::Allowed { epoch } = b.try_enter("a").await.unwrap() else {
            panic!("closed")
        };
        b.record("a", Outcome::RateLimited, epoch, false)
            .await
            .unwrap();
        b.record("a", Outcome::ResultInvalid, epoch, false)
            .await
            .unwrap();
    }
    let s = bk.snapshot().await;
    assert_eq!(
        (
            s.state,
            s.window_calls,
            s.consecutive_failures,
            s.effective_threshold
        ),
        (BreakerState::Closed, 0, 0, 8),
        "{kind}"
    );
    let Entry::Allowed { epoch } = b.try_enter("a").await.unwrap() else {
        panic!("closed")
    };
    b.record("a", Outcome::SourceDead, epoch, false)
        .await
        .unwrap();
    let s = bk.snapshot().await;
    assert_eq!(
        (s.state, s.retry_after_ms),
        (BreakerState::Open, 1000),
        "{kind}"
    );

    // Late reports of an old generation are fenced.
    let (bk, clock) = brk(kind, bcfg(), 0);
    let b = bk.backend();
    let Entry::Allowed { epoch: old } = b.try_enter("a").await.unwrap() else {
        panic!("closed")
    };
    for _ in 0..3 {
        fail(&b).await;
    }
    clock.advance(1000);
    let ep = probe(&b).await;
    b.record("a", Outcome::Success, ep, true).await.unwrap();
    for _ in 0..3 {
        b.record("a", Outcome::Failure, old, false).await.unwrap();
    }
    b.record("a", Outcome::Failure, ep, true).await.unwrap();
    assert_eq!(bk.snapshot().await.state, BreakerState::Closed, "{kind}");
}

#[tokio::test]
async fn breaker_contract_memory() {
    breaker_contract("memory").await;
}

#[tokio::test]
async fn breaker_contract_redis() {
    breaker_contract("redis").await;
}
