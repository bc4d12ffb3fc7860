//! Telemetry and cost through a real gateway process (docs/telemetry.md): the
//! rows of a failover on SQLite and on the real Postgres (cost only on the answering row),
//! a manual-mode table missing columns, Postgres going away and coming back behind a TCP
//! forwarder the test controls, streamed and non-streamed answers priced alike, a
//! partitioned table, `telemetry schema-sql`, and exact `/metrics` counters.
//!
//! Each Postgres test works in its own schema (`?options[search_path]=…` in the DSN), so
//! the tests run in parallel against the one shared server, which they never stop.

use std::path::Path;

use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::common::{bin, gateway, kv, source};
use polygateway::telemetry::{SchemaBackend, create_table_sql};
use polygateway_tests::{GatewayProcess, MockUpstream, eventually, mock, script, telemetry_rows};

const PG: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The columns the tests read.
const COLUMNS: &[&str] = &[
    "call_id",
    "logical_call_id",
    "event",
    "source_name",
    "model",
    "error_type",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "reasoning_tokens",
    "usage_source",
    "attempts",
    "cost",
    "cache_hit",
    "tenant_id",
    "meta",
    "session_id",
    "messages",
    "response",
    "total_latency_ms",
];

/// A fresh schema of the shared test database; returns an admin pool on it and the DSN
/// the gateway uses.
async fn pg_schema(name: &str) -> (PgPool, String) {
    let schema = format!("pgw_{name}_{}", std::process::id());
    let admin = PgPool::connect(PG)
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
    let dsn = format!("{PG}?options[search_path]={schema}");
    let pool = PgPool::connect(&dsn).await.unwrap();
    (pool, dsn)
}

/// Rows of `llm_calls` as JSON objects (through `to_jsonb`), ordered like the SQLite helper.
async fn pg_rows(pool: &PgPool, columns: &[&str]) -> Vec<Value> {
    let sql = format!(
        "SELECT to_jsonb(t)::text FROM (SELECT {} FROM llm_calls ORDER BY created_at, event) t",
        columns.join(", ")
    );
    let rows: Vec<String> = sqlx::query_scalar(&sql)
        .fetch_all(pool)
        .await
        .unwrap_or_default();
    rows.iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect()
}

/// Where a test's rows are read from.
enum Store {
    Sqlite(std::path::PathBuf),
    Postgres(PgPool),
}

impl Store {
    async fn rows(&self) -> Vec<Value> {
        match self {
            Store::Sqlite(db) => telemetry_rows(db, COLUMNS).await,
            Store::Postgres(pool) => pg_rows(pool, COLUMNS).await,
        }
    }

    /// The rows of one logical call, once there are `n`, sorted by event then source.
    async fn call_rows(&self, call_id: &str, n: usize) -> Vec<Value> {
        let mut rows = eventually(20, || async {
            let rows: Vec<Value> = self
                .rows()
                .await
                .into_iter()
                .filter(|r| r["logical_call_id"] == call_id)
                .collect();
            (rows.len() >= n).then_some(rows)
        })
        .await;
        rows.sort_by_key(|r| {
            (
                r["event"].as_str().unwrap_or_default().to_string(),
                r["source_name"].as_str().unwrap_or_default().to_string(),
            )
        });
        rows
    }
}

/// A JSON column read back: SQLite gives text, Postgres a JSON value.
fn json_col(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
        other => other.clone(),
    }
}

/// A boolean column read back: SQLite gives 0/1, Postgres true/false.
fn bool_col(v: &Value) -> bool {
    v.as_bool().unwrap_or_else(|| v.as_i64() == Some(1))
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-12)
}

/// Write a pricing file into `dir`.
fn pricing(dir: &Path, table: Value) -> String {
    let path = dir.join("pricing.json");
    std::fs::write(&path, table.to_string()).unwrap();
    path.display().to_string()
}

