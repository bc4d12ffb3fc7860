//! The request paths of the Gemini API: the model as a path segment (a `MODEL` written
//! `models/x` is used as `x`; every byte outside RFC 3986's unreserved set is
//! percent-encoded, `/` and `:` included, so a model name can never reach another endpoint or
//! method) and the three method paths under `/v1beta`.

use polygateway_plugin_sdk::BuildError;

/// The API version every path starts with (`BASE_URL` carries none).
pub const API_VERSION: &str = "v1beta";

/// The model name without the `models/` resource prefix.
///
/// # Example
/// ```text
/// assert_eq!(gemini::path::model_name("models/gemini-2.5-flash"), "gemini-2.5-flash");
/// assert_eq!(gemini::path::model_name("gemini-2.5-flash"), "gemini-2.5-flash");
/// ```
pub fn model_name(model: &str) -> &str {
    let model = model.trim();
    model.strip_prefix("models/").unwrap_or(model)
}

/// The model as one percent-encoded path segment.
///
/// Errors: an empty `MODEL` → `unsupported` (a source misconfiguration: another source may
/// serve the call).
///
/// # Example
/// ```text
/// assert_eq!(gemini::path::model_segment("models/gemini-2.5-flash").unwrap(), "gemini-2.5-flash");
/// assert_eq!(gemini::path::model_segment("a b/c:d?").unwrap(), "a%20b%2Fc%3Ad%3F");
/// assert!(gemini::path::model_segment(" ").is_err());
/// ```
pub fn model_segment(model: &str) -> Result<String, BuildError> {
    let name = model_name(model);
    if name.is_empty() {
        return Err(BuildError::Unsupported(
            "the source has no MODEL to put in the Gemini path".to_owned(),
        ));
    }
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(out)
}

/// `POST` path of a chat call: `…:generateContent`, or `…:streamGenerateContent?alt=sse`
/// (each SSE event is one `GenerateContentResponse`).
///
/// # Example
/// ```text
/// assert_eq!(gemini::path::chat_path("gemini-2.5-flash", true),
///            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
/// ```
pub fn chat_path(segment: &str, stream: bool) -> String {
    if stream {
        format!("/{API_VERSION}/models/{segment}:streamGenerateContent?alt=sse")
    } else {
        format!("/{API_VERSION}/models/{segment}:generateContent")
    }
}

/// `POST` path of an embedding batch.
///
/// # Example
/// ```text
/// assert_eq!(gemini::path::embed_path("gemini-embedding-001"),
///            "/v1beta/models/gemini-embedding-001:batchEmbedContents");
/// ```
pub fn embed_path(segment: &str) -> String {
    format!("/{API_VERSION}/models/{segment}:batchEmbedContents")
}
