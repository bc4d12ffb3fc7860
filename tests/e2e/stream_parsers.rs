//! Stream parsers sharing instances (`host/src/plugin/stream_parser.rs`): up to
//! `streams_per_instance` parsers of one component live in one instance, each keeps its own
//! state while their calls interleave, the instances stay warm for the next streams, and a
//! fault in one parser's call ends exactly the parsers of its instance (with a message naming
//! `PGW_PLUGIN_STREAMS_PER_INSTANCE`), while `streams_per_instance = 1` isolates every parser.

use polygateway::config::FirstParty;
use polygateway::plugin::{
    PluginEngine, PluginError, PluginLimits, ProviderComponent, SourceInfo, SseEvent, StreamParser,
    builtin_provider_bytes, delta_to_json,
};
use serde_json::{Value, json};

fn component(
    per_instance: usize,
    memory_bytes: usize,
    p: FirstParty,
) -> std::sync::Arc<ProviderComponent> {
    let limits = PluginLimits {
        streams_per_instance: per_instance,
        memory_bytes,
        ..PluginLimits::default()
    };
    let engine = PluginEngine::new(limits, None).unwrap();
    ProviderComponent::load(&engine, p.name(), builtin_provider_bytes(p)).unwrap()
}

fn source() -> SourceInfo {
    SourceInfo {
        model: "m".into(),
        base_url: "http://upstream.invalid/v1".into(),
        enable_thinking: None,
        extra_body_json: "{}".into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    }
}

fn parser(c: &std::sync::Arc<ProviderComponent>) -> StreamParser {
    c.instance().unwrap().into_stream_parser(&source()).unwrap()
}

/// One OpenAI chat-completion chunk carrying `content`.
fn chunk(content: &str) -> SseEvent {
    SseEvent {
        event: None,
        data: json!({
            "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]
        })
        .to_string(),
    }
}

fn deltas(p: &mut StreamParser, events: &[SseEvent]) -> Vec<Value> {
    p.parse(events)
        .unwrap()
        .unwrap()
        .iter()
        .map(delta_to_json)
        .collect()
}

/// The deltas of `events` other than the upstream's model name (the openai parser reports it
/// with every chunk that carries one).
fn answer(p: &mut StreamParser, events: &[SseEvent]) -> Vec<Value> {
    let mut d = deltas(p, events);
    d.retain(|d| d.get("model").is_none());
    d
}

/// Stream `i`'s three reads: a `<think>` tag split across the first two (state the parser
/// must carry between calls), then its answer.
fn reads(i: usize) -> [SseEvent; 3] {
    [
        chunk("<thi"),
        chunk(&format!("nk>why {i}</thi")),
        chunk(&format!("nk>answer {i}")),
    ]
}

#[test]
fn parsers_share_instances_up_to_the_limit_and_keep_their_own_state() {
    let shared = component(4, 64 << 20, FirstParty::Qwen);
    let mut parsers: Vec<StreamParser> = (0..10).map(|_| parser(&shared)).collect();
    assert_eq!(shared.shared_stream_parsers(), 10);
    assert_eq!(
        shared.stream_parser_instances(),
        3,
        "10 parsers, 4 per instance"
    );
    // The instance each constructor was checked out with went straight back to the pool.
    assert_eq!(shared.idle_instances(), 1);

    // Interleaved: every parser's first read, then every parser's second, then the third.
    let mut got: Vec<Vec<Value>> = vec![Vec::new(); 10];
    for round in 0..3 {
        for (i, p) in parsers.iter_mut().enumerate() {
            got[i].extend(deltas(p, &reads(i)[round..=round]));
        }
    }
    for (i, p) in parsers.iter_mut().enumerate() {
        got[i].extend(p.finish().unwrap().iter().map(delta_to_json));
    }
    for (i, g) in got.iter().enumerate() {
        let reasoning: String = g.iter().filter_map(|d| d["reasoning"].as_str()).collect();
        let content: String = g.iter().filter_map(|d| d["content"].as_str()).collect();
        assert_eq!(reasoning, format!("why {i}"), "stream {i}: {g:?}");
        assert_eq!(content, format!("answer {i}"), "stream {i}: {g:?}");
    }
    // Exactly what a parser with an instance of its own gives, delta for delta.
    let alone = component(1, 64 << 20, FirstParty::Qwen);
    for (i, g) in got.iter().enumerate() {
        let mut p = parser(&alone);
        let mut want = Vec::new();
        for r in reads(i).chunks(1) {
            want.extend(deltas(&mut p, r));
        }
        want.extend(p.finish().unwrap().iter().map(delta_to_json));
        assert_eq!(g, &want, "stream {i}");
    }
    assert_eq!(
        alone.stream_parser_instances(),
        0,
        "1 per instance: no shared instances"
    );

    // The instances stay warm for the next streams: no new ones while there is room.
    drop(parsers);
    assert_eq!(shared.shared_stream_parsers(), 0);
    assert_eq!(shared.stream_parser_instances(), 3);
    let again: Vec<StreamParser> = (0..12).map(|_| parser(&shared)).collect();
    assert_eq!(
        shared.stream_parser_instances(),
        3,
        "12 parsers fit the 3 instances"
    );
    assert_eq!(shared.shared_stream_parsers(), 12);
    let more = parser(&shared);
    assert_eq!(
        shared.stream_parser_instances(),
        4,
        "the 13th needs a fourth"
    );
    drop((again, more));
    assert_eq!(shared.faults(), 0);
}

