//! The Redis limiter backend (`PGW_LIMITER_BACKEND=redis`): the same six gates as the memory
//! backend, shared by every gateway process. One atomic Lua script per admission
//! (`acquire.lua`) and per settlement (`settle.lua`); windows and leases on the Redis server
//! clock (`TIME`) unless a test injects a clock; every key carries a TTL.
//!
//! Key layout under `{prefix}lim:{scope}:` — `conc`, `rpm`, `tpm`, `tok`, `sum` (global) and
//! the same with `:{source}` appended, `seq`, and `p:{permit}` (the permit's own lease key).
//! A permit id is `seq × 1024 + source index`, so settling needs no process-local table.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::Notify;

use super::{
    Admission, Gate, GateUsage, LimiterBackend, LimiterConfig, LimiterError, LimiterSnapshot,
    Limits, PermitId,
};
use crate::governance::SharedClock;
use crate::governance::redis_conn::RedisHandle;

static ACQUIRE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("acquire.lua")));
static SETTLE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("settle.lua")));
static USAGE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("usage.lua")));

/// Most sources per scope (the source index is folded into the permit id).
const MAX_SOURCES: usize = 1024;
/// How often the `/healthz` snapshot is refreshed from Redis.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(500);

/// A scope's limiter state in Redis.
pub struct RedisLimiter {
    redis: Arc<RedisHandle>,
    base: String,
    window_ms: u64,
    lease_ttl_ms: u64,
    global_limits: Limits,
    sources: Vec<(Arc<str>, Limits)>,
    /// `None`: the Redis server clock; `Some`: an injected clock (tests).
    clock: Option<SharedClock>,
    released: Arc<Notify>,
    settle_failures: AtomicU64,
    snapshot: Mutex<LimiterSnapshot>,
}

