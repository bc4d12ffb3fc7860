//! The provider suite: `describe` sanity, `build-request` cases (`requests.json`) with the
//! checks every built request gets (valid method, path, headers and JSON body; the canary
//! API key nowhere), and the error classification table (`errors.json`). Streams,
//! responses and robustness live in their own files.

use std::sync::Arc;

use serde_json::Value;

use super::fixtures::{self, Applies, ErrorCase, RequestCase, RequestsFile, SourceSpec};
use super::report::{Report, json_diff, shorten, show};
use super::{CheckOptions, selected};
use crate::config::{MissingDone, PluginRef, SourceSettings, TimeoutSettings};
use crate::plugin::{
    AuthScheme, BuildError, Header, HttpRequest, PluginChatRequest, PluginInfo, ProviderComponent,
    SUPPORTED_CONTRACT_VERSIONS, error_class_str, source_info, thinking_style_str,
};

/// Run the whole provider suite.
/// The chat cases run only for a provider that declares `chat` (an OCR-only component has
/// no chat requests to check); error classification and the embedding and OCR cases run
/// for every provider.
pub(super) fn run(c: &Arc<ProviderComponent>, opts: &CheckOptions, report: &mut Report) {
    describe(c, opts, report);
    let chat = c.info().capabilities.chat;
    if chat {
        requests(c, opts, report);
    }
    errors(c, opts, report);
    if chat {
        super::streams::run(c, opts, report);
        super::robustness::run(c, opts, report);
    }
    super::services::run(c, opts, report);
}

/// Where the protocol fixtures of `c` come from: `--fixtures DIR` when given; else a
/// first-party component's own embedded set (`builtin:anthropic`); else the embedded
/// OpenAI-shaped set.
pub(super) fn own<'a>(opts: &'a CheckOptions, c: &ProviderComponent) -> fixtures::Source<'a> {
    match opts.fixtures.as_deref() {
        Some(dir) => fixtures::Source::Dir(dir),
        None => c
            .origin()
            .strip_prefix("builtin:")
            .and_then(super::first_party::set)
            .map_or(fixtures::Source::Embedded, fixtures::Source::FirstParty),
    }
}

/// Whether a case applies to this provider (capabilities, name, thinking style).
pub(super) fn applies(a: &Applies, info: &PluginInfo) -> bool {
    let caps = &info.capabilities;
    let capability_ok = a.when.iter().all(|(name, want)| {
        let have = match name.as_str() {
            "streaming" => caps.streaming,
            "native-json-schema" => caps.native_json_schema,
            "prefill-continuation" => caps.prefill_continuation,
            "chat" => caps.chat,
            "embedding" => caps.embedding,
            "ocr" => caps.ocr,
            _ => return false,
        };
        have == *want
    });
    capability_ok
        && a.providers.as_ref().is_none_or(|p| p.contains(&info.name))
        && a.thinking
            .as_deref()
            .is_none_or(|t| t == thinking_style_str(caps.thinking))
}

/// A fixture file that failed to parse becomes a failed case (never for the embedded files,
/// which a unit test parses).
pub(super) fn load<T: serde::de::DeserializeOwned>(
    report: &mut Report,
    source: fixtures::Source<'_>,
    path: &str,
) -> Option<T> {
    match source.json(path) {
        Ok(v) => Some(v),
        Err(e) => {
            let mut case = report.case(format!("fixtures::{path}"));
            case.fail(e);
            report.finish(case);
            None
        }
    }
}

fn describe(c: &Arc<ProviderComponent>, opts: &CheckOptions, report: &mut Report) {
    let info = c.info().clone();
    if selected(opts, "describe::name") {
        let mut case = report.case("describe::name");
        if !valid_name(&info.name) {
            case.fail(format!(
                "name {:?} must be a short stable identifier: 1–64 of a-z, 0-9, `-`, `_`",
                info.name
            ));
        }
        report.finish(case);
    }
    if selected(opts, "describe::contract_version") {
        let mut case = report.case("describe::contract_version");
        if !SUPPORTED_CONTRACT_VERSIONS.contains(&info.contract_version.as_str()) {
            case.fail(format!(
                "contract-version {:?} is not one this host supports ({})",
                info.contract_version,
                SUPPORTED_CONTRACT_VERSIONS.join(", ")
            ));
        }
        report.finish(case);
    }
    if selected(opts, "describe::stable") {
        // `describe` is called on a fresh instance: it must not depend on state.
        let mut case = report.case("describe::stable");
        if let Some(again) = case.call("describe", || c.describe_fresh())
            && format!("{again:?}") != format!("{info:?}")
        {
            case.fail(format!(
                "describe answered differently on a fresh instance: first {info:?}, then {again:?}"
            ));
        }
        report.finish(case);
    }
}

