//! The OCR health probe (docs/ocr.md#health-probe): every OCR-capable source's
//! `health-request` (MonkeyOCR `GET /health`), all at once, each within [`PROBE_TIMEOUT`];
//! a 2xx answer is healthy. A source whose provider has no probe is not reported. Probes go
//! around governance (no admission, no breaker, no telemetry row): they observe, not call.

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::runtime::{Inner, SourceRuntime};
use super::super::upstream::{request_headers, url_of};

/// Longest wait for one probe (2 s); no answer by then is unhealthy.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Health per scope and source: `{scope: {source: healthy}}`.
pub type OcrHealth = BTreeMap<String, BTreeMap<String, bool>>;

/// Probe one source: `None` when its provider has no probe.
async fn probe(inner: &Inner, source: &SourceRuntime) -> Option<bool> {
    let name = &source.settings.name;
    let req = match source
        .component
        .instance()
        .and_then(|mut i| i.health_request(&source.info))
    {
        Ok(Some(r)) => r,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(source = %name, "OCR health probe: the plugin failed: {e}");
            return Some(false);
        }
    };
    let f = "health-request";
    let (headers, url) = match (
        request_headers(source, f, &req.headers, &req.auth, None),
        url_of(source, f, &req.path),
    ) {
        (Ok(h), Ok(u)) => (h, u),
        _ => {
            tracing::warn!(source = %name, "OCR health probe: the plugin's request cannot be sent");
            return Some(false);
        }
    };
    let send = inner.http.send(
        source.settings.trust_env,
        &req.method,
        &url,
        headers,
        req.body,
    );
    match tokio::time::timeout(PROBE_TIMEOUT, send).await {
        Ok(Ok(r)) if (200..300).contains(&r.status) => Some(true),
        Ok(Ok(r)) => {
            tracing::warn!(source = %name, status = r.status, "OCR health probe: unhealthy");
            Some(false)
        }
        Ok(Err(e)) => {
            tracing::warn!(source = %name, "OCR health probe failed: {e}");
            Some(false)
        }
        Err(_) => {
            tracing::warn!(source = %name, "OCR health probe: no answer within {PROBE_TIMEOUT:?}");
            Some(false)
        }
    }
}

/// Probe every OCR-capable source of every scope concurrently. Scopes without a probed
/// source are left out.
pub(crate) async fn probe_all(inner: &Inner) -> OcrHealth {
    let probes = inner.scopes.iter().flat_map(|scope| {
        scope
            .sources
            .iter()
            .filter(|s| s.component.info().capabilities.ocr)
            .map(move |s| async move {
                (
                    scope.settings.name.to_string(),
                    s.settings.name.to_string(),
                    probe(inner, s).await,
                )
            })
    });
    let mut out = OcrHealth::new();
    for (scope, source, healthy) in futures_util::future::join_all(probes).await {
        if let Some(h) = healthy {
            out.entry(scope).or_default().insert(source, h);
        }
    }
    out
}
