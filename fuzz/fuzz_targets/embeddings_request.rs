//! The embeddings body parser (`POST /v1/embeddings`: strings, string arrays, token arrays,
//! `encoding_format`, `dimensions`) on arbitrary bytes. Properties: it never panics; a
//! refusal names the field; an accepted body has at least one input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use polygateway::GatewayError;

fuzz_target!(|body: &[u8]| {
    match polygateway::fuzzing::embeddings_body(body) {
        Ok(inputs) => assert!(inputs > 0, "accepted a body with no input"),
        Err(GatewayError::InvalidRequest { param, message }) => {
            assert!(param.is_some(), "a refusal that names no field: {message}");
        }
        Err(other) => panic!("a body is refused with {other:?}, not InvalidRequest"),
    }
});
