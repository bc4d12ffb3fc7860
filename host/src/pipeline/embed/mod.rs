//! Embeddings under the same governance as chat: `Gateway::embed` and `POST /v1/embeddings`.
//! The inputs (texts, or token-id arrays) are deduplicated, answered from the response cache
//! where possible (one entry per input), and the rest go upstream in batches of at most the
//! admitted source's `MAX_BATCH`, one after another, each through the lean loop (its own
//! admission, retries and failover). One deadline covers every batch; vectors come back in
//! input order; usage is summed over batches, and a batch without usage makes the call's
//! usage `unavailable` (cost NULL). Token-id arrays go only to sources whose provider takes
//! them: the others answer `unsupported` once per call and are skipped for its later batches;
//! when no source of the scope takes them the call is a 400 naming `input`.

mod batch;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::cache::{EmbeddingKeyInput, model_fingerprint};
use crate::config::SourceSettings;
use crate::error::GatewayError;
use crate::telemetry::otel::{CallEnd, CallSpan, CallStart, GenAiOperation};
use crate::telemetry::{UsageSource, cap_text};

use super::admission::deadline_at;
use super::call::with_deadline;
use super::lean::call::{LeanCall, scope_of};
use super::lean::{self, LeanState};
use super::options::CallOptions;
use super::request::CacheMode;
use super::runtime::Inner;

pub(crate) use batch::summary;

/// Each input text is stored in telemetry cut to this many characters (embedding inputs are
/// often whole documents: the start says which one it was); `PGW_TELEMETRY_TEXT_CAP` applies
/// on top, the stricter one wins.
const STORED_INPUT_CHARS: usize = 200;

/// The inputs `which` (indices into `input`) as telemetry stores them: one user message whose
/// parts are the inputs — a text as a `text` part capped at [`STORED_INPUT_CHARS`], a token
/// array as a `tokens` part (`{"type": "tokens", "tokens": [ids]}`, which telemetry stores as
/// its digest, as it does every non-text part).
pub(crate) fn stored_inputs(
    input: &EmbeddingInput,
    which: impl IntoIterator<Item = usize>,
) -> [Value; 1] {
    let parts: Vec<Value> = which
        .into_iter()
        .filter_map(|i| match input {
            EmbeddingInput::Texts(t) => t
                .get(i)
                .map(|t| json!({"type": "text", "text": cap_text(t, Some(STORED_INPUT_CHARS))})),
            EmbeddingInput::Tokens(t) => {
                t.get(i).map(|ids| json!({"type": "tokens", "tokens": ids}))
            }
        })
        .collect();
    [json!({"role": "user", "content": parts})]
}

/// Cache lookups and stores run this many at a time (a Redis round trip each).
const LOOKUP_CONCURRENCY: usize = 64;

/// The inputs of an embeddings call, in order (OpenAI `input`): texts, or arrays of token
/// ids of the source model's tokenizer. A call never mixes the two (OpenAI's `input` cannot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbeddingInput {
    /// Texts, one input each (OpenAI `input`: a string, or an array of strings).
    Texts(Vec<String>),
    /// Token-id arrays, one input each (OpenAI `input`: an array of integers is one input,
    /// an array of integer arrays is one input per array). Sent upstream as given, only to
    /// sources whose provider takes token ids (the `openai` component does).
    Tokens(Vec<Vec<u32>>),
}

impl EmbeddingInput {
    /// The number of inputs.
    pub fn len(&self) -> usize {
        match self {
            EmbeddingInput::Texts(t) => t.len(),
            EmbeddingInput::Tokens(t) => t.len(),
        }
    }

    /// Whether there is no input at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Input `i` as the response cache keys it.
    fn key_input(&self, i: usize) -> Option<EmbeddingKeyInput<'_>> {
        match self {
            EmbeddingInput::Texts(t) => t.get(i).map(|t| EmbeddingKeyInput::Text(t)),
            EmbeddingInput::Tokens(t) => t.get(i).map(|ids| EmbeddingKeyInput::Tokens(ids)),
        }
    }

    /// For each input, the number of its distinct value (in order of first appearance), and
    /// for each distinct value, the index of its first input.
    fn distinct(&self) -> (Vec<usize>, Vec<usize>) {
        match self {
            EmbeddingInput::Texts(t) => first_occurrences(t),
            EmbeddingInput::Tokens(t) => first_occurrences(t),
        }
    }
}