/// An event too large for the instance's memory cap: lowering it into the guest traps.
fn oversized() -> SseEvent {
    chunk(&"x".repeat(6 << 20))
}

#[test]
fn a_fault_ends_the_parsers_of_its_instance_and_no_others() {
    let shared = component(2, 4 << 20, FirstParty::OpenAi);
    // Two per instance: a and b share the first instance, c is alone in the second.
    let mut a = parser(&shared);
    let mut b = parser(&shared);
    let mut c = parser(&shared);
    assert_eq!(shared.stream_parser_instances(), 2);
    assert_eq!(
        answer(&mut b, &[chunk("b1")]),
        vec![json!({"content": "b1"})]
    );

    let err = a.parse(&[oversized()]).unwrap_err();
    assert!(
        matches!(&err, PluginError::Fault { plugin, function: "stream-parser.parse", message }
            if plugin == "openai" && message.contains("memory")),
        "{err:?}"
    );
    assert_eq!(shared.faults(), 1);
    assert_eq!(
        shared.stream_parser_instances(),
        1,
        "a's instance was discarded"
    );

    // b lived in the discarded instance: its next call fails, saying why and what to set.
    let err = b.parse(&[chunk("b2")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin openai faulted in stream-parser.parse: the instance this stream's parser shared was discarded after a fault in another stream's call (PGW_PLUGIN_STREAMS_PER_INSTANCE=2 parsers share an instance; 1 isolates every stream)"
    );
    // ... and stays failed, without touching whatever now lives in that host.
    assert_eq!(
        b.finish().unwrap_err().to_string(),
        "plugin openai faulted in stream-parser.finish: the parser's instance was discarded after an earlier fault"
    );
    // c, in the other instance, goes on; only the trap was counted as a fault.
    assert_eq!(
        answer(&mut c, &[chunk("c1")]),
        vec![json!({"content": "c1"})]
    );
    assert_eq!(shared.faults(), 1);

    // a and b leave; new parsers get a fresh instance where theirs was.
    drop((a, b));
    let mut fresh: Vec<StreamParser> = (0..3).map(|_| parser(&shared)).collect();
    assert_eq!(shared.stream_parser_instances(), 2);
    for (i, p) in fresh.iter_mut().enumerate() {
        let text = format!("fresh {i}");
        assert_eq!(answer(p, &[chunk(&text)]), vec![json!({"content": text})]);
    }
    assert_eq!(
        answer(&mut c, &[chunk("c2")]),
        vec![json!({"content": "c2"})]
    );
    assert_eq!(shared.faults(), 1);
}

#[test]
fn one_parser_per_instance_confines_a_fault_to_its_stream() {
    let alone = component(1, 4 << 20, FirstParty::OpenAi);
    let mut a = parser(&alone);
    let mut b = parser(&alone);
    assert!(a.parse(&[oversized()]).is_err());
    assert_eq!(alone.faults(), 1);
    assert_eq!(answer(&mut b, &[chunk("b")]), vec![json!({"content": "b"})]);
    assert_eq!(alone.stream_parser_instances(), 0);
    assert_eq!(alone.shared_stream_parsers(), 0);
}

/// Parsers on one shared instance used from several threads at once: every stream gets
/// exactly its own answer back.
#[test]
fn parsers_on_one_instance_parse_from_many_threads() {
    let shared = component(8, 64 << 20, FirstParty::Qwen);
    std::thread::scope(|s| {
        for t in 0..8 {
            let shared = &shared;
            s.spawn(move || {
                for round in 0..50 {
                    let i = t * 1000 + round;
                    let mut p = parser(shared);
                    let mut got = Vec::new();
                    for r in reads(i).chunks(1) {
                        got.extend(deltas(&mut p, r));
                    }
                    got.extend(p.finish().unwrap().iter().map(delta_to_json));
                    let reasoning: String =
                        got.iter().filter_map(|d| d["reasoning"].as_str()).collect();
                    let content: String =
                        got.iter().filter_map(|d| d["content"].as_str()).collect();
                    assert_eq!(
                        (reasoning, content),
                        (format!("why {i}"), format!("answer {i}"))
                    );
                }
            });
        }
    });
    assert_eq!(shared.shared_stream_parsers(), 0);
    assert_eq!(shared.faults(), 0);
    assert_eq!(
        shared.stream_parser_instances(),
        1,
        "8 threads fit one instance of 8"
    );
}

/// A parser of a discarded instance never touches the instance that replaced it: its calls
/// fail with the eviction message and its drop does not drop a resource of the new instance
/// (a resource handle is an index into its instance's table, so a stale one could name a
/// fresh parser's).
#[test]
fn a_stale_parser_never_reaches_the_replacement_instance() {
    let shared = component(4, 4 << 20, FirstParty::OpenAi);
    let mut a = parser(&shared);
    let b = parser(&shared);
    let mut d = parser(&shared);
    assert_eq!(shared.stream_parser_instances(), 1);
    assert!(a.parse(&[oversized()]).is_err());
    assert_eq!(shared.stream_parser_instances(), 0);
    drop(a);
    // Two fresh parsers join the same host (room for two more): its instance is made anew,
    // and their resources get the first handles of the new instance's table.
    let mut fresh: Vec<StreamParser> = (0..2).map(|_| parser(&shared)).collect();
    assert_eq!(
        shared.stream_parser_instances(),
        1,
        "the host's instance made anew"
    );
    assert_eq!(
        shared.shared_stream_parsers(),
        4,
        "b, d and the two fresh ones"
    );
    // `b` is dropped without another call: its drop must not reach the new instance.
    drop(b);
    // `d`'s call fails, naming why, and does not reach it either.
    assert_eq!(
        d.parse(&[chunk("d")]).unwrap_err().to_string(),
        "plugin openai faulted in stream-parser.parse: the instance this stream's parser shared was discarded after a fault in another stream's call (PGW_PLUGIN_STREAMS_PER_INSTANCE=4 parsers share an instance; 1 isolates every stream)"
    );
    drop(d);
    for (i, p) in fresh.iter_mut().enumerate() {
        let text = format!("fresh {i}");
        assert_eq!(answer(p, &[chunk(&text)]), vec![json!({"content": text})]);
        assert!(p.finish().unwrap().is_empty());
    }
    drop(fresh);
    assert_eq!(shared.shared_stream_parsers(), 0);
    assert_eq!(shared.stream_parser_instances(), 1);
    assert_eq!(shared.faults(), 1);
}

/// Streams on a multi-threaded runtime contending for one shared instance while another
/// stream's call runs long (a 3 MiB event): the waiters spin, then wait off the runtime's
/// workers, and every stream gets exactly its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_parsers_on_a_runtime_each_get_their_own_answer() {
    let shared = component(16, 64 << 20, FirstParty::OpenAi);
    let big = "y".repeat(3 << 20);
    let mut tasks = Vec::new();
    for t in 0..8usize {
        let shared = shared.clone();
        let big = big.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..20usize {
                let mut p = parser(&shared);
                let text = if t == 0 && round % 5 == 0 {
                    big.clone()
                } else {
                    format!("stream {t} round {round}")
                };
                let got = answer(&mut p, &[chunk(&text)]);
                assert_eq!(
                    got,
                    vec![json!({"content": text})],
                    "task {t} round {round}"
                );
                tokio::task::yield_now().await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(shared.faults(), 0);
    assert_eq!(shared.shared_stream_parsers(), 0);
    assert_eq!(
        shared.stream_parser_instances(),
        1,
        "8 streams fit one instance of 16"
    );
}
