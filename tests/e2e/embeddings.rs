//! Embeddings under chat's governance through a real `polygateway serve` process, the
//! embedded API and the official OpenAI Python SDK, on the mock upstream over TCP: batching
//! by `MAX_BATCH` with vectors in input order, one cache entry per input (a repeat sends
//! nothing, new texts go in one batch), `result_invalid` for a wrong dimension with the
//! breaker still closed, one deadline over every batch, failover, usage summed (or
//! unavailable), one telemetry row per batch, and token-id array inputs (sent byte for byte,
//! cached apart from texts, failed over from a text-only provider, 400 naming `input` when no
//! source takes them).

use polygateway::config::settings_from_vars;
use polygateway::mock::{embedding_vector, token_embedding_vector};
use polygateway::{EmbeddingRequest, Gateway, UsageSource};
use serde_json::{Value, json};

use crate::common::{bin, kv};
use crate::plugin_fixtures::text_embedder;
use polygateway_tests::{
    GatewayProcess, MockUpstream, eventually, hits, mock, run_python, script, telemetry_rows,
};

/// Env of source `n` of scope `EMB` (provider `openai`) on a mock scenario.
fn emb_source(m: &MockUpstream, n: u32, scenario: &str, max_batch: u32) -> Vec<(String, String)> {
    let p = format!("EMB__OPENAI__{n}__");
    vec![
        (format!("{p}BASE_URL"), m.base_url(scenario)),
        (format!("{p}MODEL"), "text-embedding-3-small".into()),
        (format!("{p}API_KEY"), format!("sk-{scenario}")),
        (format!("{p}MAX_BATCH"), max_batch.to_string()),
    ]
}

async fn start(mut env: Vec<(String, String)>) -> GatewayProcess {
    if !env.iter().any(|(k, _)| k.starts_with("PGW_TELEMETRY")) {
        env.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    }
    env.push(kv("EMB__SELECTOR", "round-robin"));
    env.push(kv("EMB__RETRY__BASE_DELAY_S", "0.01"));
    GatewayProcess::start(bin(), &env).await
}

async fn post(
    gw: &GatewayProcess,
    body: Value,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut rb = reqwest::Client::new()
        .post(format!("{}/v1/embeddings", gw.base_url))
        .json(&body);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let resp = rb.send().await.expect("gateway reachable");
    let status = resp.status().as_u16();
    let h = resp.headers().clone();
    (status, h, resp.json().await.expect("JSON body"))
}

fn texts(prefix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{prefix} text number {i}"))
        .collect()
}

fn vectors_of(body: &Value) -> Vec<Vec<f32>> {
    body["data"]
        .as_array()
        .expect("data")
        .iter()
        .enumerate()
        .map(|(i, d)| {
            assert_eq!(d["index"], i);
            d["embedding"]
                .as_array()
                .expect("float embedding")
                .iter()
                .map(|x| x.as_f64().expect("number") as f32)
                .collect()
        })
        .collect()
}

