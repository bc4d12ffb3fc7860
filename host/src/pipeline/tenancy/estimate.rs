//! What a call may cost at most, before it runs (docs/budgets.md#reservation): the bound a
//! budget reserves, and the TPM pre-charge of a key's gate.
//!
//! Prompt tokens are bounded by the UTF-8 bytes of the messages' text: a byte-level BPE
//! token (every current model family's tokenizer) covers at least one byte, so a prompt never
//! has more tokens than bytes. A non-text part (an image, audio, a file) counts
//! [`PART_TOKENS`], and every message [`MESSAGE_TOKENS`] of framing. Completion tokens are
//! the request's `max_completion_tokens` / `max_tokens`, else the source's `MAX_TOKENS`,
//! else its `EST_TOKENS`, else [`DEFAULT_COMPLETION_TOKENS`]. The price is the dearest
//! source's of the scope, at full input and output rates (a cache discount only lowers the
//! actual cost, which settlement then refunds).

use serde_json::Value;

use crate::error::GatewayError;
use crate::telemetry::Price;

use super::super::request::ChatRequest;
use super::super::runtime::ScopeRuntime;

/// Tokens counted for one non-text content part (an image is 85–1,600 tokens at OpenAI's
/// and Anthropic's rates for the sizes they accept without tiling; high-detail tiling of a
/// large image can exceed it, which settlement then charges).
pub(crate) const PART_TOKENS: u64 = 1_600;
/// Framing tokens per message (role and separators).
pub(crate) const MESSAGE_TOKENS: u64 = 8;
/// Completion tokens reserved when neither the request nor the source bounds them.
pub(crate) const DEFAULT_COMPLETION_TOKENS: u64 = 4_096;

/// The upper bound on the prompt's tokens.
pub(crate) fn prompt_tokens(messages: &[Value]) -> u64 {
    messages.iter().map(message_tokens).sum()
}

fn message_tokens(m: &Value) -> u64 {
    let Some(obj) = m.as_object() else {
        return MESSAGE_TOKENS;
    };
    let mut n = MESSAGE_TOKENS;
    for (k, v) in obj {
        n += match (k.as_str(), v) {
            ("content", Value::Array(parts)) => parts.iter().map(part_tokens).sum(),
            ("role", _) => 0,
            (_, v) => text_bytes(v),
        };
    }
    n
}

fn part_tokens(p: &Value) -> u64 {
    match p.get("type").and_then(Value::as_str) {
        None | Some("text") => p.get("text").map_or(0, text_bytes),
        Some(_) => PART_TOKENS,
    }
}

/// The bytes of every string inside `v` (tool calls' arguments, names, plain content).
fn text_bytes(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.len() as u64,
        Value::Array(a) => a.iter().map(text_bytes).sum(),
        Value::Object(o) => o.iter().map(|(k, v)| k.len() as u64 + text_bytes(v)).sum(),
        Value::Number(_) | Value::Bool(_) => 4,
        Value::Null => 0,
    }
}

/// The completion bound of the request on `source`'s settings.
fn completion_tokens(req: &ChatRequest, source: &crate::config::SourceSettings) -> u64 {
    ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|k| req.overlay.get(*k).and_then(Value::as_u64))
        .or(source.max_tokens.map(u64::from))
        .or((source.est_tokens > 0).then_some(source.est_tokens))
        .unwrap_or(DEFAULT_COMPLETION_TOKENS)
}

/// The call's token bound (prompt + completion) on the scope's most generous source: the
/// TPM pre-charge of a key's gate.
pub(crate) fn max_tokens(req: &ChatRequest, scope: &ScopeRuntime) -> u64 {
    let prompt = prompt_tokens(&req.messages);
    scope
        .sources
        .iter()
        .map(|s| prompt + completion_tokens(req, &s.settings))
        .max()
        .unwrap_or(prompt)
}

/// The most the call can cost in USD on any source of its scope.
///
/// Errors: 400 naming the model when a source's `MODEL` has no price in
/// `PGW_PRICING_FILE` — a budget cannot hold for a call whose cost is unknown, so it is
/// refused rather than let through unmetered.
pub(crate) fn max_cost(
    req: &ChatRequest,
    scope: &ScopeRuntime,
    price: impl Fn(&str) -> Option<Price>,
) -> Result<f64, GatewayError> {
    let prompt = prompt_tokens(&req.messages) as f64;
    let mut most = 0.0f64;
    for s in &scope.sources {
        let Some(p) = price(&s.settings.model) else {
            return Err(GatewayError::invalid(
                "model",
                format!(
                    "this API key has a spend budget, and model `{}` of source {} has no price in PGW_PRICING_FILE: the call's cost could not be bounded",
                    s.settings.model, s.settings.name
                ),
            ));
        };
        let completion = completion_tokens(req, &s.settings) as f64;
        let cost = (prompt * p.input + completion * p.output) / 1_000_000.0;
        most = most.max(cost);
    }
    Ok(most)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prompt_bound_counts_bytes_parts_and_framing() {
        let m = vec![
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "héllo"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
            ]}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]}),
        ];
        // 8 + 8 ("be brief") | 8 + 6 ("héllo" is 6 bytes) + 1600 | 8 + content null 0 +
        // tool_calls: keys id(2)+c1(2) type(4)+function(8) function(8)+{name(4)+f(1) arguments(9)+{}(2)}
        let tool = 2 + 2 + 4 + 8 + 8 + (4 + 1 + 9 + 2);
        assert_eq!(prompt_tokens(&m), 16 + (8 + 6 + 1600) + (8 + tool));
    }
}
