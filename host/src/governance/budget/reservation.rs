//! The caller's guard on a granted reservation: it settles exactly once — to the actual
//! cost with [`Reservation::settle_now`], or in `Drop` by the limiter's cancellation rule
//! (docs/limiter.md#settlement) applied to money: dropped before the upstream request was
//! sent (S1), nothing can have been billed and everything is refunded; dropped after (S3),
//! the upstream may bill the whole answer, so the whole reservation is kept
//! (docs/budgets.md#cancellation).

use std::sync::Arc;

use super::{BudgetBackend, Held};

/// A granted reservation, held by the call.
pub struct Reservation {
    backend: Arc<dyn BudgetBackend>,
    held: Option<Held>,
    sent: bool,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("held", &self.held)
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl Reservation {
    /// Guard `held`, granted by `backend`.
    pub fn new(backend: Arc<dyn BudgetBackend>, held: Held) -> Self {
        Self {
            backend,
            held: Some(held),
            sent: false,
        }
    }

    /// The upstream request has been sent: a drop from now on keeps the reservation.
    pub fn sent(&mut self) {
        self.sent = true;
    }

    /// The reserved amount, micro-USD.
    pub fn amount_micro_usd(&self) -> u64 {
        self.held.as_ref().map_or(0, |h| h.amount_micro_usd)
    }

    /// Settle to the actual cost, micro-USD. A store that cannot answer is a warning: the
    /// call has ended, and its reservation stays counted (the period's reset or a restart
    /// clears it). If this future is dropped mid-way the settlement may or may not have
    /// happened; it is never repeated (a settlement is not idempotent), so at worst the
    /// reservation stays counted, as after `sent`.
    pub async fn settle_now(mut self, actual_micro_usd: u64) {
        if let Some(held) = self.held.take()
            && let Err(e) = self.backend.settle(&held, actual_micro_usd).await
        {
            tracing::warn!(error = %e, "budget settle failed; the reservation stays counted");
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let Some(held) = self.held.take() else {
            return;
        };
        // S3: sent, possibly billed in full — keeping it is settling to the reserved amount,
        // which changes nothing in the store.
        if self.sent {
            return;
        }
        // S1: nothing was sent — refund it all (memory inline; Redis spawned on the current
        // runtime, see `BudgetBackend::settle_sync`).
        self.backend.clone().settle_sync(held, 0);
    }
}
