//! `ResponseCache`: the pipeline's view of the cache. It computes a call's key from what the
//! call contributes ([`CallKey`]) and the scope's precomputed fingerprint, namespace and TTL,
//! encodes answers as JSON (any [`CachedAnswer`]: the cache knows no pipeline type, see
//! docs/cache.md#independence), and guards
//! the backend: every operation is bounded by a short timeout, a failure turns into a miss
//! or a dropped write, and while the backend is failing it is skipped and probed at most once
//! per second. The degradation is logged when it starts and when it ends, and counted for
//! `/healthz`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::config::{CacheBackendKind, ScopeSettings, Settings};
use crate::governance::SharedClock;

use super::{
    CacheBackend, CacheError, KeyInput, MemoryCache, RedisCache, cache_key, model_fingerprint,
};

/// While degraded, the backend is tried again (one probe) after this long.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// How one scope's keys are made.
struct ScopeKeying {
    fingerprint: Value,
    namespace: String,
    ttl: Duration,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    coalesced: AtomicU64,
    stores: AtomicU64,
    errors: AtomicU64,
    skipped: AtomicU64,
    dropped_writes: AtomicU64,
    undecodable: AtomicU64,
}

#[derive(Default)]
struct Degradation {
    /// The failure that started the current episode.
    reason: Option<String>,
    since: Option<Instant>,
    /// No operation is tried before this instant.
    next_probe: Option<Instant>,
}

/// One embedding input as [`ResponseCache::embedding_key`] keys it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingKeyInput<'a> {
    /// A text input.
    Text(&'a str),
    /// A token-id array input.
    Tokens(&'a [u32]),
}

/// What one call contributes to its cache key; the scope adds its model fingerprint and its
/// default namespace.
#[derive(Debug, Clone, Copy)]
pub struct CallKey<'a> {
    /// The request's messages (digested into the key).
    pub messages: &'a [Value],
    /// `x-pgw-cache-namespace`; `None` = the scope's namespace.
    pub namespace: Option<&'a str>,
    /// The virtual key's partition (`team:<id>` / `key:<id>`); `None` for static keys.
    pub partition: Option<&'a str>,
    /// `x-pgw-cache-salt`; `Some("")` is a real salt, different from `None`.
    pub salt: Option<&'a str>,
    /// The sampling overlay (temperature, seed, tools, …).
    pub sampling: &'a Map<String, Value>,
    /// The structured-output strategy of the call, when one was asked for.
    pub structured: Option<&'a str>,
}

/// An answer the cache can hold: encoded as JSON, and stored only when
/// [`is_storable`](Self::is_storable) says so. The pipeline implements it for its answers, so
/// the rule of what may be stored stays with the layer that decides it.
pub trait CachedAnswer: Serialize + DeserializeOwned {
    /// Whether this answer may be stored (complete and successful, never a replay).
    fn is_storable(&self) -> bool;
}

/// The cache as the call pipeline uses it.
pub struct ResponseCache {
    backend: Arc<dyn CacheBackend>,
    prefix: String,
    op_timeout: Duration,
    scopes: HashMap<String, ScopeKeying>,
    counters: Counters,
    degradation: Mutex<Degradation>,
}

/// The cache's state for `/healthz`. Counters count since start-up.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CacheStatus {
    /// `memory` or `redis`.
    pub backend: &'static str,
    /// `ok` or `degraded`.
    pub state: &'static str,
    /// Why the backend is degraded (the first failure of the episode), if it is.
    pub degraded: Option<String>,
    /// Seconds since the degradation started.
    pub degraded_for_s: Option<f64>,
    /// Calls answered from the store.
    pub hits: u64,
    /// Lookups that found nothing (a failed or skipped lookup counts too).
    pub misses: u64,
    /// Calls answered by joining an identical call in flight (single-flight).
    pub coalesced: u64,
    /// Answers written.
    pub stores: u64,
    /// Operations that failed or timed out.
    pub errors: u64,
    /// Operations not tried because the backend was degraded.
    pub skipped: u64,
    /// Writes lost to errors, time-outs or skipping.
    pub dropped_writes: u64,
    /// Stored values that could not be read back (treated as misses, then overwritten).
    pub undecodable: u64,
    /// Bound of one operation, in milliseconds.
    pub op_timeout_ms: u64,
}