/// `(slot, first)`: `slot[i]` numbers the distinct value of `items[i]`, `first[d]` is the
/// index of the first item of distinct value `d`.
fn first_occurrences<T: std::hash::Hash + Eq>(items: &[T]) -> (Vec<usize>, Vec<usize>) {
    let mut first: Vec<usize> = Vec::new();
    let mut index: HashMap<&T, usize> = HashMap::with_capacity(items.len());
    let slot = items
        .iter()
        .enumerate()
        .map(|(i, t)| {
            *index.entry(t).or_insert_with(|| {
                first.push(i);
                first.len() - 1
            })
        })
        .collect();
    (slot, first)
}

/// An embeddings call.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingRequest {
    /// A scope alias, as for chat.
    pub model: String,
    /// The inputs to embed, in order; each must be non-empty.
    pub input: EmbeddingInput,
    /// OpenAI `dimensions`: the output dimension asked of the upstream (> 0); every vector
    /// of the answer must have it.
    pub dimensions: Option<u32>,
    /// Tracing links, caller dimensions, deadline and cache controls.
    pub options: CallOptions,
}

impl EmbeddingRequest {
    /// A request for the texts `input` in the scope aliased `model`, with no options.
    pub fn new(model: impl Into<String>, input: Vec<String>) -> Self {
        Self::of(model, EmbeddingInput::Texts(input))
    }

    /// A request for token-id arrays (one array per input, ids of the source model's
    /// tokenizer) in the scope aliased `model`, with no options.
    pub fn tokens(model: impl Into<String>, input: Vec<Vec<u32>>) -> Self {
        Self::of(model, EmbeddingInput::Tokens(input))
    }

    /// A request for `input` in the scope aliased `model`, with no options.
    pub fn of(model: impl Into<String>, input: EmbeddingInput) -> Self {
        Self {
            model: model.into(),
            input,
            dimensions: None,
            options: CallOptions::default(),
        }
    }

    /// Check the request: at least one input, no empty text or token array,
    /// `dimensions` > 0.
    ///
    /// Errors: [`GatewayError::InvalidRequest`] naming `input` (the message says which
    /// `input[i]`) or `dimensions`.
    pub fn validate(&self) -> Result<(), GatewayError> {
        if self.input.is_empty() {
            return Err(GatewayError::invalid("input", "`input` must not be empty"));
        }
        let empty = match &self.input {
            EmbeddingInput::Texts(t) => t
                .iter()
                .position(String::is_empty)
                .map(|i| format!("`input[{i}]` is an empty string")),
            EmbeddingInput::Tokens(t) => t
                .iter()
                .position(Vec::is_empty)
                .map(|i| format!("`input[{i}]` is an empty token array")),
        };
        if let Some(message) = empty {
            return Err(GatewayError::invalid("input", message));
        }
        if self.dimensions == Some(0) {
            return Err(GatewayError::invalid(
                "dimensions",
                "`dimensions` must be > 0",
            ));
        }
        Ok(())
    }
}

/// Token usage of an embeddings call (model tokens), summed over its upstream batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct EmbeddingUsage {
    pub prompt_tokens: u64,
    pub total_tokens: u64,
}

/// The answer of an embeddings call.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EmbeddingResponse {
    /// The logical call id (the terminal telemetry row's id).
    pub call_id: String,
    pub scope: String,
    /// One vector per input, in input order, all of one dimension.
    pub vectors: Vec<Vec<f32>>,
    /// Summed over the upstream batches; `None` when a batch reported no usage
    /// (`usage_source` is then `unavailable`). Inputs answered from the cache count 0.
    pub usage: Option<EmbeddingUsage>,
    pub usage_source: UsageSource,
    /// The configured model of the source of the last batch (`None` when every input came
    /// from the cache).
    pub model: Option<String>,
    /// The source that answered the last batch (`None` when every input came from the cache).
    pub source_name: Option<String>,
    /// Upstream requests that answered (one per batch).
    pub upstream_batches: u32,
    /// Inputs answered from the response cache (repeats within the call count once).
    pub cached_inputs: u32,
    /// Attempts made, failed ones included.
    pub attempts: u32,
    /// Milliseconds from the call's start to its end.
    pub latency_ms: u64,
}

