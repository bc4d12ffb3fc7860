//! The virtual-key admin API (docs/keys.md#admin-api) against a real `polygateway serve` over
//! TCP, on SQLite and on the real Postgres (a schema of its own, `?options[search_path]=`):
//! create (the secret once, in that answer only), list and show without the secret or its
//! hash, partial updates, rotate (the old secret stops working), revoke, 400s naming their
//! field, 401/403/503, spend over rows written straight into `llm_calls` with exact sums,
//! the secret in none of the server's log lines; and `polygateway keys|teams` against a
//! temporary SQLite file through the real binary.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{bin, gateway, kv, source};
use polygateway::telemetry::{SchemaBackend, create_table_sql};
use polygateway_tests::{GatewayProcess, mock};

const ADMIN: &str = "admin-key-for-the-keys-tests";
const HASH_SECRET: &str = "keys-admin-hash-secret-0123456789abcdef";
const PG: &str = "postgres://postgres@127.0.0.1:5432/test";

/// An HTTP request with `bearer` (if any); returns status and JSON body (Null if none).
async fn request(
    gw: &GatewayProcess,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let c = reqwest::Client::new();
    let url = format!("{}{path}", gw.base_url);
    let mut rb = match method {
        "GET" => c.get(url),
        "PATCH" => c.patch(url),
        _ => c.post(url),
    };
    if let Some(b) = bearer {
        rb = rb.bearer_auth(b);
    }
    if let Some(b) = body {
        rb = rb
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = rb.send().await.expect("gateway reachable");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn admin(gw: &GatewayProcess, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    request(gw, method, path, Some(ADMIN), body).await
}

/// `(status, error.param, error.type)` of a refused admin request.
async fn refused(
    gw: &GatewayProcess,
    method: &str,
    path: &str,
    body: Value,
) -> (u16, Value, Value) {
    let (s, v) = admin(gw, method, path, Some(body)).await;
    (s, v["error"]["param"].clone(), v["error"]["type"].clone())
}

/// (call, logical call, event, scope, model, cost, prompt, completion, key id, at Unix ms).
type LedgerRow<'a> = (
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    Option<f64>,
    i64,
    i64,
    &'a str,
    i64,
);

/// Where the test reads hashes and writes ledger rows: the gateway's database.
enum Db {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Db {
    async fn hash(&self, id: &str) -> String {
        let sql = "SELECT secret_hash FROM pgw_keys WHERE id = $1";
        match self {
            Db::Sqlite(p) => sqlx::query_scalar(sql).bind(id).fetch_one(p).await.unwrap(),
            Db::Postgres(p) => sqlx::query_scalar(sql).bind(id).fetch_one(p).await.unwrap(),
        }
    }

    /// Write ledger rows (all of team `acme`).
    async fn ledger(&self, rows: &[LedgerRow<'_>]) {
        let insert_sqlite = "INSERT INTO llm_calls (call_id, logical_call_id, event, scope, model, \
            cost, prompt_tokens, completion_tokens, key_id, team_id, usage_source, created_at) \
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'acme', 'measured', $10)";
        let insert_pg = "INSERT INTO llm_calls (call_id, logical_call_id, event, scope, model, \
            cost, prompt_tokens, completion_tokens, key_id, team_id, usage_source, created_at) \
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'acme', 'measured', \
            to_timestamp(0) + $10::bigint * interval '1 millisecond')";
        macro_rules! run {
            ($pool:expr, $ddl:expr, $sql:expr) => {{
                sqlx::query(&create_table_sql($ddl))
                    .execute($pool)
                    .await
                    .unwrap();
                for r in rows {
                    sqlx::query($sql)
                        .bind(r.0)
                        .bind(r.1)
                        .bind(r.2)
                        .bind(r.3)
                        .bind(r.4)
                        .bind(r.5)
                        .bind(r.6)
                        .bind(r.7)
                        .bind(r.8)
                        .bind(r.9)
                        .execute($pool)
                        .await
                        .unwrap();
                }
            }};
        }
        match self {
            Db::Sqlite(p) => run!(p, SchemaBackend::Sqlite, insert_sqlite),
            Db::Postgres(p) => run!(p, SchemaBackend::Postgres, insert_pg),
        }
    }
}

/// The admin flow, the same on both backends; returns every secret and hash it saw.
async fn admin_flow(gw: &GatewayProcess, db: &Db) -> Vec<String> {
    let mut secrets = Vec::new();
    // Without the admin key: 401.
    let (s, v) = request(gw, "GET", "/admin/keys", None, None).await;
    assert_eq!(
        (s, v["error"]["type"].clone()),
        (401, json!("authentication_error"))
    );
    let (s, _) = request(gw, "GET", "/admin/keys", Some("not-the-admin-key"), None).await;
    assert_eq!(s, 401);

    // A team.
    let (s, team) = admin(
        gw,
        "POST",
        "/admin/teams",
        Some(json!({"id": "acme", "name": "Acme", "budgets": [{"period": "monthly", "limit_usd": 100.0}]})),
    )
    .await;
    assert_eq!(s, 201, "{team}");
    let t_at = team["created_at_ms"].as_i64().unwrap();
    assert_eq!(
        team,
        json!({"id": "acme", "name": "Acme",
               "limits": {"rpm": null, "tpm": null, "max_concurrency": null},
               "budgets": [{"period": "monthly", "limit_usd": 100.0, "soft_limit_usd": null}],
               "metadata": {}, "created_at_ms": t_at, "updated_at_ms": t_at})
    );
    assert_eq!(
        refused(
            gw,
            "POST",
            "/admin/teams",
            json!({"id": "acme", "name": "again"})
        )
        .await,
        (409, json!("id"), json!("invalid_request_error"))
    );
    assert_eq!(
        refused(
            gw,
            "POST",
            "/admin/teams",
            json!({"id": "Not Slug", "name": "x"})
        )
        .await,
        (400, json!("id"), json!("invalid_request_error"))
    );

    // A key: its secret is in this answer and only here.
    let (s, created) = admin(
        gw,
        "POST",
        "/admin/keys",
        Some(json!({
            "name": "ci", "team_id": "acme", "scopes": ["llm"], "limits": {"rpm": 60},
            "budgets": [{"period": "daily", "limit_usd": 10.0, "soft_limit_usd": 8.0}],
            "expires_at": 4_102_444_800i64, "metadata": {"owner": "ops"},
        })),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let key = created["key"].clone();
    let id = key["id"].as_str().unwrap().to_string();
    let secret = created["secret"].as_str().unwrap().to_string();
    assert_eq!(created.as_object().unwrap().len(), 2);
    assert!(id.starts_with("key_") && id.len() == 20, "{id}");
    let tail = secret
        .strip_prefix(&format!("sk-pgw-{id}-"))
        .expect("sk-pgw-<id>-<secret>");
    assert_eq!(tail.len(), 43);
    assert!(
        tail.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    let k_at = key["created_at_ms"].as_i64().unwrap();
    assert_eq!(
        key,
        json!({"id": id, "name": "ci", "team_id": "acme", "scopes": ["llm"],
               "limits": {"rpm": 60, "tpm": null, "max_concurrency": null},
               "budgets": [{"period": "daily", "limit_usd": 10.0, "soft_limit_usd": 8.0}],
               "expires_at": 4_102_444_800i64, "metadata": {"owner": "ops"}, "state": "active",
               "created_at_ms": k_at, "updated_at_ms": k_at})
    );
    let hash = db.hash(&id).await;
    assert_eq!(hash.len(), 64);
    secrets.extend([secret.clone(), tail.to_string(), hash.clone()]);
    // The token works as a client key.
    let (s, _) = request(gw, "GET", "/v1/models", Some(&secret), None).await;
    assert_eq!(s, 200);

    // List and show: the key, never its secret or hash.
    for path in [
        "/admin/keys".to_string(),
        format!("/admin/keys/{id}"),
        "/admin/keys?team=acme&state=active".to_string(),
    ] {
        let (s, v) = admin(gw, "GET", &path, None).await;
        assert_eq!(s, 200, "{path}");
        let text = v.to_string();
        assert!(
            !text.contains(tail) && !text.contains(&hash),
            "{path}: {text}"
        );
        let shown = if path.contains('?') || path == "/admin/keys" {
            v["data"].clone()
        } else {
            json!([v])
        };
        assert_eq!(shown, json!([key]), "{path}");
    }
    let (_, v) = admin(gw, "GET", "/admin/keys?state=revoked", None).await;
    assert_eq!(v, json!({"data": []}));
    let (_, v) = admin(gw, "GET", "/admin/keys?team=other", None).await;
    assert_eq!(v, json!({"data": []}));
    let (s, v) = admin(gw, "GET", "/admin/keys?state=lost", None).await;
    assert_eq!((s, v["error"]["param"].clone()), (400, json!("state")));
    let (s, v) = admin(gw, "GET", "/admin/keys?colour=red", None).await;
    assert_eq!(
        (s, v["error"]["param"].clone()),
        (400, json!("colour")),
        "{v}"
    );
    let (s, v) = admin(gw, "GET", "/admin/keys/key_aaaaaaaaaaaaaaaa", None).await;
    assert_eq!(
        (s, v["error"]["type"].clone(), v["error"]["message"].clone()),
        (
            404,
            json!("not_found_error"),
            json!("no key with id `key_aaaaaaaaaaaaaaaa`")
        )
    );

    // 400s name their field.
    let cases = [
        (
            "POST",
            "/admin/keys".to_string(),
            json!({"team_id": "acme"}),
            "name",
        ),
        (
            "POST",
            "/admin/keys".to_string(),
            json!({"name": "x", "team_id": "nope"}),
            "team_id",
        ),
        (
            "POST",
            "/admin/keys".to_string(),
            json!({"name": "x", "colour": "red"}),
            "colour",
        ),
        (
            "POST",
            "/admin/keys".to_string(),
            json!({"name": "x", "expires_at": "soon"}),
            "expires_at",
        ),
        (
            "PATCH",
            format!("/admin/keys/{id}"),
            json!({"limits": {"rpm": 0}}),
            "limits.rpm",
        ),
        (
            "PATCH",
            format!("/admin/keys/{id}"),
            json!({"limits": {"rps": 1}}),
            "rps",
        ),
        (
            "PATCH",
            format!("/admin/keys/{id}"),
            json!({"scopes": ["llm", ""]}),
            "scopes[1]",
        ),
        (
            "PATCH",
            "/admin/teams/acme".to_string(),
            json!({"name": ""}),
            "name",
        ),
    ];
    for (method, path, body, param) in cases {
        let (s, v) = admin(gw, method, &path, Some(body.clone())).await;
        assert_eq!(
            (s, v["error"]["param"].clone()),
            (400, json!(param)),
            "{body}: {v}"
        );
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["code"], Value::Null);
    }
    let (s, v) = admin(
        gw,
        "PATCH",
        &format!("/admin/keys/{id}"),
        Some(json!({"budgets": [{"period": "daily", "limit_usd": 1.0},
                                {"period": "weekly", "limit_usd": -1.0}]})),
    )
    .await;
    assert_eq!(
        (s, v),
        (
            400,
            json!({"error": {"message": "budgets[1].limit_usd must be a finite number > 0",
                             "type": "invalid_request_error", "param": "budgets[1].limit_usd",
                             "code": null}})
        )
    );

    // A partial update.
    let (s, u) = admin(
        gw,
        "PATCH",
        &format!("/admin/keys/{id}"),
        Some(json!({"name": "ci-2", "scopes": null})),
    )
    .await;
    assert_eq!(s, 200, "{u}");
    assert!(u["updated_at_ms"].as_i64().unwrap() > k_at);
    let mut want = key.clone();
    want["name"] = json!("ci-2");
    want["scopes"] = Value::Null;
    want["updated_at_ms"] = u["updated_at_ms"].clone();
    assert_eq!(u, want);
    let (s, t) = admin(
        gw,
        "PATCH",
        "/admin/teams/acme",
        Some(json!({"limits": {"rpm": 5}})),
    )
    .await;
    assert_eq!(
        (s, t["limits"]["rpm"].clone(), t["name"].clone()),
        (200, json!(5), json!("Acme"))
    );
    let (_, teams) = admin(gw, "GET", "/admin/teams", None).await;
    assert_eq!(teams, json!({"data": [t]}));
    let (_, one) = admin(gw, "GET", "/admin/teams/acme", None).await;
    assert_eq!(one, t);

    // Rotate: a new secret and hash; the old token stops working at once.
    let (s, r) = admin(gw, "POST", &format!("/admin/keys/{id}/rotate"), None).await;
    assert_eq!(s, 200, "{r}");
    let new_secret = r["secret"].as_str().unwrap().to_string();
    assert_ne!(new_secret, secret);
    let new_hash = db.hash(&id).await;
    assert_ne!(new_hash, hash);
    secrets.extend([new_secret.clone(), new_hash]);
    let (s, _) = request(gw, "GET", "/v1/models", Some(&secret), None).await;
    assert_eq!(s, 401);
    let (s, _) = request(gw, "GET", "/v1/models", Some(&new_secret), None).await;
    assert_eq!(s, 200);

    // Revoke.
    let (s, rv) = admin(gw, "POST", &format!("/admin/keys/{id}/revoke"), None).await;
    assert_eq!((s, rv["state"].clone()), (200, json!("revoked")));
    let (s, v) = request(gw, "GET", "/v1/models", Some(&new_secret), None).await;
    assert_eq!(s, 401, "{v}");
    let (_, v) = admin(gw, "GET", "/admin/keys?state=revoked", None).await;
    assert_eq!(v["data"][0]["id"], json!(id));
    let (s, v) = admin(gw, "POST", &format!("/admin/keys/{id}/rotate"), None).await;
    assert_eq!((s, v["error"]["param"].clone()), (400, json!("state")));

    // Spend over rows written straight into the ledger.
    let day = 1_796_169_600_000i64; // 2026-12-02T00:00:00Z
    db.ledger(&[
        (
            "s1",
            "L1",
            "attempt",
            "llm",
            "m1",
            Some(0.25),
            10,
            5,
            &id,
            day + 1_000,
        ),
        (
            "s2",
            "L1",
            "attempt",
            "llm",
            "m2",
            Some(0.5),
            20,
            6,
            &id,
            day + 2_000,
        ),
        (
            "s3",
            "L1",
            "terminal_success",
            "llm",
            "m2",
            None,
            20,
            6,
            &id,
            day + 3_000,
        ),
        (
            "s4",
            "L2",
            "cache_hit",
            "embed",
            "m1",
            Some(0.0),
            7,
            0,
            &id,
            day + 86_400_000,
        ),
        (
            "s5",
            "L3",
            "attempt",
            "llm",
            "m1",
            Some(4.0),
            1,
            1,
            "key_other",
            day + 5_000,
        ),
    ])
    .await;
    let (s, v) = admin(
        gw,
        "GET",
        &format!("/admin/spend?key={id}&from=2026-12-02&to=2026-12-03&group_by=model"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v,
        json!({"data": [
                  {"group": "m1", "cost_usd": 0.25, "calls": 2, "prompt_tokens": 17, "completion_tokens": 5},
                  {"group": "m2", "cost_usd": 0.5, "calls": 1, "prompt_tokens": 20, "completion_tokens": 6}],
               "total_usd": 0.75, "from": "2026-12-02T00:00:00Z", "to": "2026-12-04T00:00:00Z"})
    );
    let (_, v) = admin(
        gw,
        "GET",
        "/admin/spend?team=acme&from=2026-12-02T00:00:00Z&to=2026-12-02T23:59:59Z",
        None,
    )
    .await;
    assert_eq!(
        v,
        json!({"data": [{"group": "2026-12-02", "cost_usd": 4.75, "calls": 2, "prompt_tokens": 31, "completion_tokens": 12}],
               "total_usd": 4.75, "from": "2026-12-02T00:00:00Z", "to": "2026-12-02T23:59:59Z"})
    );
    let (_, v) = admin(
        gw,
        "GET",
        "/admin/spend?team=acme&from=2026-12-01&to=2026-12-31&group_by=scope",
        None,
    )
    .await;
    assert_eq!(
        v["data"][0],
        json!({"group": "embed", "cost_usd": 0.0, "calls": 1, "prompt_tokens": 7, "completion_tokens": 0})
    );
    assert_eq!(v["data"][1]["cost_usd"], json!(4.75));
    for (q, param) in [
        ("group_by=hour", "group_by"),
        ("from=yesterday", "from"),
        ("to=2026-02-30", "to"),
    ] {
        let (s, v) = admin(gw, "GET", &format!("/admin/spend?{q}"), None).await;
        assert_eq!((s, v["error"]["param"].clone()), (400, json!(param)), "{q}");
    }
    secrets
}

/// The env of a gateway with keys on (telemetry as given).
async fn keyed_env(
    telemetry: &[(String, String)],
) -> (polygateway_tests::MockUpstream, Vec<(String, String)>) {
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "keys-admin", "m");
    env.extend([
        kv("PGW_VIRTUAL_KEYS", "true"),
        kv("PGW_KEY_HASH_SECRET", HASH_SECRET),
        kv("PGW_ADMIN_KEYS", ADMIN),
    ]);
    env.extend(telemetry.iter().cloned());
    (m, env)
}

/// The server logged none of the secrets or hashes.
fn assert_logs_clean(stderr: &str, secrets: &[String]) {
    assert!(!stderr.is_empty());
    for s in secrets {
        assert!(
            !stderr.contains(s.as_str()),
            "a secret or hash is in the log:\n{stderr}"
        );
    }
}

#[tokio::test]
async fn the_admin_api_on_sqlite() {
    let (_m, env) = keyed_env(&[kv("PGW_TELEMETRY_BACKEND", "sqlite")]).await;
    let gw = gateway(env).await;
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", gw.telemetry_db().display()))
        .await
        .unwrap();
    let secrets = admin_flow(&gw, &Db::Sqlite(pool)).await;
    assert_logs_clean(&gw.stop().await, &secrets);
}

#[tokio::test]
async fn the_admin_api_on_postgres() {
    let schema = format!("pgw_keys_admin_{}", std::process::id());
    let root = sqlx::PgPool::connect(PG)
        .await
        .expect("postgres at 127.0.0.1:5432");
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(&root)
        .await
        .unwrap();
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&root)
        .await
        .unwrap();
    root.close().await;
    let dsn = format!("{PG}?options[search_path]={schema}");
    let (_m, env) = keyed_env(&[
        kv("PGW_TELEMETRY_BACKEND", "postgres"),
        kv("PGW_TELEMETRY_PG_DSN", &dsn),
    ])
    .await;
    let gw = gateway(env).await;
    let pool = sqlx::PgPool::connect(&dsn).await.unwrap();
    let secrets = admin_flow(&gw, &Db::Postgres(pool)).await;
    assert_logs_clean(&gw.stop().await, &secrets);
}

#[tokio::test]
async fn without_admin_keys_or_with_keys_off_the_routes_refuse() {
    // No PGW_ADMIN_KEYS: 403 for everyone.
    let (_m, mut env) = keyed_env(&[kv("PGW_TELEMETRY_BACKEND", "sqlite")]).await;
    env.retain(|(k, _)| k != "PGW_ADMIN_KEYS");
    let gw = gateway(env).await;
    let (s, v) = request(
        &gw,
        "POST",
        "/admin/keys",
        Some(ADMIN),
        Some(json!({"name": "x"})),
    )
    .await;
    assert_eq!(
        (s, v["error"]["type"].clone()),
        (403, json!("permission_error"))
    );
    drop(gw);
    // Keys off: 404 naming PGW_VIRTUAL_KEYS, after the admin check.
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "keys-off", "m");
    env.push(kv("PGW_ADMIN_KEYS", ADMIN));
    let gw = gateway(env).await;
    let (s, _) = request(&gw, "GET", "/admin/teams", None, None).await;
    assert_eq!(s, 401);
    for (method, path) in [
        ("GET", "/admin/keys"),
        ("POST", "/admin/teams"),
        ("GET", "/admin/spend"),
    ] {
        let (s, v) = admin(&gw, method, path, Some(json!({}))).await;
        assert_eq!(
            (s, v["error"]["type"].clone(), v["error"]["code"].clone()),
            (404, json!("not_found_error"), Value::Null),
            "{path}: {v}"
        );
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("PGW_VIRTUAL_KEYS")
        );
    }
}

#[tokio::test]
async fn keys_on_with_telemetry_off_is_a_config_problem() {
    let (_m, env) = keyed_env(&[kv("PGW_TELEMETRY_BACKEND", "none")]).await;
    let err = polygateway_tests::GatewayProcess::try_start(bin(), &env)
        .await
        .err()
        .expect("start-up refused");
    assert!(err.contains("PGW_VIRTUAL_KEYS"), "{err}");
    let (_m, mut env) = keyed_env(&[kv("PGW_TELEMETRY_BACKEND", "sqlite")]).await;
    env.retain(|(k, _)| k != "PGW_KEY_HASH_SECRET");
    let err = polygateway_tests::GatewayProcess::try_start(bin(), &env)
        .await
        .err()
        .expect("start-up refused");
    assert!(err.contains("PGW_KEY_HASH_SECRET"), "{err}");
}

/// `polygateway <args>` in `dir` with `env`: exit code, stdout, stderr.
async fn cli(dir: &Path, env: &[(String, String)], args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .await
        .expect("run polygateway");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_cli_creates_lists_and_revokes_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    let (_m, env) = keyed_env(&[
        kv("PGW_TELEMETRY_BACKEND", "sqlite"),
        kv("PGW_TELEMETRY_SQLITE_PATH", db.display()),
    ])
    .await;
    let (code, out, err) = cli(
        dir.path(),
        &env,
        &[
            "teams", "create", "--name", "Acme", "--id", "acme", "--rpm", "100",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let team: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (team["id"].clone(), team["limits"]["rpm"].clone()),
        (json!("acme"), json!(100))
    );

    let (code, out, err) = cli(
        dir.path(),
        &env,
        &[
            "keys",
            "create",
            "--name",
            "ci",
            "--team",
            "acme",
            "--scopes",
            "llm,embed",
            "--rpm",
            "10",
            "--tpm",
            "1000",
            "--max-concurrency",
            "2",
            "--budget",
            "daily:10.0:8.0",
            "--budget",
            "total:100",
            "--expires-at",
            "2100-01-01T00:00:00Z",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let created: Value = serde_json::from_str(&out).unwrap();
    let key = created["key"].clone();
    let id = key["id"].as_str().unwrap().to_string();
    let secret = created["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with(&format!("sk-pgw-{id}-")));
    let at = key["created_at_ms"].clone();
    assert_eq!(
        key,
        json!({"id": id, "name": "ci", "team_id": "acme", "scopes": ["llm", "embed"],
               "limits": {"rpm": 10, "tpm": 1000, "max_concurrency": 2},
               "budgets": [{"period": "daily", "limit_usd": 10.0, "soft_limit_usd": 8.0},
                           {"period": "total", "limit_usd": 100.0, "soft_limit_usd": null}],
               "expires_at": 4_102_444_800i64, "metadata": {}, "state": "active",
               "created_at_ms": at, "updated_at_ms": at})
    );

    let (code, out, _) = cli(dir.path(), &env, &["keys", "list"]).await;
    assert_eq!(code, 0);
    let tail = &secret[secret.len() - 43..];
    assert!(!out.contains(tail));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"data": [key]})
    );

    let (code, out, err) = cli(dir.path(), &env, &["keys", "revoke", &id]).await;
    assert_eq!(code, 0, "{err}");
    let revoked: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(revoked["state"], "revoked");
    let (_, out, _) = cli(dir.path(), &env, &["keys", "list", "--state", "active"]).await;
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"data": []})
    );
    let (_, out, _) = cli(dir.path(), &env, &["teams", "list"]).await;
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["data"][0]["id"],
        "acme"
    );

    // Errors name their field and exit 1.
    for (args, needle) in [
        (
            vec!["keys", "create", "--name", "x", "--budget", "hourly:1"],
            "--budget",
        ),
        (
            vec!["keys", "create", "--name", "x", "--team", "nope"],
            "team_id",
        ),
        (
            vec!["keys", "revoke", "key_aaaaaaaaaaaaaaaa"],
            "no key with id",
        ),
    ] {
        let (code, out, err) = cli(dir.path(), &env, &args).await;
        assert_eq!((code, out.as_str()), (1, ""), "{args:?}");
        assert!(
            err.starts_with("polygateway: ") && err.contains(needle),
            "{args:?}: {err}"
        );
    }

    // A gateway on the same file sees the key the CLI made (revoked) and refuses it.
    let gw = gateway(env).await;
    let (s, v) = request(&gw, "GET", "/v1/models", Some(&secret), None).await;
    assert_eq!(s, 401, "{v}");
    let (_, v) = admin(&gw, "GET", &format!("/admin/keys/{id}"), None).await;
    assert_eq!(v, revoked);
}
