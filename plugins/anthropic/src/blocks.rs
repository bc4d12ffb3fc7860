//! Anthropic content blocks (of a whole message, or the head of a streamed block in
//! `content_block_start`) → deltas: `text`, `thinking` (with its signature),
//! `redacted_thinking`, `tool_use`. Other block types (server tools and their results, …)
//! carry nothing the contract has a delta for and are skipped.

use polygateway_plugin_sdk::bindings::polygateway::plugin::types::{
    EncryptedReasoning, ReasoningSignature,
};
use polygateway_plugin_sdk::{Delta, ToolCallDelta};

use crate::assistant::REASONING_FORMAT;
use crate::json::{self, RawObject};

/// What a block is, for the deltas that may follow it in a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BlockKind {
    /// A `text` block.
    Text,
    /// A `thinking` block.
    Thinking,
    /// A `tool_use` block: the tool call with this index (its ordinal among the message's
    /// tool_use blocks), and its `input` as compact JSON text (`{}` when absent).
    Tool { index: u32, input: String },
    /// Anything else (`redacted_thinking`, server tools, unknown types).
    Other,
}

/// The deltas of one block, appended to `out`; `tools` counts the tool_use blocks seen so
/// far (the next one's index). A tool_use block gives its id and name only: the caller
/// sends its arguments.
pub(crate) fn block_deltas(
    block: &RawObject<'_>,
    tools: &mut u32,
    out: &mut Vec<Delta>,
) -> BlockKind {
    match json::string_field(block, "type").as_deref() {
        Some("text") => {
            if let Some(text) = json::text_field(block, "text") {
                out.push(Delta::Content(text));
            }
            BlockKind::Text
        }
        Some("thinking") => {
            if let Some(text) = json::text_field(block, "thinking") {
                out.push(Delta::Reasoning(text));
            }
            if let Some(signature) = json::text_field(block, "signature") {
                out.push(signature_delta(signature));
            }
            BlockKind::Thinking
        }
        Some("redacted_thinking") => {
            if let Some(data) = json::text_field(block, "data") {
                out.push(Delta::ReasoningEncrypted(EncryptedReasoning {
                    data,
                    id: None,
                    format: REASONING_FORMAT.to_owned(),
                }));
            }
            BlockKind::Other
        }
        Some("tool_use") => {
            let index = *tools;
            *tools = tools.saturating_add(1);
            out.push(Delta::ToolCall(ToolCallDelta {
                index,
                id: json::text_field(block, "id"),
                name: json::text_field(block, "name"),
                arguments: None,
            }));
            let input = json::field(block, "input")
                .map_or_else(|| "{}".to_owned(), |raw| json::compact(raw.get()));
            BlockKind::Tool { index, input }
        }
        _ => BlockKind::Other,
    }
}

/// The signature that closes a thinking block.
pub(crate) fn signature_delta(signature: String) -> Delta {
    Delta::ReasoningSignature(ReasoningSignature {
        signature,
        format: REASONING_FORMAT.to_owned(),
    })
}

/// A fragment of the arguments of tool call `index`.
pub(crate) fn arguments_delta(index: u32, arguments: String) -> Delta {
    Delta::ToolCall(ToolCallDelta {
        index,
        id: None,
        name: None,
        arguments: Some(arguments),
    })
}
