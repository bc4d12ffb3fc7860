//! One `GenerateContentResponse` → deltas, with the state one answer needs across the SSE
//! chunks of a stream (each chunk has the shape of a whole response). `parse-response` is one
//! chunk of it followed by the end.
//!
//! Per chunk, in order:
//!
//! 1. `error` (non-null) → `Err`, classified by [`crate::errors::classify_in_band`];
//! 2. [`Delta::Model`] from `modelVersion` (the first one of the answer only);
//! 3. [`Delta::Role`]`("assistant")`, once, at the first chunk with a candidate or a prompt
//!    block;
//! 4. the parts of candidate 0 (`index` 0 or absent), in order:
//!    - a `thought: true` part: its text → [`Delta::Reasoning`], then its `thoughtSignature`
//!      → [`Delta::ReasoningSignature`] (format `google-gemini-v1`), closing the block;
//!    - a `functionCall` part: one whole [`Delta::ToolCall`] — `index` = the ordinal of the
//!      call in the answer (0-based, across chunks), `id` = the call's own `id` when Gemini
//!      gave one, else `call_<responseId>_<index>` (`call_<index>` without a `responseId`),
//!      `arguments` = `args` as compact JSON in Gemini's key order (`{}` when absent) — then
//!      its `thoughtSignature` → [`Delta::ReasoningEncrypted`] with `id` = that call id;
//!    - any other part (text): its text → [`Delta::Content`], then its `thoughtSignature` →
//!      [`Delta::ReasoningEncrypted`] with no id (Gemini puts a message's signature on a text
//!      part, often an empty last one);
//! 5. `finishReason` → [`Delta::Finish`]: `STOP` → `stop` (`tool-calls` when the answer has
//!    function calls), `MAX_TOKENS` → `length`, `SAFETY`, `RECITATION`, `BLOCKLIST`,
//!    `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY` and their image siblings
//!    `IMAGE_PROHIBITED_CONTENT`, `IMAGE_RECITATION` → `content-filter`, anything else →
//!    `other(verbatim)`. A `promptFeedback.blockReason` with no candidate →
//!    `content-filter`. Only the first finish of the answer counts;
//! 6. `usageMetadata` → the answer's usage (see [`usage`]); the last one wins. It is held
//!    and emitted as one [`Delta::Usage`] after the finish (or at [`Answer::end`]), and at
//!    once for a chunk that comes after the finish;
//! 7. [`Delta::Done`] after a chunk that finished the answer.
//!
//! Other part kinds (`executableCode`, `inlineData` output, …) carry nothing the contract
//! can express and are skipped. A JSON object without candidates is a chunk with nothing
//! to say (Gemini sends usage-only chunks); a body that is not a JSON object of this shape
//! (or not UTF-8) → `Err(transient, "malformed …")`.

use std::borrow::Cow;

use polygateway_plugin_sdk::bindings::polygateway::plugin::types::{
    EncryptedReasoning, ReasoningSignature,
};
use polygateway_plugin_sdk::{
    ClassifiedError, Delta, ErrorClass, FinishReason, ToolCallDelta, Usage,
};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::REASONING_FORMAT;
use crate::errors::classify_in_band;
use crate::json::{compact, quote};
use crate::lenient::{Count, Lenient, Object, Unsigned};

/// How many characters of an unparseable body are quoted in the error message.
const QUOTE_CHARS: usize = 200;

/// One `GenerateContentResponse`, as much of it as the contract reads, borrowing its strings
/// from the JSON text where it can. Scalars are [`Lenient`], so that an unexpected type is
/// treated as absent rather than as an error; `usageMetadata` that is not an object is
/// absent too.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Chunk<'a> {
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    candidates: Option<Vec<Candidate<'a>>>,
    #[serde(default)]
    prompt_feedback: Option<Value>,
    #[serde(default)]
    usage_metadata: Option<Object<UsageIn>>,
    #[serde(default, borrow)]
    model_version: Option<Lenient<Cow<'a, str>>>,
    #[serde(default, borrow)]
    response_id: Option<Lenient<Cow<'a, str>>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(default)]
    index: Option<Lenient<Unsigned>>,
    #[serde(default, borrow)]
    content: Option<CandidateContent<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Lenient<Cow<'a, str>>>,
}

#[derive(Debug, Deserialize)]
struct CandidateContent<'a> {
    #[serde(default, borrow)]
    parts: Option<Vec<PartIn<'a>>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartIn<'a> {
    #[serde(default, borrow)]
    text: Option<Lenient<Cow<'a, str>>>,
    #[serde(default)]
    thought: Option<Lenient<bool>>,
    #[serde(default, borrow)]
    thought_signature: Option<Lenient<Cow<'a, str>>>,
    #[serde(default, borrow)]
    function_call: Option<FunctionCallIn<'a>>,
}

