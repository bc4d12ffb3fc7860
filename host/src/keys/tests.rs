//! The key store, the admin operations and the registry on SQLite (a temporary file) and on
//! the real Postgres at 127.0.0.1:5432 (a schema of its own per test, chosen through
//! `?options[search_path]=`, so parallel tests never share tables).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::config::KeyHashSecret;
use crate::governance::{ManualClock, SharedClock};

const PG: &str = "postgres://postgres@127.0.0.1:5432/test";
const HASH_KEY: &str = "test-hash-secret-0123456789abcdef0123";

fn hasher() -> Hasher {
    Hasher::new(&KeyHashSecret::new(HASH_KEY))
}

/// A store on a fresh SQLite file (kept alive by the returned dir).
async fn sqlite_store(clock: SharedClock) -> (KeyStore, StoreLocation, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let loc = StoreLocation::Sqlite(dir.path().join("keys.db"));
    let store = KeyStore::open(&loc, hasher(), clock).await.unwrap();
    (store, loc, dir)
}

/// A store on a fresh schema `pgw_keys_<name>_<pid>` of the test database.
async fn pg_store(name: &str, clock: SharedClock) -> (KeyStore, StoreLocation) {
    let schema = format!("pgw_keys_{name}_{}", std::process::id());
    let admin = sqlx::PgPool::connect(PG)
        .await
        .expect("postgres at 127.0.0.1:5432");
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(&admin)
        .await
        .unwrap();
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let loc = StoreLocation::Postgres(format!("{PG}?options[search_path]={schema}"));
    let store = KeyStore::open(&loc, hasher(), clock).await.unwrap();
    (store, loc)
}

fn create(name: &str) -> CreateKey {
    CreateKey {
        name: name.into(),
        ..CreateKey::default()
    }
}