fn header<'a>(h: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn batches_by_max_batch_and_caches_each_text() {
    let m = mock().await;
    let mut env = emb_source(&m, 1, "emb-batch", 64);
    env.push(kv("PGW_CACHE_BACKEND", "memory"));
    env.push(kv("EMB__CACHE__TTL_S", 60));
    let gw = start(env).await;
    let input = texts("batch", 1000);

    let (status, h, body) = post(&gw, json!({"model": "emb", "input": input}), &[]).await;
    assert_eq!(status, 200, "{body}");
    let got = vectors_of(&body);
    let want: Vec<Vec<f32>> = input.iter().map(|t| embedding_vector(t, 8)).collect();
    assert_eq!(got, want, "vectors in input order");
    let sent = hits(&m, "emb-batch").await;
    let sizes: Vec<usize> = sent
        .iter()
        .map(|h| h["body"]["input"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(
        sizes,
        [vec![64; 15], vec![40]].concat(),
        "16 batches: 15 × 64 + 40"
    );
    // The batches carry the texts in order.
    assert_eq!(
        sent[15]["body"]["input"][39],
        json!("batch text number 999")
    );
    assert_eq!(header(&h, "x-pgw-upstream-batches"), "16");
    assert_eq!(header(&h, "x-pgw-source"), "openai-1");
    assert_eq!(header(&h, "x-pgw-cache-hit"), "false");
    assert_eq!(header(&h, "x-pgw-cached-inputs"), "0");
    // Mock usage: one token per word, 4 words per text.
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 4000, "total_tokens": 4000})
    );

    // The same texts again: every vector from the cache, nothing sent.
    let (status, h, again) = post(&gw, json!({"model": "emb", "input": input}), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(vectors_of(&again), want);
    assert_eq!(hits(&m, "emb-batch").await.len(), 16, "zero upstream calls");
    assert_eq!(header(&h, "x-pgw-cached-inputs"), "1000");
    assert_eq!(header(&h, "x-pgw-cache-hit"), "true");
    assert_eq!(header(&h, "x-pgw-source"), "", "no source answered");
    assert_eq!(
        again["usage"],
        json!({"prompt_tokens": 0, "total_tokens": 0})
    );

    // 10 new texts among known ones: one batch of exactly those 10, in order.
    let mut mixed = input[..500].to_vec();
    let fresh = texts("fresh", 10);
    for (i, t) in fresh.iter().enumerate() {
        mixed.insert(i * 50, t.clone());
    }
    let (status, h, body) = post(&gw, json!({"model": "emb", "input": mixed}), &[]).await;
    assert_eq!(status, 200);
    let want_mixed: Vec<Vec<f32>> = mixed.iter().map(|t| embedding_vector(t, 8)).collect();
    assert_eq!(vectors_of(&body), want_mixed);
    let sent = hits(&m, "emb-batch").await;
    assert_eq!(sent.len(), 17);
    assert_eq!(sent[16]["body"]["input"], json!(fresh));
    assert_eq!(header(&h, "x-pgw-cached-inputs"), "500");

    // `x-pgw-cache: bypass` neither reads nor writes: all 10 go up again.
    let (status, _, _) = post(
        &gw,
        json!({"model": "emb", "input": fresh}),
        &[("x-pgw-cache", "bypass")],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(hits(&m, "emb-batch").await.len(), 18);
}

#[tokio::test]
async fn a_wrong_dimension_is_result_invalid_and_the_breaker_stays_closed() {
    let m = mock().await;
    // The second batch answers 5-dimensional vectors after a first batch of 8.
    script(&m, "emb-dim", json!({"steps": [{}, {"embedding_dims": 5}]})).await;
    let gw = start(emb_source(&m, 1, "emb-dim", 2)).await;
    let (status, _, body) = post(&gw, json!({"model": "emb", "input": texts("dim", 4)}), &[]).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["type"], "result_invalid");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("vector 0 of the batch has dimension 5, expected 8"),
        "{body}"
    );
    assert_eq!(hits(&m, "emb-dim").await.len(), 2, "no failover, no retry");
    let health: Value = reqwest::get(format!("{}/healthz", gw.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let src = health["scopes"]["EMB"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "openai-1")
        .cloned()
        .unwrap();
    assert_eq!(src["serves"], json!(["chat", "embedding"]));
    assert_eq!(src["breaker"], "closed", "{health}");
    assert_eq!(src["consecutive_failures"], 0, "{health}");

    // `dimensions` asked: an answer of another dimension is invalid too.
    let (status, _, body) = post(
        &gw,
        json!({"model": "emb", "input": "x", "dimensions": 16}),
        &[],
    )
    .await;
    assert_eq!(status, 200, "the mock honours dimensions: {body}");
    assert_eq!(vectors_of(&body), vec![embedding_vector("x", 16)]);
    // A wrong vector count is invalid as well.
    script(&m, "emb-dim", json!({"steps": [{"drop_vectors": 1}]})).await;
    let (status, _, body) = post(&gw, json!({"model": "emb", "input": ["a", "b"]}), &[]).await;
    assert_eq!(status, 422);
    assert_eq!(
        body["error"]["message"]
            .as_str()
            .map(|m| m.contains("1 vectors for 2 inputs")),
        Some(true),
        "{body}"
    );
}

#[tokio::test]
async fn one_deadline_covers_every_batch() {
    let m = mock().await;
    script(
        &m,
        "emb-slow",
        json!({"then": {"first_token_delay_ms": 800}}),
    )
    .await;
    let gw = start(emb_source(&m, 1, "emb-slow", 2)).await;
    let started = std::time::Instant::now();
    let (status, _, body) = post(
        &gw,
        json!({"model": "emb", "input": texts("slow", 6)}),
        &[("x-pgw-call-deadline-s", "2.0")],
    )
    .await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["type"], "deadline_exceeded");
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    // Batches at ~0 and ~0.8 s started; the third (~1.6 s, its answer due at ~2.4 s) was
    // cut by the deadline at 2.0 s; nothing starts after expiry. 400 ms of slack on each
    // side: a loaded machine's round trips may start the third batch late, and cannot
    // make the mock answer early.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let sent = hits(&m, "emb-slow").await;
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(
        sent[2]["cancelled"], true,
        "the batch in flight at expiry was cancelled"
    );
}

