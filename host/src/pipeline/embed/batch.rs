//! One embedding batch as a lean operation: the provider builds the request for the next
//! texts (at most the admitted source's `MAX_BATCH`), the host sends it and checks the
//! answer — one vector per input, every vector of one dimension, equal to the requested one
//! and to the call's earlier vectors; anything else is `result_invalid`.

use std::time::Duration;

use crate::config::SourceSettings;
use crate::plugin::{BuildError, EmbeddingRequest as PluginEmbeddingRequest, EmbeddingUsage};
use crate::telemetry::{CallRow, UsageSource};

use super::super::attempt::AttemptFailure;
use super::super::gateway::{Inner, SourceRuntime};
use super::super::lean::LeanOp;
use super::super::lean::call::LeanCall;
use super::super::rows::attempt_error;
use super::super::upstream::{
    body_cap, classified, classify_status, read_body, request_headers, result_invalid, sent, url_of,
};

/// The next batch of a call: `pending` are the texts still without a vector, in order.
pub(crate) struct BatchOp<'a> {
    pub call: &'a LeanCall,
    pub pending: &'a [String],
    /// The client's `dimensions`.
    pub dimensions: Option<u32>,
    /// The dimension every vector must have (the requested one, else the call's first).
    pub expected_dim: Option<usize>,
    /// After the call's first batch: the `(MODEL, EXTRA_BODY)` that answered it. Later
    /// batches go only to sources of the same model, so one answer never mixes vectors of
    /// two models (they would be incomparable).
    pub pin: Option<&'a SourceSettings>,
}

/// A batch's answer.
pub(crate) struct BatchOutput {
    /// One vector per text taken, in order.
    pub vectors: Vec<Vec<f32>>,
    pub usage: Option<EmbeddingUsage>,
    pub model_reported: Option<String>,
}

impl BatchOp<'_> {
    /// How many of the pending texts go to `source` in one request.
    pub(crate) fn take(&self, source: &SourceRuntime) -> usize {
        match source.settings.max_batch {
            0 => self.pending.len(),
            m => self.pending.len().min(m as usize),
        }
    }

    async fn run(
        &self,
        inner: &Inner,
        source: &SourceRuntime,
    ) -> Result<BatchOutput, AttemptFailure> {
        let texts = &self.pending[..self.take(source)];
        let deadline = tokio::time::Instant::now() + source.settings.timeouts.total;
        let mut instance = source.component.instance()?;
        let req = PluginEmbeddingRequest {
            inputs: texts.to_vec(),
            dimensions: self.dimensions,
        };
        let http = match instance.build_embedding_request(&req, &source.info)? {
            Ok(h) => h,
            Err(BuildError::InvalidRequest(m)) => return Err(AttemptFailure::BuildInvalid(m)),
            Err(BuildError::Unsupported(m)) => return Err(AttemptFailure::Unsupported(m)),
        };
        let f = "build-embedding-request";
        let headers = request_headers(source, f, &http.headers, &http.auth)?;
        let url = url_of(source, f, &http.path)?;
        let send = inner.http.send(
            source.settings.trust_env,
            &http.method,
            &url,
            headers,
            http.body,
        );
        let mut resp = sent(source, f, tokio::time::timeout_at(deadline, send).await)?;
        if !(200..300).contains(&resp.status) {
            return Err(classify_status(source, &mut instance, resp, deadline).await);
        }
        let body = read_body(source, &mut resp, body_cap(source), deadline).await?;
        let parsed = instance
            .parse_embedding_response(&body)?
            .map_err(classified)?;
        if parsed.vectors.len() != texts.len() {
            return Err(result_invalid(format!(
                "{} vectors for {} inputs",
                parsed.vectors.len(),
                texts.len()
            )));
        }
        let want = self
            .expected_dim
            .or_else(|| parsed.vectors.first().map(Vec::len));
        if let Some(want) = want
            && let Some((i, v)) = parsed
                .vectors
                .iter()
                .enumerate()
                .find(|(_, v)| v.len() != want)
        {
            return Err(result_invalid(format!(
                "vector {i} of the batch has dimension {}, expected {want}",
                v.len()
            )));
        }
        if want == Some(0) {
            return Err(result_invalid("the upstream answered empty vectors"));
        }
        if let Some(bad) = parsed.vectors.iter().flatten().find(|x| !x.is_finite()) {
            return Err(result_invalid(format!(
                "a vector holds a non-finite value ({bad})"
            )));
        }
        // A total below the prompt count is not a usage report we can trust.
        let usage = parsed.usage.filter(|u| {
            let ok = u.total_tokens >= u.prompt_tokens;
            if !ok {
                tracing::warn!(source = %source.settings.name, prompt = u.prompt_tokens, total = u.total_tokens, "embedding usage with total < prompt ignored");
            }
            ok
        });
        Ok(BatchOutput {
            vectors: parsed.vectors,
            usage,
            model_reported: parsed.model,
        })
    }
}

impl LeanOp for BatchOp<'_> {
    type Output = BatchOutput;

    fn serves(&self, source: &SourceRuntime) -> bool {
        source.component.info().capabilities.embedding
            && self.pin.is_none_or(|p| same_model(p, &source.settings))
    }

    fn attempt(
        &self,
        inner: &Inner,
        source: &SourceRuntime,
    ) -> impl std::future::Future<Output = Result<BatchOutput, AttemptFailure>> + Send {
        self.run(inner, source)
    }

    fn settle_tokens(&self, output: &BatchOutput) -> Option<u64> {
        output.usage.map(|u| u.total_tokens)
    }

    fn attempt_row(
        &self,
        inner: &Inner,
        attempt_id: &str,
        source: &SourceRuntime,
        outcome: &Result<BatchOutput, AttemptFailure>,
        latency: Duration,
    ) -> CallRow {
        let mut row = self.call.attempt_row(attempt_id, source, latency);
        // The batch's own texts, not the whole call's.
        let texts = &self.pending[..self.take(source).min(self.pending.len())];
        row.messages = Some(inner.recorder.stored_messages(&super::stored_inputs(texts)));
        match outcome {
            Ok(out) => {
                if let Some(u) = out.usage {
                    row.prompt_tokens = Some(u.prompt_tokens);
                    row.completion_tokens = Some(u.total_tokens.saturating_sub(u.prompt_tokens));
                    row.usage_source = UsageSource::Measured;
                }
                row.model_reported = out.model_reported.clone();
                row.response = Some(summary(
                    out.vectors.len(),
                    out.vectors.first().map(Vec::len),
                ));
            }
            Err(f) => {
                let (t, m) = attempt_error(f);
                row.error_type = Some(t.to_string());
                row.error = Some(m);
            }
        }
        row
    }
}

/// Whether two sources produce comparable vectors: the same `MODEL` and `EXTRA_BODY`.
pub(crate) fn same_model(a: &SourceSettings, b: &SourceSettings) -> bool {
    a.model == b.model && a.extra_body == b.extra_body
}

/// What the `response` column says of embeddings (vectors are not stored).
pub(crate) fn summary(vectors: usize, dims: Option<usize>) -> String {
    serde_json::json!({ "vectors": vectors, "dimensions": dims }).to_string()
}
