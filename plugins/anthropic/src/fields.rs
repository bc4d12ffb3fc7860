//! Anthropic response fields in the contract's terms: `stop_reason` → finish reason, and the
//! running usage total merged from `usage` objects (`message_start`, `message_delta`, a
//! whole message).

use polygateway_plugin_sdk::{FinishReason, Usage};
use serde_json::Value;

/// The finish reason of an Anthropic `stop_reason`: `end_turn` and `stop_sequence` → stop,
/// `max_tokens` → length, `tool_use` → tool-calls, `refusal` → content-filter; any other
/// (`pause_turn`, `model_context_window_exceeded`, a future value) verbatim as other.
pub(crate) fn finish_reason(stop_reason: &str) -> FinishReason {
    match stop_reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The token counts reported so far in one answer. Anthropic's counts are cumulative: a
/// count present in a later usage object replaces the earlier one, an absent one keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UsageTotals {
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    thinking: Option<u64>,
}

impl UsageTotals {
    /// Merge a `usage` object: `input_tokens`, `output_tokens`, `cache_read_input_tokens`,
    /// `cache_creation_input_tokens`, `output_tokens_details.thinking_tokens`. Returns
    /// whether it carried any of them (a count of another type or sign counts as absent).
    pub(crate) fn merge(&mut self, usage: &Value) -> bool {
        let mut any = false;
        for (slot, found) in [
            (&mut self.input, count(usage.get("input_tokens"))),
            (&mut self.output, count(usage.get("output_tokens"))),
            (
                &mut self.cache_read,
                count(usage.get("cache_read_input_tokens")),
            ),
            (
                &mut self.cache_write,
                count(usage.get("cache_creation_input_tokens")),
            ),
            (
                &mut self.thinking,
                count(usage.pointer("/output_tokens_details/thinking_tokens")),
            ),
        ] {
            if found.is_some() {
                *slot = found;
                any = true;
            }
        }
        any
    }

    /// The running total in OpenAI's accounting: prompt = input + cache reads + cache
    /// writes, completion = output (thinking included), cached = cache reads, cache-write =
    /// cache writes, reasoning = thinking tokens when reported. `None` before any input or
    /// output count.
    pub(crate) fn usage(&self) -> Option<Usage> {
        if self.input.is_none() && self.output.is_none() {
            return None;
        }
        let prompt = self
            .input
            .unwrap_or(0)
            .saturating_add(self.cache_read.unwrap_or(0))
            .saturating_add(self.cache_write.unwrap_or(0));
        Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: self.output.unwrap_or(0),
            cached_prompt_tokens: self.cache_read,
            reasoning_tokens: self.thinking,
            cache_write_tokens: self.cache_write,
        })
    }
}

/// A non-negative integer count (integral floats accepted).
fn count(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64().or_else(|| {
        let f = v.as_f64()?;
        // `as` saturates; the guard keeps fractions, negatives and non-finite values out.
        (f.is_finite() && f >= 0.0 && f.fract() == 0.0).then_some(f as u64)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merges_running_totals() {
        let mut t = UsageTotals::default();
        assert!(!t.merge(&json!({"service_tier": "standard"})));
        assert_eq!(t.usage(), None);
        assert!(
            t.merge(&json!({"input_tokens": 10, "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 5, "output_tokens": 1}))
        );
        assert!(t.merge(&json!({"output_tokens": 40.0, "input_tokens": -3,
            "output_tokens_details": {"thinking_tokens": 30}})));
        assert_eq!(
            t.usage(),
            Some(Usage {
                prompt_tokens: 115,
                completion_tokens: 40,
                cached_prompt_tokens: Some(100),
                reasoning_tokens: Some(30),
                cache_write_tokens: Some(5),
            })
        );
    }

    #[test]
    fn stop_reasons() {
        assert_eq!(finish_reason("end_turn"), FinishReason::Stop);
        assert_eq!(finish_reason("stop_sequence"), FinishReason::Stop);
        assert_eq!(finish_reason("max_tokens"), FinishReason::Length);
        assert_eq!(finish_reason("tool_use"), FinishReason::ToolCalls);
        assert_eq!(finish_reason("refusal"), FinishReason::ContentFilter);
        assert_eq!(
            finish_reason("pause_turn"),
            FinishReason::Other("pause_turn".into())
        );
    }
}
