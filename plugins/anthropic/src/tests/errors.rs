//! `classify-error`: every class, from Anthropic's documented error bodies and from garbage.

use polygateway_plugin_sdk::{ClassifiedError, ErrorClass, Guest, Header};

use super::Anthropic;

fn classify(status: u16, headers: &[(&str, &str)], body: &str) -> ClassifiedError {
    let headers = headers
        .iter()
        .map(|(n, v)| Header {
            name: (*n).into(),
            value: (*v).into(),
        })
        .collect();
    <Anthropic as Guest>::classify_error(status, headers, body.as_bytes().to_vec())
}

fn body(kind: &str, message: &str) -> String {
    format!(
        r#"{{"type":"error","error":{{"type":"{kind}","message":"{message}"}},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}}"#
    )
}

#[test]
fn documented_statuses() {
    let cases = [
        (400, "invalid_request_error", ErrorClass::RequestRejected),
        (401, "authentication_error", ErrorClass::SourceDead),
        (402, "billing_error", ErrorClass::SourceDead),
        (403, "permission_error", ErrorClass::SourceDead),
        (404, "not_found_error", ErrorClass::SourceDead),
        (409, "conflict_error", ErrorClass::Transient),
        (413, "request_too_large", ErrorClass::RequestRejected),
        (429, "rate_limit_error", ErrorClass::Transient),
        (500, "api_error", ErrorClass::Transient),
        (504, "timeout_error", ErrorClass::Transient),
        (529, "overloaded_error", ErrorClass::Transient),
        // A billing error is the account's whatever the status says.
        (400, "billing_error", ErrorClass::SourceDead),
    ];
    for (status, kind, class) in cases {
        let e = classify(status, &[], &body(kind, "The message."));
        assert_eq!(
            e,
            ClassifiedError {
                class,
                message: "The message.".into(),
                code: Some(kind.into()),
                retry_after_ms: None,
            },
            "{status} {kind}"
        );
    }
}

#[test]
fn a_spend_cap_429_is_source_dead() {
    let cap = r#"{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits.","details":{"error_code":"enforced_spend_limit_reached"}}}"#;
    let e = classify(429, &[], cap);
    assert_eq!(e.class, ErrorClass::SourceDead);
    assert_eq!(e.code.as_deref(), Some("rate_limit_error"));
    let other = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow","details":{"error_code":"something_else"}}}"#;
    assert_eq!(
        classify(429, &[("retry-after", "3")], other).class,
        ErrorClass::Transient
    );
}

#[test]
fn garbage_bodies() {
    let e = classify(502, &[], "<html>\n <body>Bad   gateway</body>\n</html>");
    assert_eq!(
        (e.class, e.message.as_str(), e.code),
        (
            ErrorClass::Transient,
            "<html> <body>Bad gateway</body> </html>",
            None
        )
    );
    let e = classify(529, &[], "");
    assert_eq!(
        (e.class, e.message.as_str()),
        (ErrorClass::Transient, "HTTP 529")
    );
    assert_eq!(classify(401, &[], "").class, ErrorClass::SourceDead);
    assert_eq!(
        classify(400, &[], "{\"type\":\"error\",\"err").class,
        ErrorClass::RequestRejected
    );
    assert_eq!(classify(302, &[], "").class, ErrorClass::Transient);
    let e = <Anthropic as Guest>::classify_error(500, Vec::new(), vec![0xc3, 0x28, 0xff]);
    assert_eq!(e.class, ErrorClass::Transient);
    assert!(!e.message.is_empty());
}

#[test]
fn retry_hints_are_never_invented() {
    // The host reads `Retry-After` itself; Anthropic sends no hint in its bodies.
    let e = classify(
        429,
        &[("retry-after", "30")],
        &body("rate_limit_error", "slow"),
    );
    assert_eq!(e.retry_after_ms, None);
    let e = classify(529, &[("retry-after", "Wed, 21 Oct 2037 07:28:00 GMT")], "");
    assert_eq!(e.retry_after_ms, None);
}
