//! Entry points for the fuzz targets of `fuzz/` into parsers that are not public API (hidden
//! from the docs; not for embedding use). Each forwards to the one function the gateway
//! itself calls, so a target exercises exactly the production parser.

use crate::GatewayError;

/// Parse a `POST /v1/embeddings` body as the proxy does; `Ok` is the number of inputs.
///
/// Errors: [`GatewayError::InvalidRequest`] naming the field at fault.
pub fn embeddings_body(body: &[u8]) -> Result<usize, GatewayError> {
    crate::proxy::parse_embeddings_body(body)
}