/// Run one embeddings call: telemetry frame, deadline, cache, batches.
pub(crate) async fn run_embed(
    inner: Arc<Inner>,
    req: EmbeddingRequest,
) -> Result<EmbeddingResponse, GatewayError> {
    req.validate()?;
    let scope = scope_of(&inner, &req.model)?;
    let call = LeanCall::new(
        &inner,
        scope,
        req.options.clone(),
        &stored_inputs(&req.input, 0..req.input.len()),
    );
    let mut guard = call.cancel_guard(inner.clone());
    let deadline = req.options.call_deadline.or(scope.settings.call_deadline);
    // The call's OpenTelemetry span (docs/tracing.md#spans), when traces are on; dropped
    // with this future, it ends as cancelled.
    let otel = inner.otel.as_ref().map(|o| {
        o.call(CallStart {
            operation: GenAiOperation::Embeddings,
            alias: &req.model,
            scope: &call.scope,
            call_id: &call.call_id,
            conversation_id: req.options.session_id.as_deref(),
            parent: req.options.trace_parent.as_ref(),
            overlay: None,
            embedding_dimensions: req.dimensions,
            messages: &[],
        })
    });
    let mut st = LeanState {
        deadline: deadline_at(call.started, deadline),
        trace: otel.as_ref().map(CallSpan::trace),
        ..LeanState::default()
    };
    let span = tracing::info_span!("embed", call_id = %call.call_id, scope = %call.scope);
    let result = match super::tenancy::lean::admit(
        &inner,
        scope,
        req.options.principal.as_ref(),
        &req.model,
        Some(embedding_tokens(&req.input)),
        |s| s.component.info().capabilities.embedding,
        &mut st,
    )
    .await
    {
        Ok(gate) => {
            let r = with_deadline(deadline, embed_inner(&inner, &call, &req, &mut st))
                .instrument_in(span)
                .await;
            let tokens = r.as_ref().ok().map(|r| {
                if r.upstream_batches == 0 {
                    0
                } else {
                    r.usage.map_or(0, |u| u.total_tokens)
                }
            });
            gate.settle(&st, tokens, r.is_err()).await;
            r
        }
        Err(e) => Err(e),
    };
    guard.row = None;
    let (usage, usage_source, response) = match &result {
        Ok(r) => (
            r.usage
                .map(|u| (u.prompt_tokens, u.total_tokens - u.prompt_tokens)),
            r.usage_source,
            Some(summary(r.vectors.len(), r.vectors.first().map(Vec::len))),
        ),
        Err(_) => (None, UsageSource::Unavailable, None),
    };
    let mut row = call.terminal_row(scope, &st, &result, usage, usage_source, response);
    if let Ok(r) = &result
        && r.upstream_batches == 0
    {
        // Every input came from the response cache: a cache-hit row (cost 0), as for chat.
        row.kind = crate::telemetry::RowKind::CacheHit;
        row.cache_hit = true;
    }
    inner.recorder.record(row);
    if let Some(otel) = otel {
        let last = st.last_source.and_then(|i| scope.sources.get(i));
        otel.end(match &result {
            Ok(r) => CallEnd {
                source: r.source_name.as_deref(),
                provider: last.map(|s| &*s.settings.provider),
                input_tokens: r.usage.map(|u| u.prompt_tokens),
                attempts: st.attempts,
                cache_hit: r.upstream_batches == 0,
                ..CallEnd::default()
            },
            Err(e) => super::traces::failed_call(e, st.attempts, last),
        });
    }
    result
}

/// One cache lookup (`None` key: no lookup).
async fn lookup(cache: &crate::cache::ResponseCache, key: Option<&str>) -> Option<Vec<f32>> {
    match key {
        Some(k) => cache.lookup_vector(k).await,
        None => None,
    }
}

/// Instrument a future with a span (keeps the call site short).
trait InstrumentIn: std::future::Future + Sized {
    fn instrument_in(self, span: tracing::Span) -> tracing::instrument::Instrumented<Self> {
        tracing::Instrument::instrument(self, span)
    }
}
impl<F: std::future::Future> InstrumentIn for F {}

