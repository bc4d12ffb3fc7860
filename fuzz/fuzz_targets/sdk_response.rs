//! The guest SDK's non-streamed chat-completion parser
//! (`polygateway_plugin_sdk::parse_chat_response`, run natively) on arbitrary bytes.
//! Property: it never panics, with and without inline `<think>` splitting.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    for think in [false, true] {
        let _ = polygateway_plugin_sdk::parse_chat_response(body, think);
    }
});
