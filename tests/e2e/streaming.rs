//! Streaming through a real gateway: the exact bytes a client receives, a stream cut after
//! tokens were sent (in-band error, never a clean finish), missing `[DONE]` (retry and
//! salvage), the TTFT watchdog failing over, a client disconnect cancelling the upstream, and
//! chunks sent before an upstream stall reaching the client at once.

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::common::{chat_body, gateway, kv, open_stream, post_chat, source, sse_contents};
use polygateway_tests::{eventually, hits, mock, script};

#[tokio::test]
async fn the_client_receives_exactly_these_bytes() {
    let m = mock().await;
    script(
        &m,
        "raw",
        json!({"then": {"content": "Hi there", "cached_tokens": 2}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "raw", "gpt-x")).await;
    let (status, headers, body) = post_chat(&gw, chat_body(true)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["content-type"], "text/event-stream");
    let call_id = headers["x-pgw-call-id"].to_str().unwrap();
    // `created` is the call's start time: read it from the first chunk, check everything else.
    let first: Value =
        serde_json::from_str(body.lines().next().unwrap().strip_prefix("data: ").unwrap()).unwrap();
    let created = first["created"].as_u64().unwrap();
    let head = format!(
        r#"data: {{"id":"chatcmpl-{call_id}","object":"chat.completion.chunk","created":{created},"model":"gpt-x","choices":[{{"index":0,"delta":"#
    );
    let tail = r#","logprobs":null,"finish_reason":null}]}"#;
    let expected = format!(
        "{head}{{\"content\":\"\",\"role\":\"assistant\"}}{tail}\n\n\
         {head}{{\"content\":\"Hi \"}}{tail}\n\n\
         {head}{{\"content\":\"there\"}}{tail}\n\n\
         {head}{{}},\"logprobs\":null,\"finish_reason\":\"stop\"}}]}}\n\n\
         data: {{\"choices\":[],\"created\":{created},\"id\":\"chatcmpl-{call_id}\",\"model\":\"gpt-x\",\"object\":\"chat.completion.chunk\",\"usage\":{{\"completion_tokens\":2,\"prompt_tokens\":5,\"prompt_tokens_details\":{{\"cached_tokens\":2}},\"total_tokens\":7}}}}\n\n\
         data: [DONE]\n\n"
    );
    assert_eq!(body, expected);
}

#[tokio::test]
async fn a_stream_cut_after_tokens_ends_with_an_error_event() {
    let m = mock().await;
    script(&m, "cut", json!({"then": {"content": "one two three four five six", "cut_after_chunks": 3, "inter_chunk_delay_ms": 30}})).await;
    let mut env = source(&m, "openai", 1, "cut", "gpt-x");
    env.extend(source(&m, "openai", 2, "cut-b", "gpt-y"));
    let gw = gateway(env).await;
    let (status, _, body) = post_chat(&gw, chat_body(true)).await;
    assert_eq!(status, 200);
    assert!(
        body.contains(r#"{"content":"one "}"#) && body.contains(r#"{"content":"three "}"#),
        "{body}"
    );
    assert!(
        !body.contains("[DONE]"),
        "a cut stream must not end cleanly: {body}"
    );
    assert!(!body.contains(r#""finish_reason":"stop""#), "{body}");
    let last = body.trim_end().lines().last().unwrap();
    let err: Value = serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(err["error"]["type"], "stream_interrupted");
    // Output had reached the client: no failover to the second source.
    assert_eq!(hits(&m, "cut-b").await.len(), 0);
}

#[tokio::test]
async fn missing_done_ends_a_started_stream_with_an_error_unless_salvaged() {
    let m = mock().await;
    script(&m, "nodone", json!({"then": {"missing_done": true}})).await;
    // Retry (default): the answer reached the client before the missing [DONE] showed, so the
    // stream ends with an in-band error, never as a complete answer.
    let mut env = source(&m, "openai", 1, "nodone", "gpt-x");
    env.extend(source(&m, "openai", 2, "done-ok", "gpt-y"));
    let gw = gateway(env).await;
    let (status, _, text) = post_chat(&gw, chat_body(true)).await;
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains("data: [DONE]"), "{text}");
    let last = text.trim_end().lines().last().unwrap();
    let err: Value = serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(err["error"]["type"], "stream_interrupted");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("without [DONE]"),
        "{err}"
    );

    // Salvage: the answer is kept and ends normally.
    let mut env = source(&m, "openai", 1, "nodone", "gpt-x");
    env.push(kv("LLM__OPENAI__1__MISSING_DONE", "salvage"));
    let gw = gateway(env).await;
    let (status, headers, text) = post_chat(&gw, chat_body(true)).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["x-pgw-source"], "openai-1");
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert!(text.contains(r#"{"content":"Hello "}"#), "{text}");
}

#[tokio::test]
async fn a_slow_first_token_fails_over_by_the_ttft_watchdog() {
    let m = mock().await;
    script(&m, "slow", json!({"then": {"first_token_delay_ms": 5000}})).await;
    let mut env = source(&m, "openai", 1, "slow", "gpt-x");
    env.extend(source(&m, "openai", 2, "fast", "gpt-y"));
    env.push(kv("LLM__OPENAI__1__TTFT_TIMEOUT_S", "0.3"));
    env.push(kv("LLM__OPENAI__1__INTER_TOKEN_TIMEOUT_S", "0.2"));
    env.push(kv("LLM__OPENAI__1__TIMEOUT_S", "10"));
    env.push(kv("LLM__RETRY__BASE_DELAY_S", "0.01"));
    let gw = gateway(env).await;
    let (status, headers, body) = post_chat(&gw, chat_body(true)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-pgw-source"], "openai-2");
    let slow = eventually(10, || {
        let m = m.clone();
        async move {
            let h = hits(&m, "slow").await;
            (h.len() == 1 && h[0]["cancelled"] == json!(true)).then_some(h)
        }
    })
    .await;
    assert_eq!(slow.len(), 1);
}

#[tokio::test]
async fn a_client_disconnect_cancels_the_upstream_attempt() {
    let m = mock().await;
    script(
        &m,
        "stall",
        json!({"then": {"content": "a b c d", "stall_after_chunks": 2}}),
    )
    .await;
    let mut env = source(&m, "openai", 1, "stall", "gpt-x");
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    let gw = gateway(env).await;
    let mut stream = Box::pin(open_stream(&gw, &chat_body(true)).await);
    let first = stream.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "));
    drop(stream);
    eventually(10, || {
        let m = m.clone();
        async move {
            let h = hits(&m, "stall").await;
            (h.len() == 1 && h[0]["cancelled"] == json!(true)).then_some(())
        }
    })
    .await;
    // The call still leaves its terminal row, marked cancelled.
    let db = gw.telemetry_db();
    let rows = eventually(10, || {
        let db = db.clone();
        async move {
            let rows = polygateway_tests::telemetry_rows(&db, &["event", "error_type"]).await;
            rows.iter()
                .any(|r| r["event"] == "terminal_failure")
                .then_some(rows)
        }
    })
    .await;
    assert!(
        rows.iter()
            .any(|r| r["event"] == "terminal_failure" && r["error_type"] == "cancelled"),
        "{rows:?}"
    );
}

/// Chunks are coalesced into one write only while more are already on their way: when the
/// upstream stalls, what it sent so far still reaches the client at once.
#[tokio::test]
async fn chunks_before_an_upstream_stall_reach_the_client() {
    let m = mock().await;
    script(
        &m,
        "pause",
        json!({"then": {"content": "a b c d", "stall_after_chunks": 2}}),
    )
    .await;
    let gw = gateway(source(&m, "openai", 1, "pause", "gpt-x")).await;
    let mut stream = Box::pin(open_stream(&gw, &chat_body(true)).await);
    // A generous bound: the two chunks come in milliseconds; a gateway that held them for
    // more would hold them until the stall ends, which it never does here.
    let got = read_until(&mut stream, r#"{"content":"b "}"#)
        .await
        .unwrap_or_else(|got| panic!("the chunks sent before the stall did not arrive: {got:?}"));
    assert_eq!(sse_contents(&got), ["", "a ", "b "], "{got}");
    assert!(!got.contains("[DONE]"), "{got}");
}

/// Read `stream` until its text holds `needle`, for 20 s at most: the text read, or
/// `Err` with what came before the time ran out.
async fn read_until(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    needle: &str,
) -> Result<String, String> {
    let mut got = String::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while !got.contains(needle) {
            let bytes = stream.next().await.unwrap().unwrap();
            got.push_str(std::str::from_utf8(&bytes).unwrap());
        }
    })
    .await;
    match read {
        Ok(()) => Ok(got),
        Err(_) => Err(got),
    }
}

/// The source's entry of `/healthz`: (parsers in shared instances, shared instances).
async fn parser_counts(gw: &polygateway_tests::GatewayProcess) -> (u64, u64) {
    let h: Value = reqwest::get(format!("{}/healthz", gw.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let s = &h["scopes"]["LLM"]["sources"][0];
    (
        s["shared_stream_parsers"].as_u64().unwrap(),
        s["stream_parser_instances"].as_u64().unwrap(),
    )
}

/// `PGW_PLUGIN_STREAMS_PER_INSTANCE` reaches a real `serve`: five open streams hold three
/// shared instances at 2 per instance, which stay warm after the clients leave; at 1, every
/// stream holds an instance of its own and none is shared.
#[tokio::test]
async fn open_streams_share_parser_instances_as_configured() {
    let m = mock().await;
    script(
        &m,
        "held",
        json!({"then": {"content": "a b c d", "stall_after_chunks": 2}}),
    )
    .await;
    for (per_instance, expected_open) in [(2, (5, 3)), (1, (0, 0))] {
        let mut env = source(&m, "openai", 1, "held", "gpt-x");
        env.push(kv("PGW_PLUGIN_STREAMS_PER_INSTANCE", per_instance));
        let gw = gateway(env).await;
        let mut streams = Vec::new();
        for _ in 0..5 {
            let mut stream = Box::pin(open_stream(&gw, &chat_body(true)).await);
            read_until(&mut stream, r#"{"content":"b "}"#)
                .await
                .unwrap_or_else(|got| panic!("no chunks: {got:?}"));
            streams.push(stream);
        }
        assert_eq!(
            parser_counts(&gw).await,
            expected_open,
            "{per_instance} per instance"
        );
        drop(streams);
        let after = (0, expected_open.1);
        let gw = &gw;
        eventually(20, || async move {
            (parser_counts(gw).await == after).then_some(())
        })
        .await;
    }
}
