//! Virtual keys in the call path, against real `polygateway serve` processes, the mock
//! upstream, real Redis and Postgres: identity from the key (the ledger's `key_id` /
//! `team_id`, the tenant, a cache partitioned by team that no header reaches across), the
//! key's scopes and its own RPM gate, budgets that hold under 200 concurrent calls — in one
//! process, on Redis, and across three processes sharing Redis — a revocation that reaches
//! every replica within a second, an expired key, spend that survives a restart, the secret
//! kept out of every log, row and page, and the OpenAI SDK's `RateLimitError` on a spent
//! budget.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{chat_body, gateway, kv, source};
use polygateway_tests::{
    GatewayProcess, MockUpstream, eventually, hits, mock, run_python, script, telemetry_rows,
};

const ADMIN: &str = "admin-secret-key";
const HASH_SECRET: &str = "test-hash-secret-0123456789abcdef0123";
const PG: &str = "postgres://postgres@127.0.0.1:5432/test";

/// One USD per token in and out: a call's cost is its token count, in USD.
const PRICES: &str = r#"{"m": {"input": 1000000.0, "output": 1000000.0}}"#;

/// Env of a gateway with virtual keys on, SQLite telemetry at `db`, and the price table.
fn keyed_env(m: &MockUpstream, scenario: &str, db: &std::path::Path) -> Vec<(String, String)> {
    let prices = db.with_extension("prices.json");
    std::fs::write(&prices, PRICES).unwrap();
    let mut env = source(m, "openai", 1, scenario, "m");
    env.extend([
        kv("PGW_VIRTUAL_KEYS", "true"),
        kv("PGW_KEY_HASH_SECRET", HASH_SECRET),
        kv("PGW_ADMIN_KEYS", ADMIN),
        kv("PGW_TELEMETRY_BACKEND", "sqlite"),
        kv("PGW_TELEMETRY_SQLITE_PATH", db.display()),
        kv("PGW_PRICING_FILE", prices.display()),
        kv("PGW_CACHE_BACKEND", "memory"),
        kv("LLM__CACHE__TTL_S", 300),
    ]);
    env
}

