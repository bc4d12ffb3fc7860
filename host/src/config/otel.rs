//! The OpenTelemetry section (docs/tracing.md#configuration): the standard `OTEL_*`
//! variables the gateway's trace exporter reads — the OTLP/HTTP endpoint, headers and
//! timeout, `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`, the sampler, the batch
//! processor's bounds and `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` — as
//! [`OtelSettings`], with their defaults and parser. Traces are off unless an endpoint is
//! set. Other `OTEL_*` variables (logs, metrics, other SDKs in the same environment) are
//! not the gateway's and are ignored.

use std::time::Duration;

use super::problems::Problems;
use super::vars::{Vars, bool_value};

/// The `OTEL_*` keys this section parses.
pub(super) const KEYS: &[&str] = &[
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
];

/// `OTEL_SERVICE_NAME` when neither it nor a `service.name` resource attribute is set: the
/// specification's `unknown_service` would hide which service the spans are from.
pub const DEFAULT_OTEL_SERVICE_NAME: &str = "polygateway";
/// `OTEL_EXPORTER_OTLP_TIMEOUT`: the specification's default, 10 s per export request.
pub const DEFAULT_OTEL_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// `OTEL_BSP_SCHEDULE_DELAY`: the specification's default, 5 s between exports of a batch
/// that is not full.
pub const DEFAULT_OTEL_SCHEDULE_DELAY: Duration = Duration::from_millis(5000);
/// `OTEL_BSP_MAX_QUEUE_SIZE`: the specification's default; spans past it are dropped and
/// counted, never waited for.
pub const DEFAULT_OTEL_MAX_QUEUE_SIZE: usize = 2048;
/// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`: the specification's default.
pub const DEFAULT_OTEL_MAX_EXPORT_BATCH_SIZE: usize = 512;
/// The path an `OTEL_EXPORTER_OTLP_ENDPOINT` gets for traces (OTLP/HTTP).
const TRACES_PATH: &str = "v1/traces";

/// Which traces are recorded (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OtelSampler {
    /// `always_on`.
    AlwaysOn,
    /// `always_off`.
    AlwaysOff,
    /// `traceidratio`: this fraction of traces (0 to 1).
    TraceIdRatio(f64),
    /// `parentbased_always_on` (the default): the client's decision when it sent a
    /// `traceparent`, else every trace.
    ParentBasedAlwaysOn,
    /// `parentbased_always_off`.
    ParentBasedAlwaysOff,
    /// `parentbased_traceidratio`: the client's decision, else this fraction of traces.
    ParentBasedTraceIdRatio(f64),
}

