//! The Redis breaker backend (`PGW_BREAKER_BACKEND=redis`): the memory backend's algorithm as
//! Lua scripts over one hash per source (`{prefix}brk:{scope}:{source}`), so every gateway
//! process sees one breaker per source. Time is the Redis server clock unless a test injects
//! a clock; epochs fence late reports; the hash carries a TTL.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{
    BreakerBackend, BreakerConfig, BreakerError, BreakerSnapshot, BreakerState, Entry, Outcome,
    ProbeLease,
};
use crate::governance::SharedClock;
use crate::governance::redis_conn::RedisHandle;

static ENTER: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("enter.lua")));
static RECORD: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("record.lua")));
static RELEASE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("release.lua")));
static SNAPSHOT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("snapshot.lua")));

/// The breaker hash lives a day past its last write (nothing without a TTL); longer than
/// any cooldown cap plus probe lease.
const KEY_TTL_MS: u64 = 24 * 3600 * 1000;
/// How often the `/healthz` snapshots are refreshed from Redis.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(500);

/// A scope's breakers in Redis.
pub struct RedisBreaker {
    redis: Arc<RedisHandle>,
    base: String,
    cfg: BreakerConfig,
    /// Source → effective consecutive-failure threshold.
    thresholds: HashMap<Arc<str>, u32>,
    clock: Option<SharedClock>,
    snapshots: Mutex<HashMap<Arc<str>, BreakerSnapshot>>,
}

