//! The [`Strategy`] trait — a structured-output strategy described by a name, a `prepare`
//! and a `repair` function — its blanket implementation of the generated
//! `structured-strategy` exports, and the building blocks of the first-party strategies:
//! prompt instructions for a target ([`instructions_for`]), the native `response_format`
//! ([`native_format`]), Markdown fence stripping ([`strip_fences`]) and, with the `repair`
//! feature, JSON repair of a model's answer ([`repair_json_text`]).

use crate::{
    CONTRACT_VERSION, Capabilities, JsonTarget, NativeSchema, Preparation, RepairError,
    ResponseFormat, StrategyGuest, StrategyInfo,
};

/// A structured-output strategy. Implement [`Strategy::NAME`], [`Strategy::prepare`] and
/// [`Strategy::repair`]; any `S: Strategy` implements the WIT exports ([`StrategyGuest`]), so
/// a component is exported with `polygateway_plugin_sdk::export_strategy!(S);`.
///
/// Both functions must be pure (no clock, no I/O, no global state): the host reuses warm
/// instances across calls.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{
///     Capabilities, JsonTarget, Preparation, RepairError, Strategy, instructions_for,
///     strip_fences,
/// };
///
/// /// Prompt instructions, and a strict parse of the fenced or bare answer.
/// struct Strict;
///
/// impl Strategy for Strict {
///     const NAME: &'static str = "strict";
///
///     fn prepare(target: &JsonTarget, _provider: &Capabilities) -> Preparation {
///         Preparation { response_format: None, instructions: Some(instructions_for(target)) }
///     }
///
///     fn repair(raw: &str, _target: &JsonTarget) -> Result<String, RepairError> {
///         let text = strip_fences(raw).trim();
///         if text.is_empty() {
///             return Err(RepairError::Empty);
///         }
///         serde_json::from_str::<serde_json::Value>(text)
///             .map(|_| text.to_string())
///             .map_err(|e| RepairError::Unrecoverable(e.to_string()))
///     }
/// }
/// // In the component crate (wasm32 only):
/// // polygateway_plugin_sdk::export_strategy!(Strict);
///
/// let target = JsonTarget { name: "person".into(), schema_json: None, strict: false };
/// assert_eq!(Strict::repair("```json\n{\"a\": 1}\n```", &target).unwrap(), "{\"a\": 1}");
/// assert_eq!(Strict::repair("  ", &target), Err(RepairError::Empty));
/// assert_eq!(Strict::describe().name, "strict");
/// ```
pub trait Strategy: 'static {
    /// Short stable name returned by `describe`, e.g. `json-repair`.
    ///
    /// # Example
    /// See the trait's example.
    const NAME: &'static str;

    /// `describe`: [`Strategy::NAME`] and [`CONTRACT_VERSION`].
    ///
    /// # Example
    /// See the trait's example.
    fn describe() -> StrategyInfo {
        StrategyInfo {
            name: Self::NAME.to_owned(),
            contract_version: CONTRACT_VERSION.to_owned(),
        }
    }

    /// `prepare`: how to ask for `target` from a provider with these capabilities (the
    /// ones every source of the scope shares). Return a `json-schema` response format
    /// only when `provider.native_json_schema` is true.
    ///
    /// # Example
    /// See the trait's example.
    fn prepare(target: &JsonTarget, provider: &Capabilities) -> Preparation;

    /// `repair`: the model's raw answer text as JSON text, or why none can be recovered.
    /// The host validates the result against the schema; do not validate here.
    ///
    /// # Example
    /// See the trait's example.
    fn repair(raw: &str, target: &JsonTarget) -> Result<String, RepairError>;
}

impl<S: Strategy> StrategyGuest for S {
    fn describe() -> StrategyInfo {
        <S as Strategy>::describe()
    }

    fn prepare(target: JsonTarget, provider: Capabilities) -> Preparation {
        <S as Strategy>::prepare(&target, &provider)
    }

