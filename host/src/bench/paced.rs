//! The paced-stream load: `streams` concurrent clients, each reading `rounds` streamed answers
//! back to back from an upstream that writes one delta every `pace` (like a model decoding),
//! through one target. Per stream it records the time to the first body chunk (TTFT) and the
//! longest gap between two chunks as the client read them; a stream whose longest gap exceeds
//! [`STALL`] is stalled. What it shows is queueing: a proxy whose per-request CPU is high makes
//! the 512 first tokens wait for each other, and one that blocks a worker shows as gaps.

use std::time::{Duration, Instant};

use super::upstream::PACED_MARKER;

/// A gap between two chunks longer than this is a stall (a reader would see the text stop).
pub const STALL: Duration = Duration::from_millis(200);

/// The answer's end: a stream without it was cut, not finished.
const DONE: &[u8] = b"data: [DONE]\n\n";

/// One paced run's figures; times in µs.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PacedStats {
    /// Streams read to their `[DONE]`.
    pub streams: usize,
    /// Streams refused, failed or cut before `[DONE]`.
    pub errors: usize,
    pub seconds: f64,
    pub ttft_p50_us: f64,
    pub ttft_p99_us: f64,
    /// Each stream's longest gap between two chunks: its median and p99 over the streams.
    pub max_gap_p50_us: f64,
    pub max_gap_p99_us: f64,
    /// Streams with a gap over [`STALL`].
    pub stalled: usize,
}

/// What one stream measured.
struct One {
    ttft: Duration,
    max_gap: Duration,
}

/// The request body of a paced stream (the upstream paces answers whose text holds
/// [`PACED_MARKER`]).
pub fn body() -> String {
    serde_json::json!({
        "model": "llm",
        "messages": [{"role": "user", "content": PACED_MARKER}],
        "stream": true,
    })
    .to_string()
}

/// Runs `streams` clients × `rounds` paced streams against `url` (a chat-completions
/// endpoint), with `key` as the bearer token when given. Before measuring, each client
/// sends one non-streamed request so that every connection (client and upstream side) is
/// open and the first round does not time TCP handshakes.
pub async fn run(url: &str, key: Option<&str>, streams: usize, rounds: usize) -> PacedStats {
    let Ok(client) = reqwest::Client::builder()
        .tcp_nodelay(true)
        .no_proxy()
        .pool_max_idle_per_host(streams)
        .build()
    else {
        return PacedStats::default();
    };
    let auth = key.map(|k| format!("Bearer {k}"));
    let request = |body: String| {
        let mut rb = client
            .post(url)
            .header("content-type", "application/json")
            .body(body);
        if let Some(a) = &auth {
            rb = rb.header("authorization", a);
        }
        rb
    };
    let warm = serde_json::json!({"model": "llm",
        "messages": [{"role": "user", "content": "warm-up"}]})
    .to_string();
    let warmups: Vec<_> = (0..streams)
        .map(|_| {
            let rb = request(warm.clone());
            tokio::spawn(async move {
                if let Ok(r) = rb.send().await {
                    let _ = r.bytes().await;
                }
            })
        })
        .collect();
    for w in warmups {
        let _ = w.await;
    }
    let body = body();
    let started = Instant::now();
    let tasks: Vec<_> = (0..streams)
        .map(|_| {
            let requests: Vec<_> = (0..rounds).map(|_| request(body.clone())).collect();
            tokio::spawn(async move {
                let mut out = Vec::with_capacity(rounds);
                for rb in requests {
                    out.push(one(rb).await);
                }
                out
            })
        })
        .collect();
    let mut ok = Vec::with_capacity(streams * rounds);
    let mut errors = 0;
    for t in tasks {
        match t.await {
            Ok(results) => {
                for r in results {
                    match r {
                        Some(one) => ok.push(one),
                        None => errors += 1,
                    }
                }
            }
            Err(_) => errors += rounds,
        }
    }
    summarize(&ok, errors, started.elapsed())
}

/// One stream: `None` when it was refused, failed or ended without `[DONE]`.
async fn one(rb: reqwest::RequestBuilder) -> Option<One> {
    let t = Instant::now();
    let mut resp = rb.send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let mut ttft = None;
    let mut last = t;
    let mut max_gap = Duration::ZERO;
    // The last bytes seen, enough to hold `[DONE]` split across two chunks.
    let mut tail: Vec<u8> = Vec::with_capacity(2 * DONE.len());
    while let Some(chunk) = resp.chunk().await.ok()? {
        let now = Instant::now();
        if ttft.is_none() {
            ttft = Some(now - t);
        } else {
            max_gap = max_gap.max(now - last);
        }
        last = now;
        tail.extend_from_slice(&chunk[chunk.len().saturating_sub(DONE.len())..]);
        let cut = tail.len().saturating_sub(DONE.len());
        tail.drain(..cut);
    }
    (tail == DONE).then_some(One {
        ttft: ttft?,
        max_gap,
    })
}

fn summarize(ok: &[One], errors: usize, elapsed: Duration) -> PacedStats {
    let micros = |d: Duration| d.as_micros() as u64;
    let mut ttft: Vec<u64> = ok.iter().map(|o| micros(o.ttft)).collect();
    let mut gaps: Vec<u64> = ok.iter().map(|o| micros(o.max_gap)).collect();
    ttft.sort_unstable();
    gaps.sort_unstable();
    PacedStats {
        streams: ok.len(),
        errors,
        seconds: elapsed.as_secs_f64(),
        ttft_p50_us: super::load::pct(&ttft, 0.5),
        ttft_p99_us: super::load::pct(&ttft, 0.99),
        max_gap_p50_us: super::load::pct(&gaps, 0.5),
        max_gap_p99_us: super::load::pct(&gaps, 0.99),
        stalled: ok.iter().filter(|o| o.max_gap > STALL).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_over_200_ms_is_a_stall_and_percentiles_are_over_streams() {
        let ms = Duration::from_millis;
        let ok = [
            One {
                ttft: ms(2),
                max_gap: ms(21),
            },
            One {
                ttft: ms(3),
                max_gap: ms(201),
            },
            One {
                ttft: ms(1),
                max_gap: ms(200),
            },
        ];
        let s = summarize(&ok, 1, Duration::from_secs(2));
        assert_eq!(s.streams, 3);
        assert_eq!(s.errors, 1);
        assert_eq!(s.stalled, 1);
        assert_eq!(s.ttft_p50_us, 2000.0);
        assert_eq!(s.max_gap_p50_us, 200_000.0);
        assert_eq!(s.max_gap_p99_us, 201_000.0);
    }
}
