//! The virtual-key model (docs/keys.md#objects): [`VirtualKey`], [`Team`], their
//! [`KeyLimits`] and [`BudgetSpec`]s, and the [`Principal`] an authenticated call carries.
//! The serde forms are the admin API's JSON; the secret and its hash are never part of them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::KeysError;

/// The calendar period a budget counts over, in UTC (docs/budgets.md#periods).
pub use crate::governance::budget::BudgetPeriod;

/// The rate gates of a key or a team; `None` = no gate of that kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyLimits {
    /// Requests per minute (≥ 1).
    #[serde(default)]
    pub rpm: Option<u32>,
    /// Tokens (prompt + completion) per minute (≥ 1).
    #[serde(default)]
    pub tpm: Option<u64>,
    /// Calls in flight at once (≥ 1).
    #[serde(default)]
    pub max_concurrency: Option<u32>,
}

impl KeyLimits {
    /// Every gate is ≥ 1; `param` is the JSON path of the limits object (`limits`).
    pub fn validate(&self, param: &str) -> Result<(), KeysError> {
        let zero = |field: &str| KeysError::invalid(format!("{param}.{field}"), "must be ≥ 1");
        if self.rpm == Some(0) {
            return Err(zero("rpm"));
        }
        if self.tpm == Some(0) {
            return Err(zero("tpm"));
        }
        if self.max_concurrency == Some(0) {
            return Err(zero("max_concurrency"));
        }
        Ok(())
    }
}

/// One spend budget, in USD.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    /// The period the spend counts over.
    pub period: BudgetPeriod,
    /// The most a period may spend, USD (finite, > 0); a call that would cross it is refused.
    pub limit_usd: f64,
    /// Crossing this only warns, USD (finite, > 0, below `limit_usd`).
    #[serde(default)]
    pub soft_limit_usd: Option<f64>,
}

/// Check a list of budgets: finite positive limits, a soft limit below its limit, one
/// budget per period. Errors name `budgets[i].<field>`.
pub fn validate_budgets(budgets: &[BudgetSpec]) -> Result<(), KeysError> {
    for (i, b) in budgets.iter().enumerate() {
        if !(b.limit_usd.is_finite() && b.limit_usd > 0.0) {
            return Err(KeysError::invalid(
                format!("budgets[{i}].limit_usd"),
                "must be a finite number > 0",
            ));
        }
        if let Some(soft) = b.soft_limit_usd
            && !(soft.is_finite() && soft > 0.0 && soft < b.limit_usd)
        {
            return Err(KeysError::invalid(
                format!("budgets[{i}].soft_limit_usd"),
                "must be a finite number > 0 and below limit_usd",
            ));
        }
        if let Some(j) = budgets[..i].iter().position(|o| o.period == b.period) {
            return Err(KeysError::invalid(
                format!("budgets[{i}].period"),
                format!(
                    "a second {} budget (budgets[{j}] is one): one budget per period",
                    b.period.as_str()
                ),
            ));
        }
    }
    Ok(())
}

/// Whether a key may still be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyState {
    Active,
    /// Refused from the next refresh on, in every process; never active again.
    Revoked,
}

impl KeyState {
    /// The stored and JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Revoked => "revoked",
        }
    }

    /// The state named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(Self::Active),
            "revoked" => Some(Self::Revoked),
            _ => None,
        }
    }
}

/// A group of keys sharing limits and budgets (charged in addition to each key's own).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Team {
    /// `team_` + 16 random characters, or a slug given at creation (`[a-z0-9_-]{1,64}`).
    pub id: String,
    /// A human label.
    pub name: String,
    pub limits: KeyLimits,
    pub budgets: Vec<BudgetSpec>,
    /// Free-form JSON kept for the operator.
    pub metadata: Map<String, Value>,
    /// Unix ms.
    pub created_at_ms: i64,
    /// Unix ms of the last write; strictly increases with every write.
    pub updated_at_ms: i64,
}

/// A virtual key. Neither its secret nor the secret's hash is part of this type, so no
/// `Serialize` or `Debug` can show them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VirtualKey {
    /// `key_` + 16 characters of `[a-z2-7]`: the public part of the token.
    pub id: String,
    /// A human label.
    pub name: String,
    /// The team it belongs to, if any.
    pub team_id: Option<String>,
    /// The model aliases (scopes) it may call, compared ASCII case-insensitively;
    /// `None` = every scope.
    pub scopes: Option<Vec<String>>,
    pub limits: KeyLimits,
    pub budgets: Vec<BudgetSpec>,
    /// Unix ms from which the key is refused (`now >= expires_at_ms`); `None` = never
    /// expires. In the admin JSON this is `expires_at`, in Unix **seconds**.
    #[serde(rename = "expires_at", with = "unix_seconds")]
    pub expires_at_ms: Option<i64>,
    /// Free-form JSON kept for the operator.
    pub metadata: Map<String, Value>,
    pub state: KeyState,
    /// Unix ms.
    pub created_at_ms: i64,
    /// Unix ms of the last write (update, rotate, revoke); strictly increases with every write.
    pub updated_at_ms: i64,
}

/// `Option<i64>` Unix ms in Rust, Unix seconds (an integer) in JSON.
mod unix_seconds {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ms: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match ms {
            Some(ms) => s.serialize_some(&ms.div_euclid(1000)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        match Option::<i64>::deserialize(d)? {
            None => Ok(None),
            Some(secs) => secs
                .checked_mul(1000)
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom("expires_at is out of range")),
        }
    }
}