impl ResponseCache {
    /// The cache of these settings, or `None` when `PGW_CACHE_BACKEND=none`. Keys start with
    /// `{PGW_REDIS_PREFIX}cache:`; Redis is `PGW_REDIS_URL`, the server of the state backends.
    /// Fails on a scope without a TTL or an unusable Redis URL; a Redis that is down only
    /// degrades.
    pub fn from_settings(
        settings: &Settings,
        clock: SharedClock,
    ) -> Result<Option<Self>, CacheError> {
        let c = &settings.process.cache;
        let backend: Arc<dyn CacheBackend> = match c.backend {
            CacheBackendKind::None => return Ok(None),
            CacheBackendKind::Memory => Arc::new(MemoryCache::new(
                clock,
                c.memory_max_entries,
                c.memory_max_bytes,
            )),
            CacheBackendKind::Redis => {
                let Some(url) = &settings.process.backends.redis_url else {
                    return Err(CacheError::Config {
                        key: "PGW_CACHE_BACKEND".into(),
                        message: "`redis` needs PGW_REDIS_URL".into(),
                    });
                };
                Arc::new(RedisCache::new(url)?)
            }
        };
        let prefix = &settings.process.backends.redis_prefix;
        Self::new(backend, prefix, c.op_timeout, &settings.scopes).map(Some)
    }

    /// A cache over `backend` for `scopes`; keys start with `{redis_prefix}cache:`. Every
    /// scope needs a TTL.
    pub fn new(
        backend: Arc<dyn CacheBackend>,
        redis_prefix: &str,
        op_timeout: Duration,
        scopes: &[ScopeSettings],
    ) -> Result<Self, CacheError> {
        let mut keyed = HashMap::new();
        for s in scopes {
            let ttl = match s.cache.ttl {
                Some(t) if !t.is_zero() => t,
                _ => {
                    return Err(CacheError::Config {
                        key: format!("{}__CACHE__TTL_S", s.name),
                        message: "required (> 0) when the response cache is on".into(),
                    });
                }
            };
            keyed.insert(
                s.name.to_string(),
                ScopeKeying {
                    fingerprint: model_fingerprint(&s.sources),
                    namespace: s
                        .cache
                        .namespace
                        .clone()
                        .unwrap_or_else(|| s.name.to_string()),
                    ttl,
                },
            );
        }
        Ok(Self {
            backend,
            prefix: redis_prefix.to_string(),
            op_timeout,
            scopes: keyed,
            counters: Counters::default(),
            degradation: Mutex::new(Degradation::default()),
        })
    }

    /// The key of the call `call` in `scope`, or `None` for a scope the cache does not know.
    pub fn key(&self, scope: &str, call: &CallKey<'_>) -> Option<String> {
        let s = self.scopes.get(scope)?;
        Some(cache_key(
            &self.prefix,
            &KeyInput {
                fingerprint: &s.fingerprint,
                messages: call.messages,
                namespace: call.namespace.unwrap_or(&s.namespace),
                partition: call.partition,
                salt: call.salt,
                sampling: call.sampling,
                structured: call.structured,
            },
        ))
    }

