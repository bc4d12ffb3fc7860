//! The client's OpenAI parameters (`chat-request.overlay-json`) mapped onto Anthropic body
//! keys: the output cap, sampling, stop sequences, tools, `user`; the OpenAI-only ones are
//! dropped.

use std::collections::BTreeMap;

use polygateway_plugin_sdk::BuildError;
use serde_json::value::RawValue;

use crate::json::{self, Kind, Obj, RawObject};
use crate::tools::{ToolChoice, tool_choice, tools_json};

/// The overlay keys passed through under the same name (Anthropic has them too).
const SAMPLING_KEYS: [&str; 3] = ["temperature", "top_p", "top_k"];

/// The smallest `top_p` Anthropic accepts with extended thinking.
const THINKING_MIN_TOP_P: f64 = 0.95;

/// The client's own `thinking` parameter (Anthropic's spelling, which DeepSeek and LiteLLM
/// share): it overrides the source's `ENABLE_THINKING` / `THINKING_BUDGET` for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientThinking {
    /// `{"type": "enabled", "budget_tokens": n}`; without `budget_tokens` (DeepSeek's
    /// spelling) the source's `THINKING_BUDGET` applies.
    Enabled(Option<u32>),
    /// `{"type": "adaptive"}`: the model decides (sent as given).
    Adaptive,
    /// `{"type": "disabled"}`.
    Disabled,
}

/// The client's `thinking`, when the overlay has one.
///
/// Errors: not an object with `type` `enabled` (and an integer `budget_tokens`), `adaptive`
/// or `disabled` → `invalid-request` naming `thinking`.
pub(crate) fn client_thinking(overlay_json: &str) -> Result<Option<ClientThinking>, BuildError> {
    if overlay_json.trim().is_empty() {
        return Ok(None);
    }
    let Some(obj) = json::object(overlay_json) else {
        return Ok(None); // `Overlay::parse` names the problem.
    };
    let Some(t) = json::field(&obj, "thinking") else {
        return Ok(None);
    };
    let bad = || {
        invalid(
            "thinking",
            "expected {\"type\": \"enabled\", \"budget_tokens\": n}, {\"type\": \"adaptive\"} or {\"type\": \"disabled\"}",
        )
    };
    let t = json::object(t.get()).ok_or_else(bad)?;
    match json::string_field(&t, "type").as_deref() {
        Some("enabled") => {
            let budget = json::field(&t, "budget_tokens")
                .map(|b| {
                    serde_json::from_str::<u32>(b.get()).map_err(|_| {
                        invalid("thinking.budget_tokens", "expected a non-negative integer")
                    })
                })
                .transpose()?;
            Ok(Some(ClientThinking::Enabled(budget)))
        }
        Some("adaptive") => Ok(Some(ClientThinking::Adaptive)),
        Some("disabled") => Ok(Some(ClientThinking::Disabled)),
        _ => Err(bad()),
    }
}

/// The client's parameters, parsed and mapped.
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    /// `max_completion_tokens`, else `max_tokens`.
    pub(crate) max_tokens: Option<u32>,
    /// Body keys to set (Anthropic names → JSON text).
    pub(crate) keys: BTreeMap<String, String>,
    /// The mapped `tool_choice`, kept apart to check it against thinking.
    pub(crate) tool_choice: Option<ToolChoice>,
}

/// An `invalid-request` naming an overlay field.
fn invalid(at: &str, problem: &str) -> BuildError {
    BuildError::InvalidRequest(format!("overlay-json: {at}: {problem}"))
}

