//! The spend layer of a call made with a virtual key (docs/budgets.md): before the call
//! goes upstream it reserves the most the call can cost (`estimate.rs`) against every budget
//! of the key and its team, atomically in the budget store; a reservation that does not fit
//! answers 429 `budget_exceeded` with the period's reset, before any upstream request. When
//! the call ends the reservation is settled to what its attempts were billed — the same
//! costs the ledger's attempt rows carry (`CallState::billed`), so the budget and
//! `GET /admin/spend` agree. It sits inside the cache layer: a hit never reserves and costs
//! nothing. Cancellation follows the limiter's rule (docs/limiter.md#settlement): a call
//! dropped before its first attempt started is refunded (S1), one dropped in flight keeps
//! its whole reservation (S3: the upstream may bill it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{GatewayError, UnavailableReason};
use crate::governance::budget::{BudgetAdmission, Reservation, rfc3339, usd_to_micro};

use super::super::layer::Layer;
use super::super::request::ChatRequest;
use super::super::response::ChatResponse;
use super::super::runtime::{Inner, ScopeRuntime};
use super::super::sink::{CallState, Sink};
use super::{estimate, owner_of};

/// The spend layer, with the layers inside it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spend<N>(pub N);

impl<N: Layer> Layer for Spend<N> {
    fn serve<'a>(
        self,
        inner: &'a Arc<Inner>,
        scope: &'a ScopeRuntime,
        req: &'a ChatRequest,
        st: &'a mut CallState,
        sink: &'a mut Sink,
    ) -> impl Future<Output = Result<ChatResponse, GatewayError>> + Send + 'a {
        charged(self.0, inner, scope, req, st, sink)
    }
}

/// A reservation held by a call, with the flag its attempts raise when the first one
/// starts; dropped unsettled, it keeps or refunds by that flag.
struct Charge {
    reservation: Option<Reservation>,
    sent: Arc<AtomicBool>,
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(mut r) = self.reservation.take() {
            if self.sent.load(Ordering::Relaxed) {
                r.sent();
            }
            drop(r);
        }
    }
}

async fn charged<N: Layer>(
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
    let lines = t.budget_lines(p).await;
    if lines.is_empty() {
        return next.serve(inner, scope, req, st, sink).await;
    }
    let Some(pricing) = inner.recorder.pricing() else {
        return Err(GatewayError::invalid(
            "model",
            "this API key has a spend budget and no PGW_PRICING_FILE is configured: the call's cost could not be bounded",
        ));
    };
    let needed_usd = estimate::max_cost(req, scope, |m| pricing.price(m))?;
    let needed = usd_to_micro(needed_usd);
    let held = match t.budgets().reserve(&lines, needed).await {
        Ok(BudgetAdmission::Granted { held, warnings }) => {
            for w in &warnings {
                tracing::warn!(
                    budget = %w.bucket,
                    soft_limit_usd = w.soft_micro_usd as f64 / 1e6,
                    total_usd = w.total_micro_usd as f64 / 1e6,
                    "soft budget limit crossed"
                );
            }
            st.budget_warnings = warnings
                .iter()
                .map(|w| {
                    format!(
                        "{} soft limit {:.6} USD crossed ({:.6} USD spent or reserved)",
                        owner_of(&w.bucket),
                        w.soft_micro_usd as f64 / 1e6,
                        w.total_micro_usd as f64 / 1e6
                    )
                })
                .collect();
            held
        }
        Ok(BudgetAdmission::Denied(d)) => {
            let now = scope.clock.unix_ms();
            return Err(GatewayError::BudgetExceeded {
                owner: owner_of(&d.bucket),
                period: d.period.as_str(),
                limit_usd: d.limit_micro_usd as f64 / 1e6,
                total_usd: d.total_micro_usd as f64 / 1e6,
                needed_usd,
                resets_at: d.resets_at_ms.map(rfc3339),
                retry_after_s: d
                    .resets_at_ms
                    .map(|t| ((t - now).max(0) as f64 / 1000.0).max(1.0)),
            });
        }
        Err(e) => {
            return Err(GatewayError::ScopeUnavailable {
                scope: scope.settings.name.to_string(),
                reason: UnavailableReason::GovernanceBackendDown,
                retry_after_s: 5.0,
                per_source_reasons: Default::default(),
                message: format!("the spend budgets of this key cannot be checked: {e}"),
            });
        }
    };
    let sent = Arc::new(AtomicBool::new(false));
    st.upstream_sent = Some(sent.clone());
    let mut charge = Charge {
        reservation: Some(Reservation::new(t.budgets().clone(), held)),
        sent,
    };
    let mut result = next.serve(inner, scope, req, st, sink).await;
    if let Ok(r) = &mut result {
        r.budget_warnings = std::mem::take(&mut st.budget_warnings);
    }
    if let Some(r) = charge.reservation.take() {
        if st.billed.unknown {
            // An attempt was billed at a price the table does not know: keep the whole
            // reservation (unknown is not free).
            let mut r = r;
            r.sent();
            drop(r);
        } else {
            r.settle_now(st.billed.micro_usd).await;
        }
    }
    result
}
