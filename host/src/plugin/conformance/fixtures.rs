//! The conformance fixtures: data files under `tests/fixtures/` (readable by plugin authors,
//! documented in `tests/fixtures/conformance/README.md`), embedded in the binary so
//! `polygateway plugin check` needs no files beside it, and their typed shapes.

use serde::Deserialize;
use serde_json::Value;

/// Every embedded fixture file, by its path relative to `tests/fixtures/`.
const FILES: &[(&str, &str)] = &[
    (
        "conformance/provider/requests.json",
        include_str!("../../../../tests/fixtures/conformance/provider/requests.json"),
    ),
    (
        "conformance/provider/errors.json",
        include_str!("../../../../tests/fixtures/conformance/provider/errors.json"),
    ),
    (
        "conformance/provider/robustness.json",
        include_str!("../../../../tests/fixtures/conformance/provider/robustness.json"),
    ),
    (
        "conformance/provider/responses.json",
        include_str!("../../../../tests/fixtures/conformance/provider/responses.json"),
    ),
    (
        "conformance/provider/streams.json",
        include_str!("../../../../tests/fixtures/conformance/provider/streams.json"),
    ),
    (
        "conformance/provider/streams/usage_only_chunk.sse",
        include_str!(
            "../../../../tests/fixtures/conformance/provider/streams/usage_only_chunk.sse"
        ),
    ),
    (
        "conformance/provider/streams/usage_only_chunk.expected.json",
        include_str!(
            "../../../../tests/fixtures/conformance/provider/streams/usage_only_chunk.expected.json"
        ),
    ),
    (
        "conformance/provider/streams/tool_call_deltas.sse",
        include_str!(
            "../../../../tests/fixtures/conformance/provider/streams/tool_call_deltas.sse"
        ),
    ),
    (
        "conformance/provider/streams/tool_call_deltas.expected.json",
        include_str!(
            "../../../../tests/fixtures/conformance/provider/streams/tool_call_deltas.expected.json"
        ),
    ),
    (
        "conformance/provider/streams/keep_alives.sse",
        include_str!("../../../../tests/fixtures/conformance/provider/streams/keep_alives.sse"),
    ),
    (
        "conformance/provider/streams/keep_alives.expected.json",
        include_str!(
            "../../../../tests/fixtures/conformance/provider/streams/keep_alives.expected.json"
        ),
    ),
    (
        "conformance/provider/streams/missing_done.sse",
        include_str!("../../../../tests/fixtures/conformance/provider/streams/missing_done.sse"),
    ),
    (
        "conformance/provider/streams/missing_done.expected.json",
        include_str!(
            "../../../../tests/fixtures/conformance/provider/streams/missing_done.expected.json"
        ),
    ),
    (
        "conformance/provider/streams/truncated_last_event.sse",
        include_str!(
            "../../../../tests/fixtures/conformance/provider/streams/truncated_last_event.sse"
        ),
    ),
    (
        "conformance/provider/streams/truncated_last_event.expected.json",
        include_str!(
            "../../../../tests/fixtures/conformance/provider/streams/truncated_last_event.expected.json"
        ),
    ),
    (
        "conformance/provider/streams/error_mid_stream.sse",
        include_str!(
            "../../../../tests/fixtures/conformance/provider/streams/error_mid_stream.sse"
        ),
    ),
    (
        "golden/openai_usage_chunk.sse",
        include_str!("../../../../tests/fixtures/golden/openai_usage_chunk.sse"),
    ),
    (
        "golden/openai_usage_chunk.expected.json",
        include_str!("../../../../tests/fixtures/golden/openai_usage_chunk.expected.json"),
    ),
    (
        "golden/openai_tool_calls.sse",
        include_str!("../../../../tests/fixtures/golden/openai_tool_calls.sse"),
    ),
    (
        "golden/openai_tool_calls.expected.json",
        include_str!("../../../../tests/fixtures/golden/openai_tool_calls.expected.json"),
    ),
    (
        "golden/deepseek_reasoner.sse",
        include_str!("../../../../tests/fixtures/golden/deepseek_reasoner.sse"),
    ),
    (
        "golden/deepseek_reasoner.expected.json",
        include_str!("../../../../tests/fixtures/golden/deepseek_reasoner.expected.json"),
    ),
    (
        "golden/qwen_thinking.sse",
        include_str!("../../../../tests/fixtures/golden/qwen_thinking.sse"),
    ),
    (
        "golden/qwen_thinking.expected.json",
        include_str!("../../../../tests/fixtures/golden/qwen_thinking.expected.json"),
    ),
    (
        "selectors/mixed.json",
        include_str!("../../../../tests/fixtures/selectors/mixed.json"),
    ),
    (
        "selectors/health.json",
        include_str!("../../../../tests/fixtures/selectors/health.json"),
    ),
    (
        "selectors/weighted.json",
        include_str!("../../../../tests/fixtures/selectors/weighted.json"),
    ),
    (
        "selectors/none_available.json",
        include_str!("../../../../tests/fixtures/selectors/none_available.json"),
    ),
    (
        "selectors/failover.json",
        include_str!("../../../../tests/fixtures/selectors/failover.json"),
    ),
    (
        "strategies/prepare.json",
        include_str!("../../../../tests/fixtures/strategies/prepare.json"),
    ),
    (
        "strategies/repair-common.json",
        include_str!("../../../../tests/fixtures/strategies/repair-common.json"),
    ),
    (
        "strategies/repair-envelope.json",
        include_str!("../../../../tests/fixtures/strategies/repair-envelope.json"),
    ),
];

