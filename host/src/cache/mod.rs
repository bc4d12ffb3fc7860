//! The response cache (docs/cache.md): the key, the storage backends
//! behind [`CacheBackend`] (in-process [`MemoryCache`], shared [`RedisCache`]), the guard
//! that keeps a slow or dead backend from ever failing or stalling a call
//! ([`ResponseCache`]), and the single-flight that coalesces identical calls in flight
//! ([`SingleFlight`]). The pipeline's cache layer (`pipeline/cache_layer/`) decides what
//! is read, replayed and stored.
//!
//! **Invariant:** a cache failure is never a call failure — reads miss, writes are dropped,
//! `/healthz` shows the degradation.

mod canonical;
mod flight;
mod key;
mod memory;
mod redis;
mod response_cache;

use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;

pub use canonical::{canonical_json, canonical_sha256, write_canonical};
pub use flight::{Flight, Publisher, SingleFlight};
pub use key::{KeyInput, cache_key, digest_messages, digest_part, key_material, model_fingerprint};
pub use memory::MemoryCache;
pub use redis::RedisCache;
pub use response_cache::{CacheStatus, CachedAnswer, CallKey, EmbeddingKeyInput, ResponseCache};

/// Why a cache operation failed. The pipeline never shows these to a caller: it treats them
/// as a miss (read) or a dropped write.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A TTL of zero was given; entries must expire.
    #[error("the TTL of a cache entry must be > 0")]
    ZeroTtl,
    /// The Redis server refused, dropped or could not be reached.
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// The operation did not finish within the bound.
    #[error("cache {op} timed out after {after_ms} ms")]
    Timeout {
        /// `get` or `set`.
        op: &'static str,
        /// The bound that passed, in milliseconds.
        after_ms: u64,
    },
    /// A stored value could not be read back (another format, corruption).
    #[error("stored value unreadable: {0}")]
    Decode(String),
    /// The backend cannot be set up from this configuration.
    #[error("{key}: {message}")]
    Config {
        /// The configuration key at fault.
        key: String,
        message: String,
    },
}

/// Where cache entries live. Every operation is async and may fail; callers bound it with a
/// timeout (see [`ResponseCache`]). Keys are complete (prefix included).
pub trait CacheBackend: Send + Sync + 'static {
    /// Short name for `/healthz`: `memory` or `redis`.
    fn name(&self) -> &'static str;

    /// The value under `key`; `None` when absent or expired.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Bytes>, CacheError>>;

    /// Store `value` under `key` for `ttl` (> 0; below 1 ms counts as 1 ms), replacing any
    /// earlier value. A backend may decline to keep a value larger than its bounds; a later
    /// `get` then misses.
    fn set<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), CacheError>>;
}

/// A TTL in whole milliseconds, at least 1.
pub(crate) fn ttl_ms(ttl: Duration) -> Result<u64, CacheError> {
    if ttl.is_zero() {
        return Err(CacheError::ZeroTtl);
    }
    Ok(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
}