    fn repair(raw: String, target: JsonTarget) -> Result<String, RepairError> {
        <S as Strategy>::repair(&raw, &target)
    }
}

/// The system instructions that ask for `target` in the prompt: one JSON value and nothing
/// else, conforming to the schema (quoted in full) or, for `json_object`, any JSON object.
/// They contain the word "JSON", which some providers' JSON modes require in the prompt.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{JsonTarget, instructions_for};
///
/// let t = JsonTarget { name: "person".into(), schema_json: Some(r#"{"type":"object"}"#.into()),
///     strict: false };
/// let text = instructions_for(&t);
/// assert!(text.contains(r#"{"type":"object"}"#) && text.contains("JSON Schema"));
/// let any = JsonTarget { schema_json: None, ..t };
/// assert!(instructions_for(&any).contains("a single JSON object"));
/// ```
pub fn instructions_for(target: &JsonTarget) -> String {
    const NO_EXTRAS: &str = "Reply with the JSON only: no Markdown code fences, no comments, \
                             no text before or after it.";
    match &target.schema_json {
        Some(schema) => format!(
            "Answer with a single JSON value that conforms to the JSON Schema named \"{}\" \
             below. {NO_EXTRAS}\n\nJSON Schema:\n{schema}",
            target.name
        ),
        None => format!("Answer with a single JSON object. {NO_EXTRAS}"),
    }
}

/// The native `response_format` for `target`: `json_schema` with the target's name, schema
/// and strictness, or `json_object` when the target has no schema.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{JsonTarget, ResponseFormat, native_format};
///
/// let t = JsonTarget { name: "n".into(), schema_json: None, strict: false };
/// assert_eq!(native_format(&t), ResponseFormat::JsonObject);
/// let t = JsonTarget { schema_json: Some("{}".into()), ..t };
/// assert!(matches!(native_format(&t), ResponseFormat::JsonSchema(s) if s.schema_json == "{}"));
/// ```
pub fn native_format(target: &JsonTarget) -> ResponseFormat {
    match &target.schema_json {
        Some(schema) => ResponseFormat::JsonSchema(NativeSchema {
            name: target.name.clone(),
            schema_json: schema.clone(),
            strict: target.strict,
        }),
        None => ResponseFormat::JsonObject,
    }
}

/// The text inside the first Markdown code fence of `raw` (```` ``` ```` or ```` ```json ````,
/// any info string), up to the closing fence — or to the end when the answer was cut off
/// before it. Text without a fence comes back unchanged.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::strip_fences;
///
/// assert_eq!(strip_fences("Here:\n```json\n{\"a\": 1}\n```\nDone."), "{\"a\": 1}\n");
/// assert_eq!(strip_fences("```\n[1, 2"), "[1, 2");
/// assert_eq!(strip_fences("{\"a\": 1}"), "{\"a\": 1}");
/// ```
pub fn strip_fences(raw: &str) -> &str {
    let Some(open) = raw.find("```") else {
        return raw;
    };
    let after = &raw[open + 3..];
    // The info string (`json`, `JSON`, …) runs to the end of the opening line.
    let body = match after.find('\n') {
        Some(nl) => &after[nl + 1..],
        None => after,
    };
    match body.find("```") {
        Some(close) => &body[..close],
        None => body,
    }
}