/// `describe`-style names: lower-case identifiers.
pub(super) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// The configured source of a case, with the canary as its API key.
fn source_settings(file: &RequestsFile, spec: &SourceSpec) -> SourceSettings {
    let d = &file.default_source;
    SourceSettings {
        name: "conformance-1".into(),
        provider: "conformance".into(),
        index: 1,
        base_url: spec
            .base_url
            .clone()
            .or_else(|| d.base_url.clone())
            .unwrap_or_default(),
        model: spec
            .model
            .clone()
            .or_else(|| d.model.clone())
            .unwrap_or_default(),
        api_key: Some(file.canary_api_key.clone()),
        plugin: PluginRef::File("conformance.wasm".into()),
        plugin_sha256: None,
        enable_thinking: spec
            .enable_thinking
            .or(d.enable_thinking)
            .unwrap_or_default(),
        extra_body: spec
            .extra_body
            .clone()
            .or_else(|| d.extra_body.clone())
            .unwrap_or_default(),
        max_tokens: spec.max_tokens.or(d.max_tokens),
        thinking_budget_tokens: spec.thinking_budget.or(d.thinking_budget),
        timeouts: TimeoutSettings::default(),
        missing_done: MissingDone::Retry,
        weight: 1,
        max_concurrency: 0,
        rpm: 0,
        tpm: 0,
        est_tokens: 0,
        max_batch: 0,
        trust_env: false,
    }
}

fn requests(c: &Arc<ProviderComponent>, opts: &CheckOptions, report: &mut Report) {
    let Some(file) =
        load::<RequestsFile>(report, own(opts, c), "conformance/provider/requests.json")
    else {
        return;
    };
    for case in &file.cases {
        let name = format!("requests::{}", case.name);
        if !selected(opts, &name) || !applies(&case.applies, c.info()) {
            continue;
        }
        let mut out = report.case(name);
        request_case(c, &file, case, &mut out);
        report.finish(out);
    }
}

fn request_case(
    c: &Arc<ProviderComponent>,
    file: &RequestsFile,
    case: &RequestCase,
    out: &mut super::report::Case,
) {
    let settings = source_settings(file, &case.source);
    let info = source_info(&settings);
    let messages = case
        .request
        .messages
        .clone()
        .unwrap_or_else(|| file.default_messages.clone());
    let req = PluginChatRequest {
        messages_json: case
            .request
            .messages_json
            .clone()
            .unwrap_or_else(|| messages.to_string()),
        overlay_json: case.request.overlay_json.clone().unwrap_or_else(|| {
            case.request
                .overlay
                .as_ref()
                .map_or_else(|| "{}".to_string(), Value::to_string)
        }),
        stream: case.request.stream,
        prefill: case.request.prefill.clone(),
    };
    let Some(built) = out.call("build-request", || {
        c.instance().and_then(|mut i| i.build_request(&req, &info))
    }) else {
        return;
    };
    let (result, detail) = match &built {
        Ok(_) => ("ok", String::new()),
        Err(BuildError::InvalidRequest(m)) => ("invalid-request", m.clone()),
        Err(BuildError::Unsupported(m)) => ("unsupported", m.clone()),
    };
    if !case.expect.result.accepts(&result.to_string()) {
        out.fail(format!(
            "expected {}, got {result}{}",
            case.expect.result.as_slice().join(" or "),
            if detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", shorten(&detail, 200))
            }
        ));
        return;
    }
    let Ok(http) = built else {
        return;
    };
    let Some(body) = check_http(&http, &file.canary_api_key, out) else {
        return;
    };
    let mut diffs = Vec::new();
    for (key, want) in &case.expect.body {
        match body.get(key) {
            Some(got) => json_diff(&format!("body.{key}"), want, got, &mut diffs),
            None => diffs.push(format!(
                "body.{key}: expected {}, but it is missing",
                show(want)
            )),
        }
    }
    for key in &case.expect.body_absent {
        if let Some(got) = body.get(key) {
            diffs.push(format!("body.{key}: must be absent, got {}", show(got)));
        }
    }
    if case.expect.messages_verbatim {
        match body.get("messages") {
            Some(got) => json_diff("body.messages", &messages, got, &mut diffs),
            None => diffs.push("body.messages: missing".to_string()),
        }
    }
    if let Some(want) = &case.expect.last_message {
        match body
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|m| m.last())
        {
            Some(Value::Object(last)) => {
                for (k, v) in want {
                    match last.get(k) {
                        Some(got) => {
                            json_diff(&format!("body.messages[last].{k}"), v, got, &mut diffs)
                        }
                        None => diffs.push(format!(
                            "body.messages[last].{k}: expected {}, but it is missing",
                            show(v)
                        )),
                    }
                }
            }
            other => diffs.push(format!(
                "body.messages[last]: expected an object, got {}",
                other.map_or_else(|| "nothing".to_string(), show)
            )),
        }
    }
    for d in diffs {
        out.fail(d);
    }
}