#[tokio::test]
async fn fails_over_and_sums_usage_or_reports_it_unavailable() {
    let m = mock().await;
    script(&m, "emb-down", json!({"then": {"status": 503}})).await;
    script(
        &m,
        "emb-nousage",
        json!({"steps": [{}, {"embedding_usage": false}]}),
    )
    .await;
    let mut env = emb_source(&m, 1, "emb-down", 3);
    env.extend(emb_source(&m, 2, "emb-nousage", 3));
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    let gw = start(env).await;
    let input = texts("usage", 5);
    let (status, h, body) = post(&gw, json!({"model": "emb", "input": input}), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        vectors_of(&body),
        input
            .iter()
            .map(|t| embedding_vector(t, 8))
            .collect::<Vec<_>>()
    );
    // The second batch reported no usage: the call's usage is unknown, not a sum of parts.
    assert_eq!(body["usage"], Value::Null);
    assert_eq!(header(&h, "x-pgw-usage-source"), "unavailable");
    assert_eq!(hits(&m, "emb-nousage").await.len(), 2);
    assert!(!hits(&m, "emb-down").await.is_empty());
    let call_id = header(&h, "x-pgw-call-id").to_string();
    let db = gw.telemetry_db();
    let down = hits(&m, "emb-down").await.len();
    // Rows are written in batches: wait for the terminal row (a bound, not a timing check).
    let rows = eventually(10, || async {
        let rows = telemetry_rows(
            &db,
            &[
                "call_id",
                "logical_call_id",
                "event",
                "source_name",
                "prompt_tokens",
                "usage_source",
                "cost",
                "error_type",
                "messages",
            ],
        )
        .await;
        rows.iter()
            .any(|r| r["event"] == "terminal_success")
            .then_some(rows)
    })
    .await;
    let of = |pred: &dyn Fn(&Value) -> bool| {
        rows.iter().filter(|r| pred(r)).cloned().collect::<Vec<_>>()
    };
    assert!(rows.iter().all(|r| r["logical_call_id"] == json!(call_id)));
    let terminal = of(&|r| r["event"] != "attempt");
    assert_eq!(terminal.len(), 1, "{rows:?}");
    assert_eq!(terminal[0]["event"], "terminal_success");
    assert_eq!(terminal[0]["call_id"], json!(call_id));
    assert_eq!(terminal[0]["usage_source"], "unavailable");
    assert_eq!(terminal[0]["prompt_tokens"], Value::Null);
    let stored: Value = serde_json::from_str(terminal[0]["messages"].as_str().unwrap()).unwrap();
    assert_eq!(stored[0]["content"][4]["text"], "usage text number 4");
    assert_eq!(stored[0]["content"].as_array().map(Vec::len), Some(5));
    let answered = of(&|r| r["event"] == "attempt" && r["source_name"] == "openai-2");
    // Each batch row stores its own texts only.
    let batch_texts: Vec<Value> = answered
        .iter()
        .map(|r| {
            let m: Value = serde_json::from_str(r["messages"].as_str().unwrap()).unwrap();
            m[0]["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["text"].clone())
                .collect()
        })
        .collect();
    assert_eq!(
        batch_texts,
        vec![
            json!([
                "usage text number 0",
                "usage text number 1",
                "usage text number 2"
            ]),
            json!(["usage text number 3", "usage text number 4"]),
        ]
    );
    let answered: Vec<(Value, Value)> = answered
        .iter()
        .map(|r| (r["usage_source"].clone(), r["prompt_tokens"].clone()))
        .collect();
    // 3 texts of 4 words, then 2 texts without a usage report.
    assert_eq!(
        answered,
        vec![
            (json!("measured"), json!(12)),
            (json!("unavailable"), Value::Null)
        ]
    );
    let failed = of(&|r| r["source_name"] == "openai-1" && r["event"] == "attempt");
    assert_eq!(failed.len(), down);
    assert!(
        failed
            .iter()
            .all(|r| r["error_type"] == "transient" && r["cost"].is_null())
    );
}

#[tokio::test]
async fn the_openai_python_sdk_gets_float_and_base64_vectors() {
    let m = mock().await;
    let gw = start(emb_source(&m, 1, "emb-sdk", 0)).await;
    for mode in ["float", "default"] {
        let out = run_python(
            "sdk_embeddings.py",
            &[&gw.base_url, "emb", mode, "alpha beta", "gamma"],
        )
        .await;
        let want: Vec<Vec<f64>> = ["alpha beta", "gamma"]
            .iter()
            .map(|t| embedding_vector(t, 8).into_iter().map(f64::from).collect())
            .collect();
        let got: Vec<Vec<f64>> = serde_json::from_value(out["embeddings"].clone()).unwrap();
        assert_eq!(got, want, "{mode}");
        assert_eq!(out["indices"], json!([0, 1]));
        assert_eq!(out["usage"], json!({"prompt_tokens": 3, "total_tokens": 3}));
        assert_eq!(out["model"], "emb");
    }
    // `client.embeddings.create(input=[[15339]])`, as LangChain's `OpenAIEmbeddings` sends.
    for (mode, ids) in [("float", "[[15339], [1917, 3]]"), ("default", "[[15339]]")] {
        let out = run_python(
            "sdk_embeddings.py",
            &[&gw.base_url, "emb", mode, "--tokens", ids],
        )
        .await;
        let ids: Vec<Vec<u32>> = serde_json::from_str(ids).unwrap();
        let want: Vec<Vec<f64>> = ids
            .iter()
            .map(|ids| {
                token_embedding_vector(ids, 8)
                    .into_iter()
                    .map(f64::from)
                    .collect()
            })
            .collect();
        let got: Vec<Vec<f64>> = serde_json::from_value(out["embeddings"].clone()).unwrap();
        assert_eq!(got, want, "{mode}");
        let n: usize = ids.iter().map(Vec::len).sum();
        assert_eq!(out["usage"], json!({"prompt_tokens": n, "total_tokens": n}));
    }
    let sent = hits(&m, "emb-sdk").await;
    assert_eq!(sent[2]["body"]["input"], json!([[15339], [1917, 3]]));
    assert_eq!(sent[3]["body"]["input"], json!([[15339]]));
    // The gateway always asks the upstream for floats, whatever the client wants.
    assert!(
        sent.iter().all(|h| h["body"]["encoding_format"] == "float"),
        "{sent:?}"
    );
}

#[tokio::test]
async fn the_embedded_api_embeds_in_order() {
    let m = mock().await;
    let mut vars = emb_source(&m, 1, "emb-embedded", 2);
    vars.push(kv("PGW_TELEMETRY_BACKEND", "none"));
    let gw = Gateway::from_settings(settings_from_vars(vars).unwrap())
        .await
        .unwrap();
    let input = texts("embedded", 5);
    let r = gw
        .embed(EmbeddingRequest::new("emb", input.clone()))
        .await
        .unwrap();
    assert_eq!(
        r.vectors,
        input
            .iter()
            .map(|t| embedding_vector(t, 8))
            .collect::<Vec<_>>()
    );
    assert_eq!((r.upstream_batches, r.cached_inputs, r.attempts), (3, 0, 3));
    assert_eq!(
        r.usage.map(|u| (u.prompt_tokens, u.total_tokens)),
        Some((20, 20))
    );
    assert_eq!(r.usage_source, UsageSource::Measured);
    assert_eq!(r.model.as_deref(), Some("text-embedding-3-small"));
    let err = gw
        .embed(EmbeddingRequest::new("emb", vec![]))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "`input` must not be empty");
    let err = gw
        .embed(EmbeddingRequest::new("nope", vec!["a".into()]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "model_not_found");
}

#[tokio::test]
async fn one_call_never_mixes_models_and_a_mixed_scope_is_not_cached() {
    let m = mock().await;
    let mut env = emb_source(&m, 1, "emb-model-a", 2);
    let mut b = emb_source(&m, 2, "emb-model-b", 2);
    b[1].1 = "other-embedding-model".into();
    env.extend(b);
    env.push(kv("PGW_CACHE_BACKEND", "memory"));
    env.push(kv("EMB__CACHE__TTL_S", 60));
    let gw = start(env).await;
    // Round-robin would alternate sources per batch; the call stays on the first model.
    let (status, _, body) = post(&gw, json!({"model": "emb", "input": texts("pin", 6)}), &[]).await;
    assert_eq!(status, 200, "{body}");
    let (a, b) = (
        hits(&m, "emb-model-a").await.len(),
        hits(&m, "emb-model-b").await.len(),
    );
    assert!(
        (a, b) == (3, 0) || (a, b) == (0, 3),
        "three batches on one model: {a} / {b}"
    );
    // Two models in the scope: vectors are not cached (they would be incomparable).
    let (status, h, _) = post(&gw, json!({"model": "emb", "input": texts("pin", 6)}), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(header(&h, "x-pgw-cached-inputs"), "0");
    assert_eq!(header(&h, "x-pgw-upstream-batches"), "3");
}

/// Env of source `n` of scope `EMB` on the text-only embedding fixture (`text_embedder.wasm`,
/// provider key `TEXTEMB`), same model as [`emb_source`].
async fn text_only_source(m: &MockUpstream, n: u32, scenario: &str) -> Vec<(String, String)> {
    let p = format!("EMB__TEXTEMB__{n}__");
    vec![
        (
            format!("{p}PLUGIN"),
            text_embedder().await.display().to_string(),
        ),
        (format!("{p}BASE_URL"), m.base_url(scenario)),
        (format!("{p}MODEL"), "text-embedding-3-small".into()),
        (format!("{p}API_KEY"), format!("sk-{scenario}")),
    ]
}

#[tokio::test]
async fn token_arrays_reach_the_upstream_byte_exact_and_answer_in_openai_shape() {
    let m = mock().await;
    let gw = start(emb_source(&m, 1, "emb-tokens", 0)).await;
    let (status, h, body) = post(
        &gw,
        json!({"model": "emb", "input": [[15339], [1917, 3]]}),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let sent = hits(&m, "emb-tokens").await;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0]["raw_body"],
        r#"{"encoding_format":"float","input":[[15339],[1917,3]],"model":"text-embedding-3-small"}"#
    );
    // OpenAI's answer shape, exactly: one embedding object per input, in order; the mock
    // counts one token per id.
    let data: Vec<Value> = [vec![15339], vec![1917, 3]]
        .iter()
        .enumerate()
        .map(|(i, ids)| {
            json!({"object": "embedding", "index": i, "embedding": token_embedding_vector(ids, 8)})
        })
        .collect();
    assert_eq!(
        body,
        json!({"object": "list", "data": data, "model": "emb",
               "usage": {"prompt_tokens": 3, "total_tokens": 3}})
    );
    assert_eq!(header(&h, "x-pgw-source"), "openai-1");

    // An array of integers is one input of token ids.
    let (status, _, body) = post(&gw, json!({"model": "emb", "input": [15339, 1917]}), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        vectors_of(&body),
        vec![token_embedding_vector(&[15339, 1917], 8)]
    );
    let sent = hits(&m, "emb-tokens").await;
    assert_eq!(sent[1]["body"]["input"], json!([[15339, 1917]]));

    // Bad token inputs are 400s naming `input`, and nothing goes upstream.
    for (input, message) in [
        (json!([[]]), "`input[0]` is an empty token array"),
        (
            json!([[1], [-2]]),
            "`input[1][0]` is -2: a token id is never negative",
        ),
        (
            json!([4294967296u64]),
            "`input[0]` is 4294967296: a token id is at most 4294967295",
        ),
    ] {
        let (status, _, body) = post(&gw, json!({"model": "emb", "input": input}), &[]).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["param"], "input", "{body}");
        assert_eq!(body["error"]["message"], message, "{body}");
    }
    assert_eq!(hits(&m, "emb-tokens").await.len(), 2);
}

