//! Garbage in, no panic out: pseudo-random bytes and mutated JSON through every entry point
//! that takes upstream input (error classification, response parsing, stream parsing).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::{
    ChatStreamParser, Header, SseEvent, classify_http_error, parse_chat_response,
};

/// A tiny deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const SEEDS: [&str; 4] = [
    r#"{"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"<think>a</think>b","tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}}"#,
    r#"{"error":{"message":"x","type":"insufficient_quota","code":429}}"#,
    r#"{"choices":[{"index":0,"message":{"content":"hi","reasoning_content":"r"},"finish_reason":"length"}]}"#,
    "[DONE]",
];

/// Mutate a seed: flip, drop, duplicate or insert bytes (possibly breaking UTF-8).
fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..=rng.below(8) {
        if v.is_empty() {
            v.push(b'{');
        }
        let i = rng.below(v.len());
        match rng.below(4) {
            0 => v[i] = (rng.next() & 0xff) as u8,
            1 => {
                v.remove(i);
            }
            2 => v.insert(i, b"{}[]\":,\\<>0e-9\xff\xc3"[rng.below(16)]),
            _ => {
                let j = (i + rng.below(20)).min(v.len());
                let dup = v[i..j].to_vec();
                v.splice(i..i, dup);
            }
        }
    }
    v
}

#[test]
fn mutated_inputs_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let headers = [Header {
        name: "retry-after-ms".into(),
        value: "12".into(),
    }];
    for round in 0..20_000 {
        let seed = SEEDS[round % SEEDS.len()].as_bytes();
        let bytes = mutate(&mut rng, seed);
        let status = [200, 400, 401, 404, 429, 500, 503, 0, 999][rng.below(9)];
        let e = classify_http_error(status, &headers, &bytes);
        assert!(!e.message.is_empty());
        let _ = parse_chat_response(&bytes, round % 2 == 0);
        let data = String::from_utf8_lossy(&bytes).into_owned();
        let mut parser = ChatStreamParser::new(round % 2 == 0);
        let _ = parser.parse(&[SseEvent { event: None, data }]);
        let _ = parser.finish();
    }
}

#[test]
fn huge_inputs_are_fine() {
    let big = vec![b'a'; 8 << 20];
    let e = classify_http_error(500, &[], &big);
    assert_eq!(
        e.message.chars().count(),
        polygateway_plugin_sdk::classify::MAX_MESSAGE_CHARS
    );
    assert!(parse_chat_response(&big, true).is_err());
    let deep = "[".repeat(100_000);
    assert!(parse_chat_response(deep.as_bytes(), false).is_err());
    let e = classify_http_error(400, &[], deep.as_bytes());
    assert!(!e.message.is_empty());
    let mut parser = ChatStreamParser::new(true);
    assert!(
        parser
            .parse(&[SseEvent {
                event: None,
                data: deep
            }])
            .is_err()
    );
}
