//! Embeddings: the `batchEmbedContents` request, token inputs refused, the answer's vectors in
//! order with no usage, and bad answers classified.

use polygateway_plugin_sdk::{
    AuthScheme, BuildError, EmbeddingGuest, EmbeddingInputs, EmbeddingRequest, ErrorClass,
};

use super::source;
use crate::Gemini;

fn texts(texts: &[&str], dimensions: Option<u32>) -> EmbeddingRequest {
    EmbeddingRequest {
        inputs: EmbeddingInputs::Texts(texts.iter().map(|t| (*t).to_owned()).collect()),
        dimensions,
    }
}

#[test]
fn batch_request() {
    let mut s = source();
    s.model = "models/gemini-embedding-001".into();
    let http = <Gemini as EmbeddingGuest>::build_embedding_request(
        texts(
            &["What is the meaning of life?", "How does the brain work?"],
            Some(256),
        ),
        s.clone(),
    )
    .unwrap();
    assert_eq!(http.method, "POST");
    assert_eq!(
        http.path,
        "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    );
    assert_eq!(http.auth, AuthScheme::Header("x-goog-api-key".into()));
    assert_eq!(
        String::from_utf8(http.body).unwrap(),
        concat!(
            r#"{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"What is the meaning of life?"}]},"outputDimensionality":256},"#,
            r#"{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"How does the brain work?"}]},"outputDimensionality":256}]}"#
        )
    );
    let http = <Gemini as EmbeddingGuest>::build_embedding_request(texts(&["hi"], None), s.clone())
        .unwrap();
    assert_eq!(
        String::from_utf8(http.body).unwrap(),
        r#"{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"hi"}]}}]}"#
    );
    let tokens = EmbeddingRequest {
        inputs: EmbeddingInputs::Tokens(vec![vec![15339]]),
        dimensions: None,
    };
    assert!(matches!(
        <Gemini as EmbeddingGuest>::build_embedding_request(tokens, s.clone()),
        Err(BuildError::Unsupported(_))
    ));
    assert!(matches!(
        <Gemini as EmbeddingGuest>::build_embedding_request(texts(&[], None), s),
        Err(BuildError::InvalidRequest(_))
    ));
}

#[test]
fn answers_in_order_without_usage() {
    let body = br#"{
  "embeddings": [
    {"values": [-0.022374554, -0.004560777, 0.013309286]},
    {"values": [-0.007975887, -0.02141119, -0.0016711014]}
  ]
}"#;
    let r = <Gemini as EmbeddingGuest>::parse_embedding_response(body.to_vec()).unwrap();
    assert_eq!(
        r.vectors,
        vec![
            vec![-0.022_374_554, -0.004_560_777, 0.013_309_286],
            vec![-0.007_975_887, -0.021_411_19, -0.001_671_101_4]
        ]
    );
    assert_eq!((r.usage, r.model), (None, None));
    // A count mismatch is the host's to judge: the vectors are returned as they came.
    let r = <Gemini as EmbeddingGuest>::parse_embedding_response(br#"{"embeddings":[]}"#.to_vec())
        .unwrap();
    assert!(r.vectors.is_empty());
    let e = <Gemini as EmbeddingGuest>::parse_embedding_response(
        br#"{"embeddings":[{"values":[1]},{}]}"#.to_vec(),
    )
    .unwrap_err();
    assert_eq!(
        (e.class, e.message.as_str()),
        (ErrorClass::ResultInvalid, "embedding 1 has no values")
    );
    let e = <Gemini as EmbeddingGuest>::parse_embedding_response(
        br#"{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}"#.to_vec(),
    )
    .unwrap_err();
    assert_eq!(e.class, ErrorClass::RequestRejected);
    for garbage in [
        &b"<html>"[..],
        b"",
        b"{}",
        b"{\"embeddings\":{}}",
        b"\xff\xfe",
    ] {
        let e = <Gemini as EmbeddingGuest>::parse_embedding_response(garbage.to_vec()).unwrap_err();
        assert_eq!(e.class, ErrorClass::Transient, "{garbage:?}");
        assert!(e.message.starts_with("malformed embeddings body"));
    }
}