/// POST a chat completion with `x-pgw-*` headers; returns status, call id and body.
async fn chat(gw: &GatewayProcess, body: Value, headers: &[(&str, &str)]) -> (u16, String, String) {
    let mut req = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("gateway reachable");
    let status = resp.status().as_u16();
    let call_id = resp
        .headers()
        .get("x-pgw-call-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, call_id, resp.text().await.unwrap())
}

async fn healthz(gw: &GatewayProcess) -> Value {
    reqwest::get(format!("{}/healthz", gw.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn body(stream: bool) -> Value {
    let mut b = json!({
        "model": "llm",
        "messages": [{"role": "user", "content": "say hello to the test"}],
        "stream": stream,
        "temperature": 0.5,
    });
    if stream {
        b["stream_options"] = json!({"include_usage": true});
    }
    b
}

/// Two sources: the first answers 503 once; a price for each model.
async fn failover_env(m: &MockUpstream, tag: &str, dir: &Path) -> Vec<(String, String)> {
    let a = format!("{tag}-a");
    script(m, &a, json!({"steps": [{"status": 503}]})).await;
    let mut env = source(m, "openai", 1, &a, "model-a");
    env.extend(source(m, "openai", 2, &format!("{tag}-b"), "model-b"));
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    env.push(kv("PGW_CACHE_BACKEND", "none"));
    env.push(kv(
        "PGW_PRICING_FILE",
        pricing(
            dir,
            json!({"model-a": {"input": 3.0, "output": 9.0}, "model-b": {"input": 1.0, "output": 2.0}}),
        ),
    ));
    env
}

/// One call that fails over once: two attempt rows and one terminal row sharing the
/// logical call id, the cost only on the answering attempt, the caller's dimensions on
/// every row.
async fn assert_failover_rows(gw: &GatewayProcess, store: &Store) {
    let (status, call_id, text) = chat(
        gw,
        body(false),
        &[
            ("x-pgw-tenant-id", "acme"),
            ("x-pgw-meta", r#"{"batch":"b1","n":2}"#),
            ("x-pgw-session-id", "s-1"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let rows = store.call_rows(&call_id, 3).await;
    assert_eq!(rows.len(), 3, "{rows:#?}");
    let events: Vec<&str> = rows.iter().map(|r| r["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["attempt", "attempt", "terminal_success"]);
    let (failed, answered, terminal) = (&rows[0], &rows[1], &rows[2]);
    for r in &rows {
        assert_eq!(r["logical_call_id"], call_id.as_str());
        assert_eq!(r["tenant_id"], "acme");
        assert_eq!(json_col(&r["meta"]), json!({"batch": "b1", "n": 2}));
        assert_eq!(r["session_id"], "s-1");
        assert!(!bool_col(&r["cache_hit"]));
        assert_eq!(
            json_col(&r["messages"]),
            json!([{"role": "user", "content": "say hello to the test"}])
        );
    }
    assert_eq!(terminal["call_id"], call_id.as_str());
    assert_ne!(failed["call_id"], answered["call_id"]);

    assert_eq!(failed["source_name"], "openai-1");
    assert_eq!(failed["error_type"], "transient");
    assert_eq!(failed["usage_source"], "unavailable");
    assert_eq!(failed["prompt_tokens"], Value::Null);
    assert_eq!(failed["cost"], Value::Null);

    assert_eq!(answered["source_name"], "openai-2");
    assert_eq!(answered["error_type"], Value::Null);
    assert_eq!(answered["prompt_tokens"], 5);
    assert_eq!(answered["completion_tokens"], 5);
    assert_eq!(answered["usage_source"], "measured");
    assert_eq!(answered["response"], "Hello from the mock upstream.");
    // 5 prompt tokens × 1.0 + 5 completion tokens × 2.0 per million.
    assert!(close(&answered["cost"], 15.0 / 1e6), "{answered}");

    assert_eq!(terminal["source_name"], "openai-2");
    assert_eq!(terminal["attempts"], 2);
    assert_eq!(terminal["prompt_tokens"], 5);
    assert_eq!(terminal["cost"], Value::Null);
    assert!(terminal["total_latency_ms"].as_i64().is_some());
    assert_eq!(answered["attempts"], Value::Null);
}

#[tokio::test]
async fn a_failover_writes_two_attempt_rows_and_one_terminal_row_on_sqlite() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut env = failover_env(&m, "tsq", dir.path()).await;
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    let gw = gateway(env).await;
    assert_failover_rows(&gw, &Store::Sqlite(gw.telemetry_db())).await;
}

#[tokio::test]
async fn a_failover_writes_two_attempt_rows_and_one_terminal_row_on_postgres() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let (pool, dsn) = pg_schema("failover").await;
    let mut env = failover_env(&m, "tpg", dir.path()).await;
    env.push(kv("PGW_TELEMETRY_BACKEND", "postgres"));
    env.push(kv("PGW_TELEMETRY_PG_DSN", dsn));
    let gw = gateway(env).await;
    assert_failover_rows(&gw, &Store::Postgres(pool)).await;
    let h = healthz(&gw).await;
    assert_eq!(h["telemetry"]["backend"], "postgres");
    assert_eq!(h["telemetry"]["degraded"], false);
}

#[tokio::test]
async fn a_manual_mode_table_missing_two_columns_still_receives_rows_and_the_warning_names_them() {
    let m = mock().await;
    let (pool, dsn) = pg_schema("manual").await;
    sqlx::query(&create_table_sql(SchemaBackend::Postgres))
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("ALTER TABLE llm_calls DROP COLUMN thinking, DROP COLUMN sampling")
        .execute(&pool)
        .await
        .unwrap();
    let mut env = source(&m, "openai", 1, "tmanual", "model-a");
    env.push(kv("PGW_TELEMETRY_BACKEND", "postgres"));
    env.push(kv("PGW_TELEMETRY_PG_DSN", dsn));
    let gw = gateway(env).await;
    let (status, call_id, text) = chat(&gw, body(false), &[]).await;
    assert_eq!(status, 200, "{text}");
    let store = Store::Postgres(pool.clone());
    let rows = store.call_rows(&call_id, 2).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(
        healthz(&gw).await["telemetry"]["missing_columns"],
        json!(["thinking", "sampling"])
    );
    let log = gw.stop().await;
    assert!(
        log.contains("lacks columns thinking, sampling")
            && log.contains("ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS thinking TEXT;")
            && log.contains("ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS sampling JSONB;"),
        "{log}"
    );
    // Manual mode never alters the table.
    let cols: Vec<String> = sqlx::query_scalar(
        "SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass('llm_calls') AND attnum > 0 AND NOT attisdropped",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(!cols.iter().any(|c| c == "thinking" || c == "sampling"));
}

/// A TCP forwarder to the shared Postgres that the test can stop and restart on one port.
struct Forwarder {
    port: u16,
    task: Option<JoinHandle<()>>,
}

impl Forwarder {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        Self {
            port,
            task: Some(tokio::spawn(forward(listener))),
        }
    }

    /// Stop listening and cut every forwarded connection.
    async fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
    }

    async fn restart(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await.unwrap();
        self.task = Some(tokio::spawn(forward(listener)));
    }
}

async fn forward(listener: TcpListener) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        conns.spawn(async move {
            if let Ok(mut out) = TcpStream::connect("127.0.0.1:5432").await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
            }
        });
    }
}

#[tokio::test]
async fn postgres_going_away_degrades_telemetry_without_failing_calls_and_rows_resume() {
    let m = mock().await;
    let (pool, _) = pg_schema("outage").await;
    let schema: String = sqlx::query_scalar("SELECT current_schema()::text")
        .fetch_one(&pool)
        .await
        .unwrap();
    let mut fwd = Forwarder::start().await;
    let dsn = format!(
        "postgres://postgres@127.0.0.1:{}/test?options[search_path]={schema}",
        fwd.port
    );
    let mut env = source(&m, "openai", 1, "toutage", "model-a");
    env.push(kv("PGW_TELEMETRY_BACKEND", "postgres"));
    env.push(kv("PGW_TELEMETRY_PG_DSN", dsn));
    env.push(kv("PGW_TELEMETRY_PG_WRITE_TIMEOUT_S", "1"));
    env.push(kv("PGW_CACHE_BACKEND", "none"));
    let gw = gateway(env).await;
    let store = Store::Postgres(pool);

    let (status, call_id, _) = chat(&gw, body(false), &[]).await;
    assert_eq!(status, 200);
    store.call_rows(&call_id, 2).await;

    fwd.stop().await;
    let h = eventually(60, || async {
        let (status, _, text) = chat(&gw, body(false), &[]).await;
        assert_eq!(status, 200, "calls keep succeeding: {text}");
        let h = healthz(&gw).await;
        let t = &h["telemetry"];
        (t["degraded"] == true && t["dropped_rows"].as_u64().unwrap_or(0) > 0).then_some(h)
    })
    .await;
    assert_eq!(h["telemetry"]["fatal"], false);
    assert!(h["telemetry"]["reason"].as_str().is_some(), "{h}");

    fwd.restart().await;
    eventually(90, || async {
        let (status, call_id, _) = chat(&gw, body(false), &[]).await;
        assert_eq!(status, 200);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let rows = store.rows().await;
        rows.iter()
            .any(|r| r["logical_call_id"] == call_id.as_str())
            .then_some(())
    })
    .await;
    let h = healthz(&gw).await;
    assert_eq!(h["telemetry"]["degraded"], false, "{h}");
    assert!(h["telemetry"]["dropped_rows"].as_u64().unwrap() > 0);
    fwd.stop().await;
}

#[tokio::test]
async fn a_streamed_answer_with_cached_and_reasoning_tokens_costs_the_same_as_non_streamed() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    script(
        &m,
        "tprice",
        json!({"then": {"reasoning": "first think it over", "cached_tokens": 3}}),
    )
    .await;
    let mut env = source(&m, "deepseek", 1, "tprice", "deepseek-chat");
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    env.push(kv("PGW_CACHE_BACKEND", "none"));
    env.push(kv(
        "PGW_PRICING_FILE",
        pricing(
            dir.path(),
            json!({"deepseek-chat": {"input": 2.0, "output": 8.0, "cached_input": 0.5}}),
        ),
    ));
    let gw = gateway(env).await;
    let store = Store::Sqlite(gw.telemetry_db());
    let mut costs = Vec::new();
    for stream in [false, true] {
        let (status, call_id, text) = chat(&gw, body(stream), &[]).await;
        assert_eq!(status, 200, "{text}");
        let rows = store.call_rows(&call_id, 2).await;
        let attempt = &rows[0];
        assert_eq!(attempt["event"], "attempt");
        assert_eq!(attempt["prompt_tokens"], 5, "{attempt}");
        assert_eq!(attempt["cached_prompt_tokens"], 3);
        assert_eq!(attempt["reasoning_tokens"], 4);
        // Completion: 5 answer pieces + 4 reasoning pieces.
        assert_eq!(attempt["completion_tokens"], 9);
        costs.push(attempt["cost"].as_f64().expect("priced"));
    }
    // (5 − 3) × 2.0 + 3 × 0.5 + 9 × 8.0 per million.
    let expected = (2.0 * 2.0 + 3.0 * 0.5 + 9.0 * 8.0) / 1e6;
    assert!((costs[0] - expected).abs() < 1e-12, "{costs:?}");
    assert_eq!(costs[0], costs[1]);
}

#[tokio::test]
async fn schema_sql_prints_the_ddl_the_host_runs_and_a_partitioned_table_receives_rows() {
    for (arg, backend) in [
        ("postgres", SchemaBackend::Postgres),
        ("sqlite", SchemaBackend::Sqlite),
    ] {
        let out = std::process::Command::new(bin())
            .args(["telemetry", "schema-sql", "--backend", arg])
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!("{};\n", create_table_sql(backend))
        );
    }

    // The printed DDL plus a partition key makes a partitioned table the host writes into.
    let m = mock().await;
    let (pool, dsn) = pg_schema("partitioned").await;
    let partitioned = format!(
        "{} PARTITION BY RANGE (created_at)",
        create_table_sql(SchemaBackend::Postgres)
    );
    sqlx::query(&partitioned).execute(&pool).await.unwrap();
    sqlx::query("CREATE TABLE llm_calls_default PARTITION OF llm_calls DEFAULT")
        .execute(&pool)
        .await
        .unwrap();
    let mut env = source(&m, "openai", 1, "tpart", "model-a");
    env.push(kv("PGW_TELEMETRY_BACKEND", "postgres"));
    env.push(kv("PGW_TELEMETRY_PG_DSN", dsn));
    let gw = gateway(env).await;
    let (status, call_id, _) = chat(&gw, body(true), &[]).await;
    assert_eq!(status, 200);
    let rows = Store::Postgres(pool.clone()).call_rows(&call_id, 2).await;
    assert_eq!(rows.len(), 2);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM llm_calls_default")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 2);
    let h = healthz(&gw).await;
    assert_eq!(h["telemetry"]["missing_columns"], json!([]));
    assert_eq!(h["telemetry"]["dropped_rows"], 0);
}

#[tokio::test]
async fn metrics_expose_exact_counters_after_a_known_sequence() {
    let m = mock().await;
    let dir = tempfile::tempdir().unwrap();
    script(&m, "tmet", json!({"steps": [{"status": 503}]})).await;
    script(&m, "tmet-judge", json!({"then": {"status": 400}})).await;
    let mut env = source(&m, "openai", 1, "tmet", "model-a");
    env.extend([
        kv("JUDGE__OPENAI__1__BASE_URL", m.base_url("tmet-judge")),
        kv("JUDGE__OPENAI__1__MODEL", "judge-model"),
        kv("JUDGE__SELECTOR", "round-robin"),
        kv("LLM__RETRY__BASE_DELAY_S", "0.01"),
        kv("PGW_CACHE_BACKEND", "none"),
        kv(
            "PGW_PRICING_FILE",
            pricing(
                dir.path(),
                json!({"model-a": {"input": 1.0, "output": 2.0}}),
            ),
        ),
    ]);
    let gw = gateway(env).await;
    // Call 1: a 503, then an answer; call 2: an answer; call 3: rejected by the upstream.
    for _ in 0..2 {
        let (status, _, text) = chat(&gw, body(false), &[]).await;
        assert_eq!(status, 200, "{text}");
    }
    let mut judge = body(false);
    judge["model"] = json!("judge");
    let (status, _, _) = chat(&gw, judge, &[]).await;
    assert_eq!(status, 400);

    let resp = reqwest::get(format!("{}/metrics", gw.base_url))
        .await
        .unwrap();
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = resp.text().await.unwrap();
    for (series, value) in [
        (
            r#"pgw_requests_total{scope="LLM",source="openai-1",outcome="success",error_class=""}"#,
            2.0,
        ),
        (
            r#"pgw_requests_total{scope="JUDGE",source="openai-1",outcome="failure",error_class="request_rejected"}"#,
            1.0,
        ),
        (
            r#"pgw_attempts_total{scope="LLM",source="openai-1",outcome="failure",error_class="transient"}"#,
            1.0,
        ),
        (
            r#"pgw_attempts_total{scope="LLM",source="openai-1",outcome="success",error_class=""}"#,
            2.0,
        ),
        (
            r#"pgw_attempts_total{scope="JUDGE",source="openai-1",outcome="failure",error_class="request_rejected"}"#,
            1.0,
        ),
        (
            r#"pgw_tokens_total{scope="LLM",source="openai-1",kind="prompt"}"#,
            10.0,
        ),
        (
            r#"pgw_tokens_total{scope="LLM",source="openai-1",kind="completion"}"#,
            10.0,
        ),
        // Two answers of 5 + 5 tokens at 1.0 and 2.0 per million.
        (
            r#"pgw_cost_total{scope="LLM",source="openai-1"}"#,
            30.0 / 1e6,
        ),
        (
            r#"pgw_attempt_duration_seconds_count{scope="LLM",source="openai-1"}"#,
            3.0,
        ),
        (
            r#"pgw_request_duration_seconds_count{scope="LLM",outcome="success"}"#,
            2.0,
        ),
        (r#"pgw_breaker_state{scope="LLM",source="openai-1"}"#, 0.0),
        (r#"pgw_breaker_state{scope="JUDGE",source="openai-1"}"#, 0.0),
        ("pgw_telemetry_dropped_rows_total", 0.0),
        ("pgw_telemetry_degraded", 0.0),
    ] {
        let got = text.lines().find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .parse::<f64>()
                .ok()
        });
        assert!(
            got.is_some_and(|g| (g - value).abs() < 1e-12),
            "{series} = {got:?}, expected {value}, in\n{text}"
        );
    }
}

#[tokio::test]
async fn the_text_cap_and_digests_apply_to_stored_rows_only_never_to_the_upstream_request() {
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "tcap", "model-a");
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    env.push(kv("PGW_TELEMETRY_TEXT_CAP", "8"));
    let gw = gateway(env).await;
    let image = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB";
    let mut b = body(false);
    b["messages"] = json!([{"role": "user", "content": [
        {"type": "text", "text": "describe this picture please"},
        {"type": "image_url", "image_url": {"url": image}},
    ]}]);
    let (status, call_id, text) = chat(&gw, b.clone(), &[]).await;
    assert_eq!(status, 200, "{text}");
    // The upstream got the request untouched.
    let sent = &polygateway_tests::hits(&m, "tcap").await[0]["body"]["messages"];
    assert_eq!(sent, &b["messages"]);

    let rows = Store::Sqlite(gw.telemetry_db())
        .call_rows(&call_id, 2)
        .await;
    for r in &rows {
        let stored = r["messages"].as_str().unwrap();
        assert!(!stored.contains("iVBOR"), "binary part stored: {stored}");
        let parts = &json_col(&r["messages"])[0]["content"];
        assert_eq!(parts[0]["text"], "describe…[20 chars cut]");
        assert_eq!(parts[1]["type"], "image_url");
        assert!(parts[1].to_string().contains("sha256"), "{}", parts[1]);
        assert_eq!(r["response"], "Hello fr…[21 chars cut]");
    }
}

#[tokio::test]
async fn metrics_need_the_client_key_when_keys_are_set() {
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "tmetkey", "model-a");
    env.push(kv("PGW_API_KEYS", "k1"));
    let gw = gateway(env).await;
    let url = format!("{}/metrics", gw.base_url);
    let client = reqwest::Client::new();
    let denied = client.get(&url).send().await.unwrap();
    assert_eq!(denied.status().as_u16(), 401);
    let ok = client.get(&url).bearer_auth("k1").send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    assert!(
        ok.text()
            .await
            .unwrap()
            .contains("pgw_telemetry_dropped_rows_total 0")
    );
}
