//! The small helpers of [`crate::json`], [`crate::lenient`] and [`crate::path`] (their documented examples, which
//! rustdoc cannot run on a `cdylib` crate).

use serde_json::json;

use std::borrow::Cow;

use crate::json::{camel_case, compact, parse_object, quote, raw};
use crate::lenient::{Count, Lenient, Object, Unsigned};
use crate::path::{chat_path, embed_path, model_name, model_segment};

#[test]
fn json_helpers() {
    assert_eq!(raw(&json!({"a": 1})).get(), r#"{"a":1}"#);
    assert_eq!(
        compact("{ \"a\" : [1, 2.50],\n \"b\": \"x y \\\" z\" }"),
        r#"{"a":[1,2.50],"b":"x y \" z"}"#
    );
    let o = parse_object("overlay-json", r#"{"b": [1], "a": 2}"#).unwrap();
    assert_eq!(o.keys().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(o["b"].get(), "[1]");
    assert!(parse_object("overlay-json", "  ").unwrap().is_empty());
    assert_eq!(
        parse_object("overlay-json", "[1]").unwrap_err(),
        "overlay-json: expected a JSON object"
    );
    assert!(
        parse_object("overlay-json", "{")
            .unwrap_err()
            .starts_with("overlay-json: invalid JSON")
    );
    assert_eq!(camel_case("safety_settings"), "safetySettings");
    assert_eq!(camel_case("generation_config"), "generationConfig");
    assert_eq!(camel_case("topK"), "topK");
    assert_eq!(camel_case("_private"), "_private");
    assert_eq!(quote("héllo", 2), "hé…");
    assert_eq!(quote("hi", 2), "hi");
}

#[test]
fn path_helpers() {
    assert_eq!(model_name("models/gemini-2.5-flash"), "gemini-2.5-flash");
    assert_eq!(model_name(" gemini-2.5-flash "), "gemini-2.5-flash");
    assert_eq!(
        model_segment("models/gemini-2.5-flash").unwrap(),
        "gemini-2.5-flash"
    );
    assert_eq!(
        model_segment("a b/c:d?é").unwrap(),
        "a%20b%2Fc%3Ad%3F%C3%A9"
    );
    assert!(model_segment(" ").is_err());
    assert!(model_segment("models/").is_err());
    assert_eq!(
        chat_path("gemini-2.5-flash", true),
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        chat_path("gemini-2.5-flash", false),
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(
        embed_path("gemini-embedding-001"),
        "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    );
}

/// Each lenient reader takes its own type and reads every other JSON value as absent,
/// consuming it whole (the next key still parses).
#[test]
fn lenient_values() {
    let count = |t: &str| serde_json::from_str::<Lenient<Count>>(t).unwrap().0;
    assert_eq!(count("12"), Some(Count(12)));
    assert_eq!(count("3.0"), Some(Count(3)));
    for other in [
        "2.5",
        "-1",
        "\"7\"",
        "null",
        "true",
        "[1, [2]]",
        "{\"a\": {\"b\": 1}}",
    ] {
        assert_eq!(count(other), None, "{other}");
    }
    let unsigned = |t: &str| serde_json::from_str::<Lenient<Unsigned>>(t).unwrap().0;
    assert_eq!(unsigned("0"), Some(Unsigned(0)));
    assert_eq!(unsigned("0.0"), None);
    assert_eq!(unsigned("-3"), None);
    let flag = |t: &str| serde_json::from_str::<Lenient<bool>>(t).unwrap().0;
    assert_eq!(flag("true"), Some(true));
    assert_eq!(flag("\"true\""), None);
    let plain = serde_json::from_str::<Lenient<Cow<'_, str>>>("\"gemini-2.5\"").unwrap();
    assert!(matches!(plain.0, Some(Cow::Borrowed("gemini-2.5"))));
    let escaped = serde_json::from_str::<Lenient<Cow<'_, str>>>(r#""a\"b\u00e9""#).unwrap();
    assert_eq!(escaped.0.as_deref(), Some("a\"bé"));
    assert_eq!(
        serde_json::from_str::<Lenient<Cow<'_, str>>>("7")
            .unwrap()
            .0,
        None
    );
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Two {
        #[serde(default)]
        a: Option<Lenient<Count>>,
        #[serde(default)]
        b: Option<Box<Object<Two>>>,
    }
    let two: Two = serde_json::from_str(r#"{"b": [1, {"x": 2}], "a": {"y": [3]}}"#).unwrap();
    assert_eq!(
        two,
        Two {
            a: Some(Lenient(None)),
            b: Some(Box::new(Object(None)))
        }
    );
    let nested: Two = serde_json::from_str(r#"{"a": 4, "b": {"a": 5, "z": 6}}"#).unwrap();
    assert_eq!(nested.a, Some(Lenient(Some(Count(4)))));
    assert_eq!(
        nested.b,
        Some(Box::new(Object(Some(Two {
            a: Some(Lenient(Some(Count(5)))),
            b: None
        }))))
    );
}
