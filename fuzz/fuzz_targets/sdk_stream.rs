//! The guest SDK's OpenAI stream parser (`polygateway_plugin_sdk::ChatStreamParser`, run
//! natively) on arbitrary events: the input is split at `\n\n` into event data, an event
//! starting with `@name\n` gets that `event:` name. Properties: it never panics, with and
//! without inline `<think>` splitting, batch by batch or all at once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use polygateway_plugin_sdk::{ChatStreamParser, SseEvent};

fuzz_target!(|input: &str| {
    let events: Vec<SseEvent> = input
        .split("\n\n")
        .map(
            |chunk| match chunk.strip_prefix('@').and_then(|c| c.split_once('\n')) {
                Some((name, data)) => SseEvent {
                    event: Some(name.to_string()),
                    data: data.to_string(),
                },
                None => SseEvent {
                    event: None,
                    data: chunk.to_string(),
                },
            },
        )
        .collect();
    for think in [false, true] {
        let mut parser = ChatStreamParser::new(think);
        let _ = parser.parse(&events);
        let _ = parser.finish();
        let mut parser = ChatStreamParser::new(think);
        for e in &events {
            if parser.parse(std::slice::from_ref(e)).is_err() {
                break;
            }
        }
        let _ = parser.finish();
    }
});