/// The paths of the embedded fixture files (relative to `tests/fixtures/`).
pub fn embedded_paths() -> impl Iterator<Item = &'static str> {
    FILES.iter().map(|(p, _)| *p)
}

/// The text of an embedded fixture file.
pub(crate) fn file(path: &str) -> Result<&'static str, String> {
    FILES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
        .ok_or_else(|| format!("fixture {path} is not embedded"))
}

/// An embedded JSON fixture parsed into `T`.
pub(crate) fn json<T: serde::de::DeserializeOwned>(path: &str) -> Result<T, String> {
    serde_json::from_str(file(path)?).map_err(|e| format!("fixture {path}: {e}"))
}

/// The embedded files a component's own fixture directory replaces (`--fixtures DIR`), by
/// their name inside DIR.
const PROTOCOL_FILES: [(&str, &str); 4] = [
    ("conformance/provider/requests.json", "requests.json"),
    ("conformance/provider/errors.json", "errors.json"),
    ("conformance/provider/responses.json", "responses.json"),
    ("conformance/provider/streams.json", "streams.json"),
];

/// Where a suite's fixtures come from: the embedded (OpenAI-shaped) set, a component's own
/// directory (`--fixtures DIR`), or a first-party component's own embedded set. For the last
/// two, the protocol files are read by their name in the set and every other path is one a
/// set file named (a transcript), relative to the set.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    Embedded,
    Dir(&'a std::path::Path),
    FirstParty(&'static [(&'static str, &'static str)]),
}

impl Source<'_> {
    /// The embedded set (contract-generic files, and every file of an OpenAI-family
    /// component).
    pub(crate) const EMBEDDED: Source<'static> = Source::Embedded;

    /// The text of fixture `path` (see the type).
    pub(crate) fn file(&self, path: &str) -> Result<std::borrow::Cow<'static, str>, String> {
        let rel = PROTOCOL_FILES
            .iter()
            .find(|(embedded, _)| *embedded == path)
            .map_or(path, |(_, name)| *name);
        match self {
            Source::Embedded => file(path).map(std::borrow::Cow::Borrowed),
            Source::Dir(dir) => {
                let full = dir.join(rel);
                std::fs::read_to_string(&full)
                    .map(std::borrow::Cow::Owned)
                    .map_err(|e| format!("fixture {}: {e}", full.display()))
            }
            Source::FirstParty(files) => files
                .iter()
                .find(|(p, _)| *p == rel)
                .map(|(_, text)| std::borrow::Cow::Borrowed(*text))
                .ok_or_else(|| format!("fixture {rel} is not in the component's embedded set")),
        }
    }

    /// JSON fixture `path` parsed into `T` (see [`Source::file`]).
    pub(crate) fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, String> {
        serde_json::from_str(&self.file(path)?).map_err(|e| format!("fixture {path}: {e}"))
    }
}

/// Bytes described in a fixture: `{"text": …}`, `{"hex": …}`, `{"json": …}` (serialized
/// compactly), `{"repeat": {"text": …, "times": n}}` or `{"concat": [...]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Bytes {
    Text(String),
    Hex(String),
    Json(Value),
    Repeat { text: String, times: usize },
    Concat(Vec<Bytes>),
}

impl Bytes {
    /// The bytes themselves.
    pub(crate) fn to_bytes(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        self.write(&mut out)?;
        Ok(out)
    }

    fn write(&self, out: &mut Vec<u8>) -> Result<(), String> {
        match self {
            Bytes::Text(t) => out.extend_from_slice(t.as_bytes()),
            Bytes::Hex(h) => {
                let compact: String = h.chars().filter(|c| !c.is_whitespace()).collect();
                out.extend(hex::decode(&compact).map_err(|e| format!("bad hex `{h}`: {e}"))?);
            }
            Bytes::Json(v) => out.extend_from_slice(v.to_string().as_bytes()),
            Bytes::Repeat { text, times } => {
                out.reserve(text.len().saturating_mul(*times));
                for _ in 0..*times {
                    out.extend_from_slice(text.as_bytes());
                }
            }
            Bytes::Concat(parts) => {
                for p in parts {
                    p.write(out)?;
                }
            }
        }
        Ok(())
    }
}

