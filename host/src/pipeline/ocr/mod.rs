//! OCR under the same governance as chat (docs/ocr.md): `Gateway::recognize_text`,
//! `Gateway::parse_layout`, `Gateway::check_ocr_health` and `POST /v1/ocr/{text,layout}`.
//! Each call runs the lean loop over the scope's OCR-capable sources (admission, breaker,
//! limiter, back-off, failover, attempt rows) under one deadline. Usage is measured zero (the
//! TPM pre-charge settles to 0); a bad image (a `result_invalid` answer) is a 422 that the
//! breaker counts as a success; answers are not cached. Telemetry stores the image as its
//! SHA-256 and length, never its bytes.

mod archive;
mod defence;
mod health;
mod op;
mod types;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use sha2::{Digest, Sha256};
use tracing::Instrument;

use crate::error::GatewayError;
use crate::telemetry::UsageSource;

use super::admission::deadline_at;
use super::call::with_deadline;
use super::lean::call::{LeanCall, scope_of};
use super::lean::{self, LeanOp, LeanState};
use super::runtime::Inner;
use op::{LayoutOp, TextOp, Upload, layout_summary};

pub use health::OcrHealth;
pub(crate) use health::probe_all;
pub use types::{
    MAX_IMAGE_BYTES, OcrElement, OcrLayoutResult, OcrPageSize, OcrRequest, OcrTextResult, OcrUsage,
};

/// The media type of `image` sniffed from its magic bytes, and a file-name extension.
fn sniff(image: &[u8]) -> (String, &'static str) {
    match infer::get(image) {
        Some(t) => (t.mime_type().to_string(), t.extension()),
        None => ("application/octet-stream".to_string(), "bin"),
    }
}

/// The call's inputs as telemetry stores them: the image as its digest and length.
fn stored_inputs(image: &[u8]) -> String {
    json!([{
        "role": "user",
        "content": [{
            "type": "image",
            "sha256": hex::encode(Sha256::digest(image)),
            "bytes": image.len(),
        }],
    }])
    .to_string()
}

/// A finished OCR call: its frame, output and who answered.
struct Done<T> {
    call: Arc<LeanCall>,
    output: T,
    source_name: String,
    model: String,
    attempts: u32,
}

/// Run one OCR call with the operation `make` builds: validation, telemetry frame (stored
/// inputs, cancel guard, terminal row with measured zero usage), deadline, lean loop.
async fn run_ocr<O: LeanOp>(
    inner: Arc<Inner>,
    req: OcrRequest,
    kind: &'static str,
    make: impl FnOnce(Arc<LeanCall>, Upload) -> O,
    stored: impl Fn(&Inner, &O::Output) -> String,
) -> Result<Done<O::Output>, GatewayError> {
    req.validate()?;
    let scope = scope_of(&inner, &req.model)?;
    let (media_type, ext) = sniff(&req.image);
    let upload = Upload {
        file_name: req
            .file_name
            .clone()
            .unwrap_or_else(|| format!("image.{ext}")),
        image: req.image.clone(),
        media_type,
    };
    let mut call = LeanCall::new(&inner, scope, req.options.clone(), &[]);
    // Set directly: the generic digest of the stored-messages path would hide the length.
    call.messages = Arc::from(stored_inputs(&req.image));
    let call = Arc::new(call);
    let mut guard = call.cancel_guard(inner.clone());
    let deadline = req.options.call_deadline.or(scope.settings.call_deadline);
    let mut st = LeanState {
        deadline: deadline_at(call.started, deadline),
        ..LeanState::default()
    };
    let op = make(call.clone(), upload);
    let seed = scope.seed.fetch_add(1, Ordering::Relaxed);
    let span = tracing::info_span!("ocr", kind, call_id = %call.call_id, scope = %call.scope);
    let result = match super::tenancy::lean::admit(
        &inner,
        scope,
        req.options.principal.as_ref(),
        &req.model,
        None,
        |_| true,
        &mut st,
    )
    .await
    {
        Ok(gate) => {
            let r = with_deadline(deadline, lean::run(&inner, scope, &op, &mut st, seed))
                .instrument(span)
                .await;
            gate.settle(&st, Some(0), r.is_err()).await;
            r
        }
        Err(e) => Err(e),
    };
    guard.row = None;
    let response = result.as_ref().ok().map(|a| stored(&inner, &a.output));
    inner.recorder.record(call.terminal_row(
        scope,
        &st,
        &result,
        Some((0, 0)),
        UsageSource::Measured,
        response,
    ));
    let answer = result?;
    let source = scope.sources.get(answer.source).ok_or_else(|| {
        GatewayError::Internal(format!("OCR answer from unknown source {}", answer.source))
    })?;
    Ok(Done {
        call,
        output: answer.output,
        source_name: source.settings.name.to_string(),
        model: source.settings.model.clone(),
        attempts: st.attempts,
    })
}