/// The store's contract, the same on both backends.
async fn store_contract(store: &KeyStore, loc: &StoreLocation, clock: &ManualClock) {
    let admin = KeyAdmin::new(store);
    let team = admin
        .create_team(CreateTeam {
            id: Some("acme".into()),
            name: "Acme".into(),
            limits: Some(KeyLimits {
                rpm: Some(60),
                tpm: None,
                max_concurrency: Some(4),
            }),
            budgets: Some(vec![parse_budget_arg("--budget", "monthly:100").unwrap()]),
            metadata: None,
        })
        .await
        .unwrap();
    assert_eq!(admin.get_team("acme").await.unwrap(), team);
    assert_eq!(
        admin
            .create_team(CreateTeam {
                id: Some("acme".into()),
                name: "again".into(),
                ..CreateTeam::default()
            })
            .await
            .unwrap_err(),
        KeysError::Conflict {
            what: "team",
            id: "acme".into()
        }
    );
    let generated = admin
        .create_team(CreateTeam {
            name: "Gen".into(),
            ..CreateTeam::default()
        })
        .await
        .unwrap();
    assert!(generated.id.starts_with("team_") && generated.id.len() == 21);

    let c = admin
        .create_key(CreateKey {
            name: "ci".into(),
            team_id: Some("acme".into()),
            scopes: Some(vec!["llm".into()]),
            limits: Some(KeyLimits {
                rpm: Some(10),
                tpm: Some(1000),
                max_concurrency: None,
            }),
            budgets: Some(vec![
                parse_budget_arg("--budget", "daily:10.0:8.0").unwrap(),
            ]),
            expires_at: Some(4_070_908_800),
            metadata: Some(json!({"owner": "ops"}).as_object().unwrap().clone()),
        })
        .await
        .unwrap();
    let k = &c.key;
    assert!(c.secret.expose().starts_with(&format!("sk-pgw-{}-", k.id)));
    assert_eq!(k.expires_at_ms, Some(4_070_908_800_000));
    assert_eq!(k.state, KeyState::Active);
    assert_eq!(k.created_at_ms, clock_ms(clock));
    assert_eq!(admin.get_key(&k.id).await.unwrap(), *k);
    let err = admin
        .create_key(CreateKey {
            team_id: Some("nope".into()),
            ..create("x")
        })
        .await
        .unwrap_err();
    assert_eq!(err.param(), Some("team_id"));
    let lone = admin.create_key(create("lone")).await.unwrap().key;

    // List and its filters.
    let ids = |v: Vec<VirtualKey>| v.into_iter().map(|k| k.id).collect::<Vec<_>>();
    let all = ids(admin.list_keys(&KeyFilter::default()).await.unwrap());
    assert_eq!(all.len(), 2);
    assert!(all.contains(&k.id) && all.contains(&lone.id));
    let by_team = KeyFilter {
        team: Some("acme".into()),
        state: None,
    };
    assert_eq!(
        ids(admin.list_keys(&by_team).await.unwrap()),
        vec![k.id.clone()]
    );

    // A partial update changes only what it names and bumps updated_at_ms.
    clock.advance(10);
    let patch: KeyPatch =
        serde_json::from_value(json!({"name": "ci-2", "scopes": null, "expires_at": null}))
            .unwrap();
    let u = admin.update_key(&k.id, patch).await.unwrap();
    assert_eq!(u.name, "ci-2");
    assert_eq!(u.scopes, None);
    assert_eq!(u.expires_at_ms, None);
    assert_eq!(u.limits, k.limits);
    assert_eq!(u.team_id.as_deref(), Some("acme"));
    assert_eq!(u.updated_at_ms, clock_ms(clock));
    assert_eq!(u.created_at_ms, k.created_at_ms);
    // A write in the same millisecond still moves updated_at_ms forward.
    let u2 = admin
        .update_key(
            &k.id,
            serde_json::from_value(json!({"team_id": null})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(u2.updated_at_ms, u.updated_at_ms + 1);
    assert_eq!(u2.team_id, None);
    assert_eq!(
        admin
            .update_key("key_aaaaaaaaaaaaaaaa", KeyPatch::default())
            .await
            .unwrap_err(),
        KeysError::NotFound {
            what: "key",
            id: "key_aaaaaaaaaaaaaaaa".into()
        }
    );

    // Rotate: a new secret with a new hash; the old one no longer verifies.
    let before = store.get_stored_key(&k.id).await.unwrap().unwrap();
    let r = admin.rotate_key(&k.id).await.unwrap();
    assert_ne!(r.secret, c.secret);
    let after = store.get_stored_key(&k.id).await.unwrap().unwrap();
    let (_, old_hash) = before.into_parts();
    let (_, new_hash) = after.into_parts();
    assert_ne!(old_hash, new_hash);
    let (_, old_secret) = secret::parse_token(c.secret.expose()).unwrap();
    let (_, new_secret) = secret::parse_token(r.secret.expose()).unwrap();
    assert!(!store.hasher().verify(old_secret, &new_hash));
    assert!(store.hasher().verify(new_secret, &new_hash));
    assert!(r.key.updated_at_ms > u2.updated_at_ms);

    // Revoke, and the state filter.
    let rv = admin.revoke_key(&k.id).await.unwrap();
    assert_eq!(rv.state, KeyState::Revoked);
    assert_eq!(admin.revoke_key(&k.id).await.unwrap(), rv);
    assert_eq!(
        admin.rotate_key(&k.id).await.unwrap_err().param(),
        Some("state")
    );
    let revoked = KeyFilter {
        team: None,
        state: Some(KeyState::Revoked),
    };
    assert_eq!(
        ids(admin.list_keys(&revoked).await.unwrap()),
        vec![k.id.clone()]
    );

    // Teams update partially.
    clock.advance(5);
    let t = admin
        .update_team(
            "acme",
            serde_json::from_value(json!({"limits": {"rpm": 5}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(t.limits.rpm, Some(5));
    assert_eq!(t.limits.max_concurrency, None);
    assert_eq!(t.name, "Acme");
    assert_eq!(t.budgets, team.budgets);
    assert_eq!(t.updated_at_ms, clock_ms(clock));

    // changed_since sees exactly the rows written after the mark.
    let (keys, teams) = store.changed_since(rv.updated_at_ms - 1).await.unwrap();
    assert_eq!(
        keys.iter().map(|s| s.key().id.clone()).collect::<Vec<_>>(),
        vec![k.id.clone()]
    );
    assert_eq!(teams, vec![t.clone()]);

    // Opening again runs no migration twice and sees the same rows.
    let again = KeyStore::open(loc, hasher(), store.clock().clone())
        .await
        .unwrap();
    assert_eq!(KeyAdmin::new(&again).list_teams().await.unwrap().len(), 2);
    assert_eq!(again.get_key(&k.id).await.unwrap().unwrap(), rv);
}

fn clock_ms(c: &ManualClock) -> i64 {
    crate::governance::Clock::unix_ms(c)
}

#[tokio::test]
async fn the_store_contract_on_sqlite() {
    let clock = ManualClock::new(0);
    let (store, loc, _dir) = sqlite_store(clock.clone()).await;
    store_contract(&store, &loc, &clock).await;
}

#[tokio::test]
async fn the_store_contract_on_postgres() {
    let clock = ManualClock::new(0);
    let (store, loc) = pg_store("contract", clock.clone()).await;
    store_contract(&store, &loc, &clock).await;
}

#[tokio::test]
async fn bad_input_names_its_field() {
    let (store, _loc, _dir) = sqlite_store(ManualClock::new(0)).await;
    let admin = KeyAdmin::new(&store);
    let param = |e: KeysError| e.param().map(String::from);
    let cases: Vec<(CreateKey, &str)> = vec![
        (create(""), "name"),
        (
            CreateKey {
                scopes: Some(vec!["llm".into(), "".into()]),
                ..create("k")
            },
            "scopes[1]",
        ),
        (
            CreateKey {
                limits: Some(KeyLimits {
                    rpm: Some(0),
                    ..KeyLimits::default()
                }),
                ..create("k")
            },
            "limits.rpm",
        ),
        (
            CreateKey {
                budgets: Some(vec![
                    parse_budget_arg("b", "daily:1").unwrap(),
                    parse_budget_arg("b", "weekly:-1").unwrap(),
                ]),
                ..create("k")
            },
            "budgets[1].limit_usd",
        ),
        (
            CreateKey {
                expires_at: Some(-5),
                ..create("k")
            },
            "expires_at",
        ),
    ];
    for (req, want) in cases {
        assert_eq!(
            param(admin.create_key(req).await.unwrap_err()),
            Some(want.into())
        );
    }
    let err = admin
        .create_team(CreateTeam {
            id: Some("Not A Slug".into()),
            name: "t".into(),
            ..CreateTeam::default()
        })
        .await
        .unwrap_err();
    assert_eq!(param(err), Some("id".into()));
    assert_eq!(
        parse_budget_arg("--budget", "hourly:1")
            .unwrap_err()
            .param(),
        Some("--budget")
    );
    assert_eq!(
        parse_budget_arg("--budget", "daily:10.0:8.0").unwrap(),
        BudgetSpec {
            period: BudgetPeriod::Daily,
            limit_usd: 10.0,
            soft_limit_usd: Some(8.0)
        }
    );
    // Nothing was written.
    assert!(
        admin
            .list_keys(&KeyFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn authenticate_checks_form_id_secret_state_and_expiry() {
    let clock = ManualClock::new(0);
    let (store, _loc, _dir) = sqlite_store(clock.clone()).await;
    let reg = KeyRegistry::with_store(store, Duration::from_secs(10))
        .await
        .unwrap();
    let admin = KeyAdmin::of(&reg);
    admin
        .create_team(CreateTeam {
            id: Some("acme".into()),
            name: "Acme".into(),
            ..CreateTeam::default()
        })
        .await
        .unwrap();
    let c = admin
        .create_key(CreateKey {
            team_id: Some("acme".into()),
            ..create("k")
        })
        .await
        .unwrap();
    let token = c.secret.expose().to_string();
    let Authn::Valid(p) = reg.authenticate(&token) else {
        panic!("valid token refused");
    };
    assert_eq!(p.key.id, c.key.id);
    assert_eq!(p.partition(), "team:acme");
    assert_eq!(p.team.as_ref().map(|t| t.name.as_str()), Some("Acme"));

    assert_eq!(reg.authenticate("sk-static-key"), Authn::NotVirtual);
    assert_eq!(
        reg.authenticate("sk-pgw-garbage"),
        Authn::Refused("invalid API key")
    );
    // Wrong secret, same id.
    let (id, secret) = secret::parse_token(&token).unwrap();
    let flipped = if secret.starts_with('A') { "B" } else { "A" };
    let wrong = format!("sk-pgw-{id}-{flipped}{}", &secret[1..]);
    assert_eq!(reg.authenticate(&wrong), Authn::Refused("invalid API key"));
    // Right secret, unknown id.
    let other = format!("sk-pgw-key_aaaaaaaaaaaaaaaa-{secret}");
    assert_eq!(reg.authenticate(&other), Authn::Refused("invalid API key"));

    // Expiry against the injected clock.
    // Unix seconds in the JSON: 1 s from now (the clock is at 0 ms).
    let at = clock_ms(&clock) / 1_000 + 1;
    admin
        .update_key(
            &c.key.id,
            serde_json::from_value(json!({ "expires_at": at })).unwrap(),
        )
        .await
        .unwrap();
    assert!(matches!(reg.authenticate(&token), Authn::Valid(_)));
    clock.advance(1_000);
    assert_eq!(reg.authenticate(&token), Authn::Refused("API key expired"));

    // A team change gives the key a new principal; a revoke refuses at once.
    admin
        .update_team(
            "acme",
            serde_json::from_value(json!({"name": "Acme 2"})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        reg.principal(&c.key.id)
            .and_then(|p| p.team.as_ref().map(|t| t.name.clone())),
        Some("Acme 2".into())
    );
    admin.revoke_key(&c.key.id).await.unwrap();
    assert_eq!(reg.authenticate(&token), Authn::Refused("API key revoked"));
    let (keys, teams) = reg.snapshot();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].state, KeyState::Revoked);
    assert_eq!(teams.len(), 1);
}

#[tokio::test]
async fn rotation_invalidates_the_old_token_at_once() {
    let (store, _loc, _dir) = sqlite_store(ManualClock::new(0)).await;
    let reg = KeyRegistry::with_store(store, Duration::from_secs(10))
        .await
        .unwrap();
    let admin = KeyAdmin::of(&reg);
    let c = admin.create_key(create("k")).await.unwrap();
    let r = admin.rotate_key(&c.key.id).await.unwrap();
    assert_eq!(
        reg.authenticate(c.secret.expose()),
        Authn::Refused("invalid API key")
    );
    assert!(matches!(
        reg.authenticate(r.secret.expose()),
        Authn::Valid(_)
    ));
}

/// A revoke written through another store handle (another replica) is seen within one
/// refresh period, and an older read applied after a newer write changes nothing.
async fn refresh_contract(reg: Arc<KeyRegistry>, other: KeyStore, refresh: Duration) {
    let c = KeyAdmin::new(&other).create_key(create("k")).await.unwrap();
    let token = c.secret.expose().to_string();
    let start = Instant::now();
    while !matches!(reg.authenticate(&token), Authn::Valid(_)) {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "create never seen"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stale = other.get_stored_key(&c.key.id).await.unwrap().unwrap();
    KeyAdmin::new(&other).revoke_key(&c.key.id).await.unwrap();
    let start = Instant::now();
    while reg.authenticate(&token) != Authn::Refused("API key revoked") {
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "revoke never seen"
        );
    }
    // One period, plus the query itself and the scheduler on a loaded test machine.
    assert!(
        start.elapsed() < refresh + Duration::from_millis(400),
        "revoke seen after {:?}",
        start.elapsed()
    );
    reg.apply(vec![stale], vec![]);
    assert_eq!(reg.authenticate(&token), Authn::Refused("API key revoked"));
}

#[tokio::test]
async fn the_registry_refresh_sees_another_replicas_revoke_on_sqlite() {
    let clock: SharedClock = Arc::new(crate::governance::SystemClock::new());
    let (store, loc, _dir) = sqlite_store(clock.clone()).await;
    let refresh = Duration::from_millis(100);
    let reg = KeyRegistry::with_store(store, refresh).await.unwrap();
    let other = KeyStore::open(&loc, hasher(), clock).await.unwrap();
    refresh_contract(reg, other, refresh).await;
}

#[tokio::test]
async fn the_registry_refresh_sees_another_replicas_revoke_on_postgres() {
    let clock: SharedClock = Arc::new(crate::governance::SystemClock::new());
    let (store, loc) = pg_store("refresh", clock.clone()).await;
    let refresh = Duration::from_millis(100);
    let reg = KeyRegistry::with_store(store, refresh).await.unwrap();
    let other = KeyStore::open(&loc, hasher(), clock).await.unwrap();
    refresh_contract(reg, other, refresh).await;
}

#[tokio::test]
async fn start_reads_the_process_settings() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let vars = [
        ("PGW_VIRTUAL_KEYS", "true".to_string()),
        ("PGW_KEY_HASH_SECRET", HASH_KEY.to_string()),
        ("PGW_TELEMETRY_SQLITE_PATH", db.display().to_string()),
        ("LLM__OPENAI__1__BASE_URL", "http://127.0.0.1:9".to_string()),
        ("LLM__OPENAI__1__MODEL", "m".to_string()),
    ];
    let settings =
        crate::config::settings_from_vars(vars.iter().map(|(k, v)| (k.to_string(), v.clone())))
            .unwrap();
    let clock: SharedClock = Arc::new(crate::governance::SystemClock::new());
    let reg = KeyRegistry::start(&settings, clock.clone()).await.unwrap();
    let c = KeyAdmin::of(&reg).create_key(create("k")).await.unwrap();
    assert!(matches!(
        reg.authenticate(c.secret.expose()),
        Authn::Valid(_)
    ));
    let mut off = settings.clone();
    off.process.keys.enabled = false;
    assert_eq!(
        KeyRegistry::start(&off, clock).await.unwrap_err(),
        KeysError::Disabled
    );
}

/// One ledger row of the spend tests.
struct Ledger {
    call: &'static str,
    logical: &'static str,
    event: &'static str,
    scope: &'static str,
    model: &'static str,
    cost: Option<f64>,
    prompt: i64,
    completion: i64,
    key: &'static str,
    team: &'static str,
    at_ms: i64,
}

const DAY1: i64 = 1_796_169_600_000; // 2026-12-02
const DAY2: i64 = DAY1 + 86_400_000;

#[rustfmt::skip]
const LEDGER: &[Ledger] = &[
    Ledger { call: "a1", logical: "A", event: "attempt", scope: "llm", model: "m1", cost: Some(0.25), prompt: 10, completion: 5, key: "key_a", team: "acme", at_ms: DAY1 + 1 },
    Ledger { call: "a2", logical: "A", event: "attempt", scope: "llm", model: "m2", cost: Some(0.5), prompt: 20, completion: 6, key: "key_a", team: "acme", at_ms: DAY1 + 2 },
    Ledger { call: "at", logical: "A", event: "terminal_success", scope: "llm", model: "m2", cost: None, prompt: 20, completion: 6, key: "key_a", team: "acme", at_ms: DAY1 + 3 },
    Ledger { call: "b1", logical: "B", event: "cache_hit", scope: "embed", model: "m1", cost: Some(0.0), prompt: 7, completion: 0, key: "key_a", team: "acme", at_ms: DAY2 },
    Ledger { call: "c1", logical: "C", event: "attempt", scope: "llm", model: "m1", cost: Some(1.0), prompt: 100, completion: 50, key: "key_b", team: "acme", at_ms: DAY2 + 5 },
    Ledger { call: "d1", logical: "D", event: "attempt", scope: "llm", model: "m1", cost: Some(8.0), prompt: 1, completion: 1, key: "key_c", team: "other", at_ms: DAY2 + 6 },
];

/// Create `llm_calls` with the host's own DDL and insert [`LEDGER`].
async fn fill_ledger(store: &KeyStore) {
    use crate::telemetry::{SchemaBackend, create_table_sql};
    macro_rules! insert {
        ($pool:expr, $backend:expr, $at:literal) => {{
            sqlx::query(&create_table_sql($backend))
                .execute($pool)
                .await
                .unwrap();
            for r in LEDGER {
                sqlx::query(concat!(
                    "INSERT INTO llm_calls (call_id, logical_call_id, event, scope, model, cost, \
                     prompt_tokens, completion_tokens, key_id, team_id, usage_source, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'measured', ",
                    $at,
                    ")"
                ))
                .bind(r.call)
                .bind(r.logical)
                .bind(r.event)
                .bind(r.scope)
                .bind(r.model)
                .bind(r.cost)
                .bind(r.prompt)
                .bind(r.completion)
                .bind(r.key)
                .bind(r.team)
                .bind(r.at_ms)
                .execute($pool)
                .await
                .unwrap();
            }
        }};
    }
    if let Some(pool) = store.sqlite_pool() {
        insert!(pool, SchemaBackend::Sqlite, "$11");
    } else if let Some(pool) = store.pg_pool() {
        insert!(
            pool,
            SchemaBackend::Postgres,
            "to_timestamp(0) + $11::bigint * interval '1 millisecond'"
        );
    }
}

/// Exact sums by day, model and scope over [`LEDGER`], the same on both backends.
async fn spend_contract(store: &KeyStore) {
    let admin = KeyAdmin::new(store);
    let empty = admin
        .spend(&SpendQuery::parse(None, None, None, None, None, 10).unwrap())
        .await
        .unwrap();
    assert_eq!(empty.data, vec![]);
    // No ledger table yet: nothing spent.
    assert_eq!(
        spent_since(store, Owner::Team("acme"), 0).await.unwrap(),
        0.0
    );
    fill_ledger(store).await;
    let q = |key: Option<&str>, team: Option<&str>, from, to, g| {
        SpendQuery::parse(
            key.map(String::from),
            team.map(String::from),
            from,
            to,
            g,
            DAY2 + 10,
        )
        .unwrap()
    };
    let row = |g: &str, cost, calls, p, c| SpendRow {
        group: g.into(),
        cost_usd: cost,
        calls,
        prompt_tokens: p,
        completion_tokens: c,
    };
    let by_day = admin
        .spend(&q(None, Some("acme"), None, None, None))
        .await
        .unwrap();
    assert_eq!(
        by_day,
        SpendReport {
            data: vec![
                row("2026-12-02", 0.75, 1, 30, 11),
                row("2026-12-03", 1.0, 2, 107, 50)
            ],
            total_usd: 1.75,
            from: "2026-11-03T00:00:00.010Z".into(),
            to: "2026-12-03T00:00:00.010Z".into(),
        }
    );
    let by_model = admin
        .spend(&q(
            Some("key_a"),
            None,
            Some("2026-12-02"),
            Some("2026-12-02"),
            Some("model"),
        ))
        .await
        .unwrap();
    assert_eq!(
        by_model.data,
        vec![row("m1", 0.25, 1, 10, 5), row("m2", 0.5, 1, 20, 6)]
    );
    assert_eq!(by_model.to, "2026-12-03T00:00:00Z");
    let by_scope = admin
        .spend(&q(
            None,
            None,
            Some("2026-12-03T00:00:00Z"),
            None,
            Some("scope"),
        ))
        .await
        .unwrap();
    assert_eq!(
        by_scope.data,
        vec![row("embed", 0.0, 1, 7, 0), row("llm", 9.0, 2, 101, 51)]
    );
    assert_eq!(by_scope.total_usd, 9.0);

    // What the budgets rebuild from: every costed row since the mark.
    assert_eq!(
        spent_since(store, Owner::Key("key_a"), 0).await.unwrap(),
        0.75
    );
    assert_eq!(
        spent_since(store, Owner::Key("key_a"), DAY1 + 2)
            .await
            .unwrap(),
        0.5
    );
    assert_eq!(
        spent_since(store, Owner::Team("acme"), 0).await.unwrap(),
        1.75
    );
    assert_eq!(
        spent_since(store, Owner::Team("other"), DAY2 + 7)
            .await
            .unwrap(),
        0.0
    );
    assert_eq!(
        spent_since(store, Owner::Key("key_zz"), 0).await.unwrap(),
        0.0
    );
}

#[tokio::test]
async fn spend_sums_the_costed_rows_of_the_ledger_on_sqlite() {
    let (store, _loc, _dir) = sqlite_store(ManualClock::new(0)).await;
    spend_contract(&store).await;
}

#[tokio::test]
async fn spend_sums_the_costed_rows_of_the_ledger_on_postgres() {
    let (store, _loc) = pg_store("spend", ManualClock::new(0)).await;
    spend_contract(&store).await;
}
