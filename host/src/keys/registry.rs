//! The in-process view of every key and team that calls authenticate against
//! (docs/keys.md#refresh-and-revocation-latency): loaded at start, refreshed every
//! `PGW_KEYS_REFRESH_MS` from the rows written since the last refresh (minus a 2 s overlap
//! for commits that land late or replicas whose clocks differ), and updated at once by this
//! process's own admin writes. Readers never lock: the view is an `ArcSwap`, replaced whole
//! by the (rare) writers.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::KeysError;
use super::model::{KeyState, Principal, Team, VirtualKey};
use super::secret::parse_token;
use super::store::{KeyStore, StoredKey};
use crate::config::Settings;
use crate::governance::SharedClock;

/// How far before the watermark a refresh reads again: a row committed late, or stamped by
/// a replica whose clock is behind, is still seen. Re-read rows that did not change are
/// skipped.
const REFRESH_OVERLAP_MS: i64 = 2_000;

/// The outcome of [`KeyRegistry::authenticate`].
#[derive(Debug, Clone, PartialEq)]
pub enum Authn {
    /// The token is not of the `sk-pgw-` form: the static keys decide.
    NotVirtual,
    /// A known, active, unexpired key whose secret matches.
    Valid(Arc<Principal>),
    /// `"invalid API key"` (unknown id, wrong secret, malformed), `"API key revoked"` or
    /// `"API key expired"`. The last two are only said to a caller holding the right secret.
    Refused(&'static str),
}

/// One loaded key: its principal (built when the key or its team loads) and its hash.
#[derive(Clone)]
struct Entry {
    principal: Arc<Principal>,
    hash: [u8; 32],
}

/// What the registry holds at one instant.
#[derive(Clone, Default)]
struct View {
    keys: HashMap<String, Entry>,
    teams: HashMap<String, Arc<Team>>,
    /// The highest `updated_at_ms` applied.
    watermark: i64,
}

/// The in-process view of the key store. See the module docs.
pub struct KeyRegistry {
    store: KeyStore,
    view: ArcSwap<View>,
    /// Serialises writers of `view` (refresh and admin); readers never take it.
    write: Mutex<()>,
    refresh: Duration,
    /// Whether the last refresh failed (so a failure is logged once, and the recovery).
    failing: AtomicBool,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

impl std::fmt::Debug for KeyRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.view.load();
        f.debug_struct("KeyRegistry")
            .field("keys", &v.keys.len())
            .field("teams", &v.teams.len())
            .field("watermark", &v.watermark)
            .finish_non_exhaustive()
    }
}

impl Drop for KeyRegistry {
    fn drop(&mut self) {
        if let Ok(mut t) = self.task.lock()
            && let Some(t) = t.take()
        {
            t.abort();
        }
    }
}

impl KeyRegistry {
    /// Open the store of `settings` (`PGW_VIRTUAL_KEYS` on; runs the migrations), load every
    /// key and team, and start the refresh task (every `PGW_KEYS_REFRESH_MS`). Must be called
    /// inside a tokio runtime.
    pub async fn start(settings: &Settings, clock: SharedClock) -> Result<Arc<Self>, KeysError> {
        let store = KeyStore::open_from_settings(&settings.process, clock).await?;
        Self::with_store(store, settings.process.keys.refresh).await
    }

    /// Like [`Self::start`], over an open store.
    pub async fn with_store(store: KeyStore, refresh: Duration) -> Result<Arc<Self>, KeysError> {
        let reg = Arc::new(Self {
            store,
            view: ArcSwap::from_pointee(View::default()),
            write: Mutex::new(()),
            refresh,
            failing: AtomicBool::new(false),
            task: Mutex::new(None),
        });
        let (keys, teams) = reg.store.changed_since(i64::MIN).await?;
        reg.apply(keys, teams);
        let handle = spawn_refresh(&reg);
        if let Ok(mut t) = reg.task.lock() {
            *t = Some(handle);
        }
        Ok(reg)
    }

    /// Authenticate a bearer / `x-api-key` token: one hash-map lookup and one HMAC, no lock,
    /// no allocation. Expiry is checked against the store's clock.
    pub fn authenticate(&self, token: &str) -> Authn {
        if !token.starts_with(super::secret::TOKEN_PREFIX) {
            return Authn::NotVirtual;
        }
        const INVALID: Authn = Authn::Refused("invalid API key");
        let Some((id, secret)) = parse_token(token) else {
            return INVALID;
        };
        let view = self.view.load();
        let Some(entry) = view.keys.get(id) else {
            // Spend the same HMAC as a known id, so timing does not tell ids apart.
            let _ = self.store.hasher().verify(secret, &[0; 32]);
            return INVALID;
        };
        if !self.store.hasher().verify(secret, &entry.hash) {
            return INVALID;
        }
        let key = &entry.principal.key;
        if key.state == KeyState::Revoked {
            return Authn::Refused("API key revoked");
        }
        if key
            .expires_at_ms
            .is_some_and(|at| self.store.clock().unix_ms() >= at)
        {
            return Authn::Refused("API key expired");
        }
        Authn::Valid(entry.principal.clone())
    }

