//! The shared budget store: every replica that uses the same Redis and prefix shares each
//! budget. Each operation is one Lua script (`reserve.lua`, `settle.lua`, `seed.lua`), so a
//! reservation's check and its charges across all lines are atomic, and the period is
//! computed inside the script from the server's `TIME` — replicas never compare clocks —
//! unless a test injects one. Keys: `{prefix}budget:{bucket}:{period start ms}`, integer
//! micro-USD, expiring a day after the period ends (a total budget's never expires). Every
//! round trip is bounded (`redis_conn::OP_TIMEOUT`); an unanswered one is `BackendDown` and
//! the call fails closed.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::governance::SharedClock;
use crate::governance::redis_conn::RedisHandle;

use super::{
    BudgetAdmission, BudgetBackend, BudgetDenial, BudgetError, BudgetLine, Held, warnings, window,
};

static RESERVE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("reserve.lua")));
static SETTLE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("settle.lua")));
static SEED: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("seed.lua")));

const DAY_MS: i64 = 86_400_000;

/// Budgets in Redis (`PGW_LIMITER_BACKEND=redis`).
pub struct RedisBudgets {
    redis: Arc<RedisHandle>,
    /// `None`: the server's clock; `Some`: an injected one (tests).
    clock: Option<SharedClock>,
}

impl std::fmt::Debug for RedisBudgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBudgets").finish_non_exhaustive()
    }
}

impl RedisBudgets {
    /// Budgets on the server's clock.
    pub fn new(redis: Arc<RedisHandle>) -> Self {
        Self { redis, clock: None }
    }

    /// Budgets whose periods follow `clock` instead of the server's (tests).
    pub fn with_clock(redis: Arc<RedisHandle>, clock: SharedClock) -> Self {
        Self {
            redis,
            clock: Some(clock),
        }
    }

    /// The scripts' `now` argument: the injected clock's Unix ms, or `''` for the server's
    /// `TIME`.
    fn now_arg(&self) -> String {
        self.clock
            .as_ref()
            .map_or(String::new(), |c| c.unix_ms().to_string())
    }

    fn key(&self, bucket: &str, start: i64) -> String {
        format!("{}budget:{bucket}:{start}", self.redis.prefix)
    }

    async fn run(
        &self,
        lines: &[BudgetLine],
        amount: u64,
        dry: bool,
    ) -> Result<Vec<i64>, BudgetError> {
        let mut args = Vec::with_capacity(4 + 3 * lines.len());
        args.push(self.now_arg());
        args.push(amount.to_string());
        args.push(if dry { "1" } else { "0" }.to_string());
        args.push(self.redis.prefix.clone());
        for l in lines {
            args.push(l.bucket.to_string());
            args.push(l.period.as_str().to_string());
            args.push(l.limit_micro_usd.to_string());
        }
        self.redis
            .script::<Vec<i64>>(&RESERVE, &[], &args)
            .await
            .map_err(BudgetError::BackendDown)
    }
}

fn garbage(v: &[i64]) -> BudgetError {
    BudgetError::BackendDown(format!("reserve.lua answered {v:?}"))
}

impl BudgetBackend for RedisBudgets {
    fn reserve<'a>(
        &'a self,
        lines: &'a [BudgetLine],
        amount_micro_usd: u64,
    ) -> BoxFuture<'a, Result<BudgetAdmission, BudgetError>> {
        Box::pin(async move {
            let v = self.run(lines, amount_micro_usd, false).await?;
            match v.first() {
                Some(1) if v.len() == 1 + 2 * lines.len() => {
                    let mut charges = Vec::with_capacity(lines.len());
                    let mut totals = Vec::with_capacity(lines.len());
                    for (i, l) in lines.iter().enumerate() {
                        charges.push((l.bucket.clone(), v[1 + 2 * i]));
                        totals.push(u64::try_from(v[2 + 2 * i]).unwrap_or(0));
                    }
                    Ok(BudgetAdmission::Granted {
                        held: Held {
                            charges,
                            amount_micro_usd,
                        },
                        warnings: warnings(lines, &totals),
                    })
                }
                Some(0) if v.len() == 4 => {
                    let idx = usize::try_from(v[1] - 1).map_err(|_| garbage(&v))?;
                    let l = lines.get(idx).ok_or_else(|| garbage(&v))?;
                    Ok(BudgetAdmission::Denied(BudgetDenial {
                        bucket: l.bucket.clone(),
                        period: l.period,
                        limit_micro_usd: l.limit_micro_usd,
                        total_micro_usd: u64::try_from(v[2]).unwrap_or(0),
                        resets_at_ms: (v[3] >= 0).then_some(v[3]),
                    }))
                }
                _ => Err(garbage(&v)),
            }
        })
    }

    fn settle<'a>(
        &'a self,
        held: &'a Held,
        actual_micro_usd: u64,
    ) -> BoxFuture<'a, Result<(), BudgetError>> {
        Box::pin(async move {
            let delta = i128::from(actual_micro_usd) - i128::from(held.amount_micro_usd);
            if delta == 0 || held.charges.is_empty() {
                return Ok(());
            }
            let keys: Vec<String> = held.charges.iter().map(|(b, s)| self.key(b, *s)).collect();
            self.redis
                .script::<i64>(&SETTLE, &keys, &[delta.to_string()])
                .await
                .map(|_| ())
                .map_err(BudgetError::BackendDown)
        })
    }

    fn totals<'a>(
        &'a self,
        lines: &'a [BudgetLine],
    ) -> BoxFuture<'a, Result<Vec<u64>, BudgetError>> {
        Box::pin(async move {
            let v = self.run(lines, 0, true).await?;
            if v.first() != Some(&1) || v.len() != 1 + 2 * lines.len() {
                return Err(garbage(&v));
            }
            Ok((0..lines.len())
                .map(|i| u64::try_from(v[2 + 2 * i]).unwrap_or(0))
                .collect())
        })
    }

    fn seed<'a>(
        &'a self,
        line: &'a BudgetLine,
        period_start_ms: i64,
        total_micro_usd: u64,
    ) -> BoxFuture<'a, Result<(), BudgetError>> {
        Box::pin(async move {
            let expiry = window(line.period, period_start_ms)
                .resets_at_ms
                .map_or(-1, |r| r + DAY_MS);
            self.redis
                .script::<i64>(
                    &SEED,
                    &[self.key(&line.bucket, period_start_ms)],
                    &[
                        self.now_arg(),
                        total_micro_usd.to_string(),
                        expiry.to_string(),
                    ],
                )
                .await
                .map(|_| ())
                .map_err(BudgetError::BackendDown)
        })
    }
}
