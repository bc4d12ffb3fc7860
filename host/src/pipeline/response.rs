//! The uniform answer of a call and the accumulator that builds it from typed deltas, and
//! the rule that tells a broken (empty) answer from a valid one with no text.

use super::passthrough::{AnswerFields, FieldLog};
use super::reasoning::ReasoningDetails;
use crate::plugin::{Delta, finish_reason_str};
use crate::telemetry::UsageSource;

/// Token usage of an answer (the upstream's last report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's prompt cache; `None` = not reported.
    pub cached_prompt_tokens: Option<u64>,
    /// Reasoning tokens; `None` = not reported.
    pub reasoning_tokens: Option<u64>,
    /// Of `prompt_tokens`, those written to the provider's prompt cache (Anthropic
    /// `cache_creation_input_tokens`); `None` = not reported.
    #[serde(default)]
    pub cache_write_tokens: Option<u64>,
}

/// One complete tool call of an answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    pub index: u32,
    pub id: Option<String>,
    pub name: Option<String>,
    /// The JSON arguments text, as the model produced it.
    pub arguments: String,
}

/// The answer of one logical call. The response cache stores it as JSON.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ChatResponse {
    /// The logical call id (`x-pgw-call-id`).
    pub call_id: String,
    pub scope: String,
    /// Answer text.
    pub content: String,
    /// Reasoning text, when the model produced any.
    pub reasoning: Option<String>,
    /// The reasoning the provider needs back on the next turn (`reasoning_details`, see
    /// `reasoning.rs`): signed text blocks and encrypted blocks, empty when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning_details: Vec<serde_json::Value>,
    pub tool_calls: Vec<ToolCall>,
    /// OpenAI `finish_reason`, when the upstream gave one.
    pub finish_reason: Option<String>,
    /// `None` when the upstream reported no usage.
    pub usage: Option<TokenUsage>,
    pub usage_source: UsageSource,
    /// The configured upstream model of the source that answered.
    pub model: String,
    /// The model the upstream reported, if any.
    pub model_reported: Option<String>,
    pub source_name: String,
    pub provider: String,
    /// Attempts made (1 = first try).
    pub attempts: u32,
    /// Milliseconds from the call's start to its end.
    pub latency_ms: u64,
    /// Unix seconds at the call's start, from the gateway's clock (the OpenAI `created`).
    #[serde(default)]
    pub created: u64,
    /// Milliseconds from the answering attempt's request to its first token.
    pub ttft_ms: Option<f64>,
    /// Longest gap between two tokens of the answering attempt, in milliseconds.
    pub max_inter_token_ms: Option<f64>,
    /// The stream ended without `[DONE]` and was kept (`MISSING_DONE=salvage`).
    pub salvaged: bool,
    /// Microseconds the gateway itself spent on the call (upstream waits and back-off
    /// sleeps excluded).
    pub overhead_us: u64,
    /// Served by the response cache (a stored answer, or an identical call in flight):
    /// no upstream attempt was made for this call (`x-pgw-cache-hit`).
    #[serde(default)]
    pub cache_hit: bool,
    /// The model's refusal (OpenAI `message.refusal`), when it declined; `content` is then
    /// usually empty and written as `null`.
    #[serde(default)]
    pub refusal: Option<String>,
    /// The upstream's fields the gateway does not own (`logprobs`, `system_fingerprint`,
    /// `service_tier`, a legacy `function_call`, …), carried to the client as given.
    #[serde(default)]
    pub upstream_fields: Option<AnswerFields>,
    /// The parsed JSON of a call that asked for it (`response_format` `json_schema` or
    /// `json_object`): the answer passed the structured-output ladder — repaired and
    /// validated against the schema — and `content` is its JSON text. `None` for every other
    /// call. Only answers the ladder validated ever carry it (and only those are cached).
    #[serde(default)]
    pub structured: Option<serde_json::Value>,
    /// Soft budget limits of the call's virtual key or team that this call crossed
    /// (`x-pgw-budget-warning`, docs/budgets.md#soft-limits); never cached.
    #[serde(skip)]
    pub budget_warnings: Vec<String>,
}

