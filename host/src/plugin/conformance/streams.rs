//! Streamed transcripts (`streams.json`: golden and generic `.sse` files → expected deltas,
//! framed exactly as the host frames them and replayed in one batch and one event per batch)
//! and non-streamed bodies (`responses.json`).

use std::sync::Arc;

use serde_json::Value;

use super::fixtures::{self, ResponsesFile, StreamCase, StreamsFile};
use super::provider::{applies, load, own};
use super::report::{Case, Report, delta_list_diff, shorten};
use super::{CheckOptions, selected};
use crate::plugin::{
    ClassifiedError, Delta, ProviderComponent, SourceInfo, SseEvent, delta_to_json, error_class_str,
};
use crate::transport::SseFramer;

/// Run the stream and response cases.
pub(super) fn run(c: &Arc<ProviderComponent>, opts: &CheckOptions, report: &mut Report) {
    if let Some(file) =
        load::<StreamsFile>(report, own(opts, c), "conformance/provider/streams.json")
    {
        for case in &file.cases {
            let name = format!("streams::{}", case.name);
            if !selected(opts, &name) || !applies(&case.applies, c.info()) {
                continue;
            }
            let mut out = report.case(name);
            stream_case(c, case, &mut out, own(opts, c));
            report.finish(out);
        }
    }
    if let Some(file) =
        load::<ResponsesFile>(report, own(opts, c), "conformance/provider/responses.json")
    {
        for case in &file.cases {
            let name = format!("responses::{}", case.name);
            if !selected(opts, &name) || !applies(&case.applies, c.info()) {
                continue;
            }
            let mut out = report.case(name);
            match case.body.to_bytes() {
                Ok(body) => {
                    if let Some(parsed) = out.call("parse-response", || {
                        c.instance().and_then(|mut i| i.parse_response(&body))
                    }) {
                        judge(
                            &mut out,
                            "parse-response",
                            parsed,
                            case.expected.as_ref(),
                            case.error.as_ref(),
                        );
                    }
                }
                Err(e) => out.fail(e),
            }
            report.finish(out);
        }
    }
}

/// The source a stream parser is created for (the transcripts do not depend on it).
pub(super) fn stream_source() -> SourceInfo {
    SourceInfo {
        model: "conformance-model".into(),
        base_url: "https://upstream.invalid/v1".into(),
        enable_thinking: Some(true),
        extra_body_json: "{}".into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    }
}

/// Frame an upstream body as the host does: events split at blank lines, comments dropped,
/// an unterminated last event still delivered at EOF.
pub(super) fn frame(bytes: &[u8]) -> Vec<SseEvent> {
    let mut framer = SseFramer::new();
    let mut framed = Vec::new();
    framer.push(bytes, &mut framed);
    if let Some(tail) = framer.finish(&mut framed) {
        framed.push(tail);
    }
    framed
        .into_iter()
        .map(|e| SseEvent {
            event: e.event,
            data: e.data,
        })
        .collect()
}

/// Replay events on a fresh parser in batches of `batch` events, then `finish`. `Err` is
/// the first classified error `parse` returned; `None` means the plugin faulted (noted).
pub(super) fn replay(
    c: &Arc<ProviderComponent>,
    events: &[SseEvent],
    batch: usize,
    out: &mut Case,
) -> Option<Result<Vec<Delta>, ClassifiedError>> {
    let source = stream_source();
    let mut parser = out.call("stream-parser.constructor", || {
        c.instance().and_then(|i| i.into_stream_parser(&source))
    })?;
    let mut deltas = Vec::new();
    for chunk in events.chunks(batch.max(1)) {
        match out.call("stream-parser.parse", || parser.parse(chunk))? {
            Ok(d) => deltas.extend(d),
            Err(e) => return Some(Err(e)),
        }
    }
    deltas.extend(out.call("stream-parser.finish", || parser.finish())?);
    Some(Ok(deltas))
}

fn stream_case(
    c: &Arc<ProviderComponent>,
    case: &StreamCase,
    out: &mut Case,
    source: fixtures::Source<'_>,
) {
    let sse = match source.file(&case.sse) {
        Ok(s) => s,
        Err(e) => {
            out.fail(e);
            return;
        }
    };
    let expected: Option<Value> = match &case.expected {
        Some(path) => match source.json(path) {
            Ok(v) => Some(v),
            Err(e) => {
                out.fail(e);
                return;
            }
        },
        None => None,
    };
    let events = frame(sse.as_bytes());
    for (label, batch) in [
        ("all events in one batch", events.len()),
        ("one event per batch", 1),
    ] {
        let Some(got) = replay(c, &events, batch, out) else {
            return;
        };
        let before = out.failed();
        judge(out, label, got, expected.as_ref(), case.error.as_ref());
        if out.failed() && !before {
            // The other batching would most likely repeat the same difference.
            return;
        }
    }
}

/// Compare what a parse gave with the expected deltas or error class.
fn judge(
    out: &mut Case,
    label: &str,
    got: Result<Vec<Delta>, ClassifiedError>,
    expected: Option<&Value>,
    error: Option<&fixtures::ErrorClassExpect>,
) {
    match (got, expected, error) {
        (Ok(deltas), Some(Value::Array(want)), _) => {
            let got: Vec<Value> = deltas.iter().map(delta_to_json).collect();
            if let Some(d) = delta_list_diff(want, &got) {
                out.fail(format!("{label}: {d}"));
            }
        }
        (Ok(deltas), _, Some(err)) => out.fail(format!(
            "{label}: expected an error of class {}, got {} deltas: {}",
            err.class.as_slice().join(" or "),
            deltas.len(),
            shorten(
                &Value::Array(deltas.iter().map(delta_to_json).collect()).to_string(),
                300
            )
        )),
        (Err(e), _, Some(err)) => {
            let class = error_class_str(e.class).to_string();
            if !err.class.accepts(&class) {
                out.fail(format!(
                    "{label}: error classified as {class}, expected {} (message: {:?})",
                    err.class.as_slice().join(" or "),
                    shorten(&e.message, 120)
                ));
            }
        }
        (Err(e), _, None) => out.fail(format!(
            "{label}: expected deltas, got an error: {} ({:?})",
            error_class_str(e.class),
            shorten(&e.message, 200)
        )),
        (Ok(_), _, None) => out.fail(format!(
            "{label}: the fixture has neither `expected` deltas nor an `error`"
        )),
    }
}