/// The checks every built request gets. Returns the body object when it is one.
fn check_http(
    http: &HttpRequest,
    canary: &str,
    out: &mut super::report::Case,
) -> Option<serde_json::Map<String, Value>> {
    const TCHARS: &[u8] = b"!#$%&'*+-.^_`|~";
    if http.method.is_empty()
        || !http
            .method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || TCHARS.contains(&b))
    {
        out.fail(format!(
            "method {:?} is not an HTTP method token",
            http.method
        ));
    }
    if !http.path.starts_with('/') || http.path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        out.fail(format!(
            "path {:?} must start with `/` and contain no spaces or control characters",
            http.path
        ));
    }
    let auth_header = match &http.auth {
        AuthScheme::None => None,
        AuthScheme::Bearer => Some("authorization".to_string()),
        AuthScheme::Header(h) => {
            if reqwest::header::HeaderName::try_from(h.as_str()).is_err() {
                out.fail(format!(
                    "auth-scheme header({h:?}) is not a valid header name"
                ));
            }
            Some(h.to_ascii_lowercase())
        }
    };
    for Header { name, value } in &http.headers {
        if reqwest::header::HeaderName::try_from(name.as_str()).is_err() {
            out.fail(format!("header name {name:?} is not valid"));
        }
        if reqwest::header::HeaderValue::try_from(value.as_str()).is_err() {
            out.fail(format!("header {name}: value {value:?} is not valid"));
        }
        let lower = name.to_ascii_lowercase();
        if auth_header.as_deref() == Some(lower.as_str()) {
            out.fail(format!(
                "header {name} is set by the plugin, but the auth scheme makes the host put the credential there"
            ));
        }
        if lower == "content-length" || lower == "host" {
            out.fail(format!("header {name} is the host's to set"));
        }
    }
    let leaks = [
        ("method", http.method.contains(canary)),
        ("path", http.path.contains(canary)),
        (
            "headers",
            http.headers
                .iter()
                .any(|h| h.name.contains(canary) || h.value.contains(canary)),
        ),
        (
            "auth-scheme",
            matches!(&http.auth, AuthScheme::Header(h) if h.contains(canary)),
        ),
        (
            "body",
            http.body
                .windows(canary.len().max(1))
                .any(|w| w == canary.as_bytes()),
        ),
    ];
    for (place, leaked) in leaks {
        if leaked {
            out.fail(format!(
                "the API key leaked into the request's {place} (a plugin must never see or emit a credential)"
            ));
        }
    }
    match serde_json::from_slice::<Value>(&http.body) {
        Ok(Value::Object(body)) => Some(body),
        Ok(other) => {
            out.fail(format!("body must be a JSON object, got {}", show(&other)));
            None
        }
        Err(e) => {
            out.fail(format!(
                "body is not valid JSON ({e}): {}",
                shorten(&String::from_utf8_lossy(&http.body), 200)
            ));
            None
        }
    }
}

fn errors(c: &Arc<ProviderComponent>, opts: &CheckOptions, report: &mut Report) {
    let Some(file) =
        load::<fixtures::ErrorsFile>(report, own(opts, c), "conformance/provider/errors.json")
    else {
        return;
    };
    for case in &file.cases {
        let name = format!("errors::{}", case.name);
        if !selected(opts, &name) {
            continue;
        }
        let mut out = report.case(name);
        error_case(c, case, &mut out);
        report.finish(out);
    }
}

fn error_case(c: &Arc<ProviderComponent>, case: &ErrorCase, out: &mut super::report::Case) {
    let headers: Vec<Header> = case
        .headers
        .iter()
        .map(|(name, v)| Header {
            name: name.clone(),
            value: v.as_str().map_or_else(|| v.to_string(), str::to_string),
        })
        .collect();
    let body = match case.body.as_ref().map(fixtures::Bytes::to_bytes) {
        None => Vec::new(),
        Some(Ok(b)) => b,
        Some(Err(e)) => {
            out.fail(e);
            return;
        }
    };
    let Some(got) = out.call("classify-error", || {
        c.instance()
            .and_then(|mut i| i.classify_error(case.status, &headers, &body))
    }) else {
        return;
    };
    let class = error_class_str(got.class).to_string();
    if !case.expect.class.accepts(&class) {
        out.fail(format!(
            "HTTP {} classified as {class}, expected {} (message: {:?}, code: {:?})",
            case.status,
            case.expect.class.as_slice().join(" or "),
            shorten(&got.message, 120),
            got.code
        ));
    }
    if let Some(allowed) = &case.expect.retry_after_ms
        && !allowed.contains(&got.retry_after_ms)
    {
        let show_ms = |v: &Option<u64>| v.map_or_else(|| "null".to_string(), |n| n.to_string());
        out.fail(format!(
            "retry-after-ms is {}, expected {}",
            show_ms(&got.retry_after_ms),
            allowed.iter().map(show_ms).collect::<Vec<_>>().join(" or ")
        ));
    }
    if got.message.trim().is_empty() {
        out.fail(
            "message is empty: say what went wrong (the upstream's message, or `HTTP <status>`)",
        );
    }
}