impl RedisBreaker {
    /// Breakers for `sources` (name, `MAX_CONCURRENCY`) of `scope`. `clock`: `None` in
    /// production (the Redis server clock).
    pub fn new(
        redis: Arc<RedisHandle>,
        scope: &str,
        cfg: BreakerConfig,
        sources: &[(Arc<str>, u32)],
        clock: Option<SharedClock>,
    ) -> Arc<Self> {
        let thresholds = sources
            .iter()
            .map(|(n, c)| {
                (
                    n.clone(),
                    cfg.fail_threshold.max(c.saturating_mul(2)).max(1),
                )
            })
            .collect::<HashMap<_, _>>();
        let snapshots = thresholds
            .iter()
            .map(|(n, t)| {
                (
                    n.clone(),
                    BreakerSnapshot {
                        state: BreakerState::Closed,
                        retry_after_ms: 0,
                        consecutive_failures: 0,
                        streak: 0,
                        window_calls: 0,
                        window_failures: 0,
                        effective_threshold: *t,
                    },
                )
            })
            .collect();
        let me = Arc::new(Self {
            base: format!("{}brk:{scope}:", redis.prefix),
            redis,
            cfg,
            thresholds,
            clock,
            snapshots: Mutex::new(snapshots),
        });
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            h.spawn(refresh(Arc::downgrade(&me)));
        }
        me
    }

    fn now_arg(&self) -> String {
        self.clock
            .as_ref()
            .map(|c| c.now_ms().max(1).to_string())
            .unwrap_or_else(|| "0".into())
    }

    fn key(&self, source: &str) -> Result<String, BreakerError> {
        if self.thresholds.contains_key(source) {
            Ok(format!("{}{source}", self.base))
        } else {
            Err(BreakerError::UnknownSource(source.to_string()))
        }
    }

    async fn enter(&self, source: &str) -> Result<Entry, BreakerError> {
        let key = self.key(source)?;
        let args = vec![
            self.now_arg(),
            self.cfg.probe_ttl_ms.to_string(),
            KEY_TTL_MS.to_string(),
        ];
        let out: Vec<i64> = self
            .redis
            .script(&ENTER, &[key], &args)
            .await
            .map_err(BreakerError::BackendDown)?;
        match out.as_slice() {
            [0, ep, _] => Ok(Entry::Allowed { epoch: *ep as u64 }),
            [1, ep, _] => Ok(Entry::Probe(ProbeLease { epoch: *ep as u64 })),
            [2, _, retry] => Ok(Entry::Rejected {
                retry_after_ms: (*retry).max(0) as u64,
            }),
            other => Err(BreakerError::BackendDown(format!(
                "unexpected breaker reply {other:?}"
            ))),
        }
    }

    async fn record_inner(
        &self,
        source: &str,
        outcome: Outcome,
        epoch: u64,
        probe: bool,
    ) -> Result<(), BreakerError> {
        let key = self.key(source)?;
        let code = match outcome {
            Outcome::Success => 0,
            Outcome::Failure => 1,
            Outcome::RateLimited => 2,
            Outcome::ResultInvalid => 3,
            Outcome::SourceDead => 4,
        };
        let threshold = self.thresholds.get(source).copied().unwrap_or(1);
        let c = &self.cfg;
        let args = vec![
            self.now_arg(),
            code.to_string(),
            epoch.to_string(),
            u8::from(probe).to_string(),
            threshold.to_string(),
            c.cooldown_ms.to_string(),
            c.max_cooldown_ms.to_string(),
            c.fail_rate.to_string(),
            c.min_calls.to_string(),
            c.bucket_ms.to_string(),
            KEY_TTL_MS.to_string(),
        ];
        let _: i64 = self
            .redis
            .script(&RECORD, &[key], &args)
            .await
            .map_err(BreakerError::BackendDown)?;
        Ok(())
    }

    async fn release_inner(&self, source: &str, lease: ProbeLease) -> Result<(), BreakerError> {
        let key = self.key(source)?;
        let _: i64 = self
            .redis
            .script(&RELEASE, &[key], &[lease.epoch.to_string()])
            .await
            .map_err(BreakerError::BackendDown)?;
        Ok(())
    }

    /// Read one source's breaker from Redis (tests; `/healthz` reads the refreshed cache).
    pub async fn fetch_snapshot(&self, source: &str) -> Result<BreakerSnapshot, BreakerError> {
        let key = self.key(source)?;
        let args = vec![self.now_arg(), self.cfg.bucket_ms.to_string()];
        let v: Vec<i64> = self
            .redis
            .script(&SNAPSHOT, &[key], &args)
            .await
            .map_err(BreakerError::BackendDown)?;
        let [st, retry, cf, sk, calls, fails] = v.as_slice() else {
            return Err(BreakerError::BackendDown(format!(
                "unexpected snapshot reply {v:?}"
            )));
        };
        let small = |x: &i64| u32::try_from(*x).unwrap_or(0);
        Ok(BreakerSnapshot {
            state: match st {
                0 => BreakerState::Closed,
                1 => BreakerState::Open,
                _ => BreakerState::HalfOpen,
            },
            retry_after_ms: (*retry).max(0) as u64,
            consecutive_failures: small(cf),
            streak: small(sk),
            window_calls: small(calls),
            window_failures: small(fails),
            effective_threshold: self.thresholds.get(source).copied().unwrap_or(1),
        })
    }
}

async fn refresh(me: Weak<RedisBreaker>) {
    loop {
        tokio::time::sleep(SNAPSHOT_EVERY).await;
        let Some(b) = me.upgrade() else { return };
        let names: Vec<Arc<str>> = b.thresholds.keys().cloned().collect();
        for n in names {
            if let Ok(s) = b.fetch_snapshot(&n).await {
                b.snapshots
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(n, s);
            }
        }
    }
}

impl BreakerBackend for RedisBreaker {
    fn try_enter<'a>(&'a self, source: &'a str) -> BoxFuture<'a, Result<Entry, BreakerError>> {
        Box::pin(self.enter(source))
    }

    fn record<'a>(
        &'a self,
        source: &'a str,
        outcome: Outcome,
        epoch: u64,
        probe: bool,
    ) -> BoxFuture<'a, Result<(), BreakerError>> {
        Box::pin(self.record_inner(source, outcome, epoch, probe))
    }

    fn release_probe<'a>(
        &'a self,
        source: &'a str,
        lease: ProbeLease,
    ) -> BoxFuture<'a, Result<(), BreakerError>> {
        Box::pin(self.release_inner(source, lease))
    }

    fn snapshot(&self, source: &str) -> Option<BreakerSnapshot> {
        self.snapshots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(source)
            .cloned()
    }
}
