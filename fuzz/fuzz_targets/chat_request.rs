//! The chat-completions body parser and its validation
//! (`polygateway::pipeline::ChatRequest::from_openai_body`) on arbitrary bytes. Properties:
//! it never panics; a body it accepts validates again; a refusal is an `invalid_request`
//! error with a message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use polygateway::GatewayError;
use polygateway::pipeline::ChatRequest;

fuzz_target!(|body: &[u8]| {
    match ChatRequest::from_openai_body(body) {
        Ok(req) => {
            assert!(!req.model.is_empty(), "accepted an empty model");
            assert!(req.validate().is_ok(), "an accepted body fails validation");
        }
        Err(GatewayError::InvalidRequest { message, .. }) => {
            assert!(!message.is_empty(), "a refusal without a message");
        }
        Err(other) => panic!("a body is refused with {other:?}, not InvalidRequest"),
    }
});
