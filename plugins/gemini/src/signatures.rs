//! Handing an assistant message's `reasoning_details` back to Gemini as thought parts and
//! `thoughtSignature`s, the inverse of what [`crate::answer`] emits.
//!
//! Only entries whose `format` is `google-gemini-v1` are read; every other entry (another
//! vendor's signatures after a failover, entries without a format) is dropped silently.
//! Strings are copied as they are (byte-exact). Of our entries:
//!
//! - `reasoning.text` with a non-empty `signature` → a `{text, thought: true,
//!   thoughtSignature}` part, all of them first in the turn in their order (Gemini reads
//!   nothing from unsigned thought text, so a `reasoning.text` without signature is dropped);
//! - `reasoning.encrypted` with an `id` → `thoughtSignature` on the turn's `functionCall` part
//!   with that id (dropped when no call of the turn has it: a signature in the wrong place is
//!   worse than none);
//! - `reasoning.encrypted` without `id` → `thoughtSignature` on the turn's first non-thought
//!   part that has none yet; when there is no such part, an empty text part carrying it is
//!   appended (Gemini itself streams signatures on empty text parts).
//!
//! Calls are served first, so a message-level signature never takes a call's place.

use serde_json::Value;

use crate::contents::Part;

/// Apply `details` (the `reasoning_details` array) of `format` to the turn's `parts`
/// (see the module documentation).
pub fn hand_back(details: &[Value], format: &str, parts: &mut Vec<Part>) {
    let ours = details
        .iter()
        .filter(|d| d.get("format").and_then(Value::as_str) == Some(format));
    let mut thoughts = Vec::new();
    let mut by_id: Vec<(&str, &str)> = Vec::new();
    let mut whole: Vec<&str> = Vec::new();
    for entry in ours {
        let text = |key: &str| entry.get(key).and_then(Value::as_str);
        match text("type") {
            Some("reasoning.text") => {
                if let Some(signature) = text("signature").filter(|s| !s.is_empty()) {
                    thoughts.push(Part {
                        text: Some(text("text").unwrap_or_default().to_owned()),
                        thought: Some(true),
                        thought_signature: Some(signature.to_owned()),
                        ..Part::default()
                    });
                }
            }
            Some("reasoning.encrypted") => {
                let Some(data) = text("data").filter(|s| !s.is_empty()) else {
                    continue;
                };
                match text("id").filter(|s| !s.is_empty()) {
                    Some(id) => by_id.push((id, data)),
                    None => whole.push(data),
                }
            }
            _ => {}
        }
    }
    for (id, data) in by_id {
        let call = parts.iter_mut().find(|p| {
            p.thought_signature.is_none()
                && p.function_call
                    .as_ref()
                    .is_some_and(|c| c.id.as_deref() == Some(id))
        });
        if let Some(part) = call {
            part.thought_signature = Some(data.to_owned());
        }
    }
    for data in whole {
        match parts
            .iter_mut()
            .find(|p| !p.is_thought() && p.thought_signature.is_none())
        {
            Some(part) => part.thought_signature = Some(data.to_owned()),
            None => parts.push(Part {
                text: Some(String::new()),
                thought_signature: Some(data.to_owned()),
                ..Part::default()
            }),
        }
    }
    if !thoughts.is_empty() {
        thoughts.append(parts);
        *parts = thoughts;
    }
}
