//! The admin operations on keys and teams, shared by the HTTP API (`proxy/admin_keys.rs`)
//! and the CLI (`polygateway keys …`): the request bodies (unknown fields refused), their
//! validation (each error names its field), the store write, and — in a serving process —
//! the registry update, so this process sees its own change before the next refresh.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::KeysError;
use super::model::{
    BudgetPeriod, BudgetSpec, KeyLimits, KeyState, Team, VirtualKey, validate_budgets,
};
use super::registry::KeyRegistry;
use super::secret::{SecretToken, is_team_slug, new_key_id, new_secret, new_team_id};
use super::spend::{SpendQuery, SpendReport};
use super::store::{KeyStore, StoredKey};

/// The longest name and scope alias, in characters.
const MAX_NAME_CHARS: usize = 200;

/// `Some(value)` for a field that is present, even as `null` (`Some(None)`): a PATCH tells
/// "clear it" from "leave it".
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// `POST /admin/keys`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    pub name: String,
    #[serde(default)]
    pub team_id: Option<String>,
    /// Model aliases the key may call; absent or `null` = every scope.
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    #[serde(default)]
    pub limits: Option<KeyLimits>,
    #[serde(default)]
    pub budgets: Option<Vec<BudgetSpec>>,
    /// Unix seconds from which the key is refused; absent or `null` = never.
    #[serde(default)]
    pub expires_at: Option<i64>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// `PATCH /admin/keys/{id}`: only the fields present change; `null` clears `team_id`,
/// `scopes` (every scope) and `expires_at` (never).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyPatch {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub team_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    pub scopes: Option<Option<Vec<String>>>,
    #[serde(default)]
    pub limits: Option<KeyLimits>,
    #[serde(default)]
    pub budgets: Option<Vec<BudgetSpec>>,
    #[serde(default, deserialize_with = "present")]
    pub expires_at: Option<Option<i64>>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// `POST /admin/teams`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTeam {
    /// A slug `[a-z0-9_-]{1,64}`; absent = `team_` + 16 random characters.
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub limits: Option<KeyLimits>,
    #[serde(default)]
    pub budgets: Option<Vec<BudgetSpec>>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// `PATCH /admin/teams/{id}`: only the fields present change.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamPatch {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub limits: Option<KeyLimits>,
    #[serde(default)]
    pub budgets: Option<Vec<BudgetSpec>>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// Which keys a list returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyFilter {
    pub team: Option<String>,
    pub state: Option<KeyState>,
}

/// A created or rotated key and its token, shown once.
#[derive(Debug, Clone)]
pub struct Created {
    pub key: VirtualKey,
    pub secret: SecretToken,
}

fn check_name(param: &str, name: &str) -> Result<(), KeysError> {
    let n = name.trim().chars().count();
    if n == 0 || n > MAX_NAME_CHARS {
        return Err(KeysError::invalid(
            param,
            format!("must be 1 to {MAX_NAME_CHARS} characters"),
        ));
    }
    Ok(())
}

fn check_scopes(scopes: &Option<Vec<String>>) -> Result<(), KeysError> {
    for (i, s) in scopes.iter().flatten().enumerate() {
        let n = s.chars().count();
        if n == 0 || n > MAX_NAME_CHARS || s.trim() != s {
            return Err(KeysError::invalid(
                format!("scopes[{i}]"),
                format!("must be a scope alias of 1 to {MAX_NAME_CHARS} characters"),
            ));
        }
    }
    Ok(())
}

/// `expires_at` (Unix seconds) as Unix ms.
fn expires(at: &Option<i64>) -> Result<Option<i64>, KeysError> {
    match *at {
        None => Ok(None),
        Some(secs) => match secs.checked_mul(1000) {
            Some(ms) if secs > 0 => Ok(Some(ms)),
            _ => Err(KeysError::invalid(
                "expires_at",
                "must be Unix seconds (an integer > 0), such as 1798761600",
            )),
        },
    }
}

/// Parse a CLI budget `PERIOD:LIMIT_USD[:SOFT_LIMIT_USD]` (`daily:10.0:8.0`), checked like
/// the JSON form; errors name `param`.
pub fn parse_budget_arg(param: &str, s: &str) -> Result<BudgetSpec, KeysError> {
    let bad = || {
        KeysError::invalid(
            param,
            format!(
                "expected PERIOD:LIMIT_USD[:SOFT_LIMIT_USD] with PERIOD daily|weekly|monthly|total, got `{s}`"
            ),
        )
    };
    let mut parts = s.split(':');
    let period = match parts.next() {
        Some("daily") => BudgetPeriod::Daily,
        Some("weekly") => BudgetPeriod::Weekly,
        Some("monthly") => BudgetPeriod::Monthly,
        Some("total") => BudgetPeriod::Total,
        _ => return Err(bad()),
    };
    let limit_usd = parts
        .next()
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or_else(bad)?;
    let soft_limit_usd = match parts.next() {
        None => None,
        Some(v) => Some(v.parse::<f64>().map_err(|_| bad())?),
    };
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(BudgetSpec {
        period,
        limit_usd,
        soft_limit_usd,
    })
}

