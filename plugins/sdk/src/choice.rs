//! Turning choice 0 of an OpenAI chat chunk (`delta`) or response (`message`) into deltas,
//! in the contract's order: role, reasoning, content, refusal, tool calls, finish.

use serde_json::Value;

use crate::fields::{finish, reasoning, text, tool_calls};
use crate::{Delta, ThinkSplitter};

/// Append the deltas of one choice to `out`. `part` is `"delta"` (stream chunk) or
/// `"message"` (whole response). Content goes through `think` when given; the splitter is
/// flushed before a finish reason, since nothing of this choice follows it.
pub(crate) fn push_choice(
    choice: &Value,
    part: &str,
    mut think: Option<&mut ThinkSplitter>,
    out: &mut Vec<Delta>,
) {
    if let Some(body) = choice.get(part) {
        if let Some(role) = text(body, "role") {
            out.push(Delta::Role(role.to_owned()));
        }
        if let Some(r) = reasoning(body) {
            out.push(Delta::Reasoning(r.to_owned()));
        }
        if let Some(content) = text(body, "content") {
            match think.as_deref_mut() {
                Some(split) => split.push(content, out),
                None => out.push(Delta::Content(content.to_owned())),
            }
        }
        if let Some(refusal) = text(body, "refusal") {
            out.push(Delta::Refusal(refusal.to_owned()));
        }
        out.extend(tool_calls(body).map(Delta::ToolCall));
    }
    if let Some(reason) = finish(choice) {
        if let Some(split) = think {
            split.finish(out);
        }
        out.push(Delta::Finish(reason));
    }
}
