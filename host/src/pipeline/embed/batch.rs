//! One embedding batch as a lean operation: the provider builds the request for the next
//! inputs (at most the admitted source's `MAX_BATCH`), the host sends it and checks the
//! answer — one vector per input, every vector of one dimension, equal to the requested one
//! and to the call's earlier vectors; anything else is `result_invalid`. A provider that
//! declines a batch of token-id arrays is remembered for the rest of the call
//! ([`Declined`]).

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use crate::config::SourceSettings;
use crate::error::{GatewayError, UnavailableReason};
use crate::plugin::{
    BuildError, EmbeddingInputs, EmbeddingRequest as PluginEmbeddingRequest, EmbeddingUsage,
};
use crate::telemetry::otel::AttemptSpan;
use crate::telemetry::{CallRow, UsageSource};

use super::super::failure::AttemptFailure;
use super::super::lean::LeanOp;
use super::super::lean::call::LeanCall;
use super::super::rows::attempt_error;
use super::super::runtime::{Inner, SourceRuntime};
use super::super::upstream::{
    body_cap, classified, classify_status, read_body, request_headers, result_invalid, sent, url_of,
};
use super::EmbeddingInput;

/// The next batch of a call.
pub(crate) struct BatchOp<'a> {
    pub call: &'a LeanCall,
    /// The call's inputs.
    pub input: &'a EmbeddingInput,
    /// The indices (into `input`) of the inputs still without a vector, in order.
    pub pending: &'a [usize],
    /// The client's `dimensions`.
    pub dimensions: Option<u32>,
    /// The dimension every vector must have (the requested one, else the call's first).
    pub expected_dim: Option<usize>,
    /// After the call's first batch: the `(MODEL, EXTRA_BODY)` that answered it. Later
    /// batches go only to sources of the same model, so one answer never mixes vectors of
    /// two models (they would be incomparable).
    pub pin: Option<&'a SourceSettings>,
    /// The sources whose provider declined token-id arrays earlier in this call.
    pub declined: &'a Declined,
}

/// The sources of one call whose provider answered `unsupported` to a batch of token-id
/// arrays, with its message: they serve none of the call's later batches, and when no other
/// source is left the call's error names `input` ([`Declined::explain`]). Only a token call
/// ever takes the lock: once per decline, and once per candidate of an admission round.
#[derive(Debug, Default)]
pub(crate) struct Declined(Mutex<Vec<(Arc<str>, String)>>);

impl Declined {
    fn note(&self, source: &Arc<str>, message: &str) {
        if let Ok(mut v) = self.0.lock() {
            v.push((source.clone(), message.to_owned()));
        }
    }

    fn contains(&self, source: &str) -> bool {
        self.0
            .lock()
            .is_ok_and(|v| v.iter().any(|(s, _)| &**s == source))
    }

    /// The call's error after the lean loop gave up with `e`: when every source left was
    /// excluded (no source of the scope can serve the call) and some of them declined token
    /// ids, a 400 naming `input` that lists them; else `e`.
    pub(crate) fn explain(&self, scope: &str, e: GatewayError) -> GatewayError {
        let no_sources = matches!(
            &e,
            GatewayError::ScopeUnavailable {
                reason: UnavailableReason::NoSources,
                ..
            }
        );
        let declined = match self.0.lock() {
            Ok(v) if no_sources && !v.is_empty() => v
                .iter()
                .map(|(s, m)| format!("{s}: {m}"))
                .collect::<Vec<_>>()
                .join("; "),
            _ => return e,
        };
        GatewayError::invalid(
            "input",
            format!(
                "no source of scope `{scope}` takes token-id arrays as `input`; send the \
                 inputs as text ({declined})"
            ),
        )
    }
}

/// A batch's answer.
pub(crate) struct BatchOutput {
    /// One vector per input taken, in order.
    pub vectors: Vec<Vec<f32>>,
    pub usage: Option<EmbeddingUsage>,
    pub model_reported: Option<String>,
}

impl BatchOp<'_> {
    /// How many of the pending inputs go to `source` in one request.
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
        trace: Option<&AttemptSpan>,
    ) -> Result<BatchOutput, AttemptFailure> {
        let taken = &self.pending[..self.take(source)];
        let deadline = tokio::time::Instant::now() + source.settings.timeouts.total;
        let inputs = match self.input {
            EmbeddingInput::Texts(t) => {
                EmbeddingInputs::Texts(taken.iter().filter_map(|&i| t.get(i).cloned()).collect())
            }
            EmbeddingInput::Tokens(t) => {
                EmbeddingInputs::Tokens(taken.iter().filter_map(|&i| t.get(i).cloned()).collect())
            }
        };
        let req = PluginEmbeddingRequest {
            inputs,
            dimensions: self.dimensions,
        };
        // Instances are checked out per guest call, never held while the upstream answers.
        let built = source
            .component
            .instance()?
            .build_embedding_request(&req, &source.info)?;
        let http = match built {
            Ok(h) => h,
            Err(BuildError::InvalidRequest(m)) => return Err(AttemptFailure::BuildInvalid(m)),
            Err(BuildError::Unsupported(m)) => {
                if matches!(self.input, EmbeddingInput::Tokens(_)) {
                    self.declined.note(&source.settings.name, &m);
                }
                return Err(AttemptFailure::Unsupported(m));
            }
        };
        let f = "build-embedding-request";
        let headers = request_headers(source, f, &http.headers, &http.auth, trace)?;
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
            return Err(classify_status(source, resp, deadline).await);
        }
        let body = read_body(source, &mut resp, body_cap(source), deadline).await?;
        let parsed = source
            .component
            .instance()?
            .parse_embedding_response(&body)?
            .map_err(classified)?;
        if parsed.vectors.len() != taken.len() {
            return Err(result_invalid(format!(
                "{} vectors for {} inputs",
                parsed.vectors.len(),
                taken.len()
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
            && !(matches!(self.input, EmbeddingInput::Tokens(_))
                && self.declined.contains(&source.settings.name))
    }

    fn attempt(
        &self,
        inner: &Inner,
        source: &SourceRuntime,
        trace: Option<&AttemptSpan>,
    ) -> impl std::future::Future<Output = Result<BatchOutput, AttemptFailure>> + Send {
        self.run(inner, source, trace)
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
        // The batch's own inputs, not the whole call's.
        let taken = &self.pending[..self.take(source).min(self.pending.len())];
        let stored = super::stored_inputs(self.input, taken.iter().copied());
        row.messages = Some(inner.recorder.stored_messages(&stored));
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
