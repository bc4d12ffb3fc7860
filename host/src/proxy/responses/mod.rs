//! The OpenAI Responses dialect, stateless: `POST /v1/responses` (`request.rs` maps the body
//! to the neutral request; `answer.rs` writes a whole answer as a Response object, `stream.rs`
//! a streamed one as the Responses event sequence; `reasoning.rs` carries the reasoning a
//! provider needs back in `encrypted_content`). Errors are OpenAI's shape, as on the Chat
//! Completions endpoint (`proxy/errors.rs`). docs/dialects.md#responses lists what is mapped
//! and what is refused.

mod answer;
mod reasoning;
mod request;
mod stream;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value};

use super::AppState;
use super::dialect::{Dialect, serve};
use super::errors::{error_response, plain_error};
use crate::error::GatewayError;
use crate::pipeline::{ChatRequest, ChatResponse, StreamStart};

pub(crate) use stream::ResponsesStream;

/// The OpenAI Responses dialect.
pub(crate) struct Responses;

/// The request fields a Response object repeats (`instructions`, `tools`, `tool_choice`,
/// `text`, `reasoning`, `parallel_tool_calls`, `temperature`, `top_p`, `max_output_tokens`,
/// `user`, `metadata`), with OpenAI's defaults for those the client left out.
#[derive(Debug, Clone, Default)]
pub(crate) struct Echo {
    fields: Map<String, Value>,
}

impl Dialect for Responses {
    type Echo = Echo;
    type Stream = ResponsesStream;

    fn parse(body: &[u8], _: &HeaderMap) -> Result<(ChatRequest, Echo), GatewayError> {
        request::parse(body)
    }

    fn whole(r: &ChatResponse, echo: &Echo) -> Vec<u8> {
        answer::response_body(r, echo)
    }

    fn stream(start: &StreamStart, echo: Echo) -> ResponsesStream {
        ResponsesStream::new(start, echo)
    }

    fn error(e: &GatewayError) -> Response {
        error_response(e)
    }

    fn plain_error(status: u16, ty: &'static str, message: &str) -> Response {
        plain_error(status, ty, message)
    }
}

/// `POST /v1/responses`.
pub(crate) async fn responses(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve::<Responses>(state, peer, headers, body).await
}