#[tokio::test]
async fn token_inputs_and_texts_never_share_a_cache_entry() {
    let m = mock().await;
    let mut env = emb_source(&m, 1, "emb-tok-cache", 0);
    env.push(kv("PGW_CACHE_BACKEND", "memory"));
    env.push(kv("EMB__CACHE__TTL_S", 60));
    let gw = start(env).await;
    // Repeats within one call go up once.
    let (status, _, body) =
        post(&gw, json!({"model": "emb", "input": [[1, 2], [1, 2]]}), &[]).await;
    assert_eq!(status, 200, "{body}");
    let ids = token_embedding_vector(&[1, 2], 8);
    assert_eq!(vectors_of(&body), vec![ids.clone(), ids.clone()]);
    assert_eq!(
        hits(&m, "emb-tok-cache").await[0]["body"]["input"],
        json!([[1, 2]])
    );
    // The text "[1,2]" is not answered with the vector of the ids [1, 2].
    let (status, h, body) = post(&gw, json!({"model": "emb", "input": "[1,2]"}), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&h, "x-pgw-cached-inputs"), "0");
    assert_eq!(vectors_of(&body), vec![embedding_vector("[1,2]", 8)]);
    assert_ne!(embedding_vector("[1,2]", 8), ids);
    // The ids again: from the cache, nothing sent.
    let (status, h, body) = post(&gw, json!({"model": "emb", "input": [1, 2]}), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&h, "x-pgw-cache-hit"), "true");
    assert_eq!(vectors_of(&body), vec![ids]);
    assert_eq!(hits(&m, "emb-tok-cache").await.len(), 2);
}

