//! The operator dashboard (`/ui/` and `/admin/dashboard/*`, docs/dashboard.md) on a real
//! `polygateway serve` with a SQLite ledger: the JSON API's answers checked exactly against
//! the calls made (the ledger's calls and attempts, spend and tokens, the live series, auth
//! and every bad parameter), the page's assets, and the page itself in real browsers
//! (`tests/node/dashboard.mjs`; Debian's Chromium driven by Playwright, Debian's Firefox ESR
//! by Puppeteer over WebDriver BiDi): sign in, a breaker opening while the mock fails a
//! source, a limiter gate filling, the call list filtered to one failed call and its
//! attempts — with a screenshot of each page in each browser.

use std::time::Duration;

use polygateway_tests::{GatewayProcess, MockUpstream, eventually, mock, repo_root, script};
use serde_json::{Value, json};

use crate::common::{gateway, kv, source};

const ADMIN: &str = "adm-dashboard-key";
const CLIENT: &str = "cli-dashboard-key";

/// Two scopes: `LLM` with sources openai-1 and openai-2 (breaker opens after 2 failures,
/// openai-2 limited to 3 concurrent calls), and `BAD` whose only source fails; priced.
fn env(m: &MockUpstream, tag: &str, pricing: &std::path::Path) -> Vec<(String, String)> {
    let mut env = vec![
        kv("PGW_ADMIN_KEYS", ADMIN),
        kv("PGW_API_KEYS", CLIENT),
        kv("PGW_TELEMETRY_BACKEND", "sqlite"),
        kv("PGW_CACHE_BACKEND", "none"),
        kv("PGW_PRICING_FILE", pricing.display()),
        kv("LLM__BREAKER__FAIL_THRESHOLD", 2),
        kv("LLM__BREAKER__COOLDOWN_S", 600),
        kv("LLM__RETRY__BASE_DELAY_S", 0.01),
        kv("LLM__OPENAI__2__MAX_CONCURRENCY", 3),
        kv("BAD__RETRY__BASE_DELAY_S", 0.01),
        kv("BAD__SELECTOR", "round-robin"),
    ];
    for (scope, n, scenario) in [
        ("LLM", 1, format!("{tag}-a")),
        ("LLM", 2, format!("{tag}-b")),
        ("BAD", 1, format!("{tag}-bad")),
    ] {
        let p = format!("{scope}__OPENAI__{n}__");
        env.push(kv(&format!("{p}BASE_URL"), m.base_url(&scenario)));
        env.push(kv(&format!("{p}MODEL"), "gpt-dash"));
        env.push(kv(&format!("{p}API_KEY"), format!("sk-{scenario}")));
    }
    env
}

fn pricing_file() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pricing.json"),
        json!({"gpt-dash": {"input": 1.0, "output": 2.0}}).to_string(),
    )
    .unwrap();
    dir
}

