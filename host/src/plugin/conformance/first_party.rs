//! The protocol fixture sets of the first-party providers that do not speak OpenAI chat
//! completions, embedded so `polygateway plugin check builtin:<name>` runs a component's own
//! transcripts without files beside the binary (`plugin check FILE.wasm --fixtures DIR` reads
//! the same layout from a directory). Each set is a component's `conformance/` directory.

/// `plugins/anthropic/conformance/`, by path inside it.
const ANTHROPIC: &[(&str, &str)] = &[
    (
        "requests.json",
        include_str!("../../../../plugins/anthropic/conformance/requests.json"),
    ),
    (
        "errors.json",
        include_str!("../../../../plugins/anthropic/conformance/errors.json"),
    ),
    (
        "responses.json",
        include_str!("../../../../plugins/anthropic/conformance/responses.json"),
    ),
    (
        "streams.json",
        include_str!("../../../../plugins/anthropic/conformance/streams.json"),
    ),
    (
        "streams/docs_basic.expected.json",
        include_str!("../../../../plugins/anthropic/conformance/streams/docs_basic.expected.json"),
    ),
    (
        "streams/docs_basic.sse",
        include_str!("../../../../plugins/anthropic/conformance/streams/docs_basic.sse"),
    ),
    (
        "streams/docs_extended_thinking.expected.json",
        include_str!(
            "../../../../plugins/anthropic/conformance/streams/docs_extended_thinking.expected.json"
        ),
    ),
    (
        "streams/docs_extended_thinking.sse",
        include_str!(
            "../../../../plugins/anthropic/conformance/streams/docs_extended_thinking.sse"
        ),
    ),
    (
        "streams/docs_tool_use.expected.json",
        include_str!(
            "../../../../plugins/anthropic/conformance/streams/docs_tool_use.expected.json"
        ),
    ),
    (
        "streams/docs_tool_use.sse",
        include_str!("../../../../plugins/anthropic/conformance/streams/docs_tool_use.sse"),
    ),
    (
        "streams/error_event_mid_stream.sse",
        include_str!(
            "../../../../plugins/anthropic/conformance/streams/error_event_mid_stream.sse"
        ),
    ),
    (
        "streams/server_tools_and_unknown_events.expected.json",
        include_str!(
            "../../../../plugins/anthropic/conformance/streams/server_tools_and_unknown_events.expected.json"
        ),
    ),
    (
        "streams/server_tools_and_unknown_events.sse",
        include_str!(
            "../../../../plugins/anthropic/conformance/streams/server_tools_and_unknown_events.sse"
        ),
    ),
    (
        "streams/thinking_redacted_tools_cached.expected.json",
        include_str!(
            "../../../../plugins/anthropic/conformance/streams/thinking_redacted_tools_cached.expected.json"
        ),
    ),
    (
        "streams/thinking_redacted_tools_cached.sse",
        include_str!(
            "../../../../plugins/anthropic/conformance/streams/thinking_redacted_tools_cached.sse"
        ),
    ),
    (
        "streams/truncated_no_message_stop.expected.json",
        include_str!(
            "../../../../plugins/anthropic/conformance/streams/truncated_no_message_stop.expected.json"
        ),
    ),
    (
        "streams/truncated_no_message_stop.sse",
        include_str!(
            "../../../../plugins/anthropic/conformance/streams/truncated_no_message_stop.sse"
        ),
    ),
];

/// The embedded fixture set of first-party provider `name`, if it has its own.
pub(crate) fn set(name: &str) -> Option<&'static [(&'static str, &'static str)]> {
    match name {
        "anthropic" => Some(ANTHROPIC),
        _ => None,
    }
}
