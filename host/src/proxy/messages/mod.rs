//! The Anthropic Messages dialect: `POST /v1/messages` (`request.rs` maps the body to the
//! neutral request; `answer.rs` writes a whole answer, `stream.rs` a streamed one; `errors.rs`
//! Anthropic's error shape), `POST /v1/messages/count_tokens` (501: the gateway has no
//! tokenizer for every source's model, and a guess would be taken for a count), and the
//! Anthropic shape of `GET /v1/models`. docs/dialects.md#messages lists what is mapped and
//! what is refused.

mod answer;
mod errors;
mod request;
mod signatures;
mod stream;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use super::dialect::{Dialect, caller, serve};
use crate::error::GatewayError;
use crate::pipeline::{ChatRequest, ChatResponse, StreamStart};

pub(crate) use stream::MessagesStream;

/// The Anthropic Messages dialect.
pub(crate) struct Messages;

impl Dialect for Messages {
    type Echo = ();
    type Stream = MessagesStream;

    fn parse(body: &[u8], _: &HeaderMap) -> Result<(ChatRequest, ()), GatewayError> {
        Ok((request::parse(body)?, ()))
    }

    fn whole(r: &ChatResponse, _: &()) -> Vec<u8> {
        answer::message_body(r)
    }

    fn stream(start: &StreamStart, _: ()) -> MessagesStream {
        MessagesStream::new(start)
    }

    fn error(e: &GatewayError) -> Response {
        errors::error_response(e)
    }

    fn plain_error(status: u16, ty: &'static str, message: &str) -> Response {
        errors::plain_error(status, ty, message)
    }
}

/// `POST /v1/messages`.
pub(crate) async fn messages(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve::<Messages>(state, peer, headers, body).await
}

/// `POST /v1/messages/count_tokens`: 501 `not_supported_error`, after auth. Counting needs the
/// tokenizer of the model that will answer, which depends on the source the call would reach
/// (a scope may mix vendors), and a character-based guess returned as `input_tokens` would be
/// trusted as a count. Claude Code and the SDKs treat the failure as "no count".
pub(crate) async fn count_tokens(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(resp) = caller::<Messages>(&state, &headers, peer) {
        return *resp;
    }
    let mut resp = errors::plain_error(
        501,
        "not_supported_error",
        "count_tokens is not supported by this gateway: token counts depend on the source a call reaches; the usage of each answer is exact",
    );
    // The SDKs retry every 5xx unless told not to: a retry would only get the same answer.
    resp.headers_mut().insert(
        super::errors::SHOULD_RETRY,
        axum::http::HeaderValue::from_static("false"),
    );
    resp
}

/// The Anthropic list of models (`GET /v1/models` with an `anthropic-version` header): one
/// model object per scope alias. `created_at` is the Unix epoch: an alias has no creation
/// time.
pub(crate) fn models_list(aliases: &[String]) -> Response {
    let data: Vec<_> = aliases
        .iter()
        .map(|a| {
            json!({"type": "model", "id": a, "display_name": a, "created_at": "1970-01-01T00:00:00Z"})
        })
        .collect();
    axum::Json(json!({
        "data": data,
        "has_more": false,
        "first_id": aliases.first(),
        "last_id": aliases.last(),
    }))
    .into_response()
}

/// An authentication failure in Anthropic's shape, for the models list.
pub(crate) fn auth_error(status: u16, ty: &'static str, message: &str) -> Response {
    errors::plain_error(status, ty, message)
}
