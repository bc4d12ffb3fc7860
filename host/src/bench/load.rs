//! The load generator: `concurrency` workers send the same chat request for a fixed time and
//! record each request's latency (and, for streams, time to first byte) in microseconds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Latency summary of one run, in microseconds.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Stats {
    pub requests: usize,
    pub errors: usize,
    pub seconds: f64,
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub ttfb_p50_us: Option<f64>,
    pub ttfb_p99_us: Option<f64>,
}

pub(super) fn pct(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64
}

/// Run the load for `duration` against `url` (a chat-completions endpoint), each request
/// sending `Authorization: Bearer <key>` when `key` is given.
pub async fn run_with_key(
    url: &str,
    stream: bool,
    concurrency: usize,
    duration: Duration,
    key: Option<&str>,
) -> Stats {
    run_counted(url, stream, concurrency, duration, None, key).await
}

/// Like [`run_with_key`], also adding each finished call to `done` as it ends (for progress reports),
/// and sending `key` as the bearer token when given.
pub async fn run_counted(
    url: &str,
    stream: bool,
    concurrency: usize,
    duration: Duration,
    done: Option<Arc<AtomicU64>>,
    key: Option<&str>,
) -> Stats {
    let auth = key.map(|k| format!("Bearer {k}"));
    let client = match reqwest::Client::builder()
        .tcp_nodelay(true)
        .no_proxy()
        .pool_max_idle_per_host(concurrency * 2)
        .build()
    {
        Ok(c) => c,
        Err(_) => return Stats::default(),
    };
    let body = serde_json::json!({
        "model": "llm",
        "messages": [{"role": "user", "content": "benchmark question"}],
        "stream": stream,
    })
    .to_string();
    let started = Instant::now();
    let end = started + duration;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let client = client.clone();
        let body = body.clone();
        let url = url.to_string();
        let done = done.clone();
        let auth = auth.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut ttfb = Vec::new();
            let mut errors = 0usize;
            while Instant::now() < end {
                let t = Instant::now();
                let mut rb = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone());
                if let Some(a) = &auth {
                    rb = rb.header("authorization", a);
                }
                let resp = rb.send().await;
                let Ok(mut resp) = resp else {
                    errors += 1;
                    continue;
                };
                if !resp.status().is_success() {
                    errors += 1;
                }
                let mut first = None;
                loop {
                    match resp.chunk().await {
                        Ok(Some(_)) => {
                            if first.is_none() {
                                first = Some(t.elapsed());
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {
                            errors += 1;
                            break;
                        }
                    }
                }
                lat.push(t.elapsed().as_micros() as u64);
                if let Some(d) = &done {
                    d.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(f) = first {
                    ttfb.push(f.as_micros() as u64);
                }
            }
            (lat, ttfb, errors)
        }));
    }
    let mut lat = Vec::new();
    let mut ttfb = Vec::new();
    let mut errors = 0;
    for t in tasks {
        if let Ok((l, f, e)) = t.await {
            lat.extend(l);
            ttfb.extend(f);
            errors += e;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    lat.sort_unstable();
    ttfb.sort_unstable();
    Stats {
        requests: lat.len(),
        errors,
        seconds,
        rps: lat.len() as f64 / seconds,
        p50_us: pct(&lat, 0.5),
        p99_us: pct(&lat, 0.99),
        p999_us: pct(&lat, 0.999),
        ttfb_p50_us: stream.then(|| pct(&ttfb, 0.5)),
        ttfb_p99_us: stream.then(|| pct(&ttfb, 0.99)),
    }
}

/// Create the benchmark's virtual key (a daily budget, a team with a monthly one, and
/// every per-key gate on) and return its secret.
pub async fn bench_key(base_url: &str, admin_key: &str) -> Result<String, String> {
    let c = reqwest::Client::new();
    let post = |path: &str, body: serde_json::Value| {
        c.post(format!("{base_url}{path}"))
            .bearer_auth(admin_key)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let team = serde_json::json!({"id": "bench", "name": "bench",
        "budgets": [{"period": "monthly", "limit_usd": 1.0e9}],
        "limits": {"rpm": 1_000_000_000u64, "tpm": 1_000_000_000_000u64, "max_concurrency": 100_000}});
    let r = post("/admin/teams", team)
        .await
        .map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("creating the bench team: HTTP {}", r.status()));
    }
    let key = serde_json::json!({"name": "bench", "team_id": "bench",
        "budgets": [{"period": "daily", "limit_usd": 1.0e9}],
        "limits": {"rpm": 1_000_000_000u64, "tpm": 1_000_000_000_000u64, "max_concurrency": 100_000}});
    let r = post("/admin/keys", key).await.map_err(|e| e.to_string())?;
    let status = r.status();
    let text = r.text().await.map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    match v["secret"].as_str() {
        Some(s) if status.is_success() => Ok(s.to_string()),
        _ => Err(format!("creating the bench key: HTTP {status}")),
    }
}
