//! `POST /v1/chat/completions`, the OpenAI Chat Completions dialect: the body validated into
//! the neutral request (it is already that shape), a non-streamed answer as one completion
//! object, a streamed one as chunks (`sse.rs`) ending with the usage chunk the client asked
//! for and `[DONE]`. The shared flow is `dialect.rs`.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::AppState;
use super::dialect::{Dialect, StreamEncoder, serve};
use super::errors::{error_response, plain_error};
use super::sse::{ChunkEncoder, completion_body, done, error_event};
use crate::error::GatewayError;
use crate::pipeline::{ChatRequest, ChatResponse, StreamStart};
use crate::plugin::Delta;

pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve::<ChatCompletions>(state, peer, headers, body).await
}

/// The OpenAI Chat Completions dialect.
pub(crate) struct ChatCompletions;

/// A streamed answer's encoder and whether the client asked for the usage chunk
/// (`stream_options.include_usage`).
pub(crate) struct ChatStream {
    enc: ChunkEncoder,
    include_usage: bool,
}

impl Dialect for ChatCompletions {
    /// `stream_options.include_usage`.
    type Echo = bool;
    type Stream = ChatStream;

    fn parse(body: &[u8], _: &HeaderMap) -> Result<(ChatRequest, bool), GatewayError> {
        let req = ChatRequest::from_openai_body(body)?;
        let include_usage = req.include_usage;
        Ok((req, include_usage))
    }

    fn whole(r: &ChatResponse, _: &bool) -> Vec<u8> {
        completion_body(r, r.created)
    }

    fn stream(start: &StreamStart, include_usage: bool) -> ChatStream {
        ChatStream {
            enc: ChunkEncoder::new(start),
            include_usage,
        }
    }

    fn error(e: &GatewayError) -> Response {
        error_response(e)
    }

    fn plain_error(status: u16, ty: &'static str, message: &str) -> Response {
        plain_error(status, ty, message)
    }
}

impl StreamEncoder for ChatStream {
    fn delta(&mut self, d: &Delta, out: &mut Vec<u8>) {
        self.enc.encode_delta(d, out);
    }

    fn end(&mut self, r: &ChatResponse, out: &mut Vec<u8>) {
        if self.include_usage {
            out.extend_from_slice(&self.enc.usage(r.usage.as_ref()));
        }
        out.extend_from_slice(&done());
    }

    fn failed(&mut self, e: &GatewayError, out: &mut Vec<u8>) {
        out.extend_from_slice(&error_event(e));
    }
}
