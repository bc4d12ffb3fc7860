//! Error classification of non-2xx responses and in-band error objects: the status table,
//! quota detection, message shaping (JSON message, collapsed and capped text), retry hints.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::classify::{MAX_MESSAGE_CHARS, collapse_and_cap};
use polygateway_plugin_sdk::{ErrorClass, Header, classify_error_object, classify_http_error};
use serde_json::{Value, json};

fn class(status: u16, body: &str) -> ErrorClass {
    classify_http_error(status, &[], body.as_bytes()).class
}

#[test]
fn status_table() {
    use ErrorClass::*;
    for (status, want) in [
        (400, RequestRejected),
        (401, SourceDead),
        (402, SourceDead),
        (403, SourceDead),
        (404, SourceDead),
        (405, RequestRejected),
        (408, Transient),
        (409, Transient),
        (413, RequestRejected),
        (422, RequestRejected),
        (425, Transient),
        (429, Transient),
        (451, RequestRejected),
        (499, RequestRejected),
        (500, Transient),
        (502, Transient),
        (503, Transient),
        (504, Transient),
        (599, Transient),
        (0, Transient),
        (200, Transient),
        (302, Transient),
        (600, Transient),
        (u16::MAX, Transient),
    ] {
        assert_eq!(class(status, ""), want, "status {status}");
    }
}

#[test]
fn quota_429_is_source_dead_wherever_it_is_mentioned() {
    use ErrorClass::*;
    let by_code = r#"{"error":{"message":"x","code":"insufficient_quota"}}"#;
    let by_type = r#"{"error":{"message":"x","type":"insufficient_quota","code":null}}"#;
    let in_text = "Error: INSUFFICIENT_QUOTA for this key";
    for body in [by_code, by_type, in_text] {
        assert_eq!(class(429, body), SourceDead, "{body}");
    }
    assert_eq!(
        class(
            429,
            r#"{"error":{"message":"slow down","type":"rate_limit_exceeded"}}"#
        ),
        Transient
    );
    // Only 429 looks at the quota; a 500 that mentions it stays transient.
    assert_eq!(class(500, in_text), Transient);
}

#[test]
fn openai_shaped_message_and_code() {
    let body = r#"{"error":{"message":"Invalid 'messages'","type":"invalid_request_error","param":"messages","code":null}}"#;
    let e = classify_http_error(400, &[], body.as_bytes());
    assert_eq!(e.message, "Invalid 'messages'");
    assert_eq!(e.code.as_deref(), Some("invalid_request_error"));
    assert_eq!(e.retry_after_ms, None);
    let e = classify_http_error(
        401,
        &[],
        br#"{"error":{"message":"bad key","code":"invalid_api_key","type":"x"}}"#,
    );
    assert_eq!(e.code.as_deref(), Some("invalid_api_key"));
}

#[test]
fn other_json_shapes() {
    let vllm = r#"{"object":"error","message":"max_tokens too large","type":"BadRequestError","param":null,"code":400}"#;
    let e = classify_http_error(400, &[], vllm.as_bytes());
    assert_eq!(
        (e.message.as_str(), e.code.as_deref()),
        ("max_tokens too large", Some("400"))
    );
    let e = classify_http_error(400, &[], br#"{"error":"model not found"}"#);
    assert_eq!(e.message, "model not found");
    // JSON that is not an error shape: the text is the message.
    let e = classify_http_error(500, &[], br#"{"detail": "boom"}"#);
    assert_eq!(
        (e.message.as_str(), e.code),
        (r#"{"detail": "boom"}"#, None)
    );
    let e = classify_http_error(500, &[], br#"{"error":{"code":"E1"}}"#);
    assert_eq!(
        (e.message.as_str(), e.code.as_deref()),
        (r#"{"error":{"code":"E1"}}"#, Some("E1"))
    );
}

#[test]
fn empty_and_garbage_bodies() {
    let e = classify_http_error(503, &[], b"");
    assert_eq!(e.message, "HTTP 503");
    let e = classify_http_error(503, &[], b" \n\t ");
    assert_eq!(e.message, "HTTP 503");
    let e = classify_http_error(500, &[], &[0xff, 0xfe, b'o', b'k', 0x80]);
    assert_eq!(e.message, "\u{fffd}\u{fffd}ok\u{fffd}");
    let e = classify_http_error(502, &[], b"null");
    assert_eq!(e.message, "null");
}

#[test]
fn huge_bodies_are_capped_head_and_tail() {
    let body = format!("HEAD{}TAIL", " word\n".repeat(100_000));
    let e = classify_http_error(500, &[], body.as_bytes());
    assert_eq!(e.message.chars().count(), MAX_MESSAGE_CHARS);
    assert!(e.message.starts_with("HEAD word"));
    assert!(e.message.ends_with("word TAIL"));
    let multibyte = "é".repeat(5000);
    let capped = collapse_and_cap(&multibyte);
    assert_eq!(capped.chars().count(), MAX_MESSAGE_CHARS);
    assert_eq!(
        collapse_and_cap(&"y".repeat(MAX_MESSAGE_CHARS)).len(),
        MAX_MESSAGE_CHARS
    );
}

#[test]
fn retry_after_ms_header() {
    let h = |n: &str, v: &str| Header {
        name: n.into(),
        value: v.into(),
    };
    let ms = |hs: &[Header]| classify_http_error(429, hs, b"").retry_after_ms;
    assert_eq!(ms(&[h("retry-after-ms", "250")]), Some(250));
    assert_eq!(ms(&[h("Retry-After-MS", " 12.2 ")]), Some(13));
    assert_eq!(
        ms(&[h("retry-after", "3")]),
        None,
        "the host parses Retry-After"
    );
    assert_eq!(ms(&[h("retry-after-ms", "soon")]), None);
    assert_eq!(ms(&[h("retry-after-ms", "-5")]), None);
    assert_eq!(ms(&[h("retry-after-ms", "NaN")]), None);
    assert_eq!(ms(&[h("retry-after-ms", "1e300")]), Some(u64::MAX));
}

#[test]
fn in_band_error_objects() {
    use ErrorClass::*;
    let c = |v: Value| classify_error_object(&v).class;
    assert_eq!(
        c(json!({"type": "rate_limit_error", "message": "slow"})),
        Transient
    );
    assert_eq!(c(json!({"type": "overloaded_error"})), Transient);
    assert_eq!(c(json!({"code": "server_error"})), Transient);
    assert_eq!(c(json!({"code": "insufficient_quota"})), SourceDead);
    assert_eq!(c(json!({"code": "invalid_api_key"})), SourceDead);
    assert_eq!(c(json!({"type": "authentication_error"})), SourceDead);
    assert_eq!(
        c(json!({"code": 502, "message": "Provider returned error"})),
        Transient
    );
    assert_eq!(c(json!({"code": 401})), SourceDead);
    assert_eq!(
        c(json!({"status": 429, "code": "insufficient_quota"})),
        SourceDead
    );
    assert_eq!(c(json!({"code": 400})), RequestRejected);
    assert_eq!(c(json!("something broke")), Transient);
    assert_eq!(c(json!(null)), Transient);
    let e = classify_error_object(&json!("something broke"));
    assert_eq!(e.message, "something broke");
    let e = classify_error_object(&json!({}));
    assert!(!e.message.is_empty());
}