/// The admin operations over one store, and the registry of this process if it serves.
#[derive(Debug, Clone, Copy)]
pub struct KeyAdmin<'a> {
    store: &'a KeyStore,
    registry: Option<&'a KeyRegistry>,
}

impl<'a> KeyAdmin<'a> {
    /// Operations on `store` (the CLI: no registry to update).
    pub fn new(store: &'a KeyStore) -> Self {
        Self {
            store,
            registry: None,
        }
    }

    /// Operations of a serving process: each write is applied to `registry` at once.
    pub fn of(registry: &'a KeyRegistry) -> Self {
        Self {
            store: registry.store(),
            registry: Some(registry),
        }
    }

    /// The store clock's wall time, Unix ms (the default end of a spend window).
    pub fn now_ms(&self) -> i64 {
        self.store.clock().unix_ms()
    }

    fn applied_key(&self, s: StoredKey) -> VirtualKey {
        let key = s.key().clone();
        if let Some(r) = self.registry {
            r.apply_key(s);
        }
        key
    }

    fn applied_team(&self, t: Team) -> Team {
        if let Some(r) = self.registry {
            r.apply_team(t.clone());
        }
        t
    }

    async fn check_team_exists(&self, team_id: &Option<String>) -> Result<(), KeysError> {
        if let Some(t) = team_id
            && self.store.get_team(t).await?.is_none()
        {
            return Err(KeysError::invalid(
                "team_id",
                format!("no team with id `{t}`"),
            ));
        }
        Ok(())
    }

    /// Create a key; its token is in the answer and nowhere else.
    pub async fn create_key(&self, req: CreateKey) -> Result<Created, KeysError> {
        check_name("name", &req.name)?;
        check_scopes(&req.scopes)?;
        let limits = req.limits.unwrap_or_default();
        limits.validate("limits")?;
        let budgets = req.budgets.unwrap_or_default();
        validate_budgets(&budgets)?;
        let expires_at_ms = expires(&req.expires_at)?;
        self.check_team_exists(&req.team_id).await?;
        let id = new_key_id()?;
        let (secret, hash) = new_secret(&id, self.store.hasher())?;
        let now = self.store.clock().unix_ms();
        let key = VirtualKey {
            id,
            name: req.name,
            team_id: req.team_id,
            scopes: req.scopes,
            limits,
            budgets,
            expires_at_ms,
            metadata: req.metadata.unwrap_or_default(),
            state: KeyState::Active,
            created_at_ms: now,
            updated_at_ms: now,
        };
        self.store.insert_key(&key, &hash).await?;
        let stored = StoredKey::new(
            key,
            super::secret::decode_hash(&hash)
                .ok_or_else(|| KeysError::Store("a new hash is not hex".into()))?,
        );
        let key = self.applied_key(stored);
        Ok(Created { key, secret })
    }

    /// One key.
    pub async fn get_key(&self, id: &str) -> Result<VirtualKey, KeysError> {
        self.store
            .get_key(id)
            .await?
            .ok_or_else(|| KeysError::NotFound {
                what: "key",
                id: id.to_string(),
            })
    }

    /// Keys, oldest first.
    pub async fn list_keys(&self, filter: &KeyFilter) -> Result<Vec<VirtualKey>, KeysError> {
        self.store
            .list_keys(filter.team.as_deref(), filter.state)
            .await
    }

