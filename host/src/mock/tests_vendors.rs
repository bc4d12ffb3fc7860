//! The mock upstream's Anthropic and Gemini endpoints over real HTTP: the exact events and
//! bodies of each vendor's documented format, the auth headers each requires, error shapes.

use serde_json::{Value, json};

use super::tests::{script, start};
use super::*;

async fn post(url: String, headers: &[(&str, &str)], body: Value) -> (u16, String) {
    let mut req = reqwest::Client::new().post(url).json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.expect("POST");
    (r.status().as_u16(), r.text().await.expect("body"))
}

const ANTHROPIC: &[(&str, &str)] = &[("x-api-key", "k"), ("anthropic-version", "2023-06-01")];

#[tokio::test]
async fn anthropic_streams_the_documented_events() {
    let m = start().await;
    script(
        &m,
        "a",
        json!({"steps": [{"reasoning": "Hmm ok", "content": "Hi there",
            "tool_calls": [{"id": "toolu_1", "name": "f", "arguments": {"x": 1}}],
            "cached_tokens": 3, "cache_write_tokens": 4}]}),
    )
    .await;
    let body = json!({"model": "claude-x", "max_tokens": 9, "stream": true,
                      "messages": [{"role": "user", "content": "one two three"}]});
    let (status, text) = post(
        format!("{}/v1/messages", m.anthropic_base_url("a")),
        ANTHROPIC,
        body,
    )
    .await;
    assert_eq!(status, 200);
    let sig = thinking_signature("Hmm ok");
    let expected = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_mock01", "type": "message", "role": "assistant", "model": "claude-x", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 3, "cache_creation_input_tokens": 4, "cache_read_input_tokens": 3, "output_tokens": 1}}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "ok"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": sig}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "there"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"x"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\":1}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 2}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let want: String = expected
        .iter()
        .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
        .collect();
    assert_eq!(text, want);
}

#[tokio::test]
async fn anthropic_refuses_missing_headers_and_answers_its_error_shape() {
    let m = start().await;
    script(&m, "e", json!({"steps": [{"status": 529}]})).await;
    let url = format!("{}/v1/messages", m.anthropic_base_url("e"));
    let body = json!({"model": "c", "max_tokens": 1, "messages": []});
    let (s, t) = post(
        url.clone(),
        &[("anthropic-version", "2023-06-01")],
        body.clone(),
    )
    .await;
    assert_eq!(s, 401);
    assert_eq!(
        serde_json::from_str::<Value>(&t).unwrap()["error"]["type"],
        "authentication_error"
    );
    let (s, t) = post(url.clone(), &[("x-api-key", "k")], body.clone()).await;
    assert_eq!(s, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&t).unwrap()["error"]["type"],
        "invalid_request_error"
    );
    // The 529 step was consumed by the first request; script it again.
    script(&m, "e", json!({"steps": [{"status": 529}]})).await;
    let (s, t) = post(url, ANTHROPIC, body).await;
    assert_eq!(s, 529);
    assert_eq!(
        serde_json::from_str::<Value>(&t).unwrap(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "mock error 529"}})
    );
}

#[tokio::test]
async fn gemini_answers_and_streams_generate_content() {
    let m = start().await;
    let step = json!({"reasoning": "Think", "content": "Hi there",
        "tool_calls": [{"id": "c1", "name": "f", "arguments": {"x": 1}}], "cached_tokens": 2});
    script(&m, "g", json!({"steps": [step.clone(), step]})).await;
    let base = m.gemini_base_url("g");
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "one two"}]}]});
    let key = [("x-goog-api-key", "k")];
    let (s, t) = post(
        format!("{base}/v1beta/models/gem-x:generateContent"),
        &key,
        body.clone(),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let sig = thought_signature("Think");
    let usage = json!({"promptTokenCount": 4, "candidatesTokenCount": 3, "totalTokenCount": 4,
                       "cachedContentTokenCount": 2, "thoughtsTokenCount": 1});
    let mut usage = usage;
    usage["totalTokenCount"] = json!(8);
    assert_eq!(
        serde_json::from_str::<Value>(&t).unwrap(),
        json!({"candidates": [{"content": {"role": "model", "parts": [
                {"text": "Think", "thought": true},
                {"text": "Hi there"},
                {"functionCall": {"name": "f", "args": {"x": 1}, "id": "c1"}, "thoughtSignature": sig}]},
              "finishReason": "STOP", "index": 0}],
              "modelVersion": "gem-x", "responseId": "mock-resp-1", "usageMetadata": usage})
    );
    let (s, t) = post(
        format!("{base}/v1beta/models/gem-x:streamGenerateContent?alt=sse"),
        &key,
        body.clone(),
    )
    .await;
    assert_eq!(s, 200);
    let chunks: Vec<Value> = t
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let parts: Vec<Value> = chunks
        .iter()
        .map(|c| c["candidates"][0]["content"]["parts"].clone())
        .collect();
    assert_eq!(
        parts,
        vec![
            json!([{"text": "Think", "thought": true}]),
            json!([{"text": "Hi "}]),
            json!([{"text": "there"}]),
            json!([{"functionCall": {"name": "f", "args": {"x": 1}, "id": "c1"}, "thoughtSignature": sig}]),
        ]
    );
    assert_eq!(chunks[3]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(chunks[3]["usageMetadata"], usage);
    assert!(chunks[..3].iter().all(|c| c.get("usageMetadata").is_none()));
    // No key: Google's 403.
    let (s, t) = post(
        format!("{base}/v1beta/models/gem-x:generateContent"),
        &[],
        body,
    )
    .await;
    assert_eq!(s, 403);
    assert_eq!(
        serde_json::from_str::<Value>(&t).unwrap()["error"]["status"],
        "PERMISSION_DENIED"
    );
}

#[tokio::test]
async fn gemini_errors_and_embeddings() {
    let m = start().await;
    script(
        &m,
        "ge",
        json!({"steps": [{"status": 429, "retry_delay": "2s"}, {}]}),
    )
    .await;
    let base = m.gemini_base_url("ge");
    let key = [("x-goog-api-key", "k")];
    let (s, t) = post(
        format!("{base}/v1beta/models/gem-x:generateContent"),
        &key,
        json!({"contents": []}),
    )
    .await;
    assert_eq!(s, 429);
    assert_eq!(
        serde_json::from_str::<Value>(&t).unwrap(),
        json!({"error": {"code": 429, "message": "mock error 429", "status": "RESOURCE_EXHAUSTED",
               "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}]}})
    );
    let (s, t) = post(
        format!("{base}/v1beta/models/emb-x:batchEmbedContents"),
        &key,
        json!({"requests": [
            {"model": "models/emb-x", "content": {"parts": [{"text": "a"}]}},
            {"model": "models/emb-x", "content": {"parts": [{"text": "b"}]}, "outputDimensionality": 4}]}),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let v: Value = serde_json::from_str(&t).unwrap();
    assert_eq!(
        v["embeddings"][0]["values"],
        json!(embedding_vector("a", DEFAULT_EMBEDDING_DIMS))
    );
    assert_eq!(
        v["embeddings"][1]["values"],
        json!(embedding_vector("b", 4))
    );
}