async fn admin_get(gw: &GatewayProcess, path: &str, key: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(format!("{}{path}", gw.base_url));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let resp = req.send().await.expect("gateway reachable");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn chat(gw: &GatewayProcess, model: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .bearer_auth(CLIENT)
        .json(
            &json!({"model": model, "messages": [{"role": "user", "content": "hello dashboard"}]}),
        )
        .send()
        .await
        .expect("gateway reachable");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Wait until the ledger holds `n` calls (the writer is asynchronous).
async fn ledger_calls(gw: &GatewayProcess, n: usize) -> Vec<Value> {
    eventually(10, || async {
        let (s, body) = admin_get(gw, "/admin/dashboard/calls", Some(ADMIN)).await;
        assert_eq!(s, 200, "{body}");
        let calls = body["calls"].as_array().cloned().unwrap_or_default();
        (calls.len() >= n).then_some(calls)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_api_reports_the_ledgers_calls_attempts_spend_and_the_live_series() {
    let m = mock().await;
    let prices = pricing_file();
    let tag = "dash-api";
    script(
        &m,
        &format!("{tag}-a"),
        json!({"steps": [{"status": 500}], "then": {"usage": true}}),
    )
    .await;
    script(&m, &format!("{tag}-b"), json!({"then": {"usage": true}})).await;
    script(&m, &format!("{tag}-bad"), json!({"then": {"status": 500}})).await;
    let gw = gateway(env(&m, tag, &prices.path().join("pricing.json"))).await;

    // Call 1: openai-1 fails with 500, openai-2 answers (two attempts). Call 2: openai-2
    // answers (round robin). Call 3: the BAD scope fails.
    let (s1, a1) = chat(&gw, "llm").await;
    assert_eq!(s1, 200, "{a1}");
    let (s2, a2) = chat(&gw, "llm").await;
    assert_eq!(s2, 200, "{a2}");
    let (s3, e3) = chat(&gw, "bad").await;
    assert_eq!(s3, 503, "{e3}");
    let calls = ledger_calls(&gw, 3).await;
    assert_eq!(calls.len(), 3, "{calls:?}");
    let statuses: Vec<&str> = calls
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["failure", "success", "success"], "newest first");

    // The failed call, alone under status=failure, and its attempts in order.
    let (s, failed) = admin_get(&gw, "/admin/dashboard/calls?status=failure", Some(ADMIN)).await;
    assert_eq!(s, 200);
    let failed = failed["calls"].as_array().unwrap().clone();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["scope"], "BAD");
    assert_eq!(failed[0]["error_type"], "scope_unavailable");
    let failed_id = failed[0]["call_id"].as_str().unwrap().to_string();
    let (s, detail) = admin_get(
        &gw,
        &format!("/admin/dashboard/calls/{failed_id}"),
        Some(ADMIN),
    )
    .await;
    assert_eq!(s, 200, "{detail}");
    let attempts = detail["attempts"].as_array().unwrap();
    assert_eq!(
        attempts.len() as i64,
        detail["call"]["attempts"].as_i64().unwrap()
    );
    assert!(!attempts.is_empty());
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(a["attempt"], i as i64 + 1);
        assert_eq!(a["source"], "openai-1");
        assert_eq!(a["error_type"], "transient", "{a}");
        assert_eq!(a["cost"], Value::Null);
    }
    assert_eq!(detail["cost"], Value::Null);

    // The failover call: openai-1's transient failure, then openai-2's answer with its cost.
    let first_id = calls[2]["call_id"].as_str().unwrap();
    let (_, detail) = admin_get(
        &gw,
        &format!("/admin/dashboard/calls/{first_id}"),
        Some(ADMIN),
    )
    .await;
    let attempts = detail["attempts"].as_array().unwrap();
    let shape: Vec<(Value, Value)> = attempts
        .iter()
        .map(|a| (a["source"].clone(), a["error_type"].clone()))
        .collect();
    assert_eq!(
        shape,
        [
            (json!("openai-1"), json!("transient")),
            (json!("openai-2"), Value::Null)
        ]
    );
    let usage1 = &a1["usage"];
    let (p1, c1) = (
        usage1["prompt_tokens"].as_i64().unwrap(),
        usage1["completion_tokens"].as_i64().unwrap(),
    );
    assert_eq!(attempts[1]["prompt_tokens"], p1);
    assert_eq!(attempts[1]["completion_tokens"], c1);
    let cost1 = (p1 as f64 * 1.0 + c1 as f64 * 2.0) / 1e6;
    assert!(
        (detail["cost"].as_f64().unwrap() - cost1).abs() < 1e-12,
        "{detail}"
    );
    assert_eq!(detail["call"]["source"], "openai-2");

    // Filters: by scope and source; an unknown call is 404.
    let (_, by_source) = admin_get(
        &gw,
        "/admin/dashboard/calls?scope=LLM&source=openai-2",
        Some(ADMIN),
    )
    .await;
    assert_eq!(by_source["calls"].as_array().unwrap().len(), 2);
    let (_, none) = admin_get(&gw, "/admin/dashboard/calls?status=cache_hit", Some(ADMIN)).await;
    assert_eq!(none["calls"], json!([]));
    let (s, missing) = admin_get(&gw, "/admin/dashboard/calls/nope", Some(ADMIN)).await;
    assert_eq!(
        (s, missing["error"]["message"].as_str()),
        (404, Some("no call `nope` in the ledger"))
    );

    // Spend by source: openai-2's two answers, tokens exactly the answers' usage.
    let (s, spend) = admin_get(&gw, "/admin/dashboard/spend?group_by=source", Some(ADMIN)).await;
    assert_eq!(s, 200, "{spend}");
    let usage2 = &a2["usage"];
    let (p2, c2) = (
        usage2["prompt_tokens"].as_i64().unwrap(),
        usage2["completion_tokens"].as_i64().unwrap(),
    );
    let lines = spend["lines"].as_array().unwrap();
    let line = |name: &str| {
        lines
            .iter()
            .find(|l| l["group"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}: {spend}"))
    };
    let b = line("openai-2");
    assert_eq!(
        (
            b["prompt_tokens"].as_i64(),
            b["completion_tokens"].as_i64(),
            b["calls"].as_i64()
        ),
        (Some(p1 + p2), Some(c1 + c2), Some(2))
    );
    let cost2 = (p2 as f64 + c2 as f64 * 2.0) / 1e6;
    assert!((b["cost"].as_f64().unwrap() - (cost1 + cost2)).abs() < 1e-12);
    // openai-1 only failed: counted calls, no tokens, no cost.
    let a = line("openai-1");
    assert_eq!(
        (
            a["cost"].clone(),
            a["prompt_tokens"].as_i64(),
            a["calls"].as_i64()
        ),
        (Value::Null, Some(0), Some(2))
    );
    assert_eq!(spend["budgets"], Value::Null, "virtual keys are off");
    let (_, by_scope) = admin_get(&gw, "/admin/dashboard/spend?group_by=scope", Some(ADMIN)).await;
    let scopes: Vec<&str> = by_scope["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["group"].as_str().unwrap())
        .collect();
    assert_eq!(scopes, ["LLM", "BAD"], "largest cost first, no cost last");

    // The live series: three calls, one failed, attempts and tokens as above.
    let (s, o) = admin_get(&gw, "/admin/dashboard/overview", Some(ADMIN)).await;
    assert_eq!(s, 200, "{o}");
    assert_eq!(o["requests_total"], 3);
    let w = &o["window"];
    assert_eq!(w["errors"], json!({"scope_unavailable": 1}));
    assert_eq!(w["prompt_tokens"].as_i64(), Some(p1 + p2));
    assert_eq!(w["completion_tokens"].as_i64(), Some(c1 + c2));
    assert_eq!(
        w["attempts"].as_i64(),
        Some(3 + attempts_of(&gw, &failed_id).await)
    );
    assert!((w["error_rate"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12);
    assert!(w["latency_p50_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(o["scopes"], json!(["BAD", "LLM"]));

    // Sources: the breaker of openai-1 counts its failure; generation 0.
    let (s, src) = admin_get(&gw, "/admin/dashboard/sources", Some(ADMIN)).await;
    assert_eq!(s, 200);
    assert_eq!(src["generation"], 0);
    assert_eq!(src["scopes"]["LLM"]["sources"][0]["name"], "openai-1");
    assert_eq!(
        src["scopes"]["LLM"]["sources"][1]["limiter"]["max_concurrency"],
        3
    );
}

/// Attempts of a call per the ledger.
async fn attempts_of(gw: &GatewayProcess, id: &str) -> i64 {
    let (_, d) = admin_get(gw, &format!("/admin/dashboard/calls/{id}"), Some(ADMIN)).await;
    d["attempts"].as_array().map_or(0, |a| a.len() as i64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spend_page_lists_each_keys_budget_with_its_periods_spend() {
    let m = mock().await;
    let prices = pricing_file();
    let tag = "dash-budgets";
    script(&m, &format!("{tag}-a"), json!({"then": {"usage": true}})).await;
    let mut env = source(&m, "openai", 1, &format!("{tag}-a"), "gpt-dash");
    env.extend([
        kv("PGW_ADMIN_KEYS", ADMIN),
        kv("PGW_VIRTUAL_KEYS", "true"),
        kv(
            "PGW_KEY_HASH_SECRET",
            "dashboard-test-hash-secret-0123456789",
        ),
        kv("PGW_TELEMETRY_BACKEND", "sqlite"),
        kv("PGW_CACHE_BACKEND", "none"),
        kv(
            "PGW_PRICING_FILE",
            prices.path().join("pricing.json").display(),
        ),
    ]);
    let gw = gateway(env).await;
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!("{}/admin/keys", gw.base_url))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "dash", "budgets": [
            {"period": "daily", "limit_usd": 5.0, "soft_limit_usd": 1.0},
            {"period": "total", "limit_usd": 50.0}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (id, secret) = (
        created["key"]["id"].as_str().unwrap().to_string(),
        created["secret"].as_str().unwrap().to_string(),
    );
    let answer: Value = client
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .bearer_auth(&secret)
        .json(&json!({"model": "llm", "messages": [{"role": "user", "content": "hello budget"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let u = &answer["usage"];
    let cost = (u["prompt_tokens"].as_f64().unwrap()
        + 2.0 * u["completion_tokens"].as_f64().unwrap())
        / 1e6;
    ledger_calls(&gw, 1).await;
    let (s, spend) = admin_get(&gw, "/admin/dashboard/spend?group_by=key", Some(ADMIN)).await;
    assert_eq!(s, 200, "{spend}");
    let lines = spend["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 1, "{spend}");
    assert_eq!(lines[0]["group"], id.as_str());
    assert!((lines[0]["cost"].as_f64().unwrap() - cost).abs() < 1e-12);
    let budgets = spend["budgets"].as_array().unwrap();
    let shape: Vec<(Value, Value, Value, Value, Value)> = budgets
        .iter()
        .map(|b| {
            (
                b["owner"].clone(),
                b["id"].clone(),
                b["period"].clone(),
                b["limit_usd"].clone(),
                b["soft_limit_usd"].clone(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (
                json!("key"),
                json!(id),
                json!("daily"),
                json!(5.0),
                json!(1.0)
            ),
            (
                json!("key"),
                json!(id),
                json!("total"),
                json!(50.0),
                Value::Null
            ),
        ]
    );
    for b in budgets {
        assert!(
            (b["spent_usd"].as_f64().unwrap() - cost).abs() < 1e-12,
            "{b}"
        );
    }
    assert_eq!(budgets[1]["period_start_ms"], 0);
    assert_eq!(budgets[1]["resets_at_ms"], Value::Null);
    let day = budgets[0]["resets_at_ms"].as_i64().unwrap()
        - budgets[0]["period_start_ms"].as_i64().unwrap();
    assert_eq!(day, 86_400_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_api_refuses_bad_keys_and_names_bad_parameters() {
    let m = mock().await;
    let prices = pricing_file();
    let gw = gateway(env(&m, "dash-refuse", &prices.path().join("pricing.json"))).await;
    for path in [
        "/admin/dashboard/overview",
        "/admin/dashboard/sources",
        "/admin/dashboard/spend",
        "/admin/dashboard/calls",
        "/admin/dashboard/calls/x",
    ] {
        let (s, _) = admin_get(&gw, path, None).await;
        assert_eq!(s, 401, "{path} without a key");
        let (s, _) = admin_get(&gw, path, Some(CLIENT)).await;
        assert_eq!(s, 401, "{path} with a client key");
    }
    let cases = [
        (
            "/admin/dashboard/calls?status=bogus",
            "status: expected success, failure or cache_hit, got `bogus`",
        ),
        (
            "/admin/dashboard/calls?limit=0",
            "limit: must be between 1 and 500, got 0",
        ),
        (
            "/admin/dashboard/calls?limit=501",
            "limit: must be between 1 and 500, got 501",
        ),
        (
            "/admin/dashboard/spend?group_by=user",
            "group_by: expected key, team, scope, source or model, got `user`",
        ),
        (
            "/admin/dashboard/spend?from=yesterday",
            "from: expected an RFC 3339 timestamp or a YYYY-MM-DD date, got `yesterday`",
        ),
    ];
    for (path, message) in cases {
        let (s, body) = admin_get(&gw, path, Some(ADMIN)).await;
        assert_eq!(
            (s, body["error"]["message"].as_str()),
            (400, Some(message)),
            "{path}"
        );
    }
    let (s, body) = admin_get(&gw, "/admin/dashboard/calls?colour=red", Some(ADMIN)).await;
    assert_eq!(s, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `colour`"),
        "{body}"
    );
    // Before any row was written the ledger reads as empty.
    let (s, body) = admin_get(&gw, "/admin/dashboard/calls", Some(ADMIN)).await;
    assert_eq!((s, body), (200, json!({"calls": []})));

    // Telemetry off: the ledger pages say so; the live pages still answer.
    let mut off_env = source(&m, "openai", 1, "dash-off", "gpt-dash");
    off_env.extend([kv("PGW_ADMIN_KEYS", ADMIN), kv("PGW_API_KEYS", CLIENT)]);
    let off = gateway(off_env).await;
    let (s, body) = admin_get(&off, "/admin/dashboard/calls", Some(ADMIN)).await;
    assert_eq!(
        (s, body["error"]["type"].as_str()),
        (409, Some("ledger_off"))
    );
    let (s, _) = admin_get(&off, "/admin/dashboard/overview", Some(ADMIN)).await;
    assert_eq!(s, 200);
    // No admin keys: /admin/* is off.
    let mut closed_env = source(&m, "openai", 1, "dash-closed", "gpt-dash");
    closed_env.push(kv("PGW_API_KEYS", CLIENT));
    let closed = gateway(closed_env).await;
    let (s, body) = admin_get(&closed, "/admin/dashboard/overview", Some(ADMIN)).await;
    assert_eq!(
        (s, body["error"]["message"].as_str()),
        (
            403,
            Some("no PGW_ADMIN_KEYS configured: /admin/* is disabled")
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_assets_are_served_from_the_binary() {
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "dash-page", "gpt-dash");
    env.push(kv("PGW_API_KEYS", CLIENT));
    let gw = gateway(env).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = client
        .get(format!("{}/ui", gw.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["location"].to_str().unwrap()
        ),
        (308, "/ui/")
    );
    let r = client
        .get(format!("{}/ui/", gw.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    assert!(
        r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("default-src 'self';")
    );
    let etag = r.headers()["etag"].clone();
    let html = r.text().await.unwrap();
    assert!(html.contains("<script src=\"assets/app.js\"></script>"));
    let again = client
        .get(format!("{}/ui/", gw.base_url))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 304);
    // The vendored chart library is the npm package's file, byte for byte.
    let r = client
        .get(format!(
            "{}/ui/assets/vendor/uplot/uPlot.iife.min.js",
            gw.base_url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    let served = r.bytes().await.unwrap();
    let published =
        std::fs::read(repo_root().join("tests/node/node_modules/uplot/dist/uPlot.iife.min.js"))
            .expect(
                "tests/node/node_modules/uplot: run `.ci/run` (or `npm ci --prefix tests/node`)",
            );
    assert!(
        served[..] == published[..],
        "the vendored uPlot differs from the npm package's"
    );
    let r = client
        .get(format!("{}/ui/assets/nope.js", gw.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["message"], "no dashboard asset `nope.js`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_chromium_shows_a_breaker_opening_a_gate_filling_and_a_failed_calls_attempts()
 {
    let ua = dashboard_in_browser("chromium", "/usr/bin/chromium", "dash-ui").await;
    assert!(ua.contains("Chrome/"), "the user agent is Chromium's: {ua}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_firefox_shows_a_breaker_opening_a_gate_filling_and_a_failed_calls_attempts()
 {
    let ua = dashboard_in_browser("firefox", "/usr/bin/firefox-esr", "dash-ff").await;
    assert!(ua.contains("Firefox/"), "the user agent is Firefox's: {ua}");
}

/// Runs `tests/node/dashboard.mjs` in `browser` ("chromium" or "firefox", the binary at
/// `path`) against a gateway of its own (scenarios named after `tag`), checks its steps and
/// its seven screenshots under `artifacts/dashboard/<browser>/`, and returns the user agent
/// the page reported.
async fn dashboard_in_browser(browser: &str, path: &str, tag: &str) -> String {
    let binary = std::path::Path::new(path);
    assert!(
        binary.exists(),
        "{path} not found: `.ci/run` installs Debian's chromium and firefox-esr"
    );
    let script_path = repo_root().join("tests/node/dashboard.mjs");
    let m = mock().await;
    let prices = pricing_file();
    script(&m, &format!("{tag}-a"), json!({"then": {"usage": true}})).await;
    script(&m, &format!("{tag}-b"), json!({"then": {"usage": true}})).await;
    script(&m, &format!("{tag}-bad"), json!({"then": {"status": 500}})).await;
    let gw = gateway(env(&m, tag, &prices.path().join("pricing.json"))).await;
    let out_dir = artifacts_dir().join(browser);
    std::fs::create_dir_all(&out_dir).expect("artifacts dir");
    let run = tokio::process::Command::new("node")
        .arg(&script_path)
        .env("GW_URL", &gw.base_url)
        .env("ADMIN_KEY", ADMIN)
        .env("CLIENT_KEY", CLIENT)
        .env("MOCK_URL", format!("http://{}", m.addr))
        .env("TAG", tag)
        .env("OUT_DIR", &out_dir)
        .env("BROWSER", browser)
        .env("BROWSER_PATH", binary)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the browser test finishes within 3 minutes")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "dashboard.mjs in {browser} failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for page in [
        "login",
        "overview",
        "sources-breaker-open",
        "sources-gate-full",
        "spend",
        "calls-failed",
        "call-attempts",
    ] {
        let png = std::fs::read(out_dir.join(format!("{page}.png")))
            .unwrap_or_else(|e| panic!("{browser}/{page}.png: {e}"));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{page}.png is a PNG");
        assert!(
            png.len() > 10_000,
            "{browser}/{page}.png is a real screenshot ({} bytes)",
            png.len()
        );
    }
    let steps: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("step: "))
        .collect();
    assert_eq!(
        steps,
        [
            "signed in",
            "overview counts calls",
            "breaker open",
            "gate full",
            "spend by source",
            "one failed call",
            "attempts shown"
        ],
        "{browser}"
    );
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("browser: "))
        .expect("dashboard.mjs prints the user agent")
        .to_owned()
}

/// Where the screenshots go: `$PGW_ARTIFACTS_DIR/dashboard`, else `target/artifacts/dashboard`
/// under `$CARGO_TARGET_DIR` or the repository.
fn artifacts_dir() -> std::path::PathBuf {
    let base = std::env::var_os("PGW_ARTIFACTS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| repo_root().join("target"))
                .join("artifacts")
        });
    let dir = base.join("dashboard");
    std::fs::create_dir_all(&dir).expect("artifacts dir");
    dir
}
