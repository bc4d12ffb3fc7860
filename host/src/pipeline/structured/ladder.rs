//! The structured-output ladder (docs/structured-output.md#ladder) for one call that asks for
//! JSON:
//!
//! 1. **prevent** — the strategy's `prepare` shapes the request: the caller's
//!    `response_format` is replaced by the strategy's (a native schema only where every
//!    source of the scope declares `native-json-schema`), and its instructions become a
//!    system message;
//! 2. **repair** — the strategy's `repair` turns the answer text into JSON text;
//! 3. **validate** — the host parses it and checks it against the schema (`jsonschema`);
//! 4. **re-ask** — on a repair or validation failure, up to
//!    `{SCOPE}__STRUCTURED__MAX_RETRIES` times: the prepared messages, the bad answer as an
//!    assistant message and a user message quoting the errors. A re-ask is a new run of the
//!    retry loop, so it passes admission and leaves attempt rows like any attempt; the
//!    breaker already counted the bad answer as a success (the service was healthy);
//! 5. **give up** — `result-invalid` (HTTP 422) with the raw text, the repair error and the
//!    first validation errors.
//!
//! An answer that is only tool calls (the caller offered tools and the model called one)
//! skips repair and validation: `response_format` shapes an answer's text, and it has none.
//!
//! The retry loop runs with a collecting sink: nothing reaches a streaming caller before
//! the answer is valid. Then the validated JSON is replayed through the caller's sink as
//! `Start`, role, content and finish (see [`replay`]).
//!
//! **Prevent uses the capabilities every source shares.** The source of an attempt is
//! chosen inside the retry loop, after the request is built; asking with the intersection
//! of the scope's capabilities means no failover target ever receives a `response_format`
//! it cannot honour. A mixed scope (say openai + deepseek) therefore gets prompt
//! instructions and repair on every source, a uniform one gets the native schema.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::{GatewayError, StructuredFailure};
use crate::plugin::{
    Capabilities, Delta, FinishReason, PluginError, Preparation, RepairError, ResponseFormat,
    StrategyComponent, ToolCallDelta,
};

use super::super::boxed::boxed_in_place;
use super::super::layer::Layer;
use super::super::request::ChatRequest;
use super::super::response::{Accumulator, ChatResponse};
use super::super::runtime::{Inner, ScopeRuntime};
use super::super::sink::{CallState, Sink};
use super::target::{Target, truncate};

/// Why an answer did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Problem {
    /// The strategy recovered no JSON (or returned text that is not JSON).
    Repair(String),
    /// The repaired JSON breaks the schema: the first errors.
    Invalid(Vec<String>),
}

/// Run a structured call through the ladder (see the module docs).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run<N: Layer>(
    next: N,
    inner: &Arc<Inner>,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    target: &Target,
    strategy: &StrategyComponent,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let caps = shared_capabilities(scope);
    let prep = strategy
        .prepare(&target.wire, &caps)
        .map_err(|e| fault(strategy, e))?;
    let base = prepared(req, &prep);
    let max = scope.settings.structured.max_retries;
    let mut ask = base.clone();
    let mut reasks: u32 = 0;
    loop {
        let mut collect = Sink::Collect;
        // The rest of the stack in a box of its own while it runs: awaited inline, it would
        // be held beside the ladder's own state (~1.5 KiB), and that sum would size every
        // call's future, structured or not (`boxed::boxed_in_place`).
        let mut answer =
            boxed_in_place(|| next.serve(inner, scope, &ask, st, &mut collect)).await?;
        if is_tool_call_answer(&answer) {
            // The caller offered tools and the model called one: `response_format` shapes
            // the text of an answer, and this answer has none. It goes back as it is.
            replay(scope, st, sink, &answer).await?;
            return Ok(answer);
        }
        match check(strategy, target, &answer.content)? {
            Ok((json, value)) => {
                answer.content = json;
                answer.structured = Some(value);
                replay(scope, st, sink, &answer).await?;
                return Ok(answer);
            }
            Err(problem) if reasks < max => {
                reasks += 1;
                tracing::info!(
                    scope = %scope.settings.name,
                    strategy = %strategy.name(),
                    reask = reasks,
                    problem = ?problem,
                    "structured answer failed the ladder; re-asking with feedback"
                );
                ask = reask(&base, &answer.content, &problem, target);
            }
            Err(problem) => {
                let (repair_error, validation_errors) = match problem {
                    Problem::Repair(m) => (Some(m), Vec::new()),
                    Problem::Invalid(errors) => (None, errors),
                };
                let first = repair_error
                    .clone()
                    .or_else(|| validation_errors.first().cloned())
                    .unwrap_or_default();
                return Err(GatewayError::ResultInvalid {
                    source_name: answer.source_name,
                    message: format!(
                        "the answer is not valid structured output after {reasks} re-ask(s) ({} strategy): {first}",
                        strategy.name()
                    ),
                    structured: Some(Box::new(StructuredFailure {
                        strategy: strategy.name().to_string(),
                        raw_text: answer.content,
                        repair_error,
                        validation_errors,
                        reasks,
                    })),
                });
            }
        }
    }
}

