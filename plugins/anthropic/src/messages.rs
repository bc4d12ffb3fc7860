//! The OpenAI `messages` array → Anthropic's `system` blocks and alternating `messages`
//! turns: system and developer messages are lifted into `system`, `tool` messages become
//! `tool_result` blocks of a user turn, assistant messages carry their thinking blocks first,
//! then text, then `tool_use` blocks, and consecutive turns of one role are merged.

use polygateway_plugin_sdk::BuildError;
use polygateway_plugin_sdk::request::parse_messages;
use serde_json::value::RawValue;

use crate::assistant::{thinking_blocks, tool_use_blocks};
use crate::content::{Allowed, Part, invalid, parts};
use crate::json::{self, Kind, Obj};

/// Anthropic's two conversation roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

/// One Anthropic turn under construction.
#[derive(Debug)]
struct Turn {
    role: Role,
    parts: Vec<Part>,
}

/// A converted conversation: the `system` text blocks and the turns.
#[derive(Debug, Default)]
pub(crate) struct Conversation {
    system: Vec<String>,
    turns: Vec<Turn>,
}

impl Conversation {
    /// Convert `chat-request.messages-json`.
    ///
    /// Errors: not a JSON array, a message without a known string `role`, a malformed part,
    /// tool call or tool message → `invalid-request` naming the message index (and part);
    /// a part type Anthropic cannot take → `unsupported`.
    pub(crate) fn from_messages_json(messages_json: &str) -> Result<Self, BuildError> {
        let messages =
            parse_messages(messages_json).map_err(|e| BuildError::InvalidRequest(e.to_string()))?;
        let mut conv = Self::default();
        for (i, message) in messages.iter().enumerate() {
            conv.add(message, &format!("messages[{i}]"))?;
        }
        Ok(conv)
    }

    /// Add one OpenAI message (`at` names it).
    fn add(&mut self, message: &RawValue, at: &str) -> Result<(), BuildError> {
        let obj =
            json::object(message.get()).ok_or_else(|| invalid(at, "expected a message object"))?;
        let role = json::string_field(&obj, "role")
            .ok_or_else(|| invalid(at, "a message needs a string `role`"))?;
        let content = json::field(&obj, "content");
        match role.as_str() {
            "system" | "developer" => {
                let texts = parts(content, at, Allowed::TextOnly)?;
                self.system.extend(texts.into_iter().map(Part::into_block));
            }
            "user" => self.push(Role::User, parts(content, at, Allowed::TextAndImages)?),
            "assistant" => {
                let mut all: Vec<Part> = thinking_blocks(json::field(&obj, "reasoning_details"))
                    .into_iter()
                    .map(Part::Block)
                    .collect();
                all.extend(parts(content, at, Allowed::TextOnly)?);
                all.extend(
                    tool_use_blocks(json::field(&obj, "tool_calls"), at)?
                        .into_iter()
                        .map(Part::Block),
                );
                self.push(Role::Assistant, all);
            }
            "tool" => {
                let id = json::raw_string(&obj, "tool_call_id")
                    .filter(|s| !json::is_empty_string(s))
                    .ok_or_else(|| invalid(at, "a tool message needs a string `tool_call_id`"))?;
                let result = tool_result_content(content, at)?;
                // `is_error: true` (the Messages dialect's carry of Anthropic's flag).
                let is_error = json::field(&obj, "is_error").is_some_and(|v| v.get() == "true");
                let block = Obj::new()
                    .str("type", "tool_result")
                    .raw("tool_use_id", id)
                    .opt("content", result.as_deref())
                    .opt("is_error", is_error.then_some("true"))
                    .build();
                self.push(Role::User, vec![Part::Block(block)]);
            }
            other => return Err(invalid(at, &format!("unknown role `{other}`"))),
        }
        Ok(())
    }

    /// Append parts to the conversation as `role`, merging with a last turn of that role.
    fn push(&mut self, role: Role, parts: Vec<Part>) {
        if parts.is_empty() {
            return;
        }
        match self.turns.last_mut() {
            Some(last) if last.role == role => last.parts.extend(parts),
            _ => self.turns.push(Turn { role, parts }),
        }
    }

    /// End with the host's prefill as assistant text for the model to continue. Trailing
    /// whitespace is trimmed (Anthropic refuses a final assistant text that ends with it); a
    /// prefill that is only whitespace adds nothing.
    pub(crate) fn push_prefill(&mut self, prefill: &str) {
        let text = prefill.trim_end();
        if !text.is_empty() {
            self.push(Role::Assistant, vec![Part::Text(json::string(text))]);
        }
    }

    /// The `system` value (an array of text blocks), when there is any system text.
    pub(crate) fn system_json(&self) -> Option<String> {
        (!self.system.is_empty()).then(|| json::list(&self.system))
    }

    /// The `messages` value: `{"role","content"}` per turn, `content` a string when the
    /// turn is exactly one plain text, else an array of blocks.
    pub(crate) fn messages_json(self) -> String {
        let turns: Vec<String> = self
            .turns
            .into_iter()
            .map(|turn| {
                let content = match turn.parts.as_slice() {
                    [Part::Text(text)] => text.clone(),
                    _ => {
                        let blocks: Vec<String> =
                            turn.parts.into_iter().map(Part::into_block).collect();
                        json::list(&blocks)
                    }
                };
                Obj::new()
                    .str("role", turn.role.as_str())
                    .raw("content", &content)
                    .build()
            })
            .collect();
        json::list(&turns)
    }
}

/// The `content` of a `tool_result` block from a tool message's content: a non-empty string
/// verbatim, or text and image parts as blocks; none when empty.
fn tool_result_content(content: Option<&RawValue>, at: &str) -> Result<Option<String>, BuildError> {
    match content {
        Some(c) if json::kind(c) == Kind::String => {
            Ok((!json::is_empty_string(c.get())).then(|| c.get().to_owned()))
        }
        other => {
            let blocks: Vec<String> = parts(other, at, Allowed::TextAndImages)?
                .into_iter()
                .map(Part::into_block)
                .collect();
            Ok((!blocks.is_empty()).then(|| json::list(&blocks)))
        }
    }
}