/// The trace exporter's settings. Off (`traces_endpoint: None`) unless an OTLP endpoint is
/// configured. `Debug` shows header names only and the endpoint without its userinfo.
#[derive(Clone, PartialEq)]
pub struct OtelSettings {
    /// Where spans are sent (OTLP/HTTP protobuf): `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as
    /// given, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`; `None` = traces off.
    pub traces_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS`: headers of every export request (e.g. the
    /// collector's credential).
    pub headers: Vec<(String, String)>,
    /// `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT` (milliseconds): bound of one export request,
    /// default 10 s.
    pub timeout: Duration,
    /// `OTEL_SERVICE_NAME` (else the `service.name` resource attribute, else
    /// `polygateway`).
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`: `key=value` pairs added to the resource.
    pub resource_attributes: Vec<(String, String)>,
    /// `OTEL_TRACES_SAMPLER` with its argument; default `parentbased_always_on`.
    pub sampler: OtelSampler,
    /// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`: record the messages and the
    /// answer on the call span (`gen_ai.input.messages`, `gen_ai.output.messages`);
    /// default false.
    pub capture_message_content: bool,
    /// `OTEL_BSP_SCHEDULE_DELAY` (milliseconds): the longest a finished span waits for its
    /// batch to be sent, default 5 s.
    pub schedule_delay: Duration,
    /// `OTEL_BSP_MAX_QUEUE_SIZE`: finished spans held for export; past it a span is dropped
    /// and counted (default 2048).
    pub max_queue_size: usize,
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`: most spans per export request (default 512).
    pub max_export_batch_size: usize,
}

impl std::fmt::Debug for OtelSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let endpoint = self
            .traces_endpoint
            .as_deref()
            .map(|e| crate::transport::strip_userinfo(e).into_owned());
        let headers: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OtelSettings")
            .field("traces_endpoint", &endpoint)
            .field("headers", &headers)
            .field("timeout", &self.timeout)
            .field("service_name", &self.service_name)
            .field("resource_attributes", &self.resource_attributes)
            .field("sampler", &self.sampler)
            .field("capture_message_content", &self.capture_message_content)
            .field("schedule_delay", &self.schedule_delay)
            .field("max_queue_size", &self.max_queue_size)
            .field("max_export_batch_size", &self.max_export_batch_size)
            .finish()
    }
}

impl Default for OtelSettings {
    /// Traces off; every other value at its default.
    fn default() -> Self {
        Self {
            traces_endpoint: None,
            headers: Vec::new(),
            timeout: DEFAULT_OTEL_EXPORT_TIMEOUT,
            service_name: DEFAULT_OTEL_SERVICE_NAME.to_string(),
            resource_attributes: Vec::new(),
            sampler: OtelSampler::ParentBasedAlwaysOn,
            capture_message_content: false,
            schedule_delay: DEFAULT_OTEL_SCHEDULE_DELAY,
            max_queue_size: DEFAULT_OTEL_MAX_QUEUE_SIZE,
            max_export_batch_size: DEFAULT_OTEL_MAX_EXPORT_BATCH_SIZE,
        }
    }
}

impl OtelSettings {
    /// Traces to the OTLP/HTTP collector at `endpoint` (the base URL, as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: `/v1/traces` is appended), every other value at its
    /// default — for an embedding application that configures the gateway in code.
    pub fn to_collector(endpoint: &str) -> Self {
        Self {
            traces_endpoint: Some(traces_url(endpoint)),
            ..Self::default()
        }
    }

    /// Whether traces are exported.
    pub fn enabled(&self) -> bool {
        self.traces_endpoint.is_some()
    }
}

/// `base` + `/v1/traces` (one slash between them).
fn traces_url(base: &str) -> String {
    format!("{}/{TRACES_PATH}", base.trim_end_matches('/'))
}

/// The first of `keys` that is set: (key, value).
fn first<'v>(vars: &'v Vars, keys: &[&'static str]) -> Option<(&'static str, &'v str)> {
    keys.iter().find_map(|k| vars.get(k).map(|v| (*k, v)))
}

/// Parse the `OTEL_*` keys (named by the whole key).
pub(super) fn parse(vars: &Vars, problems: &mut Problems) -> OtelSettings {
    let mut o = OtelSettings::default();
    let disabled = match vars.get("OTEL_SDK_DISABLED") {
        Some(v) => bool_value("OTEL_SDK_DISABLED", v, problems).unwrap_or(false),
        None => false,
    };
    let exporter_on = match vars.get("OTEL_TRACES_EXPORTER") {
        None | Some("otlp") => true,
        Some("none") => false,
        Some(v) => {
            problems.add(
                "OTEL_TRACES_EXPORTER",
                format!("expected otlp|none (the gateway exports OTLP only), got `{v}`"),
            );
            false
        }
    };
    o.traces_endpoint = match (
        vars.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        vars.get("OTEL_EXPORTER_OTLP_ENDPOINT"),
    ) {
        (Some(e), _) => Some(e.to_string()),
        (None, Some(base)) => Some(traces_url(base)),
        (None, None) => None,
    };
    if disabled || !exporter_on {
        o.traces_endpoint = None;
    }
    let protocol = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ];
    if let Some((key, v)) = first(vars, &protocol)
        && v != "http/protobuf"
    {
        problems.add(
            key,
            format!(
                "expected http/protobuf (the only OTLP protocol the gateway speaks), got `{v}`"
            ),
        );
    }
    let compression = [
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        "OTEL_EXPORTER_OTLP_COMPRESSION",
    ];
    if let Some((key, v)) = first(vars, &compression)
        && v != "none"
    {
        problems.add(
            key,
            format!("expected none (export requests are not compressed), got `{v}`"),
        );
    }
    let headers = [
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ];
    if let Some((key, v)) = first(vars, &headers) {
        match key_values(v) {
            Some(list) => o.headers = list,
            None => problems.add(
                key,
                "expected comma-separated name=value pairs (the values are not shown)",
            ),
        }
    }
    let timeout = [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ];
    if let Some((key, v)) = first(vars, &timeout)
        && let Some(ms) = millis(key, v, problems)
    {
        o.timeout = ms;
    }
    if let Some(v) = vars.get("OTEL_RESOURCE_ATTRIBUTES") {
        match key_values(v) {
            Some(list) => o.resource_attributes = list,
            None => problems.add(
                "OTEL_RESOURCE_ATTRIBUTES",
                format!("expected comma-separated key=value pairs, got `{v}`"),
            ),
        }
    }
    let from_resource = o
        .resource_attributes
        .iter()
        .find(|(k, _)| k == "service.name")
        .map(|(_, v)| v.clone());
    if let Some(name) = vars
        .get("OTEL_SERVICE_NAME")
        .map(str::to_string)
        .or(from_resource)
    {
        o.service_name = name;
    }
    o.sampler = parse_sampler(vars, problems);
    if let Some(v) = vars.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") {
        o.capture_message_content = bool_value(
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            v,
            problems,
        )
        .unwrap_or(false);
    }
    if let Some(v) = vars.get("OTEL_BSP_SCHEDULE_DELAY")
        && let Some(ms) = millis("OTEL_BSP_SCHEDULE_DELAY", v, problems)
    {
        o.schedule_delay = ms;
    }
    for (key, slot) in [
        ("OTEL_BSP_MAX_QUEUE_SIZE", &mut o.max_queue_size),
        (
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            &mut o.max_export_batch_size,
        ),
    ] {
        if let Some(v) = vars.get(key) {
            match v.parse::<usize>() {
                Ok(n) => *slot = n,
                Err(_) => problems.add(key, format!("expected a positive integer, got `{v}`")),
            }
        }
    }
    o
}

/// A number of milliseconds (the `OTEL_*` durations are integers of milliseconds).
fn millis(key: &str, v: &str, problems: &mut Problems) -> Option<Duration> {
    match v.parse::<u64>() {
        Ok(n) => Some(Duration::from_millis(n)),
        Err(_) => {
            problems.add(
                key,
                format!("expected an integer number of milliseconds, got `{v}`"),
            );
            None
        }
    }
}

/// `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` (the ratio, default 1.0).
fn parse_sampler(vars: &Vars, problems: &mut Problems) -> OtelSampler {
    let ratio = || match vars.get("OTEL_TRACES_SAMPLER_ARG") {
        None => Some(1.0),
        Some(v) => match v.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Some(r),
            _ => None,
        },
    };
    let bad_ratio = |problems: &mut Problems| {
        let v = vars.get("OTEL_TRACES_SAMPLER_ARG").unwrap_or_default();
        problems.add(
            "OTEL_TRACES_SAMPLER_ARG",
            format!("expected a ratio from 0 to 1, got `{v}`"),
        );
    };
    match vars.get("OTEL_TRACES_SAMPLER") {
        None | Some("parentbased_always_on") => OtelSampler::ParentBasedAlwaysOn,
        Some("always_on") => OtelSampler::AlwaysOn,
        Some("always_off") => OtelSampler::AlwaysOff,
        Some("parentbased_always_off") => OtelSampler::ParentBasedAlwaysOff,
        Some("traceidratio") => match ratio() {
            Some(r) => OtelSampler::TraceIdRatio(r),
            None => {
                bad_ratio(problems);
                OtelSampler::AlwaysOff
            }
        },
        Some("parentbased_traceidratio") => match ratio() {
            Some(r) => OtelSampler::ParentBasedTraceIdRatio(r),
            None => {
                bad_ratio(problems);
                OtelSampler::AlwaysOff
            }
        },
        Some(v) => {
            problems.add(
                "OTEL_TRACES_SAMPLER",
                format!(
                    "expected always_on|always_off|traceidratio|parentbased_always_on|\
                     parentbased_always_off|parentbased_traceidratio, got `{v}`"
                ),
            );
            OtelSampler::AlwaysOff
        }
    }
}

/// `k1=v1,k2=v2` (W3C Baggage-like, as the OTel variables write them; values
/// percent-decoded); `None` when a member has no `=` or an empty key.
fn key_values(v: &str) -> Option<Vec<(String, String)>> {
    v.split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| {
            let (k, val) = m.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_string(), percent_decoded(val.trim())))
        })
        .collect()
}

/// `s` with its `%XX` escapes decoded (an invalid escape is kept as written).
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let (h, l) = (hex(h).unwrap_or(0), hex(l).unwrap_or(0));
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The rules on the trace settings, however they were assembled (`Settings::validate`).
pub(super) fn check(o: &OtelSettings, problems: &mut Problems) {
    let at = |path: &str, problem: String| format!("{problem} (field `process.otel.{path}`)");
    if let Some(e) = &o.traces_endpoint {
        let ok = reqwest::Url::parse(e)
            .ok()
            .is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
        if !ok {
            let shown = crate::transport::strip_userinfo(e).into_owned();
            problems.add(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                at(
                    "traces_endpoint",
                    format!("expected an http:// or https:// URL, got `{shown}`"),
                ),
            );
        }
    }
    if o.timeout.is_zero() {
        problems.add(
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            at("timeout", "must be > 0 ms, got 0".into()),
        );
    }
    if o.max_queue_size == 0 {
        problems.add(
            "OTEL_BSP_MAX_QUEUE_SIZE",
            at("max_queue_size", "must be > 0 spans, got 0".into()),
        );
    }
    if o.max_export_batch_size == 0 || o.max_export_batch_size > o.max_queue_size {
        problems.add(
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            at(
                "max_export_batch_size",
                format!(
                    "must be 1..={} spans (OTEL_BSP_MAX_QUEUE_SIZE), got {}",
                    o.max_queue_size, o.max_export_batch_size
                ),
            ),
        );
    }
    if o.schedule_delay.is_zero() {
        problems.add(
            "OTEL_BSP_SCHEDULE_DELAY",
            at("schedule_delay", "must be > 0 ms, got 0".into()),
        );
    }
    let ratio = match o.sampler {
        OtelSampler::TraceIdRatio(r) | OtelSampler::ParentBasedTraceIdRatio(r) => Some(r),
        _ => None,
    };
    if let Some(r) = ratio
        && !(0.0..=1.0).contains(&r)
    {
        problems.add(
            "OTEL_TRACES_SAMPLER_ARG",
            at("sampler", format!("the ratio must be from 0 to 1, got {r}")),
        );
    }
    if o.headers.iter().any(|(k, v)| {
        reqwest::header::HeaderName::try_from(k.as_str()).is_err() || v.contains(['\r', '\n'])
    }) {
        problems.add(
            "OTEL_EXPORTER_OTLP_HEADERS",
            at(
                "headers",
                "a header name or value cannot be sent (the values are not shown)".into(),
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_vars(list: &[(&str, &str)]) -> (OtelSettings, Vec<String>) {
        let mut p = Problems::new();
        let o = parse(&Vars::from_pairs("", list), &mut p);
        check(&o, &mut p);
        (o, p.into_list().into_iter().map(|p| p.key).collect())
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        let (o, p) = parse_vars(&[]);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(o, OtelSettings::default());
        assert!(!o.enabled());
        let (o, _) = parse_vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
            ("OTEL_SDK_DISABLED", "true"),
        ]);
        assert!(!o.enabled());
        let (o, _) = parse_vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ]);
        assert!(!o.enabled());
    }

    #[test]
    fn the_standard_variables_parse() {
        let (o, p) = parse_vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20abc, x-tenant = t1",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "1500"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment.name=prod,service.name=from-res",
            ),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ]);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(
            o.traces_endpoint.as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(
            o.headers,
            vec![
                ("authorization".to_string(), "Bearer abc".to_string()),
                ("x-tenant".to_string(), "t1".to_string())
            ]
        );
        assert_eq!(o.timeout, Duration::from_millis(1500));
        assert_eq!(o.service_name, "from-res");
        assert_eq!(o.sampler, OtelSampler::ParentBasedTraceIdRatio(0.25));
        assert!(o.capture_message_content);
        assert_eq!(o.schedule_delay, Duration::from_millis(100));
        assert!(!format!("{o:?}").contains("abc"), "{o:?}");
        let (o, _) = parse_vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:4318/custom"),
            ("OTEL_SERVICE_NAME", "gw-eu"),
        ]);
        assert_eq!(o.traces_endpoint.as_deref(), Some("http://b:4318/custom"));
        assert_eq!(o.service_name, "gw-eu");
    }

    #[test]
    fn bad_values_name_their_key() {
        let (_, p) = parse_vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "ten"),
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "2"),
            ("OTEL_TRACES_EXPORTER", "zipkin"),
            (
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                "maybe",
            ),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
        ]);
        assert_eq!(
            p,
            vec![
                "OTEL_TRACES_EXPORTER",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
                "OTEL_EXPORTER_OTLP_TIMEOUT",
                "OTEL_TRACES_SAMPLER_ARG",
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                "OTEL_BSP_MAX_QUEUE_SIZE",
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            ]
        );
        let (_, p) = parse_vars(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "not a url")]);
        assert_eq!(p, vec!["OTEL_EXPORTER_OTLP_ENDPOINT"]);
    }
}