/// Builds an answer from deltas: text is appended, tool-call fragments joined by index,
/// the first reported model and the last usage win.
#[derive(Debug, Default, Clone)]
pub struct Accumulator {
    pub content: String,
    pub reasoning: String,
    /// Signed and encrypted reasoning blocks (`reasoning_details`).
    pub reasoning_details: ReasoningDetails,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<TokenUsage>,
    pub model_reported: Option<String>,
    pub done: bool,
    /// Refusal text (appended).
    pub refusal: String,
    /// The checked passthrough deltas of the attempt.
    pub(crate) fields: FieldLog,
}

impl Accumulator {
    /// Apply one delta; returns whether it is a token for the watchdog (content, reasoning,
    /// refusal, a tool-call fragment, or message-level passthrough such as a legacy
    /// `function_call` fragment). A passthrough delta must have been checked
    /// (`passthrough::check`).
    pub fn apply(&mut self, d: &Delta) -> bool {
        match d {
            Delta::Role(_) => false,
            Delta::Content(c) => {
                self.content.push_str(c);
                !c.is_empty()
            }
            Delta::Reasoning(r) => {
                self.reasoning.push_str(r);
                !r.is_empty()
            }
            Delta::ReasoningSignature(sig) => {
                self.reasoning_details.sign(&self.reasoning, sig);
                true
            }
            Delta::ReasoningEncrypted(e) => {
                self.reasoning_details.encrypted(&self.reasoning, e);
                true
            }
            Delta::ToolCall(t) => {
                let slot = match self.tool_calls.iter_mut().find(|c| c.index == t.index) {
                    Some(s) => s,
                    None => {
                        self.tool_calls.push(ToolCall {
                            index: t.index,
                            id: None,
                            name: None,
                            arguments: String::new(),
                        });
                        let last = self.tool_calls.len() - 1;
                        &mut self.tool_calls[last]
                    }
                };
                if let Some(id) = &t.id {
                    slot.id.get_or_insert_with(|| id.clone());
                }
                if let Some(n) = &t.name {
                    match &mut slot.name {
                        Some(existing) if existing != n => existing.push_str(n),
                        Some(_) => {}
                        None => slot.name = Some(n.clone()),
                    }
                }
                if let Some(a) = &t.arguments {
                    slot.arguments.push_str(a);
                }
                true
            }
            Delta::Finish(f) => {
                self.finish_reason = Some(finish_reason_str(f).to_string());
                false
            }
            Delta::Usage(u) => {
                self.usage = Some(TokenUsage {
                    prompt_tokens: u.prompt_tokens,
                    completion_tokens: u.completion_tokens,
                    cached_prompt_tokens: u.cached_prompt_tokens,
                    reasoning_tokens: u.reasoning_tokens,
                    cache_write_tokens: u.cache_write_tokens,
                });
                false
            }
            Delta::Model(m) => {
                if self.model_reported.is_none() && !m.is_empty() {
                    self.model_reported = Some(m.clone());
                }
                false
            }
            Delta::Done => {
                self.done = true;
                false
            }
            Delta::Refusal(r) => {
                self.refusal.push_str(r);
                !r.is_empty()
            }
            Delta::Passthrough(p) => {
                self.fields.push(p);
                p.message_json.is_some()
            }
        }
    }

    /// A broken answer: it ended with no finish reason and nothing in it (no text, refusal,
    /// tool call or message-level field such as a legacy `function_call`). An answer with a
    /// finish reason is the upstream's answer even with no text (a refusal, a
    /// `content_filter` stop, a `length` stop after only reasoning, `content: ""`).
    pub fn is_empty_completion(&self) -> bool {
        self.finish_reason.is_none()
            && self.content.is_empty()
            && self.refusal.is_empty()
            && self.tool_calls.is_empty()
            && !self.fields.has_message()
    }

    /// The refusal, when there is one.
    pub fn refusal(&self) -> Option<String> {
        (!self.refusal.is_empty()).then(|| self.refusal.clone())
    }

    /// The pass-through fields of the whole answer.
    pub fn upstream_fields(&self) -> Option<AnswerFields> {
        self.fields.answer()
    }
}
