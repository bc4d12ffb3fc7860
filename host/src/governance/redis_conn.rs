//! The shared Redis connection of the governance backends: a lazily created, auto-reconnecting
//! `ConnectionManager`, and every operation bounded by a short timeout so a slow or dead
//! Redis turns into a typed error at once (admission then fails closed,
//! docs/errors.md#degradation).

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

/// Longest a governance round trip may take before it counts as "Redis down".
pub const OP_TIMEOUT: Duration = Duration::from_millis(500);

/// A handle on one Redis server, shared by the limiters and breakers of all scopes.
pub struct RedisHandle {
    client: redis::Client,
    manager: OnceCell<ConnectionManager>,
    /// Key prefix (`PGW_REDIS_PREFIX`, default `pgw:`).
    pub prefix: String,
}

impl std::fmt::Debug for RedisHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisHandle")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisHandle {
    /// A handle on `url` (no connection is made until the first operation). Fails only on
    /// an unparseable URL.
    pub fn new(url: &str, prefix: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| format!("PGW_REDIS_URL: {e}"))?;
        Ok(Self {
            client,
            manager: OnceCell::new(),
            prefix: prefix.to_string(),
        })
    }

    async fn connection(&self) -> Result<ConnectionManager, String> {
        let m = self
            .manager
            .get_or_try_init(|| async {
                let cfg = ConnectionManagerConfig::new()
                    .set_connection_timeout(OP_TIMEOUT)
                    .set_response_timeout(OP_TIMEOUT)
                    .set_number_of_retries(1)
                    .set_max_delay(1000);
                self.client
                    .get_connection_manager_with_config(cfg)
                    .await
                    .map_err(|e| e.to_string())
            })
            .await?;
        Ok(m.clone())
    }

    /// Run a Lua script with keys and args, bounded by [`OP_TIMEOUT`].
    pub async fn script<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        keys: &[String],
        args: &[String],
    ) -> Result<T, String> {
        let fut = async {
            let mut conn = self.connection().await?;
            let mut inv = script.prepare_invoke();
            for k in keys {
                inv.key(k);
            }
            for a in args {
                inv.arg(a);
            }
            inv.invoke_async::<T>(&mut conn)
                .await
                .map_err(|e| e.to_string())
        };
        match tokio::time::timeout(OP_TIMEOUT, fut).await {
            Ok(r) => r,
            Err(_) => Err(format!("redis did not answer within {OP_TIMEOUT:?}")),
        }
    }
}
