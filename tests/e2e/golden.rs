//! Golden SSE transcripts (`tests/fixtures/golden/`) through the real first-party wasm
//! components and the host's SSE framing: exactly the expected deltas, whether the events
//! arrive one per batch or all in one batch, and whatever the read boundaries.

use polygateway::config::FirstParty;
use polygateway::plugin::{
    PluginEngine, PluginLimits, ProviderComponent, SourceInfo, SseEvent, builtin_provider_bytes,
    delta_to_json,
};
use polygateway::transport::SseFramer;
use polygateway_tests::fixture;
use serde_json::Value;

fn frame(bytes: &[u8], read_size: usize) -> Vec<SseEvent> {
    let mut f = SseFramer::new();
    let mut out = Vec::new();
    for chunk in bytes.chunks(read_size) {
        f.push(chunk, &mut out);
    }
    if let Some(t) = f.finish(&mut out) {
        out.push(t);
    }
    out.into_iter()
        .map(|e| SseEvent {
            event: e.event,
            data: e.data,
        })
        .collect()
}

#[test]
fn golden_transcripts_parse_to_the_expected_deltas() {
    let engine = PluginEngine::new(PluginLimits::default(), None).unwrap();
    let cases: Vec<Value> =
        serde_json::from_slice(&std::fs::read(fixture("golden/cases.json")).unwrap()).unwrap();
    assert!(cases.len() >= 4, "the four required cases are listed");
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let provider = FirstParty::from_name(case["provider"].as_str().unwrap()).unwrap();
        let component =
            ProviderComponent::load(&engine, provider.name(), builtin_provider_bytes(provider))
                .unwrap();
        let sse = std::fs::read(fixture(&format!("golden/{name}.sse"))).unwrap();
        let expected: Value = serde_json::from_slice(
            &std::fs::read(fixture(&format!("golden/{name}.expected.json"))).unwrap(),
        )
        .unwrap();
        let source = SourceInfo {
            model: "golden-model".into(),
            base_url: "http://upstream.invalid/v1".into(),
            enable_thinking: Some(true),
            extra_body_json: "{}".into(),
            max_tokens: None,
            thinking_budget_tokens: None,
        };
        for (read_size, batch) in [(sse.len(), usize::MAX), (1, 1), (7, 3), (64, 1)] {
            let events = frame(&sse, read_size);
            let mut parser = component
                .instance()
                .unwrap()
                .into_stream_parser(&source)
                .unwrap();
            let mut got = Vec::new();
            for chunk in events.chunks(batch.min(events.len()).max(1)) {
                got.extend(parser.parse(chunk).unwrap().unwrap());
            }
            got.extend(parser.finish().unwrap());
            let got: Vec<Value> = got.iter().map(delta_to_json).collect();
            assert_eq!(
                Value::Array(got),
                expected,
                "{name}: read size {read_size}, batch {batch}"
            );
        }
    }
}
