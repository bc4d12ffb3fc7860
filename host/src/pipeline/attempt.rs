//! One attempt: the provider plugin builds the request, the host adds the credential and
//! sends it, the body is framed and parsed by the plugin under the liveness watchdog, and the
//! outcome is classified. Deltas are forwarded to the sink once the call commits (first token).

use std::time::Duration;

use tokio::time::Instant;

use crate::config::MissingDone;
use crate::plugin::{BuildError, Delta, ErrorClass, PluginChatRequest, SseEvent};
use crate::telemetry::UsageSource;
use crate::telemetry::otel::AttemptSpan;
use crate::transport::{LivenessTimeout, LivenessTimer, SseFramer, UpstreamError, Watchdog};

use super::boxed::boxed_in_place;
use super::failure::AttemptFailure;
use super::passthrough;
use super::response::Accumulator;
use super::runtime::{Inner, SourceRuntime};
use super::sink::{CallState, Sink};
use super::upstream::{self, transient};

/// What an attempt measured, whatever its outcome (for its telemetry row).
#[derive(Debug, Default)]
pub(crate) struct AttemptMetrics {
    pub latency: Duration,
    pub ttft: Option<Duration>,
    pub max_inter_token: Option<Duration>,
}

/// A successful attempt's answer.
pub(crate) struct AttemptAnswer {
    pub acc: Accumulator,
    pub usage_source: UsageSource,
    pub salvaged: bool,
}

fn timeout_failure(kind: LivenessTimeout, source: &str) -> AttemptFailure {
    transient(format!("{} from {source}", kind.as_str()), "timeout")
}

/// Run one attempt against `source`; `trace` is its span, whose trace context the upstream
/// request carries.
pub(crate) async fn run(
    inner: &Inner,
    source: &SourceRuntime,
    preq: &PluginChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
    trace: Option<&AttemptSpan>,
) -> (Result<AttemptAnswer, AttemptFailure>, AttemptMetrics) {
    let mut wd = Watchdog::start(source.settings.timeouts);
    let out = run_inner(inner, source, preq, st, sink, &mut wd, trace)
        .await
        .map_err(|f| upstream::scrub(source, f));
    let metrics = AttemptMetrics {
        latency: wd.started().elapsed(),
        ttft: wd.ttft(),
        max_inter_token: wd.max_inter_token(),
    };
    (out, metrics)
}

