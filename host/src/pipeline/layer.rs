//! The shape of one layer of a chat call ([`Layer`]): it gets the call and the layers below
//! it as a value (`next`, a `Layer` itself), so `stack.rs` composes the whole onion in one
//! expression and no layer names the one beneath it. Layers are zero-sized and `Copy`: the
//! composition costs nothing per call and a layer may run `next` several times (the
//! structured-output re-asks) or in another task (the cache's shared call).

use std::sync::Arc;

use crate::error::GatewayError;

use super::request::ChatRequest;
use super::response::ChatResponse;
use super::runtime::{Inner, ScopeRuntime};
use super::sink::{CallState, Sink};

/// One layer of a chat call, with the rest of the stack inside it.
pub(crate) trait Layer: Copy + Send + Sync + 'static {
    /// Serve the call `req` in `scope`: `st` is the call's state (shared by every layer),
    /// `sink` where its output goes.
    fn serve<'a>(
        self,
        inner: &'a Arc<Inner>,
        scope: &'a ScopeRuntime,
        req: &'a ChatRequest,
        st: &'a mut CallState,
        sink: &'a mut Sink,
    ) -> impl Future<Output = Result<ChatResponse, GatewayError>> + Send + 'a;
}