/// One value or a list of acceptable values.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: PartialEq> OneOrMany<T> {
    pub(crate) fn accepts(&self, v: &T) -> bool {
        match self {
            OneOrMany::One(x) => x == v,
            OneOrMany::Many(xs) => xs.contains(v),
        }
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            OneOrMany::One(x) => std::slice::from_ref(x),
            OneOrMany::Many(xs) => xs,
        }
    }
}

/// When a case applies: capabilities it needs (`when`), describe names (`providers`), a
/// thinking style (`thinking`).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Applies {
    /// Capability name (`streaming`, `native-json-schema`, `prefill-continuation`) → the
    /// value the provider must declare.
    #[serde(default)]
    pub when: std::collections::BTreeMap<String, bool>,
    /// Only for these provider names.
    #[serde(default)]
    pub providers: Option<Vec<String>>,
    /// Only for this thinking style (`none`, `reasoning-field`, `inline-tags`,
    /// `reasoning-blocks`).
    #[serde(default)]
    pub thinking: Option<String>,
}

/// `requests.json`.
#[derive(Debug, Deserialize)]
pub(crate) struct RequestsFile {
    pub canary_api_key: String,
    pub default_source: SourceSpec,
    pub default_messages: Value,
    pub cases: Vec<RequestCase>,
}

/// A source of `requests.json` (fields override `default_source`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SourceSpec {
    pub model: Option<String>,
    pub base_url: Option<String>,
    #[serde(default, deserialize_with = "explicit_option")]
    pub enable_thinking: Option<Option<bool>>,
    pub extra_body: Option<serde_json::Map<String, Value>>,
    /// `MAX_TOKENS`.
    pub max_tokens: Option<u32>,
    /// `THINKING_BUDGET`.
    pub thinking_budget: Option<u32>,
}

/// Distinguishes a missing key (`None`) from an explicit `null` (`Some(None)`).
fn explicit_option<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// One `build-request` case.
#[derive(Debug, Deserialize)]
pub(crate) struct RequestCase {
    pub name: String,
    #[serde(default)]
    #[allow(dead_code)]
    pub note: Option<String>,
    #[serde(flatten)]
    pub applies: Applies,
    pub request: RequestSpec,
    #[serde(default)]
    pub source: SourceSpec,
    pub expect: RequestExpect,
}

/// The chat-request of a case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequestSpec {
    pub stream: bool,
    /// Messages as JSON (default: the file's `default_messages`).
    pub messages: Option<Value>,
    /// Raw `messages-json` text, for malformed cases.
    pub messages_json: Option<String>,
    /// Parameters as a JSON object (default `{}`).
    pub overlay: Option<Value>,
    /// Raw `overlay-json` text, for malformed cases.
    pub overlay_json: Option<String>,
    pub prefill: Option<String>,
}

/// What a `build-request` case expects.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequestExpect {
    /// `ok`, `invalid-request` or `unsupported` (or a list of them).
    pub result: OneOrMany<String>,
    /// Body keys and the values they must have.
    #[serde(default)]
    pub body: serde_json::Map<String, Value>,
    /// Body keys that must be absent.
    #[serde(default)]
    pub body_absent: Vec<String>,
    /// `body.messages` must equal the request's messages.
    #[serde(default)]
    pub messages_verbatim: bool,
    /// The last element of `body.messages` must contain these keys and values.
    pub last_message: Option<serde_json::Map<String, Value>>,
}

/// `errors.json`.
#[derive(Debug, Deserialize)]
pub(crate) struct ErrorsFile {
    pub cases: Vec<ErrorCase>,
}

/// One `classify-error` case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ErrorCase {
    pub name: String,
    #[allow(dead_code)]
    pub note: Option<String>,
    pub status: u16,
    #[serde(default)]
    pub headers: serde_json::Map<String, Value>,
    pub body: Option<Bytes>,
    pub expect: ErrorExpect,
}

/// What a `classify-error` case expects.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ErrorExpect {
    /// Acceptable classes (`transient`, `source-dead`, `request-rejected`, `result-invalid`).
    pub class: OneOrMany<String>,
    /// Acceptable retry hints (`null` = none); absent = not checked.
    pub retry_after_ms: Option<Vec<Option<u64>>>,
}

/// `robustness.json`.
#[derive(Debug, Deserialize)]
pub(crate) struct RobustnessFile {
    pub cases: Vec<RobustnessCase>,
}