/// An admin request; returns the status and the JSON body.
async fn admin(gw: &GatewayProcess, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let c = reqwest::Client::new();
    let url = format!("{}{path}", gw.base_url);
    let mut rb = match method {
        "GET" => c.get(url),
        "PATCH" => c.patch(url),
        _ => c.post(url),
    }
    .bearer_auth(ADMIN);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let resp = rb.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Create a key; returns (id, secret).
async fn create_key(gw: &GatewayProcess, body: Value) -> (String, String) {
    let (status, v) = admin(gw, "POST", "/admin/keys", Some(body)).await;
    assert_eq!(status, 201, "{v}");
    (
        v["key"]["id"].as_str().unwrap().to_string(),
        v["secret"].as_str().unwrap().to_string(),
    )
}

/// A chat call with `key` and extra headers: status, headers, body.
async fn call(
    gw: &GatewayProcess,
    key: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut rb = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .bearer_auth(key)
        .json(body);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let resp = rb.send().await.unwrap();
    let status = resp.status().as_u16();
    let h = resp.headers().clone();
    let text = resp.text().await.unwrap();
    (
        status,
        h,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The body the tests send: 21 bytes of text (reserved as 21 + 8 framing = 29 prompt
/// tokens) and `max_tokens: 10`, so a reservation is 39 USD; the mock bills 5 words in and 5
/// out, 10 USD. A question one byte longer reserves 40.
fn body() -> Value {
    let mut b = chat_body(false);
    b["max_tokens"] = json!(10);
    b
}
const BILLED_USD: f64 = 10.0;

#[tokio::test]
async fn identity_comes_from_the_key_and_no_header_reaches_another_teams_cache() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("calls.db");
    let mut env = keyed_env(&m, "vk-id", &db);
    env.push(kv("PGW_API_KEYS", "static-key"));
    let gw = gateway(env).await;
    for t in ["acme", "globex"] {
        let (s, v) = admin(
            &gw,
            "POST",
            "/admin/teams",
            Some(json!({"id": t, "name": t})),
        )
        .await;
        assert_eq!(s, 201, "{v}");
    }
    let (a_id, a) = create_key(&gw, json!({"name": "a", "team_id": "acme"})).await;
    let (_, b) = create_key(&gw, json!({"name": "b", "team_id": "globex"})).await;

    // Key A fills the cache; A again is a hit.
    let (s, h, _) = call(&gw, &a, &body(), &[]).await;
    assert_eq!(s, 200);
    assert_eq!(h["x-pgw-cache-hit"], "false");
    let (_, h, _) = call(&gw, &a, &body(), &[]).await;
    assert_eq!(h["x-pgw-cache-hit"], "true");
    assert_eq!(hits(&m, "vk-id").await.len(), 1);

    // For every x-pgw-* header a client could use to reach another entry: A asks a fresh
    // question with it (and A's second ask is a hit), then B asks the same question with the
    // same header — and must miss, going upstream itself.
    let variants: Vec<Vec<(&str, &str)>> = vec![
        vec![],
        vec![("x-pgw-cache-namespace", "LLM")],
        vec![("x-pgw-cache-namespace", "team:acme")],
        vec![("x-pgw-cache-namespace", "acme")],
        vec![("x-pgw-tenant-id", "acme")],
        vec![("x-pgw-tenant-id", "team:acme")],
        vec![("x-pgw-cache-salt", "")],
        vec![("x-pgw-cache-salt", "team:acme")],
        vec![("x-pgw-meta", r#"{"team":"acme"}"#)],
        vec![("x-pgw-session-id", "s"), ("x-pgw-parent-call-id", "p")],
        vec![("x-pgw-call-deadline-s", "30")],
        vec![("x-pgw-structured-strategy", "native-schema")],
    ];
    let mut upstream = 1;
    for (i, hs) in variants.iter().enumerate() {
        let mut q = body();
        q["messages"][0]["content"] = json!(format!("question number {i}"));
        let (s, h, v) = call(&gw, &a, &q, hs).await;
        assert_eq!(
            (s, &h["x-pgw-cache-hit"]),
            (200, &"false".parse().unwrap()),
            "{hs:?}: {v}"
        );
        let (_, h, _) = call(&gw, &a, &q, hs).await;
        assert_eq!(h["x-pgw-cache-hit"], "true", "A's own entry, {hs:?}");
        let (s, h, v) = call(&gw, &b, &q, hs).await;
        assert_eq!(s, 200, "{hs:?}: {v}");
        assert_eq!(
            h["x-pgw-cache-hit"], "false",
            "B reached A's entry with {hs:?}"
        );
        upstream += 2;
        assert_eq!(hits(&m, "vk-id").await.len(), upstream, "{hs:?}");
    }
    // The static key is unrestricted and outside every team's partition.
    let (s, h, _) = call(
        &gw,
        "static-key",
        &body(),
        &[("x-pgw-cache-namespace", "LLM")],
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(h["x-pgw-cache-hit"], "false");

    // The ledger names the key and the team; the tenant is the team, narrowed by a header.
    let (_, _, _) = call(&gw, &a, &chat_body(false), &[("x-pgw-tenant-id", "sub")]).await;
    let rows = eventually(10, || async {
        let rows = telemetry_rows(&db, &["event", "key_id", "team_id", "tenant_id"]).await;
        rows.iter()
            .any(|r| r["tenant_id"] == "acme/sub" && r["event"] == "terminal_success")
            .then_some(rows)
    })
    .await;
    let a_rows: Vec<&Value> = rows
        .iter()
        .filter(|r| r["key_id"] == a_id.as_str())
        .collect();
    assert!(a_rows.iter().all(|r| r["team_id"] == "acme"), "{a_rows:?}");
    assert!(
        a_rows.iter().any(|r| r["tenant_id"] == "acme/sub"),
        "{a_rows:?}"
    );
    assert!(
        a_rows.iter().any(|r| r["tenant_id"] == "acme"),
        "{a_rows:?}"
    );
    assert!(
        rows.iter().any(|r| r["key_id"].is_null()),
        "the static key's rows"
    );
    gw.stop().await;
}

#[tokio::test]
async fn scopes_and_the_keys_own_rpm_gate() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("calls.db");
    let gw = gateway(keyed_env(&m, "vk-rpm", &db)).await;
    let (_, k) = create_key(
        &gw,
        json!({"name": "limited", "scopes": ["llm"], "limits": {"rpm": 2}}),
    )
    .await;
    let (_, other) = create_key(&gw, json!({"name": "elsewhere", "scopes": ["other"]})).await;
    // Not among its scopes: 403 naming the model, no upstream call.
    let (s, _, v) = call(&gw, &other, &body(), &[]).await;
    assert_eq!(s, 403, "{v}");
    assert_eq!(v["error"]["type"], "permission_error");
    assert_eq!(v["error"]["code"], "model_not_allowed");
    assert_eq!(v["error"]["param"], "model");
    let models: Value = reqwest::Client::new()
        .get(format!("{}/v1/models", gw.base_url))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"], json!([]));
    // Two requests a minute: the third is refused before any upstream work.
    let mut b = body();
    for i in 0..2 {
        b["messages"][0]["content"] = json!(format!("question {i}"));
        assert_eq!(call(&gw, &k, &b, &[]).await.0, 200);
    }
    let (s, h, v) = call(&gw, &k, &body(), &[]).await;
    assert_eq!(s, 429, "{v}");
    assert_eq!(v["error"]["code"], "key_rate_limited");
    assert_eq!(v["error"]["type"], "rate_limit_exceeded");
    let retry: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(hits(&m, "vk-rpm").await.len(), 2);
    // A wrong secret of a real key id, and a revoked key: 401, never echoing the token.
    let forged = format!("{}x", &k[..k.len() - 1]);
    let (s, _, v) = call(&gw, &forged, &body(), &[]).await;
    assert_eq!(s, 401, "{v}");
    assert!(!v.to_string().contains(&forged));
    gw.stop().await;
}

/// Fire 200 calls at once (spread over `gws`) against a key whose budget fits 50
/// reservations, each held 3 s by the mock: returns (successes, refusals).
async fn storm(gws: &[&GatewayProcess], key: &str) -> (usize, usize) {
    let mut tasks = Vec::new();
    for i in 0..200 {
        let base = gws[i % gws.len()].base_url.clone();
        let key = key.to_string();
        tasks.push(tokio::spawn(async move {
            let mut b = body();
            // Distinct questions: nothing is a cache hit.
            b["messages"][0]["content"] = json!(format!("say hello to test {i:04}"));
            let resp = reqwest::Client::new()
                .post(format!("{base}/v1/chat/completions"))
                .bearer_auth(key)
                .json(&b)
                .send()
                .await
                .unwrap();
            let status = resp.status();
            let v: Value = resp.json().await.unwrap_or(Value::Null);
            (status, v)
        }));
    }
    let (mut ok, mut refused) = (0, 0);
    for t in tasks {
        let (status, v) = t.await.unwrap();
        match status {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(v["error"]["code"], "budget_exceeded", "{v}");
                assert_eq!(v["error"]["period"], "total", "{v}");
                refused += 1;
            }
            other => panic!("unexpected {other}: {v}"),
        }
    }
    (ok, refused)
}

/// `say hello to test 0001`-style questions are 22 bytes (30 prompt tokens) + 10
/// completion tokens reserved = 40 USD per call; a budget of 50 reservations.
const STORM_RESERVED_USD: f64 = 40.0;
const STORM_BUDGET_USD: f64 = 50.0 * STORM_RESERVED_USD;

fn storm_key() -> Value {
    json!({"name": "storm", "budgets": [{"period": "total", "limit_usd": STORM_BUDGET_USD}]})
}

async fn slow_mock(scenario: &str) -> MockUpstream {
    let m = mock().await;
    script(
        &m,
        scenario,
        json!({"then": {"first_token_delay_ms": 3000}}),
    )
    .await;
    m
}

#[tokio::test]
async fn a_budget_holds_under_200_concurrent_calls_in_memory() {
    let m = slow_mock("vk-storm-mem").await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("calls.db");
    let gw = gateway(keyed_env(&m, "vk-storm-mem", &db)).await;
    let (id, k) = create_key(&gw, storm_key()).await;
    let (ok, refused) = storm(&[&gw], &k).await;
    // Every call was in flight at once: exactly the 50 reservations that fit went upstream.
    assert_eq!((ok, refused), (50, 150));
    assert_eq!(hits(&m, "vk-storm-mem").await.len(), 50);
    let spent = ledger_spend(&db, &id, 50).await;
    assert_eq!(spent, 50.0 * BILLED_USD);
    assert!(spent <= STORM_BUDGET_USD);
    gw.stop().await;
}

/// Total `cost` of a key's rows in a SQLite ledger, once the writer has flushed the rows of
/// its `calls` answered calls.
async fn ledger_spend(db: &std::path::Path, key_id: &str, calls: usize) -> f64 {
    eventually(10, || async {
        let rows = telemetry_rows(db, &["event", "key_id", "cost"]).await;
        let terminal = rows
            .iter()
            .filter(|r| r["key_id"] == key_id && r["event"] == "terminal_success")
            .count();
        let attempts: Vec<f64> = rows
            .iter()
            .filter(|r| r["key_id"] == key_id && r["event"] == "attempt")
            .filter_map(|r| r["cost"].as_f64())
            .collect();
        (terminal == calls && attempts.len() == calls).then(|| attempts.iter().sum())
    })
    .await
}

fn redis_env(env: &mut Vec<(String, String)>, prefix: &str) {
    env.extend([
        kv("PGW_LIMITER_BACKEND", "redis"),
        kv("PGW_REDIS_URL", "redis://127.0.0.1:6379"),
        kv("PGW_REDIS_PREFIX", prefix),
    ]);
}

fn unique(name: &str) -> String {
    format!("{name}_{}_{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        % 1_000_000_007
}

#[tokio::test]
async fn a_budget_holds_under_200_concurrent_calls_on_redis() {
    let m = slow_mock("vk-storm-redis").await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("calls.db");
    let mut env = keyed_env(&m, "vk-storm-redis", &db);
    redis_env(&mut env, &format!("{}:", unique("pgwtest_vk")));
    let gw = gateway(env).await;
    let (id, k) = create_key(&gw, storm_key()).await;
    let (ok, refused) = storm(&[&gw], &k).await;
    assert_eq!((ok, refused), (50, 150));
    assert_eq!(hits(&m, "vk-storm-redis").await.len(), 50);
    assert_eq!(ledger_spend(&db, &id, 50).await, 50.0 * BILLED_USD);
    gw.stop().await;
}

/// A fresh Postgres schema; returns its DSN.
async fn pg_schema(name: &str) -> String {
    let schema = unique(&format!("pgw_{name}"));
    let admin = sqlx::PgPool::connect(PG)
        .await
        .expect("postgres at 127.0.0.1:5432");
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    format!("{PG}?options[search_path]={schema}")
}

/// Env of one of several replicas sharing Postgres (keys and ledger) and Redis.
fn replica_env(m: &MockUpstream, scenario: &str, dsn: &str, prefix: &str) -> Vec<(String, String)> {
    let dir = std::env::temp_dir().join(unique("pgw_prices"));
    std::fs::write(&dir, PRICES).unwrap();
    let mut env = source(m, "openai", 1, scenario, "m");
    env.extend([
        kv("PGW_VIRTUAL_KEYS", "true"),
        kv("PGW_KEY_HASH_SECRET", HASH_SECRET),
        kv("PGW_ADMIN_KEYS", ADMIN),
        kv("PGW_TELEMETRY_BACKEND", "postgres"),
        kv("PGW_TELEMETRY_PG_DSN", dsn),
        kv("PGW_PRICING_FILE", dir.display()),
    ]);
    redis_env(&mut env, prefix);
    env
}

#[tokio::test]
async fn three_replicas_share_one_budget_and_a_revocation_reaches_all_within_a_second() {
    let m = slow_mock("vk-replicas").await;
    let dsn = pg_schema("replicas").await;
    let prefix = format!("{}:", unique("pgwtest_vk3"));
    let a = gateway(replica_env(&m, "vk-replicas", &dsn, &prefix)).await;
    let b = gateway(replica_env(&m, "vk-replicas", &dsn, &prefix)).await;
    let c = gateway(replica_env(&m, "vk-replicas", &dsn, &prefix)).await;
    let (_, k) = create_key(&a, storm_key()).await;
    // The key reaches the other replicas by their refresh (well within a second).
    for gw in [&b, &c] {
        eventually(5, || async {
            let r = reqwest::Client::new()
                .get(format!("{}/v1/models", gw.base_url))
                .bearer_auth(&k)
                .send()
                .await
                .unwrap();
            (r.status() == 200).then_some(())
        })
        .await;
    }
    let (ok, refused) = storm(&[&a, &b, &c], &k).await;
    assert_eq!((ok, refused), (50, 150));
    assert_eq!(hits(&m, "vk-replicas").await.len(), 50);

    // Revoke on A: B and C refuse the key within one second.
    let (_, victim) = create_key(&a, json!({"name": "victim"})).await;
    for gw in [&b, &c] {
        eventually(5, || async {
            let r = reqwest::Client::new()
                .get(format!("{}/v1/models", gw.base_url))
                .bearer_auth(&victim)
                .send()
                .await
                .unwrap();
            (r.status() == 200).then_some(())
        })
        .await;
    }
    let id = victim
        .strip_prefix("sk-pgw-")
        .and_then(|r| r.split('-').next())
        .unwrap()
        .to_string();
    let (s, v) = admin(&a, "POST", &format!("/admin/keys/{id}/revoke"), None).await;
    assert_eq!(s, 200, "{v}");
    let revoked = Instant::now();
    for gw in [&a, &b, &c] {
        let elapsed = eventually(3, || async {
            let r = reqwest::Client::new()
                .get(format!("{}/v1/models", gw.base_url))
                .bearer_auth(&victim)
                .send()
                .await
                .unwrap();
            let s = r.status().as_u16();
            let v: Value = r.json().await.unwrap();
            (s == 401).then(|| {
                assert_eq!(v["error"]["message"], "API key revoked", "{v}");
                revoked.elapsed()
            })
        })
        .await;
        assert!(elapsed < Duration::from_secs(1), "{elapsed:?}");
    }
    for gw in [a, b, c] {
        gw.stop().await;
    }
}

#[tokio::test]
async fn an_expired_key_is_refused_at_its_expiry() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("calls.db");
    let gw = gateway(keyed_env(&m, "vk-exp", &db)).await;
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let expiry = now_s + 2;
    let (_, k) = create_key(&gw, json!({"name": "short", "expires_at": expiry})).await;
    assert_eq!(call(&gw, &k, &body(), &[]).await.0, 200);
    let refused_at = eventually(6, || async {
        let (s, _, v) = call(&gw, &k, &body(), &[]).await;
        (s == 401).then(|| {
            assert_eq!(v["error"]["message"], "API key expired", "{v}");
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        })
    })
    .await;
    assert!(refused_at >= expiry as f64, "{refused_at} < {expiry}");
    assert!(refused_at < expiry as f64 + 1.0, "{refused_at}");
    gw.stop().await;
}

#[tokio::test]
async fn spend_survives_a_restart_and_a_spent_budget_is_a_rate_limit_error_in_the_sdk() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("calls.db");
    let env = keyed_env(&m, "vk-restart", &db);
    let gw = gateway(env.clone()).await;
    // 69 USD a day, a warning past 45; each call reserves 39 or 40 and settles to 10.
    let (id, k) = create_key(
        &gw,
        json!({"name": "r", "budgets": [{"period": "daily", "limit_usd": 69.0, "soft_limit_usd": 45.0}]}),
    )
    .await;
    let (s, h, _) = call(&gw, &k, &body(), &[]).await;
    assert_eq!(s, 200);
    assert!(h.get("x-pgw-budget-warning").is_none());
    let mut b = body();
    b["messages"][0]["content"] = json!("say hello to the test!");
    let (s, h, _) = call(&gw, &k, &b, &[]).await;
    assert_eq!(s, 200);
    // 10 spent + 40 reserved crossed the 45 USD soft limit: a warning, not a refusal.
    let warning = h["x-pgw-budget-warning"].to_str().unwrap().to_string();
    assert_eq!(
        warning,
        format!("key {id} soft limit 45.000000 USD crossed (50.000000 USD spent or reserved)")
    );
    assert_eq!(ledger_spend(&db, &id, 2).await, 2.0 * BILLED_USD);
    gw.stop().await;

    // 20 of 69 USD spent, in the ledger: after a restart one more reservation fits
    // (20 + 40), and the next (30 + 40 > 69) does not — it would (10 + 40) had the restart
    // lost the spend.
    let gw = gateway(env).await;
    let mut b = body();
    b["messages"][0]["content"] = json!("say hello to the test?");
    assert_eq!(call(&gw, &k, &b, &[]).await.0, 200);
    b["messages"][0]["content"] = json!("say hello to the test.");
    let (s, h, v) = call(&gw, &k, &b, &[]).await;
    assert_eq!(s, 429, "{v}");
    assert_eq!(v["error"]["type"], "budget_exceeded");
    assert_eq!(v["error"]["period"], "daily");
    assert_eq!(v["error"]["limit_usd"], json!(69.0));
    assert_eq!(v["error"]["total_usd"], json!(30.0));
    assert_eq!(v["error"]["needed_usd"], json!(40.0));
    let resets = v["error"]["resets_at"].as_str().unwrap();
    assert!(resets.ends_with("T00:00:00Z"), "{resets}");
    assert_eq!(h["x-should-retry"], "false");
    let retry: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&retry), "{retry}");
    assert_eq!(hits(&m, "vk-restart").await.len(), 3);

    // The official OpenAI SDK raises RateLimitError and does not retry it.
    let out = run_python("sdk_errors.py", &[&gw.base_url, "llm", "nonstream", &k]).await;
    assert_eq!(out["raised"], "RateLimitError", "{out}");
    assert_eq!(out["code"], "budget_exceeded", "{out}");
    assert_eq!(out["should_retry"], "false", "{out}");
    assert_eq!(hits(&m, "vk-restart").await.len(), 3);

    // The secret is nowhere: not in the log, the ledger, /healthz, /metrics or an error.
    let health = reqwest::get(format!("{}/healthz", gw.base_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let metrics = reqwest::Client::new()
        .get(format!("{}/metrics", gw.base_url))
        .bearer_auth(&k)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let (_, listed) = admin(&gw, "GET", "/admin/keys", None).await;
    let log = gw.stop().await;
    let secret = k[format!("sk-pgw-{id}-").len()..].to_string();
    let all_rows = telemetry_rows(&db, &["*"]).await;
    for (what, text) in [
        ("log", log),
        ("rows", serde_json::to_string(&all_rows).unwrap()),
        ("healthz", health),
        ("metrics", metrics),
        ("error", v.to_string()),
        ("admin list", listed.to_string()),
    ] {
        assert!(!text.contains(&secret), "the secret is in the {what}");
        assert!(!text.contains(&k), "the token is in the {what}");
    }
}

#[tokio::test]
async fn embeddings_are_charged_to_the_keys_budget_and_refused_past_it() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("calls.db");
    let gw = gateway(keyed_env(&m, "vk-embed", &db)).await;
    let (id, k) = create_key(
        &gw,
        json!({"name": "e", "budgets": [{"period": "total", "limit_usd": 15.0}]}),
    )
    .await;
    let (_, other) = create_key(&gw, json!({"name": "o", "scopes": ["other"]})).await;
    let embed = |key: String, text: String| {
        let base = gw.base_url.clone();
        async move {
            let r = reqwest::Client::new()
                .post(format!("{base}/v1/embeddings"))
                .bearer_auth(key)
                .json(&json!({"model": "llm", "input": text}))
                .send()
                .await
                .unwrap();
            let s = r.status().as_u16();
            (s, r.json::<Value>().await.unwrap())
        }
    };
    // "hello world N" is 13 bytes: 13 USD reserved; the mock bills 3 words, 3 USD.
    // 0 + 13 ≤ 15, then 3 + 13 > 15: the second is refused before any upstream request.
    let (s, v) = embed(k.clone(), "hello world 1".into()).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = embed(k.clone(), "hello world 2".into()).await;
    assert_eq!(s, 429, "{v}");
    assert_eq!(v["error"]["code"], "budget_exceeded");
    assert_eq!(v["error"]["total_usd"], json!(3.0));
    assert_eq!(v["error"]["needed_usd"], json!(13.0));
    assert_eq!(hits(&m, "vk-embed").await.len(), 1);
    // A key without the scope may not embed with it either.
    let (s, v) = embed(other, "hello".into()).await;
    assert_eq!(s, 403, "{v}");
    assert_eq!(v["error"]["code"], "model_not_allowed");
    let rows = eventually(10, || async {
        let rows = telemetry_rows(&db, &["event", "key_id", "cost"]).await;
        rows.iter()
            .any(|r| r["key_id"] == id.as_str() && r["event"] == "attempt")
            .then_some(rows)
    })
    .await;
    let billed: f64 = rows
        .iter()
        .filter(|r| r["key_id"] == id.as_str())
        .filter_map(|r| r["cost"].as_f64())
        .sum();
    assert_eq!(billed, 3.0);
    gw.stop().await;
}

/// [`body`] with another question of the same 21 bytes (the same 39 USD reservation), so
/// that the response cache does not answer it: `n` < 100.
fn fresh_body(n: usize) -> Value {
    let mut b = body();
    b["messages"][0]["content"] = json!(format!("say hello to test {n:02}!"));
    b
}

/// A budget added to a key that already spent in the period counts that spend: its first
/// call seeds the budget from the ledger (20 USD spent + 39 reserved > 45), where a counter
/// starting at zero would let it through (0 + 39 ≤ 45).
#[tokio::test]
async fn a_budget_added_later_counts_the_periods_spend_from_the_ledger() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("calls.db");
    let gw = gateway(keyed_env(&m, "vk-added", &db)).await;
    let (id, k) = create_key(&gw, json!({"name": "later"})).await;
    for n in 0..2 {
        assert_eq!(call(&gw, &k, &fresh_body(n), &[]).await.0, 200);
    }
    assert_eq!(ledger_spend(&db, &id, 2).await, 2.0 * BILLED_USD);
    let (s, v) = admin(
        &gw,
        "PATCH",
        &format!("/admin/keys/{id}"),
        Some(json!({"budgets": [{"period": "daily", "limit_usd": 45.0}]})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, _, v) = call(&gw, &k, &fresh_body(2), &[]).await;
    assert_eq!(s, 429, "{v}");
    assert_eq!(v["error"]["type"], "budget_exceeded");
    assert_eq!(v["error"]["total_usd"], json!(20.0));
    assert_eq!(v["error"]["needed_usd"], json!(39.0));
    assert_eq!(hits(&m, "vk-added").await.len(), 2);
    // Raised to 60: one more call fits (20 + 39), and settles to 10.
    let (s, v) = admin(
        &gw,
        "PATCH",
        &format!("/admin/keys/{id}"),
        Some(json!({"budgets": [{"period": "daily", "limit_usd": 60.0}]})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(call(&gw, &k, &fresh_body(3), &[]).await.0, 200);
    let (s, _, v) = call(&gw, &k, &fresh_body(4), &[]).await;
    assert_eq!(s, 429, "{v}");
    assert_eq!(v["error"]["total_usd"], json!(30.0));
    assert_eq!(hits(&m, "vk-added").await.len(), 3);
}

/// With budgets on Redis, a Redis outage refuses a budgeted key's calls before any
/// upstream request (503 `governance_backend_down`, naming the budgets), and the key is
/// served again once Redis is back, without a restart.
#[tokio::test]
async fn a_redis_outage_fails_a_budgeted_key_closed_and_recovers() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("calls.db");
    let mut fwd = polygateway_tests::TcpForwarder::start("127.0.0.1:6379".parse().unwrap()).await;
    let mut env = keyed_env(&m, "vk-outage", &db);
    env.extend([
        kv("PGW_LIMITER_BACKEND", "redis"),
        kv("PGW_REDIS_URL", format!("redis://{}", fwd.addr)),
        kv("PGW_REDIS_PREFIX", unique("vk_outage")),
    ]);
    let gw = gateway(env).await;
    let (_, k) = create_key(
        &gw,
        json!({"name": "o", "budgets": [{"period": "monthly", "limit_usd": 1000.0}]}),
    )
    .await;
    assert_eq!(call(&gw, &k, &fresh_body(0), &[]).await.0, 200);
    fwd.stop().await;
    for n in 1..4 {
        let (s, h, v) = call(&gw, &k, &fresh_body(n), &[]).await;
        assert_eq!(s, 503, "{v}");
        assert_eq!(v["error"]["reason"], "governance_backend_down", "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("the spend budgets of this key cannot be checked"),
            "{message}"
        );
        assert_eq!(h["retry-after"], "5");
    }
    assert_eq!(
        hits(&m, "vk-outage").await.len(),
        1,
        "nothing went upstream unmetered"
    );
    fwd.restart().await;
    eventually(20, || {
        let (gw, k) = (&gw, &k);
        async move { (call(gw, k, &fresh_body(4), &[]).await.0 == 200).then_some(()) }
    })
    .await;
    assert_eq!(hits(&m, "vk-outage").await.len(), 2);
}
