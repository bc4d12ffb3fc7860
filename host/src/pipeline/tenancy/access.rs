//! The access layer of a call made with a virtual key (docs/keys.md#limits): the key may
//! call this model (its scopes), and neither the key's nor its team's RPM, TPM or
//! concurrency gate is full. The gates hold for the whole call and settle with its tokens
//! (a cache hit's: 0; an answer without usage: the pre-charge, as the limiter's settlement
//! rule S3 keeps it). A full gate answers 429 at once: a client over its own limit is told
//! so, not queued.

use std::sync::Arc;

use crate::error::GatewayError;
use crate::governance::limiter::{FailureKind, Permit};

use super::super::layer::Layer;
use super::super::request::ChatRequest;
use super::super::response::ChatResponse;
use super::super::runtime::gates;
use super::super::runtime::{Inner, ScopeRuntime};
use super::super::sink::{CallState, Sink};
use super::estimate;

/// The access layer, with the layers inside it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Access<N>(pub N);

impl<N: Layer> Layer for Access<N> {
    fn serve<'a>(
        self,
        inner: &'a Arc<Inner>,
        scope: &'a ScopeRuntime,
        req: &'a ChatRequest,
        st: &'a mut CallState,
        sink: &'a mut Sink,
    ) -> impl Future<Output = Result<ChatResponse, GatewayError>> + Send + 'a {
        gated(self.0, inner, scope, req, st, sink)
    }
}

async fn gated<N: Layer>(
    next: N,
    inner: &Arc<Inner>,
    scope: &ScopeRuntime,
    req: &ChatRequest,
    st: &mut CallState,
    sink: &mut Sink,
) -> Result<ChatResponse, GatewayError> {
    let (Some(p), Some(t)) = (&req.principal, &inner.tenancy) else {
        return next.serve(inner, scope, req, st, sink).await;
    };
    super::may_use(Some(p), &req.model)?;
    let key_limits = gates::limits(&p.key.limits);
    let team_limits = p.team.as_ref().map(|team| gates::limits(&team.limits));
    if key_limits.is_unlimited() && team_limits.is_none_or(|l| l.is_unlimited()) {
        return next.serve(inner, scope, req, st, sink).await;
    }
    let est = estimate::max_tokens(req, scope);
    let scope_name = scope.settings.name.as_ref();
    let mut permits: Vec<Permit> = Vec::with_capacity(2);
    let key_owner = format!("key {}", p.key.id);
    permits.extend(
        t.gates
            .admit(&key_owner, key_limits, est, scope_name)
            .await?,
    );
    if let (Some(team), Some(limits)) = (&p.team, team_limits) {
        // A refusal here drops the key's permit unsent: it settles 0 (S1).
        let team_owner = format!("team {}", team.id);
        permits.extend(t.gates.admit(&team_owner, limits, est, scope_name).await?);
    }
    for permit in &mut permits {
        // From here a cancelled call keeps its pre-charge (S3), as an attempt in flight does.
        permit.transport_started();
    }
    let result = next.serve(inner, scope, req, st, sink).await;
    for mut permit in permits {
        match &result {
            Ok(r) if r.cache_hit => permit.usage_known(0),
            Ok(r) => {
                if let Some(u) = r.usage {
                    permit.usage_known(u.prompt_tokens.saturating_add(u.completion_tokens));
                }
            }
            // Nothing went upstream: nothing to keep.
            Err(_) if st.attempts == 0 => permit.failed(FailureKind::Unclassified),
            Err(_) => permit.failed(FailureKind::Transient),
        }
        permit.settle_now().await;
    }
    result
}