/// An answer made of tool calls and no text (whitespace aside).
fn is_tool_call_answer(answer: &ChatResponse) -> bool {
    !answer.tool_calls.is_empty() && answer.content.trim().is_empty()
}

/// What every source of the scope can do: a capability counts only when all sources
/// declare it (see the module docs).
fn shared_capabilities(scope: &ScopeRuntime) -> Capabilities {
    let all = |f: fn(&Capabilities) -> bool| {
        scope
            .sources
            .iter()
            .all(|s| f(&s.component.info().capabilities))
    };
    let mut caps = match scope.sources.first() {
        Some(s) => s.component.info().capabilities,
        None => Capabilities {
            streaming: false,
            native_json_schema: false,
            thinking: crate::plugin::ThinkingStyle::None,
            prefill_continuation: false,
            chat: true,
            embedding: false,
            ocr: false,
            audio: false,
        },
    };
    caps.streaming = all(|c| c.streaming);
    caps.native_json_schema = all(|c| c.native_json_schema);
    caps.prefill_continuation = all(|c| c.prefill_continuation);
    caps
}

fn fault(strategy: &StrategyComponent, e: PluginError) -> GatewayError {
    GatewayError::PluginFault {
        plugin: strategy.name().to_string(),
        message: e.to_string(),
    }
}

/// The request as the strategy prepared it: the caller's `response_format` replaced by the
/// strategy's (or removed), the instructions as a system message after the leading system
/// (or developer) messages.
fn prepared(req: &ChatRequest, prep: &Preparation) -> ChatRequest {
    let mut out = req.clone();
    out.overlay.remove("response_format");
    if let Some(format) = &prep.response_format {
        out.overlay
            .insert("response_format".into(), response_format_json(format));
    }
    if let Some(text) = prep
        .instructions
        .as_deref()
        .filter(|t| !t.trim().is_empty())
    {
        let at = out
            .messages
            .iter()
            .take_while(|m| matches!(m["role"].as_str(), Some("system" | "developer")))
            .count();
        out.messages
            .insert(at, json!({"role": "system", "content": text}));
    }
    out
}

/// The OpenAI `response_format` object of a strategy's answer. A schema that is not JSON
/// text (a strategy bug) is sent as `{}` rather than invented.
fn response_format_json(f: &ResponseFormat) -> Value {
    match f {
        ResponseFormat::JsonObject => json!({"type": "json_object"}),
        ResponseFormat::JsonSchema(s) => {
            let schema: Value = serde_json::from_str(&s.schema_json).unwrap_or_else(|_| json!({}));
            json!({"type": "json_schema",
                   "json_schema": {"name": s.name, "schema": schema, "strict": s.strict}})
        }
    }
}

