//! Virtual keys in the call (docs/keys.md, docs/budgets.md): what a call made with a virtual
//! key goes through besides a scope's own governance, on the process-wide runtime of
//! `runtime/tenancy.rs` (the registry, the budget store, the per-owner gates). Two layers of
//! the chat stack: [`Access`] (`access.rs`: the key's scopes, then its and its team's RPM /
//! TPM / concurrency gates, held for the whole call) outside the cache, so a hit is still a
//! request; [`Spend`] (`spend.rs`: reserve the call's most possible cost against every budget
//! of the key and its team, settle to what its attempts were billed) inside it, so a hit
//! costs nothing. `lean.rs` does the same for embeddings and OCR; `estimate.rs` bounds a
//! call's tokens and cost before it runs. A call without a virtual key (a static key, an
//! embedded call) passes untouched.

mod access;
mod estimate;
pub(crate) mod lean;
mod spend;

use crate::error::GatewayError;
use crate::keys::Principal;

pub(crate) use access::Access;
pub(crate) use spend::Spend;

/// A call of `principal` may use `model` (its scopes); `Ok` without a virtual key.
///
/// Errors: 403 `model_not_allowed`.
pub(crate) fn may_use(principal: Option<&Principal>, model: &str) -> Result<(), GatewayError> {
    match principal {
        Some(p) if !p.may_use(model) => Err(GatewayError::ModelNotAllowed {
            key_id: p.key.id.clone(),
            model: model.to_string(),
        }),
        _ => Ok(()),
    }
}

/// `key <id>` or `team <id>`, from a bucket `key:<id>:<period>`.
pub(crate) fn owner_of(bucket: &str) -> String {
    let mut it = bucket.splitn(3, ':');
    match (it.next(), it.next()) {
        (Some(kind), Some(id)) => format!("{kind} {id}"),
        _ => bucket.to_string(),
    }
}
