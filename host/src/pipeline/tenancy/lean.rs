//! Virtual keys on the one-shot calls (embeddings, OCR): the same scope check, the same
//! per-key and per-team gates as a chat call (`access.rs`), and for embeddings the same
//! budgets (`spend.rs`): a reservation of the inputs' token bound at the dearest embedding
//! source's input price, settled to what the call's attempts were billed. OCR answers carry
//! no token usage and the ledger prices them at nothing, so its budgets are not charged.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{GatewayError, UnavailableReason};
use crate::governance::budget::{BudgetAdmission, Reservation, usd_to_micro};
use crate::governance::limiter::{FailureKind, Permit};
use crate::keys::Principal;

use super::super::lean::LeanState;
use super::super::runtime::gates;
use super::super::runtime::{Inner, ScopeRuntime};
use super::owner_of;

/// What a lean call of a virtual key holds while it runs.
#[derive(Default)]
pub(crate) struct LeanGate {
    permits: Vec<Permit>,
    reservation: Option<(Reservation, Arc<AtomicBool>)>,
}

/// Admit a lean call of `principal`: its scope, its and its team's gates, and (when
/// `prompt_tokens` is given: embeddings) its budgets, reserving `prompt_tokens` at the
/// dearest input price of the sources that serve it (`serves`).
///
/// Errors: 403 `model_not_allowed`, 429 `key_rate_limited` / `budget_exceeded`, 400 for a
/// budgeted call on an unpriced model, 503 when a store cannot answer.
pub(crate) async fn admit(
    inner: &Inner,
    scope: &ScopeRuntime,
    principal: Option<&Arc<Principal>>,
    model: &str,
    prompt_tokens: Option<u64>,
    serves: impl Fn(&super::super::runtime::SourceRuntime) -> bool,
    st: &mut LeanState,
) -> Result<LeanGate, GatewayError> {
    let (Some(p), Some(t)) = (principal, &inner.tenancy) else {
        return Ok(LeanGate::default());
    };
    super::may_use(Some(p), model)?;
    let scope_name = scope.settings.name.as_ref();
    let est = prompt_tokens.unwrap_or(0);
    let mut gate = LeanGate::default();
    gate.permits.extend(
        t.gates
            .admit(
                &format!("key {}", p.key.id),
                gates::limits(&p.key.limits),
                est,
                scope_name,
            )
            .await?,
    );
    if let Some(team) = &p.team {
        gate.permits.extend(
            t.gates
                .admit(
                    &format!("team {}", team.id),
                    gates::limits(&team.limits),
                    est,
                    scope_name,
                )
                .await?,
        );
    }
    for permit in &mut gate.permits {
        permit.transport_started();
    }
    let lines = t.budget_lines(p).await;
    let Some(prompt) = prompt_tokens.filter(|_| !lines.is_empty()) else {
        return Ok(gate);
    };
    let Some(pricing) = inner.recorder.pricing() else {
        return Err(GatewayError::invalid(
            "model",
            "this API key has a spend budget and no PGW_PRICING_FILE is configured: the call's cost could not be bounded",
        ));
    };
    let mut most = 0.0f64;
    for s in scope.sources.iter().filter(|s| serves(s)) {
        let Some(price) = pricing.price(&s.settings.model) else {
            return Err(GatewayError::invalid(
                "model",
                format!(
                    "this API key has a spend budget, and model `{}` of source {} has no price in PGW_PRICING_FILE: the call's cost could not be bounded",
                    s.settings.model, s.settings.name
                ),
            ));
        };
        most = most.max(prompt as f64 * price.input / 1_000_000.0);
    }
    let needed = usd_to_micro(most);
    match t.budgets().reserve(&lines, needed).await {
        Ok(BudgetAdmission::Granted { held, warnings }) => {
            for w in &warnings {
                tracing::warn!(budget = %w.bucket, total_usd = w.total_micro_usd as f64 / 1e6, "soft budget limit crossed");
            }
            let sent = Arc::new(AtomicBool::new(false));
            st.upstream_sent = Some(sent.clone());
            gate.reservation = Some((Reservation::new(t.budgets().clone(), held), sent));
            Ok(gate)
        }
        Ok(BudgetAdmission::Denied(d)) => {
            let now = scope.clock.unix_ms();
            Err(GatewayError::BudgetExceeded {
                owner: owner_of(&d.bucket),
                period: d.period.as_str(),
                limit_usd: d.limit_micro_usd as f64 / 1e6,
                total_usd: d.total_micro_usd as f64 / 1e6,
                needed_usd: most,
                resets_at: d.resets_at_ms.map(crate::governance::budget::rfc3339),
                retry_after_s: d
                    .resets_at_ms
                    .map(|r| ((r - now).max(0) as f64 / 1000.0).max(1.0)),
            })
        }
        Err(e) => Err(GatewayError::ScopeUnavailable {
            scope: scope_name.to_string(),
            reason: UnavailableReason::GovernanceBackendDown,
            retry_after_s: 5.0,
            per_source_reasons: Default::default(),
            message: format!("the spend budgets of this key cannot be checked: {e}"),
        }),
    }
}

impl LeanGate {
    /// Settle after the call: the gates with its tokens (`None`: unknown, keep the
    /// pre-charge), the budgets with what its attempts were billed.
    pub(crate) async fn settle(mut self, st: &LeanState, tokens: Option<u64>, failed: bool) {
        for mut permit in self.permits.drain(..) {
            match tokens {
                Some(n) if !failed => permit.usage_known(n),
                _ if st.attempts == 0 => permit.failed(FailureKind::Unclassified),
                _ => permit.failed(FailureKind::Transient),
            }
            permit.settle_now().await;
        }
        if let Some((mut r, _)) = self.reservation.take() {
            if st.billed.unknown {
                r.sent();
                drop(r);
            } else {
                r.settle_now(st.billed.micro_usd).await;
            }
        }
    }
}

impl Drop for LeanGate {
    fn drop(&mut self) {
        if let Some((mut r, sent)) = self.reservation.take() {
            if sent.load(Ordering::Relaxed) {
                r.sent();
            }
            drop(r);
        }
    }
}
