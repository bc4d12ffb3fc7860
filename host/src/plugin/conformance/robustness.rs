//! Robustness (`robustness.json`): garbage, huge (8 MiB) and non-UTF-8 inputs to every
//! provider function must give typed answers — never a trap, an exhausted time budget or
//! the memory cap.

use std::sync::Arc;

use super::fixtures::{RobustnessCase, RobustnessFile};
use super::provider::load;
use super::report::{Case, Report, shorten};
use super::streams::stream_source;
use super::{CheckOptions, selected};
use crate::plugin::{PluginChatRequest, ProviderComponent, SseEvent};

/// The longest classified-error message a provider should produce from any body, in bytes:
/// messages go to clients and logs, so cap the upstream's text.
const MAX_ERROR_MESSAGE_BYTES: usize = 16 * 1024;

/// Run the robustness cases.
pub(super) fn run(c: &Arc<ProviderComponent>, opts: &CheckOptions, report: &mut Report) {
    let Some(file) = load::<RobustnessFile>(
        report,
        super::fixtures::Source::EMBEDDED,
        "conformance/provider/robustness.json",
    ) else {
        return;
    };
    for case in &file.cases {
        let name = format!("robustness::{}", case.name);
        if !selected(opts, &name) {
            continue;
        }
        let mut out = report.case(name);
        if let Some(ms) = case.budget_ms {
            out.allow(std::time::Duration::from_millis(ms));
        }
        let foreign = case.openai_shaped
            && !matches!(
                super::provider::own(opts, c),
                super::fixtures::Source::Embedded
            );
        robustness_case(c, case, foreign, &mut out);
        report.finish(out);
    }
}

/// What a call gave: a typed success, a typed error (with its description), or nothing
/// (the plugin faulted; already noted).
enum Answer {
    Ok,
    Error(String),
}

fn robustness_case(
    c: &Arc<ProviderComponent>,
    case: &RobustnessCase,
    foreign: bool,
    out: &mut Case,
) {
    let input = match case.input.to_bytes() {
        Ok(b) => b,
        Err(e) => {
            out.fail(e);
            return;
        }
    };
    let answer = match case.call.as_str() {
        "build-request" => {
            let req = PluginChatRequest {
                messages_json: String::from_utf8_lossy(&input).into_owned(),
                overlay_json: "{}".into(),
                stream: false,
                prefill: None,
            };
            let source = stream_source();
            out.call("build-request", || {
                c.instance()
                    .and_then(|mut i| i.build_request(&req, &source))
            })
            .map(|r| match r {
                Ok(_) => Answer::Ok,
                Err(e) => Answer::Error(format!("{e:?}")),
            })
        }
        "parse-response" => out
            .call("parse-response", || {
                c.instance().and_then(|mut i| i.parse_response(&input))
            })
            .map(|r| match r {
                Ok(_) => Answer::Ok,
                Err(e) => Answer::Error(e.message),
            }),
        "stream-parse" => {
            let events = [SseEvent {
                event: case.event.clone(),
                data: String::from_utf8_lossy(&input).into_owned(),
            }];
            let source = stream_source();
            let parsed = out.call("stream-parser.constructor", || {
                c.instance().and_then(|i| i.into_stream_parser(&source))
            });
            match parsed {
                None => None,
                Some(mut parser) => match out.call("stream-parser.parse", || parser.parse(&events))
                {
                    None => None,
                    Some(Err(e)) => Some(Answer::Error(e.message)),
                    Some(Ok(_)) => out
                        .call("stream-parser.finish", || parser.finish())
                        .map(|_| Answer::Ok),
                },
            }
        }
        "classify-error" => {
            let status = case.status.unwrap_or(500);
            out.call("classify-error", || {
                c.instance()
                    .and_then(|mut i| i.classify_error(status, &[], &input))
            })
            .map(|e| {
                if e.message.len() > MAX_ERROR_MESSAGE_BYTES {
                    out.fail(format!(
                        "the message is {} bytes long; cap the upstream's text (at most {MAX_ERROR_MESSAGE_BYTES} bytes)",
                        e.message.len()
                    ));
                }
                Answer::Ok
            })
        }
        other => {
            out.fail(format!("unknown call `{other}` in the fixture"));
            return;
        }
    };
    let Some(answer) = answer else {
        return;
    };
    let expect = if foreign {
        "no-fault"
    } else {
        case.expect.as_str()
    };
    match (expect, answer) {
        ("no-fault", _) | ("ok", Answer::Ok) | ("error", Answer::Error(_)) => {}
        ("ok", Answer::Error(e)) => out.fail(format!(
            "{} returned an error, expected an answer: {}",
            case.call,
            shorten(&e, 200)
        )),
        ("error", Answer::Ok) => out.fail(format!(
            "{} accepted the input, expected a typed error ({} bytes of input)",
            case.call,
            input.len()
        )),
        (other, _) => out.fail(format!("unknown expectation `{other}` in the fixture")),
    }
}