impl<T> Done<T> {
    fn latency_ms(&self) -> u64 {
        u64::try_from(self.call.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// Recognise the text of `req.image` (MonkeyOCR `POST /ocr/text`) on the scope's
/// OCR-capable sources, with failover.
///
/// Errors: 400 `invalid_request_error` (empty or oversized image, bad file name),
/// 404 `model_not_found`, 422 `result_invalid` (the service could not read the image —
/// the breaker records a success), 503 `scope_unavailable` (no OCR-capable source, or
/// every attempt failed), 504 `deadline_exceeded`, 502 `plugin_fault`.
pub(crate) async fn recognize_text(
    inner: Arc<Inner>,
    req: OcrRequest,
) -> Result<OcrTextResult, GatewayError> {
    let d = run_ocr(
        inner,
        req,
        "text",
        |call, upload| TextOp { call, upload },
        |inner, t: &String| inner.recorder.stored_text(t),
    )
    .await?;
    Ok(OcrTextResult {
        latency_ms: d.latency_ms(),
        call_id: d.call.call_id.clone(),
        scope: d.call.scope.clone(),
        text: d.output,
        source_name: d.source_name,
        model: d.model,
        attempts: d.attempts,
        usage: OcrUsage::ZERO,
    })
}

/// Parse the layout of `req.image` (MonkeyOCR `POST /parse` → archive → `*_middle.json`):
/// elements with boxes in page coordinates and the page sizes. Boxes that are
/// non-finite, reversed or of zero area are dropped and counted in `dropped_boxes`.
///
/// Errors: as [`recognize_text`]; 422 `result_invalid` also for an
/// archive that is not a ZIP, has no `*_middle.json`, holds unparseable JSON or is larger
/// than 256 MiB (64 MiB decompressed).
pub(crate) async fn parse_layout(
    inner: Arc<Inner>,
    req: OcrRequest,
) -> Result<OcrLayoutResult, GatewayError> {
    let d = run_ocr(
        inner,
        req,
        "layout",
        |call, upload| LayoutOp { call, upload },
        |_, l| layout_summary(l),
    )
    .await?;
    Ok(OcrLayoutResult {
        latency_ms: d.latency_ms(),
        call_id: d.call.call_id.clone(),
        scope: d.call.scope.clone(),
        elements: d.output.elements,
        page_sizes: d.output.page_sizes,
        dropped_boxes: d.output.dropped_boxes,
        source_name: d.source_name,
        model: d.model,
        attempts: d.attempts,
        usage: OcrUsage::ZERO,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_png_and_falls_back_to_octet_stream() {
        let png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR";
        assert_eq!(sniff(png), ("image/png".to_string(), "png"));
        assert_eq!(
            sniff(b"hello"),
            ("application/octet-stream".to_string(), "bin")
        );
    }

    #[test]
    fn stored_inputs_hold_the_digest_not_the_bytes() {
        let stored: serde_json::Value = serde_json::from_str(&stored_inputs(b"abc")).unwrap();
        assert_eq!(
            stored,
            json!([{"role": "user", "content": [{
                "type": "image",
                "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                "bytes": 3,
            }]}])
        );
    }
}
