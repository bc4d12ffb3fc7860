//! `build-request`: the Messages API request (`POST /v1/messages`) for one attempt — the
//! body's contract keys, the output cap and thinking settings, `EXTRA_BODY`, then the
//! client's mapped parameters.

use std::collections::BTreeMap;

use polygateway_plugin_sdk::{
    AuthScheme, BuildError, ChatRequest, Header, HttpRequest, SourceInfo,
};

use crate::json::{self, Obj, RawObject};
use crate::messages::Conversation;
use crate::overlay::{ClientThinking, Overlay, client_thinking};

/// The Messages API path, appended to `BASE_URL` (`https://api.anthropic.com`, no `/v1`).
pub const MESSAGES_PATH: &str = "/v1/messages";

/// The `anthropic-version` header every request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The header the host puts the source's key in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// The output cap when neither the client nor `MAX_TOKENS` gives one (Anthropic requires
/// `max_tokens`).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// `thinking.budget_tokens` when `THINKING_BUDGET` is not set: Anthropic's minimum.
pub const DEFAULT_THINKING_BUDGET: u32 = 1024;

/// The smallest `budget_tokens` Anthropic accepts.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// Body keys `EXTRA_BODY` never sets (the contract's, plus `system`, which the messages
/// own). `max_tokens` is protected only when the client set one: it is written again after
/// the merge.
const EXTRA_BODY_PROTECTED: [&str; 5] = ["model", "messages", "stream", "stream_options", "system"];

/// Build the request. Body, in merge order (later wins):
/// 1. `model` (`MODEL`), `system` and `messages` (see [`Conversation`]; the prefill as a last
///    assistant text), `stream` as asked;
/// 2. `max_tokens`: the client's cap, else `MAX_TOKENS`, else [`DEFAULT_MAX_TOKENS`]; with
///    `ENABLE_THINKING` on, `thinking: {"type":"enabled","budget_tokens":THINKING_BUDGET or
///    1024}`, and a cap not from the client that does not exceed the budget is raised to
///    budget + [`DEFAULT_MAX_TOKENS`]; a client `thinking` overrides the source's (its
///    `budget_tokens`, `adaptive` as given, or `disabled`);
/// 3. `EXTRA_BODY`'s keys, but never `model`, `messages`, `stream`, `stream_options`,
///    `system` (it may replace `thinking`, or `max_tokens` when the client set none);
/// 4. the client's mapped parameters (see [`Overlay::parse`]), including its `max_tokens`.
///
/// Errors: `invalid-request` for malformed messages or overlay (naming the field), `n` > 1,
/// or a client cap that does not exceed the thinking budget; `unsupported` (another source
/// may serve it) for a prefill or a forced tool choice while thinking is on, a part type
/// Anthropic cannot take, a `THINKING_BUDGET` below 1024 or an `EXTRA_BODY` that is not a
/// JSON object (source misconfigurations the host should have refused).
pub(crate) fn build_request(
    req: &ChatRequest,
    source: &SourceInfo,
) -> Result<HttpRequest, BuildError> {
    let client = client_thinking(&req.overlay_json)?;
    let thinking = match client {
        Some(ClientThinking::Enabled(_) | ClientThinking::Adaptive) => true,
        Some(ClientThinking::Disabled) => false,
        None => source.enable_thinking == Some(true),
    };
    let overlay = Overlay::parse(&req.overlay_json, thinking)?;
    let mut conv = Conversation::from_messages_json(&req.messages_json)?;
    if let Some(prefill) = &req.prefill {
        if thinking {
            return Err(BuildError::Unsupported(
                "anthropic cannot continue a prefilled answer while extended thinking is on \
                 (ENABLE_THINKING)"
                    .to_owned(),
            ));
        }
        conv.push_prefill(prefill);
    }
    if thinking && overlay.tool_choice.as_ref().is_some_and(|c| c.forced) {
        return Err(BuildError::Unsupported(
            "anthropic cannot force a tool call while extended thinking is on (ENABLE_THINKING)"
                .to_owned(),
        ));
    }
    let (cap, thinking_json) = match client {
        Some(ClientThinking::Adaptive) => (
            overlay
                .max_tokens
                .or(source.max_tokens)
                .unwrap_or(DEFAULT_MAX_TOKENS),
            Some(Obj::new().str("type", "adaptive").build()),
        ),
        Some(ClientThinking::Enabled(budget)) => {
            output_settings(overlay.max_tokens, source, thinking, budget)?
        }
        _ => output_settings(overlay.max_tokens, source, thinking, None)?,
    };
    let mut body: BTreeMap<String, String> = BTreeMap::new();
    body.insert("model".into(), json::string(&source.model));
    if let Some(system) = conv.system_json() {
        body.insert("system".into(), system);
    }
    body.insert("messages".into(), conv.messages_json());
    body.insert("stream".into(), req.stream.to_string());
    body.insert("max_tokens".into(), cap.to_string());
    if let Some(t) = thinking_json {
        body.insert("thinking".into(), t);
    }
    merge_extra_body(&mut body, &source.extra_body_json)?;
    if let Some(client_cap) = overlay.max_tokens {
        body.insert("max_tokens".into(), client_cap.to_string());
    }
    body.extend(overlay.keys);
    Ok(HttpRequest {
        method: "POST".into(),
        path: MESSAGES_PATH.into(),
        headers: vec![
            header("anthropic-version", ANTHROPIC_VERSION),
            header("content-type", "application/json"),
        ],
        body: to_bytes(&body),
        auth: AuthScheme::Header(API_KEY_HEADER.into()),
    })
}

