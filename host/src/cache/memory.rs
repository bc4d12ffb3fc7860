//! The in-process cache backend: a map bounded by entries and by bytes (least recently used
//! evicted first), with per-entry TTL on the injected clock so tests move time by hand.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;

use crate::governance::SharedClock;

use super::{CacheBackend, CacheError, ttl_ms};

/// In-process cache entries, bounded by count and by size. The size of an entry is its key
/// length plus its value length, in bytes.
pub struct MemoryCache {
    clock: SharedClock,
    max_entries: usize,
    max_bytes: usize,
    state: Mutex<State>,
}

struct Entry {
    value: Bytes,
    /// Clock time (ms) at which the entry stops being served.
    expires_ms: u64,
    /// Position in the LRU order.
    tick: u64,
}

#[derive(Default)]
struct State {
    map: HashMap<Arc<str>, Entry>,
    /// Least recently used first.
    lru: BTreeMap<u64, Arc<str>>,
    /// Soonest expiry first.
    expiry: BTreeSet<(u64, Arc<str>)>,
    next_tick: u64,
    bytes: usize,
}

impl State {
    fn remove(&mut self, key: &str) {
        if let Some((k, e)) = self.map.remove_entry(key) {
            self.lru.remove(&e.tick);
            self.expiry.remove(&(e.expires_ms, k.clone()));
            self.bytes = self.bytes.saturating_sub(k.len() + e.value.len());
        }
    }

    fn purge_expired(&mut self, now_ms: u64) {
        while let Some((exp, key)) = self.expiry.first().cloned() {
            if exp > now_ms {
                break;
            }
            self.remove(&key);
        }
    }

    fn tick(&mut self) -> u64 {
        self.next_tick += 1;
        self.next_tick
    }
}

impl MemoryCache {
    /// A cache holding at most `max_entries` entries and `max_bytes` bytes (keys and values),
    /// with expiry measured on `clock`.
    pub fn new(clock: SharedClock, max_entries: usize, max_bytes: usize) -> Self {
        Self {
            clock,
            max_entries,
            max_bytes,
            state: Mutex::new(State::default()),
        }
    }

    /// Entries currently held (expired ones included until they are purged).
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes currently held (keys plus values).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps inconsistent in a way that
        // matters more than losing the cache, so keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get_now(&self, key: &str) -> Option<Bytes> {
        let now = self.clock.now_ms();
        let mut st = self.lock();
        let (expires_ms, old_tick) = match st.map.get(key) {
            None => return None,
            Some(e) => (e.expires_ms, e.tick),
        };
        if expires_ms <= now {
            st.remove(key);
            return None;
        }
        let tick = st.tick();
        let k = st.lru.remove(&old_tick)?;
        st.lru.insert(tick, k);
        let e = st.map.get_mut(key)?;
        e.tick = tick;
        Some(e.value.clone())
    }

    fn set_now(&self, key: &str, value: Bytes, ttl: Duration) -> Result<(), CacheError> {
        let ttl = ttl_ms(ttl)?;
        let now = self.clock.now_ms();
        let size = key.len() + value.len();
        let mut st = self.lock();
        st.remove(key);
        if self.max_entries == 0 || size > self.max_bytes {
            return Ok(());
        }
        st.purge_expired(now);
        while st.map.len() >= self.max_entries || st.bytes + size > self.max_bytes {
            let Some((_, oldest)) = st.lru.first_key_value() else {
                break;
            };
            let oldest = oldest.clone();
            st.remove(&oldest);
        }
        let k: Arc<str> = Arc::from(key);
        let tick = st.tick();
        let expires_ms = now.saturating_add(ttl);
        st.lru.insert(tick, k.clone());
        st.expiry.insert((expires_ms, k.clone()));
        st.bytes += size;
        st.map.insert(
            k,
            Entry {
                value,
                expires_ms,
                tick,
            },
        );
        Ok(())
    }
}

impl CacheBackend for MemoryCache {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Bytes>, CacheError>> {
        let v = self.get_now(key);
        Box::pin(async move { Ok(v) })
    }

    fn set<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), CacheError>> {
        let r = self.set_now(key, value, ttl);
        Box::pin(async move { r })
    }
}