async fn embed_inner(
    inner: &Inner,
    call: &LeanCall,
    req: &EmbeddingRequest,
    st: &mut LeanState,
) -> Result<EmbeddingResponse, GatewayError> {
    let scope = scope_of(inner, &req.model)?;
    // Each distinct input once: `slot[i]` numbers input i's distinct value, `first[d]` is
    // the first input of distinct value d.
    let (slot, first) = req.input.distinct();
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; first.len()];

    // Vectors of different models are incomparable: the cache is used only when every
    // embedding source of the scope runs one model (the usual case: accounts of one model).
    let embedders: Vec<&SourceSettings> = scope
        .sources
        .iter()
        .filter(|s| s.component.info().capabilities.embedding)
        .map(|s| &s.settings)
        .collect();
    let one_model = embedders
        .split_first()
        .filter(|(first, rest)| rest.iter().all(|s| batch::same_model(first, s)))
        .map(|(first, _)| model_fingerprint(std::slice::from_ref(*first)));
    if one_model.is_none() && inner.cache.is_some() {
        tracing::debug!(scope = %call.scope, "embedding sources differ in MODEL or EXTRA_BODY: cache not used");
    }
    let cache = inner
        .cache
        .as_ref()
        .map(|c| &c.cache)
        .filter(|_| one_model.is_some());
    let opts = &req.options;
    let keys: Vec<Option<String>> = match cache {
        Some(c) if opts.cache_mode != CacheMode::Bypass => first
            .iter()
            .map(|&i| {
                c.embedding_key(
                    &call.scope,
                    one_model.as_ref()?,
                    req.input.key_input(i)?,
                    req.dimensions,
                    opts.cache_namespace.as_deref(),
                    opts.principal.as_deref().map(|p| p.partition()),
                    opts.cache_salt.as_deref(),
                )
            })
            .collect(),
        _ => vec![None; first.len()],
    };
    let mut cached_inputs = 0u32;
    if let Some(c) = cache {
        let mut found: Vec<Option<Vec<f32>>> = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(LOOKUP_CONCURRENCY) {
            let lookups: Vec<_> = chunk.iter().map(|k| lookup(c, k.as_deref())).collect();
            found.extend(futures_util::future::join_all(lookups).await);
        }
        for (i, v) in found.into_iter().enumerate() {
            if keys[i].is_some() {
                inner
                    .recorder
                    .metrics()
                    .cache_lookup(&call.scope, v.is_some());
            }
            if let Some(v) = v {
                vectors[i] = Some(v);
                cached_inputs += 1;
            }
        }
    }
    // Cached vectors of another dimension than asked are not used (a stale entry).
    let mut expected_dim = req.dimensions.map(|d| d as usize);
    if expected_dim.is_none() {
        expected_dim = vectors.iter().flatten().map(Vec::len).next();
    }
    if let Some(d) = expected_dim {
        for v in vectors.iter_mut() {
            if v.as_ref().is_some_and(|v| v.len() != d) {
                *v = None;
                cached_inputs -= 1;
            }
        }
    }

    // The distinct values still without a vector, and their first inputs (what is sent).
    let missing: Vec<usize> = (0..first.len()).filter(|&d| vectors[d].is_none()).collect();
    let pending: Vec<usize> = missing.iter().map(|&d| first[d]).collect();
    let declined = batch::Declined::default();
    let mut usage = Some(EmbeddingUsage {
        prompt_tokens: 0,
        total_tokens: 0,
    });
    let mut upstream_batches = 0u32;
    let mut model = None;
    let mut source_name = None;
    let mut done = 0usize;
    let mut pin: Option<&SourceSettings> = None;
    let seed = scope.seed.fetch_add(1, Ordering::Relaxed);
    while done < pending.len() {
        let op = batch::BatchOp {
            call,
            input: &req.input,
            pending: &pending[done..],
            dimensions: req.dimensions,
            expected_dim,
            pin,
            declined: &declined,
        };
        let answer = match lean::run(inner, scope, &op, st, seed).await {
            Ok(a) => a,
            Err(e) => return Err(declined.explain(&call.scope, e)),
        };
        let out = answer.output;
        let source = &scope.sources[answer.source];
        pin = Some(&source.settings);
        model = Some(source.settings.model.clone());
        source_name = Some(source.settings.name.to_string());
        upstream_batches += 1;
        usage = match (usage, out.usage) {
            (Some(a), Some(b)) => a
                .prompt_tokens
                .checked_add(b.prompt_tokens)
                .zip(a.total_tokens.checked_add(b.total_tokens))
                .map(|(prompt_tokens, total_tokens)| EmbeddingUsage {
                    prompt_tokens,
                    total_tokens,
                }),
            _ => None,
        };
        if expected_dim.is_none() {
            expected_dim = out.vectors.first().map(Vec::len);
        }
        let taken = out.vectors.len();
        let store = cache.filter(|_| opts.cache_mode == CacheMode::Default);
        if let Some(c) = store {
            let batch_keys: Vec<(&str, &[f32])> = out
                .vectors
                .iter()
                .enumerate()
                .filter_map(|(k, v)| {
                    let key = keys.get(missing[done + k])?.as_deref()?;
                    Some((key, v.as_slice()))
                })
                .collect();
            for chunk in batch_keys.chunks(LOOKUP_CONCURRENCY) {
                let stores: Vec<_> = chunk
                    .iter()
                    .map(|(key, v)| c.store_vector(&call.scope, key, v))
                    .collect();
                futures_util::future::join_all(stores).await;
            }
        }
        for (k, v) in out.vectors.into_iter().enumerate() {
            vectors[missing[done + k]] = Some(v);
        }
        done += taken;
    }
    let mut out = Vec::with_capacity(req.input.len());
    for &s in &slot {
        match vectors.get(s).and_then(Option::as_ref) {
            Some(v) => out.push(v.clone()),
            None => {
                return Err(GatewayError::Internal(format!(
                    "embedding input {s} has no vector after every batch"
                )));
            }
        }
    }
    Ok(EmbeddingResponse {
        call_id: call.call_id.clone(),
        scope: call.scope.clone(),
        vectors: out,
        usage,
        usage_source: if usage.is_some() {
            UsageSource::Measured
        } else {
            UsageSource::Unavailable
        },
        model,
        source_name,
        upstream_batches,
        cached_inputs,
        attempts: st.attempts,
        latency_ms: u64::try_from(call.started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// The token bound of embedding inputs: a text's UTF-8 bytes (a byte-level BPE token covers
/// at least one byte), a token-id array's length.
pub(crate) fn embedding_tokens(input: &EmbeddingInput) -> u64 {
    match input {
        EmbeddingInput::Texts(t) => t.iter().map(|s| s.len() as u64).sum(),
        EmbeddingInput::Tokens(t) => t.iter().map(|v| v.len() as u64).sum(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn stored_inputs_are_text_parts_capped_at_200_chars() {
        let long = "é".repeat(250);
        let input = EmbeddingInput::Texts(vec!["short".to_string(), long]);
        let [m] = stored_inputs(&input, 0..2);
        assert_eq!(m["role"], "user");
        assert_eq!(m["content"][0], json!({"type": "text", "text": "short"}));
        let cut = m["content"][1]["text"].as_str().unwrap();
        assert_eq!(cut, format!("{}…[50 chars cut]", "é".repeat(200)));
        let [m] = stored_inputs(&input, [1, 0]);
        assert_eq!(m["content"][1], json!({"type": "text", "text": "short"}));
    }

    #[test]
    fn token_inputs_are_stored_as_tokens_parts() {
        let input = EmbeddingInput::Tokens(vec![vec![15339], vec![1917, 3]]);
        let [m] = stored_inputs(&input, [1]);
        assert_eq!(
            m["content"],
            json!([{"type": "tokens", "tokens": [1917, 3]}])
        );
    }

    #[test]
    fn repeats_are_deduplicated_and_tokens_never_equal_texts() {
        let tokens = EmbeddingInput::Tokens(vec![vec![1, 2], vec![3], vec![1, 2], vec![1]]);
        assert_eq!(tokens.distinct(), (vec![0, 1, 0, 2], vec![0, 1, 3]));
        let texts = EmbeddingInput::Texts(vec!["[1,2]".into()]);
        assert_ne!(tokens.key_input(0), texts.key_input(0));
        assert_eq!(
            tokens.key_input(0),
            Some(EmbeddingKeyInput::Tokens(&[1, 2]))
        );
        assert_eq!(tokens.key_input(4), None);
    }

    #[test]
    fn requests_are_validated_naming_the_field() {
        let mut r = EmbeddingRequest::new("emb", vec!["a".into(), String::new()]);
        assert_eq!(
            r.validate().unwrap_err().to_string(),
            "`input[1]` is an empty string"
        );
        let t = EmbeddingRequest::tokens("emb", vec![vec![1], vec![]]);
        assert_eq!(
            t.validate().unwrap_err().to_string(),
            "`input[1]` is an empty token array"
        );
        let t = EmbeddingRequest::tokens("emb", vec![]);
        assert_eq!(
            t.validate().unwrap_err().to_string(),
            "`input` must not be empty"
        );
        r.input = EmbeddingInput::Texts(vec!["a".into()]);
        r.dimensions = Some(0);
        match r.validate().unwrap_err() {
            GatewayError::InvalidRequest { param, .. } => {
                assert_eq!(param.as_deref(), Some("dimensions"))
            }
            e => panic!("{e:?}"),
        }
    }
}