async fn run_inner(
    inner: &Inner,
    source: &SourceRuntime,
    preq: &PluginChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
    wd: &mut Watchdog,
    trace: Option<&AttemptSpan>,
) -> Result<AttemptAnswer, AttemptFailure> {
    // Instances are checked out per guest call, never held while the upstream answers: an
    // attempt waiting for its upstream holds none, so the pool stays as small as the number
    // of calls the workers run at once (and the instances in use stay warm in the caches).
    let built = source
        .component
        .instance()?
        .build_request(preq, &source.info)?;
    let http = match built {
        Ok(h) => h,
        Err(BuildError::InvalidRequest(m)) => return Err(AttemptFailure::BuildInvalid(m)),
        Err(BuildError::Unsupported(m)) => return Err(AttemptFailure::Unsupported(m)),
    };
    let headers =
        upstream::request_headers(source, "build-request", &http.headers, &http.auth, trace)?;
    let url = upstream::url_of(source, "build-request", &http.path)?;

    let (deadline, kind) = wd.next_deadline();
    let waited = Instant::now();
    // Boxed (`boxed::boxed_in_place`): the send's future (~2.9 KiB with its timeout) would
    // otherwise be part of the attempt's state while the answer streams.
    let sent = boxed_in_place(|| {
        tokio::time::timeout_at(
            deadline,
            inner.http.send(
                source.settings.trust_env,
                &http.method,
                &url,
                headers,
                http.body,
            ),
        )
    })
    .await;
    st.upstream_wait += waited.elapsed();
    let mut resp = match sent {
        Err(_) => return Err(timeout_failure(kind, &source.settings.name)),
        Ok(Err(UpstreamError::Invalid(m))) => {
            return Err(upstream::fault(source, "build-request", m));
        }
        Ok(Err(e)) => return Err(upstream::transport_failure(source, &e, "network_error")),
        Ok(Ok(r)) => r,
    };

    if !(200..300).contains(&resp.status) {
        let waited = Instant::now();
        let failure = upstream::classify_status(source, resp, wd.total_deadline()).await;
        st.upstream_wait += waited.elapsed();
        return Err(failure);
    }

    let mut acc = Accumulator::default();
    if !preq.stream {
        let waited = Instant::now();
        let body = upstream::read_answer(source, &mut resp, wd.total_deadline()).await;
        st.upstream_wait += waited.elapsed();
        let body = body?;
        let mut deltas = match source.component.instance()?.parse_response(&body)? {
            Ok(d) => d,
            Err(c) => return Err(classified_failure(c)),
        };
        check_passthroughs(&mut deltas, source, "parse-response")?;
        // The whole body arrived at once: one arrival (a time to first token, no gaps).
        let mut token = false;
        for d in &deltas {
            token |= acc.apply(d);
        }
        if token {
            wd.on_token(Instant::now());
        }
        if acc.is_empty_completion() {
            return Err(transient("empty completion", "empty_completion"));
        }
        let usage_source = if acc.usage.is_some() {
            UsageSource::Measured
        } else {
            UsageSource::Unavailable
        };
        return Ok(AttemptAnswer {
            acc,
            usage_source,
            salvaged: false,
        });
    }

    // Streamed answer.
    let continuing = preq.prefill.is_some();
    if !st.committed {
        st.sent_content.clear();
        st.sent_tool_calls = false;
    }
    let mut parser = source.component.stream_parser(&source.info)?;
    let mut framer = SseFramer::with_max_event_bytes(inner.http.limits().sse_max_event_bytes);
    let mut framed = Vec::new();
    let mut batch: Vec<SseEvent> = Vec::new();
    let mut fwd = Forwarding {
        pending: Vec::new(),
        continuing,
    };
    let mut timer = LivenessTimer::new(wd.next_deadline().0);
    loop {
        let (deadline, kind) = wd.next_deadline();
        let waited = Instant::now();
        let chunk = timer.run(deadline, resp.body.chunk()).await;
        st.upstream_wait += waited.elapsed();
        let bytes = match chunk {
            None => return Err(timeout_failure(kind, &source.settings.name)),
            Some(Err(e)) => return Err(upstream::transport_failure(source, &e, "broken_stream")),
            Some(Ok(None)) => break,
            Some(Ok(Some(b))) => b,
        };
        if let Err(e) = framer.try_push(&bytes, &mut framed) {
            return Err(transient(
                format!("{e} from {}", source.settings.name),
                "oversized_event",
            ));
        }
        if framed.is_empty() {
            continue;
        }
        batch.extend(framed.drain(..).map(|e| SseEvent {
            event: e.event,
            data: e.data,
        }));
        let deltas = match parser.parse(&batch)? {
            Ok(d) => d,
            Err(c) => return Err(classified_failure(c)),
        };
        batch.clear();
        handle_deltas(deltas, &mut acc, wd, st, sink, &mut fwd, source).await?;
        if acc.done {
            break;
        }
    }
    if !acc.done {
        if let Some(tail) = framer.finish(&mut framed) {
            framed.push(tail);
        }
        if !framed.is_empty() {
            batch.extend(framed.drain(..).map(|e| SseEvent {
                event: e.event,
                data: e.data,
            }));
            let deltas = match parser.parse(&batch)? {
                Ok(d) => d,
                Err(c) => return Err(classified_failure(c)),
            };
            handle_deltas(deltas, &mut acc, wd, st, sink, &mut fwd, source).await?;
        }
    }
    let rest = parser.finish()?;
    handle_deltas(rest, &mut acc, wd, st, sink, &mut fwd, source).await?;
    drop(parser);

    let mut salvaged = false;
    if !acc.done {
        if acc.is_empty_completion() && !continuing {
            return Err(transient(
                "stream ended before any answer (early EOF)",
                "broken_stream",
            ));
        }
        match source.settings.missing_done {
            MissingDone::Retry => {
                return Err(transient("stream ended without [DONE]", "broken_stream"));
            }
            MissingDone::Salvage => salvaged = true,
        }
    }
    if acc.is_empty_completion() && !continuing {
        return Err(transient("empty completion", "empty_completion"));
    }
    // Whatever is still pending (e.g. only a role delta before a tool call) goes out now.
    if !fwd.pending.is_empty() {
        sink.commit(st, source, &acc, &mut fwd.pending).await?;
    }
    let usage_source = match (&acc.usage, salvaged) {
        (None, _) => UsageSource::Unavailable,
        (Some(_), false) => UsageSource::Measured,
        (Some(_), true) => UsageSource::Estimated,
    };
    Ok(AttemptAnswer {
        acc,
        usage_source,
        salvaged,
    })
}

