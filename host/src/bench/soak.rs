//! The soak: the gateway (default configuration) under `concurrency` back-to-back streamed
//! calls for a long run, its resident set sampled from `/proc` at a fixed period, to show
//! whether memory stays flat. Reports the samples, the RSS after warm-up, at the end and at
//! its peak, and the growth over the second half of the run.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{gateway_env, load, process, upstream};

/// Soak parameters.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// Length of the whole soak (warm-up included).
    pub duration: Duration,
    /// Streamed calls in flight at any time.
    pub concurrency: usize,
    /// Period between two RSS samples.
    pub sample_every: Duration,
    /// SSE chunks per streamed answer.
    pub chunks: usize,
    /// Where the JSON report goes.
    pub out: std::path::PathBuf,
}

/// One RSS sample.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sample {
    /// Seconds since the soak started.
    pub t_s: f64,
    /// Resident set of the gateway process in MiB (`VmRSS`).
    pub rss_mib: f64,
    /// Calls completed so far.
    pub requests: u64,
}

/// The soak's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SoakReport {
    pub machine: String,
    pub duration_s: f64,
    pub concurrency: usize,
    pub chunks: usize,
    /// Calls completed and failed over the whole soak.
    pub requests: u64,
    pub errors: u64,
    /// RSS in MiB of the first sample (after the warm-up period of one sample).
    pub start_rss_mib: f64,
    /// RSS in MiB of the last sample.
    pub end_rss_mib: f64,
    /// Highest RSS sampled in MiB.
    pub peak_rss_mib: f64,
    /// `VmHWM` at the end: the kernel's own peak, in MiB (catches spikes between samples).
    pub hwm_rss_mib: Option<f64>,
    /// RSS at the end minus RSS at the middle sample, in MiB (growth over the second half).
    pub second_half_growth_mib: f64,
    pub samples: Vec<Sample>,
}

/// Run the soak, print its summary and write the JSON report.
pub async fn run(opts: SoakOptions) -> Result<SoakReport, String> {
    let mut out = std::io::stdout();
    let pacing = upstream::Pacing {
        deltas: opts.chunks,
        pace: Duration::from_millis(20),
    };
    let upstream_addr = upstream::start(opts.chunks, pacing)
        .await
        .map_err(|e| e.to_string())?;
    let upstream = format!("http://{upstream_addr}");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let gw = process::GatewayChild::start(&exe, &gateway_env(&upstream, true)).await?;
    let url = format!("{}/v1/chat/completions", gw.base_url);
    let _ = writeln!(
        out,
        "polygateway bench soak: {} s, {} concurrent streams of {} chunks, RSS sampled every {} s",
        opts.duration.as_secs_f64(),
        opts.concurrency,
        opts.chunks,
        opts.sample_every.as_secs_f64()
    );
    let done = Arc::new(AtomicU64::new(0));
    let counter = done.clone();
    let (concurrency, duration) = (opts.concurrency, opts.duration);
    let load = tokio::spawn(async move {
        load::run_counted(&url, true, concurrency, duration, Some(counter), None).await
    });
    let started = Instant::now();
    let mut samples = Vec::new();
    loop {
        tokio::time::sleep(opts.sample_every).await;
        let t = started.elapsed();
        let Some(rss) = gw.rss_mib() else {
            return Err("the gateway process is gone (no /proc entry)".into());
        };
        let sample = Sample {
            t_s: t.as_secs_f64(),
            rss_mib: rss,
            requests: done.load(Ordering::Relaxed),
        };
        let _ = writeln!(
            out,
            "  t={:>6.0} s  RSS {:>7.1} MiB  calls {}",
            sample.t_s, sample.rss_mib, sample.requests
        );
        samples.push(sample);
        if t >= opts.duration {
            break;
        }
    }
    let stats = load.await.map_err(|e| e.to_string())?;
    let hwm_rss_mib = gw.peak_rss_mib();
    gw.stop().await;
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return Err("the soak took no sample".into());
    };
    let middle = &samples[samples.len() / 2];
    let report = SoakReport {
        machine: super::machine(),
        duration_s: opts.duration.as_secs_f64(),
        concurrency: opts.concurrency,
        chunks: opts.chunks,
        requests: stats.requests as u64,
        errors: stats.errors as u64,
        start_rss_mib: first.rss_mib,
        end_rss_mib: last.rss_mib,
        peak_rss_mib: samples.iter().map(|s| s.rss_mib).fold(0.0, f64::max),
        hwm_rss_mib,
        second_half_growth_mib: last.rss_mib - middle.rss_mib,
        samples: samples.clone(),
    };
    let _ = writeln!(
        out,
        "\nmachine: {}\nsoak: {} calls ({} errors, {:.0}/s); RSS start {:.1} MiB, end {:.1} MiB, peak {:.1} MiB (VmHWM {}); growth over the second half {:+.1} MiB",
        report.machine,
        report.requests,
        report.errors,
        stats.rps,
        report.start_rss_mib,
        report.end_rss_mib,
        report.peak_rss_mib,
        report
            .hwm_rss_mib
            .map(|x| format!("{x:.1} MiB"))
            .unwrap_or_else(|| "?".into()),
        report.second_half_growth_mib,
    );
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&opts.out, json).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let _ = writeln!(out, "JSON written to {}", opts.out.display());
    Ok(report)
}
