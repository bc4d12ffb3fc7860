//! The shared cache backend on Redis (`PGW_CACHE_BACKEND=redis`): `SET key value PX ttl` and
//! `GET key` over one multiplexed `ConnectionManager`, created on first use (a Redis that is
//! down at start-up only degrades the cache) and reconnecting by itself afterwards.

use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use bytes::Bytes;
use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;

use super::{CacheBackend, CacheError, ttl_ms};

/// Reconnect tuning: attempts after a lost connection, first delay and cap (ms). Short, so
/// a restarted Redis is used again within about a second; every caller is bounded by the
/// cache's own operation timeout anyway.
const RECONNECT_RETRIES: usize = 2;
const RECONNECT_FACTOR_MS: u64 = 50;
const RECONNECT_MAX_DELAY_MS: u64 = 500;
/// One TCP connect attempt and one command response, at most.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Cache entries in Redis.
pub struct RedisCache {
    client: ::redis::Client,
    conn: OnceCell<ConnectionManager>,
}

impl RedisCache {
    /// A backend for `url` (`redis://`, `rediss://`, `unix://`). Only the URL is checked here;
    /// the connection is made on first use.
    pub fn new(url: &str) -> Result<Self, CacheError> {
        let client = ::redis::Client::open(url).map_err(|e| CacheError::Config {
            key: "PGW_REDIS_URL".into(),
            // The kind only: the full message may echo the URL and its password.
            message: format!("not a usable Redis URL ({:?})", e.kind()),
        })?;
        Ok(Self {
            client,
            conn: OnceCell::new(),
        })
    }

    async fn conn(&self) -> Result<ConnectionManager, CacheError> {
        let cm = self
            .conn
            .get_or_try_init(|| async {
                let cfg = ConnectionManagerConfig::new()
                    .set_number_of_retries(RECONNECT_RETRIES)
                    .set_factor(RECONNECT_FACTOR_MS)
                    .set_max_delay(RECONNECT_MAX_DELAY_MS)
                    .set_connection_timeout(CONNECT_TIMEOUT)
                    .set_response_timeout(RESPONSE_TIMEOUT);
                ConnectionManager::new_with_config(self.client.clone(), cfg).await
            })
            .await?;
        Ok(cm.clone())
    }
}

impl CacheBackend for RedisCache {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Bytes>, CacheError>> {
        Box::pin(async move {
            let mut c = self.conn().await?;
            let v: Option<Vec<u8>> = ::redis::cmd("GET").arg(key).query_async(&mut c).await?;
            Ok(v.map(Bytes::from))
        })
    }

    fn set<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), CacheError>> {
        Box::pin(async move {
            let px = ttl_ms(ttl)?;
            let mut c = self.conn().await?;
            let () = ::redis::cmd("SET")
                .arg(key)
                .arg(value.as_ref())
                .arg("PX")
                .arg(px)
                .query_async(&mut c)
                .await?;
            Ok(())
        })
    }
}