/// What an authenticated call carries: the key and its team, as loaded. Built once per key
/// version (and again when its team changes), so a call only clones an `Arc`.
#[derive(Debug, Clone, PartialEq)]
pub struct Principal {
    pub key: Arc<VirtualKey>,
    pub team: Option<Arc<Team>>,
    /// `team:<team id>` or `key:<key id>`, computed once.
    partition: String,
}

impl Principal {
    /// The principal of `key` in `team` (the team the key names, when loaded).
    pub fn new(key: Arc<VirtualKey>, team: Option<Arc<Team>>) -> Self {
        let partition = match &team {
            Some(t) => format!("team:{}", t.id),
            None => format!("key:{}", key.id),
        };
        Self {
            key,
            team,
            partition,
        }
    }

    /// The cache/tenant partition: `team:<team id>` or, for a key without a team,
    /// `key:<key id>` (precomputed).
    pub fn partition(&self) -> &str {
        &self.partition
    }

    /// The tenant: the team id, or the key id for a key without a team.
    pub fn tenant(&self) -> &str {
        match &self.team {
            Some(t) => &t.id,
            None => &self.key.id,
        }
    }

    /// Whether the key may call the scope `scope_alias` (ASCII case-insensitive).
    pub fn may_use(&self, scope_alias: &str) -> bool {
        match &self.key.scopes {
            None => true,
            Some(list) => list.iter().any(|s| s.eq_ignore_ascii_case(scope_alias)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(team: bool, scopes: Option<Vec<&str>>) -> Principal {
        let k = VirtualKey {
            id: "key_aaaaaaaaaaaaaaaa".into(),
            name: "k".into(),
            team_id: team.then(|| "acme".into()),
            scopes: scopes.map(|s| s.into_iter().map(String::from).collect()),
            limits: KeyLimits::default(),
            budgets: vec![],
            expires_at_ms: None,
            metadata: Map::new(),
            state: KeyState::Active,
            created_at_ms: 1,
            updated_at_ms: 1,
        };
        let t = Team {
            id: "acme".into(),
            name: "Acme".into(),
            limits: KeyLimits::default(),
            budgets: vec![],
            metadata: Map::new(),
            created_at_ms: 1,
            updated_at_ms: 1,
        };
        Principal::new(Arc::new(k), team.then(|| Arc::new(t)))
    }

    #[test]
    fn partition_and_tenant_follow_the_team() {
        let p = key(true, None);
        assert_eq!(p.partition(), "team:acme");
        assert_eq!(p.tenant(), "acme");
        let p = key(false, None);
        assert_eq!(p.partition(), "key:key_aaaaaaaaaaaaaaaa");
        assert_eq!(p.tenant(), "key_aaaaaaaaaaaaaaaa");
    }

    #[test]
    fn scopes_gate_aliases_case_insensitively() {
        assert!(key(false, None).may_use("anything"));
        let p = key(false, Some(vec!["llm", "Embed"]));
        assert!(p.may_use("LLM"));
        assert!(p.may_use("embed"));
        assert!(!p.may_use("vision"));
        assert!(!key(false, Some(vec![])).may_use("llm"));
    }

    fn b(period: BudgetPeriod, limit: f64, soft: Option<f64>) -> BudgetSpec {
        BudgetSpec {
            period,
            limit_usd: limit,
            soft_limit_usd: soft,
        }
    }

    #[test]
    fn budgets_are_checked_field_by_field() {
        use BudgetPeriod::*;
        let check = |list: Vec<BudgetSpec>| validate_budgets(&list).map_err(|e| e.to_string());
        assert_eq!(
            check(vec![b(Daily, 10.0, Some(8.0)), b(Total, 1.0, None)]),
            Ok(())
        );
        assert_eq!(
            check(vec![b(Daily, 10.0, None), b(Weekly, f64::NAN, None)]),
            Err("budgets[1].limit_usd must be a finite number > 0".into())
        );
        assert_eq!(
            check(vec![b(Daily, 0.0, None)]),
            Err("budgets[0].limit_usd must be a finite number > 0".into())
        );
        assert_eq!(
            check(vec![b(Daily, 10.0, Some(10.0))]),
            Err("budgets[0].soft_limit_usd must be a finite number > 0 and below limit_usd".into())
        );
        assert_eq!(
            check(vec![b(Daily, 1.0, None), b(Monthly, 1.0, None), b(Daily, 2.0, None)]),
            Err(
                "budgets[2].period a second daily budget (budgets[0] is one): one budget per period"
                    .into()
            )
        );
    }

    #[test]
    fn limits_refuse_zero_and_unknown_fields() {
        let l = KeyLimits {
            rpm: Some(1),
            tpm: Some(0),
            max_concurrency: None,
        };
        assert_eq!(
            l.validate("limits").map_err(|e| e.to_string()),
            Err("limits.tpm must be ≥ 1".into())
        );
        let e = serde_json::from_str::<KeyLimits>(r#"{"rpm": 1, "rps": 2}"#).unwrap_err();
        assert!(e.to_string().starts_with("unknown field `rps`"), "{e}");
    }

    #[test]
    fn json_shapes() {
        let v = serde_json::to_value(b(BudgetPeriod::Monthly, 5.5, None)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"period": "monthly", "limit_usd": 5.5, "soft_limit_usd": null})
        );
        let v = serde_json::to_value(&*key(true, Some(vec!["llm"])).key).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "id": "key_aaaaaaaaaaaaaaaa", "name": "k", "team_id": "acme",
                "scopes": ["llm"], "limits": {"rpm": null, "tpm": null, "max_concurrency": null},
                "budgets": [], "expires_at": null, "metadata": {}, "state": "active",
                "created_at_ms": 1, "updated_at_ms": 1,
            })
        );
    }
}