    /// Change the fields present in `patch`.
    pub async fn update_key(&self, id: &str, patch: KeyPatch) -> Result<VirtualKey, KeysError> {
        if let Some(n) = &patch.name {
            check_name("name", n)?;
        }
        if let Some(s) = &patch.scopes {
            check_scopes(s)?;
        }
        if let Some(l) = &patch.limits {
            l.validate("limits")?;
        }
        if let Some(b) = &patch.budgets {
            validate_budgets(b)?;
        }
        let expires_at_ms = match &patch.expires_at {
            Some(at) => Some(expires(at)?),
            None => None,
        };
        if let Some(t) = &patch.team_id {
            self.check_team_exists(t).await?;
        }
        let stored = self
            .store
            .update_key(id, |k| {
                if let Some(n) = &patch.name {
                    k.name.clone_from(n);
                }
                if let Some(t) = &patch.team_id {
                    k.team_id.clone_from(t);
                }
                if let Some(s) = &patch.scopes {
                    k.scopes.clone_from(s);
                }
                if let Some(l) = &patch.limits {
                    k.limits.clone_from(l);
                }
                if let Some(b) = &patch.budgets {
                    k.budgets.clone_from(b);
                }
                if let Some(e) = expires_at_ms {
                    k.expires_at_ms = e;
                }
                if let Some(m) = &patch.metadata {
                    k.metadata.clone_from(m);
                }
                Ok(None)
            })
            .await?;
        Ok(self.applied_key(stored))
    }

    /// A new secret for an active key: the old token stops working (here at once, on other
    /// replicas at their next refresh).
    pub async fn rotate_key(&self, id: &str) -> Result<Created, KeysError> {
        let hasher = self.store.hasher();
        let mut token = None;
        let stored = self
            .store
            .update_key(id, |k| {
                if k.state == KeyState::Revoked {
                    return Err(KeysError::invalid(
                        "state",
                        "the key is revoked: create a new key instead",
                    ));
                }
                let (secret, hash) = new_secret(&k.id, hasher)?;
                token = Some(secret);
                Ok(Some(hash))
            })
            .await?;
        let secret = token.ok_or_else(|| KeysError::Store("no secret was drawn".into()))?;
        Ok(Created {
            key: self.applied_key(stored),
            secret,
        })
    }

    /// Revoke a key for good (revoking a revoked key changes nothing).
    pub async fn revoke_key(&self, id: &str) -> Result<VirtualKey, KeysError> {
        let current = self.get_key(id).await?;
        if current.state == KeyState::Revoked {
            return Ok(current);
        }
        let stored = self
            .store
            .update_key(id, |k| {
                k.state = KeyState::Revoked;
                Ok(None)
            })
            .await?;
        Ok(self.applied_key(stored))
    }

    /// Create a team; `Conflict` when the id is taken.
    pub async fn create_team(&self, req: CreateTeam) -> Result<Team, KeysError> {
        check_name("name", &req.name)?;
        let id = match req.id {
            Some(id) if is_team_slug(&id) => id,
            Some(_) => {
                return Err(KeysError::invalid("id", "must match [a-z0-9_-]{1,64}"));
            }
            None => new_team_id()?,
        };
        let limits = req.limits.unwrap_or_default();
        limits.validate("limits")?;
        let budgets = req.budgets.unwrap_or_default();
        validate_budgets(&budgets)?;
        let now = self.store.clock().unix_ms();
        let team = Team {
            id,
            name: req.name,
            limits,
            budgets,
            metadata: req.metadata.unwrap_or_default(),
            created_at_ms: now,
            updated_at_ms: now,
        };
        self.store.insert_team(&team).await?;
        Ok(self.applied_team(team))
    }

    /// One team.
    pub async fn get_team(&self, id: &str) -> Result<Team, KeysError> {
        self.store
            .get_team(id)
            .await?
            .ok_or_else(|| KeysError::NotFound {
                what: "team",
                id: id.to_string(),
            })
    }

    /// Every team, oldest first.
    pub async fn list_teams(&self) -> Result<Vec<Team>, KeysError> {
        self.store.list_teams().await
    }

    /// Change the fields present in `patch`.
    pub async fn update_team(&self, id: &str, patch: TeamPatch) -> Result<Team, KeysError> {
        if let Some(n) = &patch.name {
            check_name("name", n)?;
        }
        if let Some(l) = &patch.limits {
            l.validate("limits")?;
        }
        if let Some(b) = &patch.budgets {
            validate_budgets(b)?;
        }
        let team = self
            .store
            .update_team(id, |t| {
                if let Some(n) = &patch.name {
                    t.name.clone_from(n);
                }
                if let Some(l) = &patch.limits {
                    t.limits.clone_from(l);
                }
                if let Some(b) = &patch.budgets {
                    t.budgets.clone_from(b);
                }
                if let Some(m) = &patch.metadata {
                    t.metadata.clone_from(m);
                }
                Ok(())
            })
            .await?;
        Ok(self.applied_team(team))
    }

    /// Spend from the ledger (`llm_calls`).
    pub async fn spend(&self, q: &SpendQuery) -> Result<SpendReport, KeysError> {
        super::spend::spend(self.store, q).await
    }
}