/// Repair and validate an answer: `Ok(Ok((json text, value)))` when it passes,
/// `Ok(Err(problem))` when it does not, `Err` when the strategy faulted.
fn check(
    strategy: &StrategyComponent,
    target: &Target,
    raw: &str,
) -> Result<Result<(String, Value), Problem>, GatewayError> {
    let repaired = match strategy
        .repair(raw, &target.wire)
        .map_err(|e| fault(strategy, e))?
    {
        Ok(text) => text,
        Err(RepairError::Empty) => {
            return Ok(Err(Problem::Repair("the answer is empty".into())));
        }
        Err(RepairError::Unrecoverable(m)) => return Ok(Err(Problem::Repair(truncate(m)))),
    };
    let value: Value = match serde_json::from_str(&repaired) {
        Ok(v) => v,
        Err(e) => {
            return Ok(Err(Problem::Repair(truncate(format!(
                "the {} strategy's repair is not JSON: {e}",
                strategy.name()
            )))));
        }
    };
    let errors = target.validate(&value);
    if !errors.is_empty() {
        return Ok(Err(Problem::Invalid(errors)));
    }
    Ok(Ok((repaired.trim().to_string(), value)))
}

/// The re-ask after a failed answer: the prepared messages, the bad answer, and a user
/// message quoting what was wrong. Each re-ask starts from the prepared messages (not from
/// the previous re-ask), so the prompt does not grow with every round; its messages differ
/// from the original call's, so it can never be answered from the original's cache entry.
fn reask(base: &ChatRequest, bad: &str, problem: &Problem, target: &Target) -> ChatRequest {
    let wanted = match target.wire.schema_json {
        Some(_) => "a single JSON value that conforms to the required JSON Schema",
        None => "a single JSON object",
    };
    let what = match problem {
        Problem::Repair(m) => format!("Your previous answer is not valid JSON: {m}"),
        Problem::Invalid(errors) => {
            let list: Vec<String> = errors.iter().map(|e| format!("- {e}")).collect();
            format!(
                "Your previous answer does not conform to the required JSON Schema:\n{}",
                list.join("\n")
            )
        }
    };
    let feedback = format!(
        "{what}\n\nReply again with {wanted}, corrected, and nothing else: no Markdown code fences, no comments, no text before or after it."
    );
    let mut out = base.clone();
    out.messages
        .push(json!({"role": "assistant", "content": bad}));
    out.messages
        .push(json!({"role": "user", "content": feedback}));
    out
}

/// Send the validated answer to a streaming caller: `Start` (committing the call to the
/// source that answered), then role, reasoning, the JSON text, tool calls and the finish
/// reason, as a live stream would. `End` follows from the call layer. A collecting sink
/// gets nothing.
async fn replay(
    scope: &ScopeRuntime,
    st: &mut CallState,
    sink: &mut Sink,
    answer: &ChatResponse,
) -> Result<(), GatewayError> {
    if !sink.forwards() {
        return Ok(());
    }
    let Some(source) = st.last_source.and_then(|i| scope.sources.get(i)) else {
        return Err(GatewayError::Internal(
            "a structured answer without a source".into(),
        ));
    };
    let acc = Accumulator {
        model_reported: answer.model_reported.clone(),
        ..Accumulator::default()
    };
    let mut pending = vec![Delta::Role("assistant".into())];
    pending.extend(crate::pipeline::reasoning::replay(
        answer.reasoning.as_deref(),
        &answer.reasoning_details,
    ));
    pending.push(Delta::Content(answer.content.clone()));
    for t in &answer.tool_calls {
        pending.push(Delta::ToolCall(ToolCallDelta {
            index: t.index,
            id: t.id.clone(),
            name: t.name.clone(),
            arguments: Some(t.arguments.clone()),
        }));
    }
    if let Some(f) = &answer.finish_reason {
        pending.push(Delta::Finish(finish_reason(f)));
    }
    sink.commit(st, source, &acc, &mut pending)
        .await
        .map_err(|_| GatewayError::Internal("the client went away".into()))
}

