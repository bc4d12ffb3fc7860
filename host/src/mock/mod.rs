//! The scriptable mock upstream (`polygateway mock-upstream`): an OpenAI-compatible and
//! MonkeyOCR-compatible fake used by the tests, the README demo and the benchmark. Scenarios
//! are addressed by path, `/sc/<name>/…` (or the root for `default`):
//!
//! - chat: `POST /sc/<name>/v1/chat/completions` (`/v1/chat/completions`);
//! - Anthropic Messages: `POST /sc/<name>/v1/messages` (`/v1/messages`), see `anthropic.rs`;
//! - Gemini: `POST /sc/<name>/v1beta/models/{model}:generateContent`,
//!   `…:streamGenerateContent?alt=sse`, `…:batchEmbedContents`, see `gemini.rs`;
//! - embeddings: `POST /sc/<name>/v1/embeddings` (`/v1/embeddings`), see `embeddings.rs`;
//! - MonkeyOCR, base URL `http://<addr>/sc/<name>`: `POST /ocr/text`, `POST /parse`,
//!   `GET /static/<file>` (the archive a parse answer points at), `GET /health`, see `ocr.rs`
//!   and `fixtures/README.md` (the exact archive contents).
//!
//! `PUT /_mock/scenarios/<name>` scripts a scenario ([`Script`], [`Step`]; chat, embeddings,
//! `/ocr/text` and `/parse` requests consume one step each), `PUT /_mock/scenarios/<name>/health`
//! `{"status": 503}` sets its OCR health status, and `GET /_mock/scenarios/<name>/hits` lists
//! the requests it received (each hit has `path`, `at_ms`, `headers`, `authorization`, `body`
//! or `multipart`, and `completed`/`cancelled`) since it was last scripted: `count` of them,
//! the latest 10,000 in `hits` and how many older ones were dropped in `dropped`, so the log
//! of a mock under a load test stays bounded.

mod anthropic;
mod chat;
mod embeddings;
mod gemini;
mod ocr;
mod script;
mod server;

pub use anthropic::thinking_signature;
pub use embeddings::{
    DEFAULT_EMBEDDING_DIMS, embedding_base64, embedding_tokens, embedding_vector,
    token_embedding_vector,
};
pub use gemini::thought_signature;
pub use ocr::{
    LAYOUT_BAD_BOX_MIDDLE_JSON, LAYOUT_BAD_JSON_MIDDLE, LAYOUT_GOOD_MIDDLE_JSON, LAYOUT_MARKDOWN,
    NOT_ZIP_BYTES, build_archive,
};
pub use script::{Layout, Script, ScriptedToolCall, Step};
pub use server::{MockUpstream, serve_mock};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_vendors;