/// The `max_tokens` value and the `thinking` object (when thinking is on).
fn output_settings(
    client_cap: Option<u32>,
    source: &SourceInfo,
    thinking: bool,
    client_budget: Option<u32>,
) -> Result<(u32, Option<String>), BuildError> {
    let cap = client_cap
        .or(source.max_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    if !thinking {
        return Ok((cap, None));
    }
    let budget = client_budget
        .or(source.thinking_budget_tokens)
        .unwrap_or(DEFAULT_THINKING_BUDGET);
    if let Some(b) = client_budget
        && b < MIN_THINKING_BUDGET
    {
        return Err(BuildError::InvalidRequest(format!(
            "overlay-json: thinking.budget_tokens: {b} is below anthropic's minimum of {MIN_THINKING_BUDGET}"
        )));
    }
    if budget < MIN_THINKING_BUDGET {
        return Err(BuildError::Unsupported(format!(
            "THINKING_BUDGET {budget} is below anthropic's minimum budget_tokens of \
             {MIN_THINKING_BUDGET}"
        )));
    }
    let cap = match client_cap {
        Some(c) if c <= budget => {
            return Err(BuildError::InvalidRequest(format!(
                "overlay-json: max_tokens: {c} must exceed the thinking budget_tokens {budget} \
                 (THINKING_BUDGET): anthropic counts thinking in max_tokens"
            )));
        }
        Some(c) => c,
        None if cap <= budget => budget.saturating_add(DEFAULT_MAX_TOKENS),
        None => cap,
    };
    let thinking_json = Obj::new()
        .str("type", "enabled")
        .raw("budget_tokens", &budget.to_string())
        .build();
    Ok((cap, Some(thinking_json)))
}

/// Merge `EXTRA_BODY` (values verbatim), skipping the protected keys.
fn merge_extra_body(body: &mut BTreeMap<String, String>, extra: &str) -> Result<(), BuildError> {
    if extra.trim().is_empty() {
        return Ok(());
    }
    let obj: RawObject<'_> = serde_json::from_str(extra).map_err(|e| {
        BuildError::Unsupported(format!("extra-body-json: expected a JSON object ({e})"))
    })?;
    for (key, value) in obj {
        if !EXTRA_BODY_PROTECTED.contains(&key.as_str()) {
            body.insert(key, value.get().to_owned());
        }
    }
    Ok(())
}

fn header(name: &str, value: &str) -> Header {
    Header {
        name: name.into(),
        value: value.into(),
    }
}

/// The body as JSON bytes (keys sorted).
fn to_bytes(body: &BTreeMap<String, String>) -> Vec<u8> {
    let mut out = Obj::new();
    for (key, value) in body {
        out = out.raw(key, value);
    }
    out.build().into_bytes()
}