/// Repair a model's answer into JSON text — the `repair` of the first-party strategies:
///
/// 1. empty or blank text → [`RepairError::Empty`];
/// 2. the first Markdown fence's content is taken ([`strip_fences`]);
/// 3. text that already parses as JSON is returned as it is (trimmed: key order and
///    formatting kept);
/// 4. anything else goes through [`llm_json`] (a port of Python's `json_repair`): prose
///    around the JSON, trailing commas, single quotes, unquoted keys, comments and truncated
///    tails (unclosed strings, arrays and objects) are fixed, and the result is compact
///    JSON text;
/// 5. a repair that yields only a scalar (e.g. the whole answer as one JSON string) means
///    the text held no JSON object or array: [`RepairError::Unrecoverable`].
///
/// Text that is not JSON as it is and is longer than [`MAX_REPAIR_BYTES`] or nested deeper
/// than [`MAX_REPAIR_DEPTH`] is [`RepairError::Unrecoverable`] without a repair attempt: the
/// repairer's memory and recursion grow with both, and a trap (memory cap, stack) would fail
/// the whole call instead of letting the host re-ask.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{RepairError, repair_json_text};
///
/// assert_eq!(repair_json_text("```json\n{\"a\": 1,}\n```").unwrap(), r#"{"a":1}"#);
/// assert_eq!(repair_json_text("{'a': 'x', b: [1, 2").unwrap(), r#"{"a":"x","b":[1,2]}"#);
/// assert_eq!(repair_json_text(" [1, 2] ").unwrap(), "[1, 2]");
/// assert_eq!(repair_json_text(""), Err(RepairError::Empty));
/// assert!(matches!(repair_json_text("no json here"), Err(RepairError::Unrecoverable(_))));
/// ```
#[cfg(feature = "repair")]
pub fn repair_json_text(raw: &str) -> Result<String, RepairError> {
    let text = strip_fences(raw).trim();
    if text.is_empty() {
        return Err(RepairError::Empty);
    }
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
        return Ok(text.to_string());
    }
    if text.len() > MAX_REPAIR_BYTES {
        return Err(RepairError::Unrecoverable(format!(
            "the answer is {} bytes of text that is not JSON; repair is tried on at most {MAX_REPAIR_BYTES}",
            text.len()
        )));
    }
    if nesting_depth(text) > MAX_REPAIR_DEPTH {
        return Err(RepairError::Unrecoverable(format!(
            "the answer nests brackets deeper than {MAX_REPAIR_DEPTH} levels"
        )));
    }
    let repaired = llm_json::repair_json(text, &llm_json::RepairOptions::default())
        .map_err(|e| RepairError::Unrecoverable(format!("not repairable as JSON: {e}")))?;
    match serde_json::from_str::<serde_json::Value>(&repaired) {
        Ok(serde_json::Value::Object(_) | serde_json::Value::Array(_)) => Ok(repaired),
        Ok(_) => Err(RepairError::Unrecoverable(
            "the answer holds no JSON object or array".to_string(),
        )),
        Err(e) => Err(RepairError::Unrecoverable(format!(
            "repair did not produce JSON: {e}"
        ))),
    }
}

/// The longest text that is not JSON as it is on which [`repair_json_text`] tries a repair,
/// in bytes (model answers are far shorter; the repairer needs several times its input in
/// memory).
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{MAX_REPAIR_BYTES, RepairError, repair_json_text};
///
/// let huge = "x".repeat(MAX_REPAIR_BYTES + 1);
/// assert!(matches!(repair_json_text(&huge), Err(RepairError::Unrecoverable(_))));
/// ```
#[cfg(feature = "repair")]
pub const MAX_REPAIR_BYTES: usize = 1 << 20;

/// The deepest bracket nesting on which [`repair_json_text`] tries a repair (the repairer
/// recurses once per level).
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{MAX_REPAIR_DEPTH, RepairError, repair_json_text};
///
/// let deep = "[".repeat(MAX_REPAIR_DEPTH + 1);
/// assert!(matches!(repair_json_text(&deep), Err(RepairError::Unrecoverable(_))));
/// assert!(repair_json_text(&"[".repeat(10)).is_ok());
/// ```
#[cfg(feature = "repair")]
pub const MAX_REPAIR_DEPTH: usize = 128;

/// The deepest nesting of `[`/`{` in `text`, brackets inside strings (either quote) not
/// counted; unbalanced closers never go below zero.
#[cfg(feature = "repair")]
fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    for b in text.bytes() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == q {
                    quote = None;
                }
            }
            None => match b {
                b'"' | b'\'' => quote = Some(b),
                b'[' | b'{' => {
                    depth += 1;
                    max = max.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    max
}