impl RedisLimiter {
    /// A limiter for `scope` with these gates. `clock`: `None` in production (server time).
    /// Starts a background refresh of the `/healthz` snapshot.
    pub fn new(
        redis: Arc<RedisHandle>,
        scope: &str,
        config: LimiterConfig,
        clock: Option<SharedClock>,
    ) -> Result<Arc<Self>, LimiterError> {
        if config.sources.len() > MAX_SOURCES {
            return Err(LimiterError::BackendDown(format!(
                "scope {scope} has more than {MAX_SOURCES} sources"
            )));
        }
        let usage0 = |limits: Limits| GateUsage {
            in_flight: 0,
            requests_in_window: 0,
            tokens_in_window: 0,
            limits,
        };
        let snapshot = LimiterSnapshot {
            window_ms: config.window_ms.max(1),
            global: usage0(config.global),
            sources: config
                .sources
                .iter()
                .map(|(n, l)| (n.clone(), usage0(*l)))
                .collect(),
            expired_leases: 0,
            settle_failures: 0,
        };
        let me = Arc::new(Self {
            base: format!("{}lim:{scope}:", redis.prefix),
            redis,
            window_ms: config.window_ms.max(1),
            lease_ttl_ms: config.lease_ttl_ms.max(1),
            global_limits: config.global,
            sources: config.sources,
            clock,
            released: Arc::new(Notify::new()),
            settle_failures: AtomicU64::new(0),
            snapshot: Mutex::new(snapshot),
        });
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            h.spawn(refresh(Arc::downgrade(&me)));
        }
        Ok(me)
    }

    fn now_arg(&self) -> String {
        self.clock
            .as_ref()
            .map(|c| c.now_ms().max(1).to_string())
            .unwrap_or_else(|| "0".into())
    }

    fn source_index(&self, source: &str) -> Option<usize> {
        self.sources.iter().position(|(n, _)| &**n == source)
    }

    fn keys(&self, si: usize) -> [String; 6] {
        let s = &self.sources[si].0;
        let b = &self.base;
        [
            format!("{b}conc"),
            format!("{b}conc:{s}"),
            format!("{b}tok"),
            format!("{b}tok:{s}"),
            format!("{b}sum"),
            format!("{b}sum:{s}"),
        ]
    }

    /// Keys expire after the longer of the window and the lease, plus a margin.
    fn key_ttl_ms(&self) -> u64 {
        self.window_ms.max(self.lease_ttl_ms) + 60_000
    }

    async fn acquire(&self, source: &str, est: u64) -> Result<Admission, LimiterError> {
        let si = self
            .source_index(source)
            .ok_or_else(|| LimiterError::UnknownSource(source.to_string()))?;
        let s = &self.sources[si];
        let b = &self.base;
        let name = &s.0;
        let keys = vec![
            format!("{b}conc"),
            format!("{b}conc:{name}"),
            format!("{b}rpm"),
            format!("{b}rpm:{name}"),
            format!("{b}tpm"),
            format!("{b}tpm:{name}"),
            format!("{b}tok"),
            format!("{b}tok:{name}"),
            format!("{b}sum"),
            format!("{b}sum:{name}"),
            format!("{b}seq"),
            format!("{b}p:"),
        ];
        let g = self.global_limits;
        let l = s.1;
        let args: Vec<String> = [
            self.now_arg(),
            self.window_ms.to_string(),
            self.lease_ttl_ms.to_string(),
            est.to_string(),
            g.max_concurrency.to_string(),
            l.max_concurrency.to_string(),
            g.rpm.to_string(),
            l.rpm.to_string(),
            g.tpm.to_string(),
            l.tpm.to_string(),
            self.key_ttl_ms().to_string(),
            si.to_string(),
        ]
        .into();
        let out: Vec<i64> = self
            .redis
            .script(&ACQUIRE, &keys, &args)
            .await
            .map_err(LimiterError::BackendDown)?;
        match out.as_slice() {
            [1, id] => Ok(Admission::Granted(PermitId(*id as u64))),
            [0, gate, retry] => {
                let gate = match gate {
                    1 => Gate::GlobalConcurrency,
                    2 => Gate::SourceConcurrency,
                    3 => Gate::GlobalRpm,
                    4 => Gate::SourceRpm,
                    5 => Gate::GlobalTpm,
                    _ => Gate::SourceTpm,
                };
                Ok(Admission::Denied {
                    gate,
                    retry_after_ms: (*retry >= 0).then_some(*retry as u64),
                })
            }
            other => Err(LimiterError::BackendDown(format!(
                "unexpected acquire reply {other:?}"
            ))),
        }
    }

    async fn settle_inner(&self, permit: PermitId, actual: u64) -> Result<(), LimiterError> {
        let si = (permit.0 % MAX_SOURCES as u64) as usize;
        if si >= self.sources.len() {
            return Ok(()); // not one of ours: nothing to settle
        }
        let [cg, cs, tg, ts, sg, ss] = self.keys(si);
        let keys = vec![
            cg,
            cs,
            tg,
            ts,
            sg,
            ss,
            format!("{}p:{}", self.base, permit.0),
        ];
        let args = vec![permit.0.to_string(), actual.to_string(), self.now_arg()];
        let _: i64 = self
            .redis
            .script(&SETTLE, &keys, &args)
            .await
            .map_err(LimiterError::BackendDown)?;
        self.released.notify_waiters();
        Ok(())
    }

    async fn usage(&self, suffix: &str, limits: Limits) -> Option<GateUsage> {
        let b = &self.base;
        let keys = [
            format!("{b}conc{suffix}"),
            format!("{b}rpm{suffix}"),
            format!("{b}tpm{suffix}"),
            format!("{b}tok{suffix}"),
        ];
        let args = vec![self.now_arg(), self.window_ms.to_string()];
        let v: Vec<i64> = self.redis.script(&USAGE, &keys, &args).await.ok()?;
        match v.as_slice() {
            [f, r, t] => Some(GateUsage {
                in_flight: u32::try_from(*f).unwrap_or(0),
                requests_in_window: u64::try_from(*r).unwrap_or(0),
                tokens_in_window: u64::try_from(*t).unwrap_or(0),
                limits,
            }),
            _ => None,
        }
    }

    /// Read the current usage from Redis (also used by tests; `/healthz` reads the cache).
    pub async fn fetch_snapshot(&self) -> Option<LimiterSnapshot> {
        let global = self.usage("", self.global_limits).await?;
        let mut sources = Vec::new();
        for (name, limits) in &self.sources {
            let u = self.usage(&format!(":{name}"), *limits).await?;
            sources.push((name.clone(), u));
        }
        Some(LimiterSnapshot {
            window_ms: self.window_ms,
            global,
            sources,
            expired_leases: 0,
            settle_failures: self.settle_failures.load(Ordering::Relaxed),
        })
    }
}

async fn refresh(me: Weak<RedisLimiter>) {
    loop {
        tokio::time::sleep(SNAPSHOT_EVERY).await;
        let Some(l) = me.upgrade() else { return };
        if let Some(s) = l.fetch_snapshot().await {
            *l.snapshot.lock().unwrap_or_else(PoisonError::into_inner) = s;
        }
    }
}

impl LimiterBackend for RedisLimiter {
    fn try_acquire<'a>(
        &'a self,
        source: &'a str,
        est_tokens: u64,
    ) -> BoxFuture<'a, Result<Admission, LimiterError>> {
        Box::pin(self.acquire(source, est_tokens))
    }

    fn settle(
        &self,
        permit: PermitId,
        actual_tokens: u64,
    ) -> BoxFuture<'_, Result<(), LimiterError>> {
        Box::pin(self.settle_inner(permit, actual_tokens))
    }

    fn record_settle_failure(&self) {
        self.settle_failures.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> LimiterSnapshot {
        let mut s = self
            .snapshot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        s.settle_failures = self.settle_failures.load(Ordering::Relaxed);
        s
    }

    fn released(&self) -> Arc<Notify> {
        self.released.clone()
    }
}