/// One robustness case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RobustnessCase {
    pub name: String,
    /// `build-request`, `parse-response`, `stream-parse` or `classify-error`.
    pub call: String,
    pub input: Bytes,
    /// The SSE event name, for `stream-parse`.
    pub event: Option<String>,
    /// The status, for `classify-error`.
    pub status: Option<u16>,
    /// `ok`, `error` or `no-fault`.
    pub expect: String,
    /// A larger per-call budget for this case, in milliseconds (huge inputs).
    pub budget_ms: Option<u64>,
    /// The input is a well-formed OpenAI answer or error, so its `ok` / `error` holds for
    /// the OpenAI wire format only: a component checked with its own protocol fixtures
    /// (another protocol) must then only not fault (`no-fault`).
    #[serde(default)]
    pub openai_shaped: bool,
}

/// `streams.json`.
#[derive(Debug, Deserialize)]
pub(crate) struct StreamsFile {
    pub cases: Vec<StreamCase>,
}

/// One streamed transcript.
#[derive(Debug, Deserialize)]
pub(crate) struct StreamCase {
    pub name: String,
    #[serde(default)]
    #[allow(dead_code)]
    pub note: Option<String>,
    #[serde(flatten)]
    pub applies: Applies,
    /// The `.sse` file, relative to `tests/fixtures/`.
    pub sse: String,
    /// The expected deltas file, relative to `tests/fixtures/`.
    pub expected: Option<String>,
    /// Or the error the parser must return.
    pub error: Option<ErrorClassExpect>,
}

/// An expected error, by class.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ErrorClassExpect {
    pub class: OneOrMany<String>,
}

/// `responses.json`.
#[derive(Debug, Deserialize)]
pub(crate) struct ResponsesFile {
    pub cases: Vec<ResponseCase>,
}

/// One non-streamed body.
#[derive(Debug, Deserialize)]
pub(crate) struct ResponseCase {
    pub name: String,
    #[serde(flatten)]
    pub applies: Applies,
    pub body: Bytes,
    pub expected: Option<Value>,
    pub error: Option<ErrorClassExpect>,
}

/// The selector fixture files (candidate sets, and `failover.json`'s cases).
pub(crate) const SELECTOR_FILES: [&str; 4] = [
    "selectors/mixed.json",
    "selectors/health.json",
    "selectors/weighted.json",
    "selectors/none_available.json",
];

/// `selectors/failover.json`.
pub(crate) const SELECTOR_FAILOVER: &str = "selectors/failover.json";

/// The strategy `prepare` cases.
pub(crate) const STRATEGY_PREPARE: &str = "strategies/prepare.json";

/// The strategy `repair` case files.
pub(crate) const STRATEGY_REPAIR_FILES: [&str; 2] = [
    "strategies/repair-common.json",
    "strategies/repair-envelope.json",
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    /// Every embedded file parses (JSON ones), and every file under the fixture folders the
    /// kit reads is embedded, so a new fixture cannot be forgotten here.
    #[test]
    fn every_fixture_is_embedded_and_parses() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        for dir in [
            "conformance/provider",
            "conformance/provider/streams",
            "selectors",
            "strategies",
        ] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
                if !["json", "sse"].contains(&ext) {
                    continue;
                }
                let rel = format!("{dir}/{}", path.file_name().unwrap().to_str().unwrap());
                let embedded = file(&rel).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(embedded, std::fs::read_to_string(&path).unwrap(), "{rel}");
            }
        }
        for (path, text) in FILES {
            if path.ends_with(".json") {
                serde_json::from_str::<Value>(text).unwrap_or_else(|e| panic!("{path}: {e}"));
            }
        }
        json::<RequestsFile>("conformance/provider/requests.json").unwrap();
        json::<ErrorsFile>("conformance/provider/errors.json").unwrap();
        json::<RobustnessFile>("conformance/provider/robustness.json").unwrap();
        json::<ResponsesFile>("conformance/provider/responses.json").unwrap();
        let streams = json::<StreamsFile>("conformance/provider/streams.json").unwrap();
        for case in streams.cases {
            file(&case.sse).unwrap();
            if let Some(e) = case.expected {
                file(&e).unwrap();
            }
        }
    }

    #[test]
    fn byte_specs_build_what_they_say() {
        let b: Bytes = serde_json::from_str(
            r#"{"concat": [{"text": "a"}, {"hex": "ff 00"}, {"repeat": {"text": "xy", "times": 3}}, {"json": {"k": [1]}}]}"#,
        )
        .unwrap();
        assert_eq!(
            b.to_bytes().unwrap(),
            b"a\xff\x00xyxyxy{\"k\":[1]}".to_vec()
        );
    }
}