impl Overlay {
    /// Parse and map `overlay-json` (empty or whitespace-only text = no parameters).
    ///
    /// Mapped: `max_completion_tokens` / `max_tokens` → the cap; `temperature`, `top_p`,
    /// `top_k` as given (with `thinking`, `temperature` and `top_k` are dropped and `top_p`
    /// only kept from 0.95 up, as Anthropic requires); `stop` (a string or a list) →
    /// `stop_sequences`; `tools`, `tool_choice`, `parallel_tool_calls` (see [`crate::tools`];
    /// a tool choice is only sent with tools);
    /// `user` → `metadata.user_id`; `n` must be 1; `thinking` is read by [`client_thinking`].
    /// Every other key — OpenAI's
    /// `frequency_penalty`, `presence_penalty`, `logprobs`, `top_logprobs`, `seed`,
    /// `response_format`, `logit_bias`, `stream_options`, … — is dropped: Anthropic refuses
    /// unknown keys, and its own extras belong in the source's `EXTRA_BODY`.
    ///
    /// Errors: not a JSON object, or a mapped key of the wrong type → `invalid-request`
    /// naming the field; `n` > 1 → `invalid-request` (Anthropic answers one choice).
    pub(crate) fn parse(overlay_json: &str, thinking: bool) -> Result<Self, BuildError> {
        let mut out = Self::default();
        if overlay_json.trim().is_empty() {
            return Ok(out);
        }
        let obj: RawObject<'_> = serde_json::from_str(overlay_json).map_err(|e| {
            BuildError::InvalidRequest(match e.classify() {
                serde_json::error::Category::Data => {
                    "overlay-json: expected a JSON object".to_owned()
                }
                _ => format!("overlay-json: invalid JSON: {e}"),
            })
        })?;
        out.max_tokens = cap(&obj, "max_completion_tokens")?.or(cap(&obj, "max_tokens")?);
        if let Some(n) = json::field(&obj, "n")
            && serde_json::from_str::<f64>(n.get()).ok() != Some(1.0)
        {
            return Err(invalid(
                "n",
                &format!("anthropic answers one choice, not {}", n.get()),
            ));
        }
        for key in SAMPLING_KEYS {
            if let Some(v) = json::field(&obj, key)
                && keep_sampling(key, v, thinking)?
            {
                out.keys.insert(key.to_owned(), v.get().to_owned());
            }
        }
        if let Some(stop) = json::field(&obj, "stop")
            && let Some(sequences) = stop_sequences(stop)?
        {
            out.keys.insert("stop_sequences".into(), sequences);
        }
        let tools = match json::field(&obj, "tools") {
            Some(t) => tools_json(t)?,
            None => None,
        };
        let choice = tool_choice(
            json::field(&obj, "tool_choice"),
            json::field(&obj, "parallel_tool_calls"),
            tools.is_some(),
        )?;
        // A tool choice without tools has nothing to choose from: it is checked, not sent.
        out.tool_choice = choice.filter(|_| tools.is_some());
        if let Some(tools) = tools {
            out.keys.insert("tools".into(), tools);
        }
        if let Some(choice) = &out.tool_choice {
            out.keys.insert("tool_choice".into(), choice.json.clone());
        }
        if let Some(user) = json::field(&obj, "user") {
            if json::kind(user) != Kind::String {
                return Err(invalid("user", "expected a string"));
            }
            let metadata = Obj::new().raw("user_id", user.get()).build();
            out.keys.insert("metadata".into(), metadata);
        }
        Ok(out)
    }
}

/// An output cap: a non-negative integer that fits in 32 bits.
fn cap(obj: &RawObject<'_>, key: &str) -> Result<Option<u32>, BuildError> {
    json::field(obj, key)
        .map(|v| {
            serde_json::from_str::<u32>(v.get())
                .map_err(|_| invalid(key, "expected a non-negative integer"))
        })
        .transpose()
}

/// Whether a sampling key is sent: with thinking, Anthropic refuses `temperature` and
/// `top_k` changes and a `top_p` below 0.95.
fn keep_sampling(key: &str, value: &RawValue, thinking: bool) -> Result<bool, BuildError> {
    let number =
        serde_json::from_str::<f64>(value.get()).map_err(|_| invalid(key, "expected a number"))?;
    Ok(!thinking || (key == "top_p" && number >= THINKING_MIN_TOP_P))
}

/// OpenAI `stop` → Anthropic `stop_sequences`: a string → `[string]`, a list of strings as
/// given; an empty string or list → nothing.
fn stop_sequences(stop: &RawValue) -> Result<Option<String>, BuildError> {
    match json::kind(stop) {
        Kind::String if json::is_empty_string(stop.get()) => Ok(None),
        Kind::String => Ok(Some(json::list(&[stop.get()]))),
        Kind::Array => {
            let items = json::array(stop.get()).unwrap_or_default();
            if items.iter().any(|s| json::kind(s) != Kind::String) {
                return Err(invalid("stop", "expected a string or a list of strings"));
            }
            Ok((!items.is_empty()).then(|| stop.get().to_owned()))
        }
        _ => Err(invalid("stop", "expected a string or a list of strings")),
    }
}
