//! `classify-error`: every class with its code and message, `RetryInfo.retryDelay` forms,
//! the array wrapper, key and project `ErrorInfo` reasons, and the fallbacks for bodies that
//! are not Google-shaped.

use polygateway_plugin_sdk::{ClassifiedError, ErrorClass, Guest, Header};
use serde_json::json;

use crate::Gemini;
use crate::errors::duration_ms;

fn classify(status: u16, body: &serde_json::Value) -> ClassifiedError {
    <Gemini as Guest>::classify_error(status, vec![], body.to_string().into_bytes())
}

fn google(code: u16, status: &str, message: &str, details: serde_json::Value) -> serde_json::Value {
    json!({"error": {"code": code, "message": message, "status": status, "details": details}})
}

fn retry(delay: &str) -> serde_json::Value {
    json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay})
}

#[test]
fn every_status_has_its_class() {
    for (status, class) in [
        ("RESOURCE_EXHAUSTED", ErrorClass::Transient),
        ("UNAVAILABLE", ErrorClass::Transient),
        ("INTERNAL", ErrorClass::Transient),
        ("DEADLINE_EXCEEDED", ErrorClass::Transient),
        ("ABORTED", ErrorClass::Transient),
        ("PERMISSION_DENIED", ErrorClass::SourceDead),
        ("UNAUTHENTICATED", ErrorClass::SourceDead),
        ("NOT_FOUND", ErrorClass::SourceDead),
        ("FAILED_PRECONDITION", ErrorClass::SourceDead),
        ("INVALID_ARGUMENT", ErrorClass::RequestRejected),
        ("OUT_OF_RANGE", ErrorClass::RequestRejected),
    ] {
        let e = classify(400, &google(400, status, "what happened", json!([])));
        assert_eq!(
            (
                e.class,
                e.code.as_deref(),
                e.message.as_str(),
                e.retry_after_ms
            ),
            (class, Some(status), "what happened", None),
            "{status}"
        );
    }
}

#[test]
fn resource_exhausted_carries_the_retry_delay() {
    let body = google(
        429,
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota.",
        json!([
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "quotaValue": "10"}]},
            {"@type": "type.googleapis.com/google.rpc.Help", "links": []},
            retry("17s")
        ]),
    );
    let e = classify(429, &body);
    assert_eq!(
        e,
        ClassifiedError {
            class: ErrorClass::Transient,
            message: "You exceeded your current quota.".into(),
            code: Some("RESOURCE_EXHAUSTED".into()),
            retry_after_ms: Some(17_000),
        }
    );
    // Google sometimes wraps the error in an array.
    let wrapped = json!([google(
        429,
        "RESOURCE_EXHAUSTED",
        "slow",
        json!([retry("1.5s")])
    )]);
    assert_eq!(classify(429, &wrapped).retry_after_ms, Some(1500));
    // The body's hint wins over a retry-after-ms header; the header is used without one.
    let header = Header {
        name: "retry-after-ms".into(),
        value: "900".into(),
    };
    let e =
        <Gemini as Guest>::classify_error(429, vec![header.clone()], body.to_string().into_bytes());
    assert_eq!(e.retry_after_ms, Some(17_000));
    let e = <Gemini as Guest>::classify_error(
        429,
        vec![header],
        google(429, "RESOURCE_EXHAUSTED", "x", json!([]))
            .to_string()
            .into_bytes(),
    );
    assert_eq!(e.retry_after_ms, Some(900));
}

#[test]
fn retry_delay_durations() {
    for (text, ms) in [
        ("17s", Some(17_000)),
        ("1.5s", Some(1_500)),
        ("0.25s", Some(250)),
        ("10.250s", Some(10_250)),
        ("0.0001s", Some(1)),
        ("2.000000000s", Some(2_000)),
        ("0s", Some(0)),
        (".5s", Some(500)),
        (" 3s ", Some(3_000)),
        ("99999999999999999999s", None),
        ("-1s", None),
        ("s", None),
        ("1.2.3s", None),
        ("17", None),
        ("1e3s", None),
        ("", None),
    ] {
        assert_eq!(duration_ms(text), ms, "{text:?}");
    }
}

#[test]
fn key_and_project_reasons_are_source_dead() {
    let body = google(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        json!([
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}},
            {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": "API key not valid. Please pass a valid API key."}
        ]),
    );
    let e = classify(400, &body);
    assert_eq!(
        (e.class, e.code.as_deref()),
        (ErrorClass::SourceDead, Some("INVALID_ARGUMENT"))
    );
    let body = google(
        403,
        "PERMISSION_DENIED",
        "Generative Language API has not been used in project 1 before or it is disabled.",
        json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED"}]),
    );
    assert_eq!(classify(403, &body).class, ErrorClass::SourceDead);
    // An ErrorInfo about something else does not change the class.
    let body = google(
        400,
        "INVALID_ARGUMENT",
        "bad",
        json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED"}]),
    );
    assert_eq!(classify(400, &body).class, ErrorClass::RequestRejected);
}

#[test]
fn bodies_without_a_status_fall_back_to_http() {
    let e = classify(403, &json!({"error": {"code": 403, "message": "nope"}}));
    assert_eq!(
        (e.class, e.message.as_str(), e.code.as_deref()),
        (ErrorClass::SourceDead, "nope", Some("403"))
    );
    // An unknown status name: the HTTP status decides, the name is still the code.
    let e = classify(503, &google(503, "SOMETHING_NEW", "hm", json!([])));
    assert_eq!(
        (e.class, e.code.as_deref()),
        (ErrorClass::Transient, Some("SOMETHING_NEW"))
    );
    let e =
        <Gemini as Guest>::classify_error(502, vec![], b"<html>\n Bad   gateway </html>".to_vec());
    assert_eq!(
        (e.class, e.message.as_str()),
        (ErrorClass::Transient, "<html> Bad gateway </html>")
    );
    let e = <Gemini as Guest>::classify_error(401, vec![], Vec::new());
    assert_eq!(
        (e.class, e.message.as_str()),
        (ErrorClass::SourceDead, "HTTP 401")
    );
    let e = <Gemini as Guest>::classify_error(400, vec![], b"[]".to_vec());
    assert_eq!(e.class, ErrorClass::RequestRejected);
    // A message-less Google error keeps a non-empty message.
    let e = classify(500, &json!({"error": {"status": "INTERNAL"}}));
    assert!(!e.message.is_empty());
    assert_eq!(e.code.as_deref(), Some("INTERNAL"));
}