    /// The store, for the admin operations.
    pub fn store(&self) -> &KeyStore {
        &self.store
    }

    /// Every key and team currently loaded, keys ordered by id, teams by id.
    pub fn snapshot(&self) -> (Vec<Arc<VirtualKey>>, Vec<Arc<Team>>) {
        let v = self.view.load();
        let mut keys: Vec<_> = v.keys.values().map(|e| e.principal.key.clone()).collect();
        keys.sort_by(|a, b| a.id.cmp(&b.id));
        let mut teams: Vec<_> = v.teams.values().cloned().collect();
        teams.sort_by(|a, b| a.id.cmp(&b.id));
        (keys, teams)
    }

    /// The principal of key `id` as loaded (whatever its state), for tests and tools.
    pub fn principal(&self, id: &str) -> Option<Arc<Principal>> {
        self.view.load().keys.get(id).map(|e| e.principal.clone())
    }

    /// Apply rows read from the store or written by this process: a row replaces the loaded
    /// one only when it is newer (`updated_at_ms` strictly higher), so applying twice, or an
    /// older read after a newer write, changes nothing. Teams first; every key of a changed
    /// team gets a new principal.
    pub fn apply(&self, keys: Vec<StoredKey>, teams: Vec<Team>) {
        let Ok(_writer) = self.write.lock() else {
            return;
        };
        let cur = self.view.load_full();
        let mut next: Option<View> = None;
        let mut watermark = cur.watermark;
        let mut changed_teams = HashSet::new();
        for t in teams {
            watermark = watermark.max(t.updated_at_ms);
            if cur
                .teams
                .get(&t.id)
                .is_some_and(|old| old.updated_at_ms >= t.updated_at_ms)
            {
                continue;
            }
            changed_teams.insert(t.id.clone());
            let v = next.get_or_insert_with(|| (*cur).clone());
            v.teams.insert(t.id.clone(), Arc::new(t));
        }
        let mut changed_keys = HashSet::new();
        for s in keys {
            let (key, hash) = s.into_parts();
            watermark = watermark.max(key.updated_at_ms);
            let known = next.as_ref().unwrap_or(&cur);
            if known
                .keys
                .get(&key.id)
                .is_some_and(|old| old.principal.key.updated_at_ms >= key.updated_at_ms)
            {
                continue;
            }
            let team = key
                .team_id
                .as_ref()
                .and_then(|t| known.teams.get(t).cloned());
            if key.team_id.is_some() && team.is_none() {
                tracing::warn!(key_id = %key.id, "virtual key names a team that is not loaded");
            }
            changed_keys.insert(key.id.clone());
            let v = next.get_or_insert_with(|| (*cur).clone());
            let principal = Arc::new(Principal::new(Arc::new(key), team));
            v.keys
                .insert(principal.key.id.clone(), Entry { principal, hash });
        }
        if let Some(v) = next.as_mut() {
            if !changed_teams.is_empty() {
                let View { keys, teams, .. } = v;
                for (id, e) in keys.iter_mut() {
                    let Some(team_id) = &e.principal.key.team_id else {
                        continue;
                    };
                    if changed_keys.contains(id) || !changed_teams.contains(team_id) {
                        continue;
                    }
                    e.principal = Arc::new(Principal::new(
                        e.principal.key.clone(),
                        teams.get(team_id).cloned(),
                    ));
                }
            }
            v.watermark = watermark;
        }
        match next {
            Some(v) => self.view.store(Arc::new(v)),
            None if watermark > cur.watermark => {
                let mut v = (*cur).clone();
                v.watermark = watermark;
                self.view.store(Arc::new(v));
            }
            None => {}
        }
    }

    /// Apply one key this process wrote (an admin operation), at once.
    pub fn apply_key(&self, key: StoredKey) {
        self.apply(vec![key], Vec::new());
    }

    /// Apply one team this process wrote (an admin operation), at once; every loaded key of
    /// the team gets a new principal.
    pub fn apply_team(&self, team: Team) {
        self.apply(Vec::new(), vec![team]);
    }

    /// Read the rows changed since the watermark (minus the overlap) and apply them; a
    /// failure keeps the last view and is logged once, as is the recovery.
    pub async fn refresh_now(&self) -> Result<(), KeysError> {
        let since = self
            .view
            .load()
            .watermark
            .saturating_sub(REFRESH_OVERLAP_MS);
        match self.store.changed_since(since).await {
            Ok((keys, teams)) => {
                self.apply(keys, teams);
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!("virtual key refresh recovered");
                }
                Ok(())
            }
            Err(e) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "virtual key refresh failed: keeping the keys loaded before");
                }
                Err(e)
            }
        }
    }
}

/// The refresh loop: every `refresh`, while the registry lives.
fn spawn_refresh(reg: &Arc<KeyRegistry>) -> tokio::task::AbortHandle {
    let weak = Arc::downgrade(reg);
    let period = reg.refresh;
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(reg) = weak.upgrade() else {
                return;
            };
            let _ = reg.refresh_now().await;
        }
    });
    task.abort_handle()
}
