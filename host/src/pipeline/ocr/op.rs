//! The two OCR operations as lean operations. One attempt: the provider describes the
//! multipart upload, the host encodes and sends it under the source's total timeout (the
//! image never enters the plugin), a non-2xx answer is classified by the provider. Text: the
//! provider parses the answer into the text. Layout: the provider names an archive, the host
//! downloads and unzips it (same timeout), the provider parses the member, and the host drops
//! boxes no renderer can draw.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::plugin::{AuthScheme, BuildError, ImageInfo, OcrOperation, ProviderInstance};
use crate::telemetry::otel::AttemptSpan;
use crate::telemetry::{CallRow, UsageSource};
use crate::transport::MultipartUpload;

use super::super::failure::AttemptFailure;
use super::super::lean::LeanOp;
use super::super::lean::call::LeanCall;
use super::super::rows::attempt_error;
use super::super::runtime::{Inner, SourceRuntime};
use super::super::upstream::{
    body_cap, classified, classify_status, fault, read_body, request_headers, result_invalid, sent,
    transient, url_of,
};
use super::archive;
use super::defence::{CleanLayout, clean};

/// Most bytes of an upload's answer (a text or a submission answer; 16 MiB).
const ANSWER_CAP: usize = 16 * 1024 * 1024;

/// The image of a call as it is uploaded.
#[derive(Debug, Clone)]
pub(crate) struct Upload {
    pub image: Bytes,
    pub file_name: String,
    /// Sniffed from the bytes (`application/octet-stream` when unknown).
    pub media_type: String,
}

/// An upload that answered 2xx: the body, and what a follow-up request needs.
struct Uploaded {
    instance: ProviderInstance,
    body: Vec<u8>,
    auth: AuthScheme,
    deadline: Instant,
}

/// One upload of `up` for `op` to `source`, under its total timeout.
async fn upload(
    inner: &Inner,
    source: &SourceRuntime,
    up: &Upload,
    op: OcrOperation,
) -> Result<Uploaded, AttemptFailure> {
    let deadline = Instant::now() + source.settings.timeouts.total;
    let mut instance = source.component.instance()?;
    let info = ImageInfo {
        size_bytes: up.image.len() as u64,
        media_type: up.media_type.clone(),
        file_name: up.file_name.clone(),
    };
    let req = match instance.build_ocr_request(op, &info, &source.info)? {
        Ok(r) => r,
        Err(BuildError::InvalidRequest(m)) => return Err(AttemptFailure::BuildInvalid(m)),
        Err(BuildError::Unsupported(m)) => return Err(AttemptFailure::Unsupported(m)),
    };
    let f = "build-ocr-request";
    if req.file_field.is_empty() {
        return Err(fault(source, f, "empty file-field".into()));
    }
    let headers = request_headers(source, f, &req.headers, &req.auth, None)?;
    let url = url_of(source, f, &req.path)?;
    let form = MultipartUpload {
        file_field: req.file_field,
        file_name: up.file_name.clone(),
        content_type: up.media_type.clone(),
        bytes: up.image.clone(),
        fields: req.fields.into_iter().map(|h| (h.name, h.value)).collect(),
    };
    let send = inner
        .http
        .send_multipart(source.settings.trust_env, &url, headers, form);
    let mut resp = sent(source, f, tokio::time::timeout_at(deadline, send).await)?;
    if !(200..300).contains(&resp.status) {
        return Err(classify_status(source, resp, deadline).await);
    }
    let body = read_body(
        source,
        &mut resp,
        ANSWER_CAP.min(body_cap(source)),
        deadline,
    )
    .await?;
    Ok(Uploaded {
        instance,
        body,
        auth: req.auth,
        deadline,
    })
}

/// The attempt row of an OCR attempt: measured zero tokens and `response` on success.
fn ocr_row<T>(
    call: &LeanCall,
    attempt_id: &str,
    source: &SourceRuntime,
    outcome: &Result<T, AttemptFailure>,
    latency: Duration,
    response: impl FnOnce(&T) -> String,
) -> CallRow {
    let mut row = call.attempt_row(attempt_id, source, latency);
    match outcome {
        Ok(out) => {
            row.prompt_tokens = Some(0);
            row.completion_tokens = Some(0);
            row.usage_source = UsageSource::Measured;
            row.response = Some(response(out));
        }
        Err(f) => {
            let (t, m) = attempt_error(f);
            row.error_type = Some(t.to_string());
            row.error = Some(m);
        }
    }
    row
}

/// `recognize_text`: one upload, the text.
pub(crate) struct TextOp {
    pub call: Arc<LeanCall>,
    pub upload: Upload,
}

impl TextOp {
    async fn run(&self, inner: &Inner, source: &SourceRuntime) -> Result<String, AttemptFailure> {
        let mut up = upload(inner, source, &self.upload, OcrOperation::Text).await?;
        up.instance
            .parse_text_response(&up.body)?
            .map_err(classified)
    }
}

