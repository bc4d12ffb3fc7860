//! OpenTelemetry traces (docs/tracing.md) against a real OTLP/HTTP receiver: an HTTP server
//! in the test decodes every export request with the protocol's prost types, and the tests
//! assert what arrived exactly — span names and kinds, trace ids and parents, attributes,
//! statuses — and that the upstream (the mock) saw the attempt span's `traceparent`. Also:
//! message content only when asked, a collector that is down is counted and not felt, no
//! exporter when the variables are unset, and the embedded library exporting too.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use serde_json::{Value, json};

use crate::common::{chat_body, gateway, kv, post_chat, source};
use polygateway_tests::{GatewayProcess, eventually, hits, mock, script, telemetry_rows};

/// The client's trace and span (W3C trace-context example ids).
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// OTLP span kinds.
const KIND_SERVER: i32 = 2;
const KIND_CLIENT: i32 = 3;
/// OTLP status codes.
const STATUS_UNSET: i32 = 0;
const STATUS_ERROR: i32 = 2;

/// One span as it arrived, with its resource and scope.
#[derive(Debug, Clone)]
struct Got {
    name: String,
    kind: i32,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: BTreeMap<String, Value>,
    status: (i32, String),
    resource: BTreeMap<String, Value>,
    scope: String,
}

impl Got {
    fn attr(&self, key: &str) -> &Value {
        self.attributes.get(key).unwrap_or(&Value::Null)
    }
}

/// An OTLP/HTTP receiver on a free port: `POST /v1/traces`, protobuf bodies.
struct Collector {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    content_types: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn any_value(v: &Option<AnyValue>) -> Value {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::IntValue(i)) => json!(i),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        Some(any_value::Value::ArrayValue(a)) => a
            .values
            .iter()
            .map(|v| any_value(&Some(v.clone())))
            .collect(),
        other => json!(format!("{other:?}")),
    }
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, Value> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), any_value(&kv.value)))
        .collect()
}