/// The typed finish reason of its OpenAI string (the inverse of `finish_reason_str`).
fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        "function_call" => FinishReason::FunctionCall,
        other => FinishReason::Other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::plugin::NativeSchema;

    fn req(messages: Value) -> ChatRequest {
        let mut r = ChatRequest::new("llm", serde_json::from_value(messages).unwrap());
        r.overlay.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object"}}}),
        );
        r.overlay.insert("temperature".into(), json!(0.2));
        r
    }

    #[test]
    fn prepare_replaces_the_format_and_places_the_instructions() {
        let r = req(json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "who?"}
        ]));
        let p = prepared(
            &r,
            &Preparation {
                response_format: None,
                instructions: Some("JSON only".into()),
            },
        );
        assert!(!p.overlay.contains_key("response_format"));
        assert_eq!(p.overlay["temperature"], json!(0.2));
        let roles: Vec<&str> = p
            .messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "system", "user"]);
        assert_eq!(p.messages[1]["content"], "JSON only");

        let native = prepared(
            &r,
            &Preparation {
                response_format: Some(ResponseFormat::JsonSchema(NativeSchema {
                    name: "p".into(),
                    schema_json: r#"{"type":"object"}"#.into(),
                    strict: true,
                })),
                instructions: None,
            },
        );
        assert_eq!(native.messages.len(), 2);
        assert_eq!(
            native.overlay["response_format"],
            json!({"type": "json_schema",
                   "json_schema": {"name": "p", "schema": {"type": "object"}, "strict": true}})
        );
    }

    #[test]
    fn a_reask_quotes_the_errors_after_the_bad_answer() {
        let base = req(json!([{"role": "user", "content": "who?"}]));
        let target = Target::from_overlay(&base.overlay).unwrap().unwrap();
        let r = reask(
            &base,
            r#"{"age": "x"}"#,
            &Problem::Invalid(vec!["/age: \"x\" is not of type \"integer\"".into()]),
            &target,
        );
        assert_eq!(r.messages.len(), 3);
        assert_eq!(
            r.messages[1],
            json!({"role": "assistant", "content": r#"{"age": "x"}"#})
        );
        let feedback = r.messages[2]["content"].as_str().unwrap();
        assert_eq!(r.messages[2]["role"], "user");
        assert!(
            feedback.contains("- /age: \"x\" is not of type \"integer\""),
            "{feedback}"
        );
        assert!(feedback.contains("conforms to the required JSON Schema"));
        // The overlay (the prepared format) is kept.
        assert_eq!(r.overlay, base.overlay);
    }

    #[test]
    fn only_a_textless_tool_call_answer_skips_the_ladder() {
        let mut a: ChatResponse = serde_json::from_value(json!({
            "call_id": "c", "scope": "LLM", "content": " ", "reasoning": null,
            "tool_calls": [{"index": 0, "id": "t", "name": "f", "arguments": "{}"}],
            "finish_reason": "tool_calls", "usage": null, "usage_source": "unavailable",
            "model": "m", "model_reported": null, "source_name": "s", "provider": "openai",
            "attempts": 1, "latency_ms": 1, "ttft_ms": null, "max_inter_token_ms": null,
            "salvaged": false, "overhead_us": 1
        }))
        .unwrap();
        assert!(is_tool_call_answer(&a));
        a.content = "{}".into();
        assert!(!is_tool_call_answer(&a));
        a.tool_calls.clear();
        a.content.clear();
        assert!(!is_tool_call_answer(&a));
    }

    #[test]
    fn finish_reasons_round_trip() {
        for s in [
            "stop",
            "length",
            "tool_calls",
            "content_filter",
            "function_call",
            "eos",
        ] {
            assert_eq!(crate::plugin::finish_reason_str(&finish_reason(s)), s);
        }
    }
}