impl LeanOp for TextOp {
    type Output = String;

    fn serves(&self, source: &SourceRuntime) -> bool {
        source.component.info().capabilities.ocr
    }

    fn attempt(
        &self,
        inner: &Inner,
        source: &SourceRuntime,
        _trace: Option<&AttemptSpan>,
    ) -> impl std::future::Future<Output = Result<String, AttemptFailure>> + Send {
        self.run(inner, source)
    }

    fn settle_tokens(&self, _output: &String) -> Option<u64> {
        // OCR bills no tokens: the TPM pre-charge settles to 0.
        Some(0)
    }

    fn fixed_tokens(&self) -> Option<u64> {
        // Also after a failure or a cancellation: OCR usage is not measured in tokens.
        Some(0)
    }

    fn attempt_row(
        &self,
        inner: &Inner,
        attempt_id: &str,
        source: &SourceRuntime,
        outcome: &Result<String, AttemptFailure>,
        latency: Duration,
    ) -> CallRow {
        ocr_row(&self.call, attempt_id, source, outcome, latency, |t| {
            inner.recorder.stored_text(t)
        })
    }
}

/// `parse_layout`: upload, archive download, unzip, parse, defence.
pub(crate) struct LayoutOp {
    pub call: Arc<LeanCall>,
    pub upload: Upload,
}

impl LayoutOp {
    async fn run(
        &self,
        inner: &Inner,
        source: &SourceRuntime,
    ) -> Result<CleanLayout, AttemptFailure> {
        let Uploaded {
            mut instance,
            body,
            auth,
            deadline,
        } = upload(inner, source, &self.upload, OcrOperation::Layout).await?;
        let fetch = instance.parse_layout_response(&body)?.map_err(classified)?;
        if fetch.member_suffix.is_empty() {
            return Err(fault(
                source,
                "parse-layout-response",
                "empty member-suffix".into(),
            ));
        }
        let Some(url) = archive::resolve(&source.base_url, &fetch.url) else {
            return Err(result_invalid(format!(
                "the layout answer's download URL `{}` is neither an http(s) URL nor a path",
                fetch.url
            )));
        };
        let bytes = archive::download(inner, source, &url, &auth, deadline).await?;
        let unzip = archive::member_blocking(bytes, fetch.member_suffix);
        let (name, member) = match tokio::time::timeout_at(deadline, unzip).await {
            Ok(m) => m?,
            Err(_) => {
                return Err(transient(
                    format!("total timeout from {}", source.settings.name),
                    "timeout",
                ));
            }
        };
        tracing::debug!(member = %name, bytes = member.len(), "layout archive member");
        let cap = body_cap(source);
        if member.len() > cap {
            return Err(result_invalid(format!(
                "{name} has {} bytes, more than the {cap} a plugin parses within its memory cap (PGW_PLUGIN_MEMORY_MB / 4)",
                member.len()
            )));
        }
        let doc = instance
            .parse_layout_document(&member)?
            .map_err(classified)?;
        let layout = clean(doc, &source.settings.name);
        if layout.dropped_boxes > 0 {
            inner.recorder.metrics().ocr_boxes_dropped(
                &self.call.scope,
                &source.settings.name,
                u64::from(layout.dropped_boxes),
            );
        }
        Ok(layout)
    }
}

impl LeanOp for LayoutOp {
    type Output = CleanLayout;

    fn serves(&self, source: &SourceRuntime) -> bool {
        source.component.info().capabilities.ocr
    }

    fn attempt(
        &self,
        inner: &Inner,
        source: &SourceRuntime,
        _trace: Option<&AttemptSpan>,
    ) -> impl std::future::Future<Output = Result<CleanLayout, AttemptFailure>> + Send {
        self.run(inner, source)
    }

    fn settle_tokens(&self, _output: &CleanLayout) -> Option<u64> {
        Some(0)
    }

    fn fixed_tokens(&self) -> Option<u64> {
        // Also after a failure or a cancellation: OCR usage is not measured in tokens.
        Some(0)
    }

    fn attempt_row(
        &self,
        _inner: &Inner,
        attempt_id: &str,
        source: &SourceRuntime,
        outcome: &Result<CleanLayout, AttemptFailure>,
        latency: Duration,
    ) -> CallRow {
        ocr_row(
            &self.call,
            attempt_id,
            source,
            outcome,
            latency,
            layout_summary,
        )
    }
}

/// What the `response` column says of a layout (elements are not stored).
pub(crate) fn layout_summary(l: &CleanLayout) -> String {
    serde_json::json!({
        "elements": l.elements.len(),
        "pages": l.page_sizes.len(),
        "dropped_boxes": l.dropped_boxes,
    })
    .to_string()
}