/// A classified error in a 2xx answer; a transient one is a broken stream.
fn classified_failure(c: crate::plugin::ClassifiedError) -> AttemptFailure {
    let mut failure = upstream::classified(c);
    if let AttemptFailure::Upstream(u) = &mut failure
        && u.class == ErrorClass::Transient
    {
        u.short = "broken_stream";
    }
    failure
}

/// Deltas held until the call commits, and whether this attempt continues a stream.
struct Forwarding {
    pending: Vec<Delta>,
    continuing: bool,
}

/// Check every passthrough delta of a plugin's batch (`passthrough::check`): a bad one is a
/// fault of the plugin's `function`; one left with nothing to carry is removed.
fn check_passthroughs(
    deltas: &mut Vec<Delta>,
    source: &SourceRuntime,
    function: &'static str,
) -> Result<(), AttemptFailure> {
    if !deltas.iter().any(|d| matches!(d, Delta::Passthrough(_))) {
        return Ok(());
    }
    let mut bad = None;
    deltas.retain_mut(|d| match d {
        Delta::Passthrough(p) => match passthrough::check(p) {
            Ok(keep) => keep,
            Err(e) => {
                bad.get_or_insert(e);
                false
            }
        },
        _ => true,
    });
    match bad {
        Some(e) => Err(upstream::fault(source, function, e)),
        None => Ok(()),
    }
}

/// Whether a delta goes to the client (a continuation streams only the remainder: no
/// second role, no new reasoning). A passthrough goes with the delta after it.
fn forwarded(d: &Delta, continuing: bool) -> bool {
    match d {
        Delta::Role(_)
        | Delta::Reasoning(_)
        | Delta::ReasoningSignature(_)
        | Delta::ReasoningEncrypted(_) => !continuing,
        Delta::Content(_) | Delta::Refusal(_) | Delta::ToolCall(_) | Delta::Finish(_) => true,
        Delta::Usage(_) | Delta::Model(_) | Delta::Done | Delta::Passthrough(_) => false,
    }
}

/// Check the batch's passthrough deltas and give each one with choice- or message-level
/// fields a delta to be written with: when the delta after it is not forwarded, an empty
/// content delta is inserted (the encoder writes the fields into its chunk). One with only
/// top-level fields and nothing after it is recorded but not forwarded.
fn prepare_passthroughs(
    deltas: &mut Vec<Delta>,
    source: &SourceRuntime,
    continuing: bool,
) -> Result<(), AttemptFailure> {
    check_passthroughs(deltas, source, "stream-parser")?;
    let mut i = 0;
    while i < deltas.len() {
        if let Delta::Passthrough(p) = &deltas[i]
            && (p.choice_json.is_some() || p.message_json.is_some())
            && !deltas.get(i + 1).is_some_and(|n| forwarded(n, continuing))
        {
            deltas.insert(i + 1, Delta::Content(String::new()));
        }
        i += 1;
    }
    Ok(())
}

async fn handle_deltas(
    mut deltas: Vec<Delta>,
    acc: &mut Accumulator,
    wd: &mut Watchdog,
    st: &mut CallState,
    sink: &mut Sink,
    fwd: &mut Forwarding,
    source: &SourceRuntime,
) -> Result<(), AttemptFailure> {
    let continuing = fwd.continuing;
    if deltas.is_empty() {
        return Ok(());
    }
    prepare_passthroughs(&mut deltas, source, continuing)?;
    let now = Instant::now();
    // Deltas of a committed call, forwarded together after the loop (one hand-over per
    // upstream read).
    let mut committed = Vec::new();
    let mut deltas = deltas.into_iter().peekable();
    while let Some(d) = deltas.next() {
        let token = acc.apply(&d);
        if token {
            wd.on_token(now);
        }
        if matches!(d, Delta::Usage(_)) {
            // Kept where a cancelled attempt's row can read it (`rows::AttemptRowGuard`).
            st.attempt_usage = acc.usage;
        }
        let forward = match &d {
            Delta::Passthrough(_) => deltas.peek().is_some_and(|n| forwarded(n, continuing)),
            other => forwarded(other, continuing),
        };
        if !forward || !sink.forwards() {
            continue;
        }
        match &d {
            Delta::Content(c) => st.sent_content.push_str(c),
            Delta::ToolCall(_) => st.sent_tool_calls = true,
            _ => {}
        }
        if st.committed {
            committed.push(d);
        } else {
            fwd.pending.push(d);
            if token {
                sink.commit(st, source, acc, &mut fwd.pending).await?;
            }
        }
    }
    Ok(sink.send_deltas(committed).await?)
}