    /// The stored answer under `key`, if any. Never fails: an error, a time-out, a skipped
    /// lookup or an unreadable value is a miss.
    pub async fn lookup<A: CachedAnswer>(&self, key: &str) -> Option<A> {
        let found = self.guarded("get", self.backend.get(key)).await.flatten();
        let Some(bytes) = found else {
            self.counters.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        match serde_json::from_slice::<A>(&bytes) {
            Ok(r) => {
                self.counters.hits.fetch_add(1, Ordering::Relaxed);
                Some(r)
            }
            Err(e) => {
                tracing::debug!(error = %e, "cached value unreadable; treated as a miss");
                self.counters.undecodable.fetch_add(1, Ordering::Relaxed);
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Store `answer` under `key` for the scope's TTL if it
    /// [`is_storable`](CachedAnswer::is_storable). Never fails: a failed write is dropped and
    /// counted.
    pub async fn store<A: CachedAnswer>(&self, scope: &str, key: &str, answer: &A) {
        let Some(s) = self.scopes.get(scope) else {
            return;
        };
        if !answer.is_storable() {
            return;
        }
        let bytes = match serde_json::to_vec(answer) {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                tracing::warn!(error = %e, "answer not cacheable: cannot encode it");
                return;
            }
        };
        match self
            .guarded("set", self.backend.set(key, bytes, s.ttl))
            .await
        {
            Some(()) => {
                self.counters.stores.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                self.counters.dropped_writes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The key of one embedding input in `scope`: the canonical SHA-256 of `fingerprint`
    /// (the [`model_fingerprint`] of the sources that embed it), the input, the requested
    /// `dimensions`, the namespace and the salt (the same rules as a chat key), or `None` for
    /// an unknown scope. A text is keyed under `input` and token ids under `input_tokens`,
    /// so the ids `[1, 2]` never share an entry with the text `"[1,2]"`.
    // One argument per part of the key material, as `KeyInput` names them for a chat key.
    #[allow(clippy::too_many_arguments)]
    pub fn embedding_key(
        &self,
        scope: &str,
        fingerprint: &serde_json::Value,
        input: EmbeddingKeyInput<'_>,
        dimensions: Option<u32>,
        namespace: Option<&str>,
        partition: Option<&str>,
        salt: Option<&str>,
    ) -> Option<String> {
        let s = self.scopes.get(scope)?;
        let mut m = serde_json::Map::new();
        m.insert("kind".into(), "embedding".into());
        m.insert("model".into(), fingerprint.clone());
        match input {
            EmbeddingKeyInput::Text(text) => m.insert("input".into(), text.into()),
            EmbeddingKeyInput::Tokens(ids) => m.insert("input_tokens".into(), ids.into()),
        };
        m.insert("namespace".into(), namespace.unwrap_or(&s.namespace).into());
        if let Some(p) = partition {
            m.insert("partition".into(), p.into());
        }
        if let Some(salt) = salt {
            m.insert("salt".into(), salt.into());
        }
        if let Some(d) = dimensions {
            m.insert("dimensions".into(), d.into());
        }
        Some(format!(
            "{}cache:{}",
            self.prefix,
            super::canonical_sha256(&serde_json::Value::Object(m))
        ))
    }

    /// The vector stored under `key` (little-endian f32 bytes), if any. Never fails: an
    /// error, a time-out or an unreadable value is a miss.
    pub async fn lookup_vector(&self, key: &str) -> Option<Vec<f32>> {
        let found = self.guarded("get", self.backend.get(key)).await.flatten();
        match found {
            Some(b) if !b.is_empty() && b.len() % 4 == 0 => {
                self.counters.hits.fetch_add(1, Ordering::Relaxed);
                Some(
                    b.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                )
            }
            Some(_) => {
                self.counters.undecodable.fetch_add(1, Ordering::Relaxed);
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
            None => {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Store one embedding vector under `key` for the scope's TTL. Never fails: a failed
    /// write is dropped and counted.
    pub async fn store_vector(&self, scope: &str, key: &str, vector: &[f32]) {
        let Some(s) = self.scopes.get(scope) else {
            return;
        };
        let bytes: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
        match self
            .guarded("set", self.backend.set(key, Bytes::from(bytes), s.ttl))
            .await
        {
            Some(()) => {
                self.counters.stores.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                self.counters.dropped_writes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Count a call answered by joining an identical call in flight.
    pub fn note_coalesced(&self) {
        self.counters.coalesced.fetch_add(1, Ordering::Relaxed);
    }

    /// The cache's state for `/healthz`.
    pub fn status(&self) -> CacheStatus {
        let d = self.lock_degradation();
        let c = &self.counters;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStatus {
            backend: self.backend.name(),
            state: if d.reason.is_some() { "degraded" } else { "ok" },
            degraded: d.reason.clone(),
            degraded_for_s: d.since.map(|s| s.elapsed().as_secs_f64()),
            hits: n(&c.hits),
            misses: n(&c.misses),
            coalesced: n(&c.coalesced),
            stores: n(&c.stores),
            errors: n(&c.errors),
            skipped: n(&c.skipped),
            dropped_writes: n(&c.dropped_writes),
            undecodable: n(&c.undecodable),
            op_timeout_ms: self.op_timeout.as_millis() as u64,
        }
    }

    fn lock_degradation(&self) -> std::sync::MutexGuard<'_, Degradation> {
        self.degradation.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run one backend operation under the timeout and the degradation rules.
    async fn guarded<T>(
        &self,
        op: &'static str,
        fut: impl std::future::Future<Output = Result<T, CacheError>>,
    ) -> Option<T> {
        {
            let d = self.lock_degradation();
            if d.next_probe.is_some_and(|t| Instant::now() < t) {
                self.counters.skipped.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
        let outcome = match tokio::time::timeout(self.op_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(CacheError::Timeout {
                op,
                after_ms: self.op_timeout.as_millis() as u64,
            }),
        };
        match outcome {
            Ok(v) => {
                self.recovered();
                Some(v)
            }
            Err(e) => {
                self.failed(&e);
                None
            }
        }
    }

    fn failed(&self, e: &CacheError) {
        self.counters.errors.fetch_add(1, Ordering::Relaxed);
        let mut d = self.lock_degradation();
        let now = Instant::now();
        d.next_probe = Some(now + PROBE_INTERVAL);
        if d.reason.is_none() {
            tracing::warn!(
                backend = self.backend.name(),
                error = %e,
                "response cache degraded: lookups miss and answers are not stored until it recovers"
            );
            d.reason = Some(e.to_string());
            d.since = Some(now);
        }
    }

    fn recovered(&self) {
        let mut d = self.lock_degradation();
        if let Some(reason) = d.reason.take() {
            let after = d.since.map(|s| s.elapsed()).unwrap_or_default();
            tracing::info!(
                backend = self.backend.name(),
                degraded_for = ?after,
                first_error = %reason,
                "response cache recovered"
            );
        }
        d.since = None;
        d.next_probe = None;
    }
}