#[derive(Debug, Deserialize)]
struct FunctionCallIn<'a> {
    #[serde(default, borrow)]
    name: Option<Lenient<Cow<'a, str>>>,
    #[serde(default, borrow)]
    id: Option<Lenient<Cow<'a, str>>>,
    #[serde(default)]
    args: Option<Box<RawValue>>,
}

/// `usageMetadata`'s counts (see [`usage`]); other keys are skipped.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageIn {
    #[serde(default)]
    prompt_token_count: Option<Lenient<Count>>,
    #[serde(default)]
    candidates_token_count: Option<Lenient<Count>>,
    #[serde(default)]
    thoughts_token_count: Option<Lenient<Count>>,
    #[serde(default)]
    tool_use_prompt_token_count: Option<Lenient<Count>>,
    #[serde(default)]
    cached_content_token_count: Option<Lenient<Count>>,
}

/// A non-empty string field.
fn text<'s>(v: Option<&'s Lenient<Cow<'_, str>>>) -> Option<&'s str> {
    v.and_then(Lenient::get)
        .map(|s| s.as_ref())
        .filter(|s| !s.is_empty())
}

/// A count field.
fn count(v: Option<&Lenient<Count>>) -> Option<u64> {
    v.and_then(Lenient::get).map(|c| c.0)
}

impl<'a> Chunk<'a> {
    /// Parse one chunk's JSON text.
    ///
    /// Errors: not a JSON object of the chunk's shape → `transient`, quoting the text after
    /// `what` (e.g. `malformed SSE data: …`).
    pub fn parse(text: &'a str, what: &str) -> Result<Self, ClassifiedError> {
        serde_json::from_str(text).map_err(|_| malformed(what, text))
    }
}

/// The state of one answer across its chunks (see the module documentation).
#[derive(Debug, Default)]
pub struct Answer {
    model_seen: bool,
    role_sent: bool,
    /// Function calls seen so far: the next call's index.
    calls: u32,
    response_id: Option<String>,
    finished: bool,
    pending_usage: Option<Usage>,
}

impl Answer {
    /// A fresh answer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a finish (and its `done`) was emitted.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Append the deltas of one chunk to `out`.
    ///
    /// Errors: the chunk carries an `error` object.
    pub fn chunk(
        &mut self,
        chunk: &Chunk<'_>,
        out: &mut Vec<Delta>,
    ) -> Result<(), ClassifiedError> {
        if let Some(error) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            return Err(classify_in_band(error));
        }
        if !self.model_seen
            && let Some(model) = text(chunk.model_version.as_ref())
        {
            self.model_seen = true;
            out.push(Delta::Model(model.to_owned()));
        }
        if self.response_id.is_none() {
            self.response_id = text(chunk.response_id.as_ref()).map(str::to_owned);
        }
        let candidate = chunk.candidates.as_deref().and_then(|c| {
            c.iter()
                .find(|c| c.index.as_ref().is_none_or(|i| i.0 == Some(Unsigned(0))))
        });
        let blocked = candidate.is_none()
            && chunk
                .prompt_feedback
                .as_ref()
                .and_then(|f| f.get("blockReason"))
                .and_then(Value::as_str)
                .is_some_and(|r| !r.is_empty());
        if (candidate.is_some() || blocked) && !self.role_sent {
            self.role_sent = true;
            out.push(Delta::Role("assistant".to_owned()));
        }
        let mut finish = blocked.then_some(FinishReason::ContentFilter);
        if let Some(candidate) = candidate {
            let parts = candidate
                .content
                .as_ref()
                .and_then(|c| c.parts.as_deref())
                .unwrap_or_default();
            for part in parts {
                self.part(part, out);
            }
            if let Some(reason) = text(candidate.finish_reason.as_ref()) {
                finish = Some(finish_reason(reason, self.calls > 0));
            }
        }
        if let Some(usage) = chunk
            .usage_metadata
            .as_ref()
            .and_then(|u| u.0.as_ref())
            .and_then(usage)
        {
            self.pending_usage = Some(usage);
        }
        match finish {
            Some(reason) if !self.finished => {
                self.finished = true;
                out.push(Delta::Finish(reason));
                self.flush_usage(out);
                out.push(Delta::Done);
            }
            _ if self.finished => self.flush_usage(out),
            _ => {}
        }
        Ok(())
    }

    /// The end of the stream: the usage still held, if any.
    pub fn flush_usage(&mut self, out: &mut Vec<Delta>) {
        if let Some(usage) = self.pending_usage.take() {
            out.push(Delta::Usage(usage));
        }
    }

    /// The end of a non-streamed answer (or an explicit end marker): the usage still held,
    /// then [`Delta::Done`] unless the finish already brought one.
    pub fn end(&mut self, out: &mut Vec<Delta>) {
        self.flush_usage(out);
        if !self.finished {
            self.finished = true;
            out.push(Delta::Done);
        }
    }

    fn part(&mut self, part: &PartIn<'_>, out: &mut Vec<Delta>) {
        let signature = text(part.thought_signature.as_ref()).map(str::to_owned);
        if let Some(call) = &part.function_call {
            let index = self.calls;
            self.calls = self.calls.saturating_add(1);
            let id = text(call.id.as_ref()).map_or_else(
                || match &self.response_id {
                    Some(response) => format!("call_{response}_{index}"),
                    None => format!("call_{index}"),
                },
                str::to_owned,
            );
            let arguments = call
                .args
                .as_ref()
                .map_or_else(|| "{}".to_owned(), |a| compact(a.get()));
            out.push(Delta::ToolCall(ToolCallDelta {
                index,
                id: Some(id.clone()),
                name: text(call.name.as_ref()).map(str::to_owned),
                arguments: Some(arguments),
            }));
            if let Some(data) = signature {
                out.push(encrypted(data, Some(id)));
            }
            return;
        }
        let content = text(part.text.as_ref()).map(str::to_owned);
        if part.thought.as_ref().and_then(Lenient::get) == Some(&true) {
            if let Some(reasoning) = content {
                out.push(Delta::Reasoning(reasoning));
            }
            if let Some(signature) = signature {
                out.push(Delta::ReasoningSignature(ReasoningSignature {
                    signature,
                    format: REASONING_FORMAT.to_owned(),
                }));
            }
            return;
        }
        if let Some(content) = content {
            out.push(Delta::Content(content));
        }
        if let Some(data) = signature {
            out.push(encrypted(data, None));
        }
    }
}