#[tokio::test]
async fn a_scope_whose_only_source_takes_text_refuses_token_arrays_naming_input() {
    let m = mock().await;
    let gw = start(text_only_source(&m, 1, "emb-text-only").await).await;
    let (status, h, body) = post(&gw, json!({"model": "emb", "input": [[15339]]}), &[]).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["param"], "input", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("no source of scope `EMB` takes token-id arrays as `input`")
            && message.contains("provider `text-embedder` takes text inputs only"),
        "{message}"
    );
    assert!(h.get("x-pgw-source").is_none());
    assert_eq!(
        hits(&m, "emb-text-only").await.len(),
        0,
        "nothing went upstream"
    );
    // The same source serves texts.
    let (status, _, body) = post(&gw, json!({"model": "emb", "input": ["hello"]}), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(vectors_of(&body), vec![embedding_vector("hello", 8)]);
    assert_eq!(
        hits(&m, "emb-text-only").await[0]["body"]["input"],
        json!(["hello"])
    );
}

#[tokio::test]
async fn token_arrays_fail_over_from_a_text_only_source_to_one_that_takes_them() {
    let m = mock().await;
    // Source 1 (index 0, the round robin's first pick) takes text only; source 2 is OpenAI.
    // Batches of one input: the text-only source declines once and is skipped for the
    // call's later batches.
    let mut env = text_only_source(&m, 1, "emb-fo-text").await;
    env.push(kv("EMB__TEXTEMB__1__MAX_BATCH", 1));
    env.extend(emb_source(&m, 2, "emb-fo-openai", 1));
    env.push(kv("PGW_TELEMETRY_BACKEND", "sqlite"));
    let gw = start(env).await;
    let input = json!([[15339], [1917, 3], [7]]);
    let (status, h, body) = post(&gw, json!({"model": "emb", "input": input}), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        vectors_of(&body),
        [vec![15339], vec![1917, 3], vec![7]]
            .iter()
            .map(|ids| token_embedding_vector(ids, 8))
            .collect::<Vec<_>>()
    );
    assert_eq!(header(&h, "x-pgw-source"), "openai-2");
    assert_eq!(
        header(&h, "x-pgw-attempts"),
        "4",
        "one decline, then three batches"
    );
    assert_eq!(header(&h, "x-pgw-upstream-batches"), "3");
    assert_eq!(hits(&m, "emb-fo-text").await.len(), 0);
    let sent = hits(&m, "emb-fo-openai").await;
    let inputs: Vec<&Value> = sent.iter().map(|h| &h["body"]["input"]).collect();
    assert_eq!(
        inputs,
        [&json!([[15339]]), &json!([[1917, 3]]), &json!([[7]])]
    );
    // The decline is an attempt row of its own; token inputs are stored as digests.
    let db = gw.telemetry_db();
    let rows = eventually(10, || async {
        let rows = telemetry_rows(&db, &["event", "source_name", "error_type", "messages"]).await;
        rows.iter()
            .any(|r| r["event"] == "terminal_success")
            .then_some(rows)
    })
    .await;
    let attempts = |source: &str| -> Vec<Value> {
        rows.iter()
            .filter(|r| r["event"] == "attempt" && r["source_name"] == source)
            .cloned()
            .collect()
    };
    let declined = attempts("textemb-1");
    assert_eq!(declined.len(), 1, "{rows:?}");
    assert_eq!(declined[0]["error_type"], "unsupported");
    let answered = attempts("openai-2");
    assert_eq!(answered.len(), 3, "{rows:?}");
    assert!(
        answered.iter().all(|r| r["error_type"].is_null()),
        "{rows:?}"
    );
    let stored: Value = serde_json::from_str(declined[0]["messages"].as_str().unwrap()).unwrap();
    let part = &stored[0]["content"][0];
    assert_eq!(part["type"], "tokens", "{stored}");
    assert_eq!(part["sha256"].as_str().map(str::len), Some(64), "{stored}");
}
