//! The small helpers of [`crate::json`] and [`crate::path`] (their documented examples, which
//! rustdoc cannot run on a `cdylib` crate).

use serde_json::json;

use crate::json::{camel_case, compact, count, parse_object, quote, raw};
use crate::path::{chat_path, embed_path, model_name, model_segment};

#[test]
fn json_helpers() {
    assert_eq!(raw(&json!({"a": 1})).get(), r#"{"a":1}"#);
    assert_eq!(
        compact("{ \"a\" : [1, 2.50],\n \"b\": \"x y \\\" z\" }"),
        r#"{"a":[1,2.50],"b":"x y \" z"}"#
    );
    assert_eq!(count(Some(&json!(12))), Some(12));
    assert_eq!(count(Some(&json!(3.0))), Some(3));
    assert_eq!(count(Some(&json!(2.5))), None);
    assert_eq!(count(Some(&json!(-1))), None);
    assert_eq!(count(Some(&json!("7"))), None);
    assert_eq!(count(None), None);
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