fn encrypted(data: String, id: Option<String>) -> Delta {
    Delta::ReasoningEncrypted(EncryptedReasoning {
        data,
        id,
        format: REASONING_FORMAT.to_owned(),
    })
}

/// Gemini's `finishReason` in OpenAI terms (see the module documentation).
///
/// # Example
/// ```text
/// finish_reason("STOP", true) == FinishReason::ToolCalls
/// ```
pub fn finish_reason(reason: &str, had_calls: bool) -> FinishReason {
    match reason {
        "STOP" if had_calls => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Gemini's `usageMetadata` in the contract's accounting: `prompt-tokens` =
/// `promptTokenCount` (which already includes `cachedContentTokenCount`) plus
/// `toolUsePromptTokenCount` (results of server-side tools, also input), `completion-tokens` =
/// `candidatesTokenCount` + `thoughtsTokenCount`, `cached-prompt-tokens` =
/// `cachedContentTokenCount`, `reasoning-tokens` = `thoughtsTokenCount` (each none when
/// absent; note that Google's JSON leaves zero counts out), `cache-write-tokens` none (Gemini
/// reports no cache writes). None unless `promptTokenCount` or `candidatesTokenCount` is a
/// count.
pub fn usage(u: &UsageIn) -> Option<Usage> {
    let prompt = count(u.prompt_token_count.as_ref());
    let candidates = count(u.candidates_token_count.as_ref());
    if prompt.is_none() && candidates.is_none() {
        return None;
    }
    let thoughts = count(u.thoughts_token_count.as_ref());
    let tool_use = count(u.tool_use_prompt_token_count.as_ref());
    Some(Usage {
        prompt_tokens: prompt.unwrap_or(0).saturating_add(tool_use.unwrap_or(0)),
        completion_tokens: candidates
            .unwrap_or(0)
            .saturating_add(thoughts.unwrap_or(0)),
        cached_prompt_tokens: count(u.cached_content_token_count.as_ref()),
        reasoning_tokens: thoughts,
        cache_write_tokens: None,
    })
}

/// `parse-response`: one whole `GenerateContentResponse` → its deltas, ending with
/// [`Delta::Done`] (see the module documentation).
///
/// Errors: an `error` object → classified; a body that is not a JSON object of the
/// response's shape → `transient` ("malformed response body: …").
pub fn parse_response(body: &[u8]) -> Result<Vec<Delta>, ClassifiedError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| malformed("malformed response body", &String::from_utf8_lossy(body)))?;
    let chunk = Chunk::parse(text, "malformed response body")?;
    let mut answer = Answer::new();
    let mut out = Vec::with_capacity(8);
    answer.chunk(&chunk, &mut out)?;
    answer.end(&mut out);
    Ok(out)
}

/// The error for a body or event that is not a Gemini response.
pub fn malformed(what: &str, text: &str) -> ClassifiedError {
    let shown = quote(text.trim(), QUOTE_CHARS);
    ClassifiedError {
        class: ErrorClass::Transient,
        message: if shown.is_empty() {
            format!("{what}: (empty)")
        } else {
            format!("{what}: {shown}")
        },
        code: None,
        retry_after_ms: None,
    }
}