impl Collector {
    async fn start() -> Self {
        let requests: Arc<Mutex<Vec<ExportTraceServiceRequest>>> = Arc::default();
        let content_types: Arc<Mutex<Vec<String>>> = Arc::default();
        let (r, c) = (requests.clone(), content_types.clone());
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let (r, c) = (r.clone(), c.clone());
                    async move {
                        let ct = headers
                            .get("content-type")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string();
                        c.lock().unwrap().push(ct);
                        let req = ExportTraceServiceRequest::decode(body.as_ref())
                            .expect("an OTLP protobuf export request");
                        r.lock().unwrap().push(req);
                        (
                            [("content-type", "application/x-protobuf")],
                            ExportTraceServiceResponse::default().encode_to_vec(),
                        )
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            requests,
            content_types,
            task,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    /// Every span received so far.
    fn spans(&self) -> Vec<Got> {
        let mut out = Vec::new();
        for req in self.requests.lock().unwrap().iter() {
            for rs in &req.resource_spans {
                let resource = rs
                    .resource
                    .as_ref()
                    .map(|r| attributes(&r.attributes))
                    .unwrap_or_default();
                for ss in &rs.scope_spans {
                    let scope = ss
                        .scope
                        .as_ref()
                        .map(|s| s.name.clone())
                        .unwrap_or_default();
                    for s in &ss.spans {
                        out.push(Got {
                            name: s.name.clone(),
                            kind: s.kind,
                            trace_id: hex::encode(&s.trace_id),
                            span_id: hex::encode(&s.span_id),
                            parent_span_id: hex::encode(&s.parent_span_id),
                            attributes: attributes(&s.attributes),
                            status: s
                                .status
                                .as_ref()
                                .map(|st| (st.code, st.message.clone()))
                                .unwrap_or((STATUS_UNSET, String::new())),
                            resource: resource.clone(),
                            scope: scope.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Wait until `n` spans arrived (no more arrive for a moment after: exactly `n`).
    async fn wait_for(&self, n: usize) -> Vec<Got> {
        let spans = eventually(20, || async {
            let s = self.spans();
            (s.len() >= n).then_some(s)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let again = self.spans();
        assert_eq!(
            again.len(),
            spans.len(),
            "more spans than expected: {again:#?}"
        );
        assert_eq!(spans.len(), n, "{spans:#?}");
        spans
    }
}

/// The env of a traced gateway exporting to `collector`, quickly (50 ms batches).
fn otel_env(collector: &str) -> Vec<(String, String)> {
    vec![
        kv("OTEL_EXPORTER_OTLP_ENDPOINT", collector),
        kv("OTEL_BSP_SCHEDULE_DELAY", "50"),
        kv("OTEL_SERVICE_NAME", "pgw-e2e"),
    ]
}

async fn post_with_traceparent(
    gw: &GatewayProcess,
    body: &Value,
    traceparent: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut req = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .json(body);
    if let Some(tp) = traceparent {
        req = req.header("traceparent", tp);
    }
    let resp = req.send().await.expect("gateway reachable");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.expect("body"))
}

async fn metrics(gw: &GatewayProcess) -> String {
    reqwest::get(format!("{}/metrics", gw.base_url))
        .await
        .expect("metrics reachable")
        .text()
        .await
        .expect("metrics text")
}

/// The value of an unlabelled counter in a `/metrics` text.
fn counter(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The `traceparent` a mock hit carried.
fn hit_traceparent(hit: &Value) -> Option<String> {
    hit["headers"]["traceparent"].as_str().map(str::to_string)
}

fn split(spans: Vec<Got>) -> (Got, Vec<Got>) {
    let (calls, mut attempts): (Vec<Got>, Vec<Got>) =
        spans.into_iter().partition(|s| s.kind == KIND_SERVER);
    assert_eq!(calls.len(), 1, "one call span: {calls:#?}");
    attempts.sort_by_key(|s| s.attr("pgw.attempt").as_i64());
    assert!(
        attempts.iter().all(|s| s.kind == KIND_CLIENT),
        "{attempts:#?}"
    );
    (calls.into_iter().next().unwrap(), attempts)
}

fn map(v: Value) -> BTreeMap<String, Value> {
    serde_json::from_value(v).unwrap()
}

#[tokio::test]
async fn a_failover_is_one_call_span_and_two_attempt_spans_under_the_clients_span() {
    let collector = Collector::start().await;
    let m = mock().await;
    script(&m, "ot-a", json!({"steps": [{"status": 500}]})).await;
    let mut env = source(&m, "openai", 1, "ot-a", "model-a");
    env.extend(source(&m, "openai", 2, "ot-b", "model-b"));
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    env.extend(otel_env(&collector.endpoint()));
    let gw = gateway(env).await;
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let (status, headers, body) =
        post_with_traceparent(&gw, &chat_body(false), Some(&traceparent)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-pgw-attempts"], "2");
    let call_id = headers["x-pgw-call-id"].to_str().unwrap().to_string();

    let (call, attempts) = split(collector.wait_for(3).await);
    assert_eq!(attempts.len(), 2);
    // One trace, the client's: call span under the client's span, attempts under the call.
    assert_eq!(call.name, "chat llm");
    assert_eq!(call.trace_id, CLIENT_TRACE);
    assert_eq!(call.parent_span_id, CLIENT_SPAN);
    assert_eq!(
        attempts.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["chat model-a", "chat model-b"]
    );
    for a in &attempts {
        assert_eq!(a.trace_id, CLIENT_TRACE);
        assert_eq!(a.parent_span_id, call.span_id);
        assert_eq!(a.scope, "polygateway");
    }
    assert_eq!(call.resource["service.name"], "pgw-e2e");
    assert_eq!(call.scope, "polygateway");

    // The attempt ids are the ledger's attempt rows.
    let db = gw.telemetry_db();
    let rows = eventually(10, || {
        let db = db.clone();
        async move {
            let rows = telemetry_rows(&db, &["call_id", "event", "source_name"]).await;
            (rows.len() == 3).then_some(rows)
        }
    })
    .await;
    let attempt_id = |source: &str| {
        rows.iter()
            .find(|r| r["event"] == "attempt" && r["source_name"] == source)
            .map(|r| r["call_id"].clone())
            .unwrap()
    };
    let port = i64::from(m.addr.port());
    assert_eq!(
        call.attributes,
        map(json!({
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "llm",
            "gen_ai.provider.name": "openai",
            "gen_ai.response.model": "model-b",
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": 5,
            "gen_ai.usage.output_tokens": 5,
            "pgw.scope": "LLM",
            "pgw.call_id": call_id,
            "pgw.source": "openai-2",
            "pgw.attempts": 2,
            "pgw.cache_hit": false,
        }))
    );
    assert_eq!(call.status, (STATUS_UNSET, String::new()));
    assert_eq!(
        attempts[0].attributes,
        map(json!({
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "model-a",
            "error.type": "server_error",
            "http.response.status_code": 500,
            "server.address": "127.0.0.1",
            "server.port": port,
            "pgw.scope": "LLM",
            "pgw.call_id": call_id,
            "pgw.source": "openai-1",
            "pgw.attempt": 1,
            "pgw.attempt_id": attempt_id("openai-1"),
            "pgw.error_class": "transient",
        }))
    );
    assert_eq!(attempts[0].status, (STATUS_ERROR, "server_error".into()));
    assert_eq!(
        attempts[1].attributes,
        map(json!({
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "model-b",
            "gen_ai.response.model": "model-b",
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": 5,
            "gen_ai.usage.output_tokens": 5,
            "server.address": "127.0.0.1",
            "server.port": port,
            "pgw.scope": "LLM",
            "pgw.call_id": call_id,
            "pgw.source": "openai-2",
            "pgw.attempt": 2,
            "pgw.attempt_id": attempt_id("openai-2"),
        }))
    );
    assert_eq!(attempts[1].status, (STATUS_UNSET, String::new()));

    // Each upstream request carried its attempt span as the parent.
    let a = hits(&m, "ot-a").await;
    let b = hits(&m, "ot-b").await;
    assert_eq!((a.len(), b.len()), (1, 1));
    assert_eq!(
        hit_traceparent(&a[0]),
        Some(format!("00-{CLIENT_TRACE}-{}-01", attempts[0].span_id))
    );
    assert_eq!(
        hit_traceparent(&b[0]),
        Some(format!("00-{CLIENT_TRACE}-{}-01", attempts[1].span_id))
    );
    // No credential in any span or resource.
    let all = format!("{call:?}{attempts:?}");
    assert!(!all.contains("sk-ot-"), "{all}");
    assert!(
        collector
            .content_types
            .lock()
            .unwrap()
            .iter()
            .all(|c| c == "application/x-protobuf")
    );
    let text = metrics(&gw).await;
    assert_eq!(
        counter(&text, "pgw_otel_exported_spans_total"),
        Some(3.0),
        "{text}"
    );
    assert_eq!(counter(&text, "pgw_otel_export_failures_total"), Some(0.0));
}

#[tokio::test]
async fn a_streamed_call_starts_a_trace_and_propagates_it_upstream() {
    let collector = Collector::start().await;
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "ot-s", "model-s");
    env.extend(otel_env(&collector.endpoint()));
    let gw = gateway(env).await;
    let mut body = chat_body(true);
    body["temperature"] = json!(0.5);
    body["max_tokens"] = json!(64);
    let (status, headers, text) = post_chat(&gw, body).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("[DONE]"), "{text}");
    let call_id = headers["x-pgw-call-id"].to_str().unwrap().to_string();

    let (call, attempts) = split(collector.wait_for(2).await);
    let attempt = &attempts[0];
    // No client span: a trace of the gateway's own, rooted at the call span.
    assert_eq!(call.parent_span_id, "");
    assert_eq!(attempt.trace_id, call.trace_id);
    assert_eq!(attempt.parent_span_id, call.span_id);
    assert_eq!(call.name, "chat llm");
    assert_eq!(attempt.name, "chat model-s");
    assert_eq!(
        call.attributes,
        map(json!({
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "llm",
            "gen_ai.request.temperature": 0.5,
            "gen_ai.request.max_tokens": 64,
            "gen_ai.provider.name": "openai",
            "gen_ai.response.model": "model-s",
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": 5,
            "gen_ai.usage.output_tokens": 5,
            "pgw.scope": "LLM",
            "pgw.call_id": call_id,
            "pgw.source": "openai-1",
            "pgw.attempts": 1,
            "pgw.cache_hit": false,
        }))
    );
    let attempt_id = attempt.attr("pgw.attempt_id").clone();
    assert!(
        attempt_id.as_str().is_some_and(|s| s.len() == 36),
        "{attempt_id}"
    );
    assert_eq!(
        attempt.attributes,
        map(json!({
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "model-s",
            "gen_ai.request.temperature": 0.5,
            "gen_ai.request.max_tokens": 64,
            "gen_ai.response.model": "model-s",
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": 5,
            "gen_ai.usage.output_tokens": 5,
            "server.address": "127.0.0.1",
            "server.port": i64::from(m.addr.port()),
            "pgw.scope": "LLM",
            "pgw.call_id": call_id,
            "pgw.source": "openai-1",
            "pgw.attempt": 1,
            "pgw.attempt_id": attempt_id,
        }))
    );
    let h = hits(&m, "ot-s").await;
    assert_eq!(
        hit_traceparent(&h[0]),
        Some(format!("00-{}-{}-01", call.trace_id, attempt.span_id))
    );
}

#[tokio::test]
async fn message_content_is_recorded_only_when_the_variable_is_true() {
    let collector = Collector::start().await;
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "ot-c", "model-c");
    env.extend(otel_env(&collector.endpoint()));
    env.push(kv(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "true",
    ));
    let gw = gateway(env).await;
    let (status, _, text) = post_chat(&gw, chat_body(true)).await;
    assert_eq!(status, 200, "{text}");
    let (call, attempts) = split(collector.wait_for(2).await);
    let parse = |v: &Value| -> Value { serde_json::from_str(v.as_str().unwrap()).unwrap() };
    assert_eq!(
        parse(call.attr("gen_ai.input.messages")),
        json!([{"role": "user", "parts": [{"type": "text", "content": "say hello to the test"}]}])
    );
    assert_eq!(
        parse(call.attr("gen_ai.output.messages")),
        json!([{
            "role": "assistant",
            "parts": [{"type": "text", "content": "Hello from the mock upstream."}],
            "finish_reason": "stop",
        }])
    );
    // Content goes on the call span only.
    assert!(
        attempts[0]
            .attributes
            .keys()
            .all(|k| !k.ends_with(".messages")),
        "{attempts:#?}"
    );
}

#[tokio::test]
async fn a_collector_that_is_down_is_counted_and_not_felt() {
    // A port nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let m = mock().await;
    let mut down_env = source(&m, "openai", 1, "ot-down", "model-d");
    down_env.extend(otel_env(&format!("http://{closed}")));
    down_env.push(kv("OTEL_EXPORTER_OTLP_TIMEOUT", "500"));
    let down = gateway(down_env).await;
    let off = gateway(source(&m, "openai", 1, "ot-off", "model-d")).await;

    // Warm both, then time the same calls against each, interleaved.
    let body = chat_body(false);
    for gw in [&down, &off] {
        assert_eq!(post_chat(gw, body.clone()).await.0, 200);
    }
    let mut times = (Vec::new(), Vec::new());
    for _ in 0..15 {
        for (gw, t) in [(&down, &mut times.0), (&off, &mut times.1)] {
            let started = Instant::now();
            let (status, _, text) = post_chat(gw, body.clone()).await;
            assert_eq!(status, 200, "{text}");
            t.push(started.elapsed());
        }
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (d, o) = (median(&mut times.0), median(&mut times.1));
    assert!(
        d <= o * 3 + Duration::from_millis(25),
        "median call with the collector down {d:?}, with traces off {o:?}"
    );
    let text = eventually(20, || async {
        let t = metrics(&down).await;
        (counter(&t, "pgw_otel_export_failures_total").unwrap_or(0.0) > 0.0).then_some(t)
    })
    .await;
    assert!(
        counter(&text, "pgw_otel_dropped_spans_total").unwrap_or(0.0) > 0.0,
        "{text}"
    );
    assert_eq!(counter(&text, "pgw_otel_exported_spans_total"), Some(0.0));
    let log = down.stop().await;
    assert!(log.contains("OpenTelemetry export failed"), "{log}");
}

#[tokio::test]
async fn no_exporter_and_no_traceparent_when_the_variables_are_unset() {
    let collector = Collector::start().await;
    let m = mock().await;
    let gw = gateway(source(&m, "openai", 1, "ot-none", "model-n")).await;
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let (status, _, body) = post_with_traceparent(&gw, &chat_body(false), Some(&traceparent)).await;
    assert_eq!(status, 200, "{body}");
    let h = hits(&m, "ot-none").await;
    assert_eq!(hit_traceparent(&h[0]), None, "{h:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(collector.request_count(), 0);
    let text = metrics(&gw).await;
    assert_eq!(counter(&text, "pgw_otel_exported_spans_total"), Some(0.0));
    let log = gw.stop().await;
    assert!(!log.contains("OpenTelemetry traces on"), "{log}");
}

#[tokio::test]
async fn the_embedded_library_exports_spans_under_the_callers_span_and_flushes() {
    use polygateway::telemetry::otel::TraceParent;
    use polygateway::{ChatRequest, Gateway};

    let collector = Collector::start().await;
    let m = mock().await;
    let mut vars = source(&m, "openai", 1, "ot-lib", "model-l");
    vars.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    // A long schedule delay: only the flush sends the spans.
    vars.push(kv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint()));
    vars.push(kv("OTEL_BSP_SCHEDULE_DELAY", "600000"));
    let settings = polygateway::config::settings_from_vars(vars).unwrap();
    let gw = Gateway::from_settings(settings).await.unwrap();
    assert!(gw.traces_enabled());
    let mut req = ChatRequest::user("llm", "say hello to the test");
    req.stream = false;
    req.trace_parent = TraceParent::from_w3c(&format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"), None);
    assert!(req.trace_parent.is_some());
    let r = gw.chat(req).await.unwrap();
    assert_eq!(collector.request_count(), 0);
    assert!(gw.flush_traces(Duration::from_secs(10)).await);
    let (call, attempts) = split(collector.wait_for(2).await);
    assert_eq!(call.trace_id, CLIENT_TRACE);
    assert_eq!(call.parent_span_id, CLIENT_SPAN);
    assert_eq!(attempts[0].parent_span_id, call.span_id);
    assert_eq!(call.attr("pgw.call_id"), &json!(r.call_id));
    assert_eq!(call.resource["service.name"], "polygateway");
    let h = hits(&m, "ot-lib").await;
    assert_eq!(
        hit_traceparent(&h[0]),
        Some(format!("00-{CLIENT_TRACE}-{}-01", attempts[0].span_id))
    );
}

#[tokio::test]
async fn an_embeddings_call_is_an_embeddings_call_span_with_its_attempt() {
    let collector = Collector::start().await;
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "ot-emb", "text-embedding-3-small");
    env.extend(otel_env(&collector.endpoint()));
    let gw = gateway(env).await;
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/embeddings", gw.base_url))
        .header("traceparent", &traceparent)
        .json(&json!({"model": "llm", "input": ["one two three", "four"], "dimensions": 8}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let call_id = resp.headers()["x-pgw-call-id"]
        .to_str()
        .unwrap()
        .to_string();

    let (call, attempts) = split(collector.wait_for(2).await);
    let attempt = &attempts[0];
    assert_eq!(call.name, "embeddings llm");
    assert_eq!(attempt.name, "embeddings text-embedding-3-small");
    assert_eq!(call.trace_id, CLIENT_TRACE);
    assert_eq!(call.parent_span_id, CLIENT_SPAN);
    assert_eq!(attempt.parent_span_id, call.span_id);
    assert_eq!(
        call.attributes,
        map(json!({
            "gen_ai.operation.name": "embeddings",
            "gen_ai.request.model": "llm",
            "gen_ai.embeddings.dimension.count": 8,
            "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": 4,
            "pgw.scope": "LLM",
            "pgw.call_id": call_id,
            "pgw.source": "openai-1",
            "pgw.attempts": 1,
            "pgw.cache_hit": false,
        }))
    );
    let attempt_id = attempt.attr("pgw.attempt_id").clone();
    assert_eq!(
        attempt.attributes,
        map(json!({
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "text-embedding-3-small",
            "gen_ai.embeddings.dimension.count": 8,
            "gen_ai.response.model": "text-embedding-3-small",
            "gen_ai.usage.input_tokens": 4,
            "server.address": "127.0.0.1",
            "server.port": i64::from(m.addr.port()),
            "pgw.scope": "LLM",
            "pgw.call_id": call_id,
            "pgw.source": "openai-1",
            "pgw.attempt": 1,
            "pgw.attempt_id": attempt_id,
        }))
    );
    let h = hits(&m, "ot-emb").await;
    assert_eq!(
        hit_traceparent(&h[0]),
        Some(format!("00-{CLIENT_TRACE}-{}-01", attempt.span_id))
    );
}

#[tokio::test]
async fn a_cache_hit_is_a_call_span_without_attempts() {
    let collector = Collector::start().await;
    let m = mock().await;
    let mut env = source(&m, "openai", 1, "ot-hit", "model-h");
    env.push(kv("PGW_CACHE_BACKEND", "memory"));
    env.push(kv("LLM__CACHE__TTL_S", 60));
    env.extend(otel_env(&collector.endpoint()));
    let gw = gateway(env).await;
    for _ in 0..2 {
        let (status, _, body) = post_chat(&gw, chat_body(false)).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(hits(&m, "ot-hit").await.len(), 1);
    let spans = collector.wait_for(3).await;
    let mut calls: Vec<&Got> = spans.iter().filter(|s| s.kind == KIND_SERVER).collect();
    calls.sort_by_key(|s| s.attr("pgw.cache_hit").as_bool());
    assert_eq!(calls.len(), 2);
    let (miss, hit) = (calls[0], calls[1]);
    assert_eq!(miss.attr("pgw.cache_hit"), &json!(false));
    assert_eq!(miss.attr("pgw.attempts"), &json!(1));
    assert_eq!(hit.attr("pgw.cache_hit"), &json!(true));
    assert_eq!(hit.attr("pgw.attempts"), &json!(0));
    assert_eq!(hit.attr("pgw.source"), &json!("openai-1"));
    assert_eq!(hit.attr("gen_ai.usage.output_tokens"), &json!(5));
    assert_ne!(hit.trace_id, miss.trace_id);
    let attempts: Vec<&Got> = spans.iter().filter(|s| s.kind == KIND_CLIENT).collect();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].parent_span_id, miss.span_id);
}
