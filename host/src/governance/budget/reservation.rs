//! The caller's guard on a granted reservation: it settles exactly once — to the actual
//! cost with [`Reservation::settle_now`], or in `Drop` by the limiter's cancellation rule
//! (docs/limiter.md#settlement) applied to money: dropped before the upstream request was
//! sent (S1), nothing can have been billed and everything is refunded; dropped after (S3),
//! the upstream may bill the whole answer, so the whole reservation is kept.

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

    /// Settle to the actual cost. A store that cannot answer is a warning: the call has
    /// ended, and its reservation stays counted (the period's reset or a restart clears it).
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
        // S1: nothing was sent — refund it all.
        let backend = self.backend.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Err(e) = backend.settle(&held, 0).await {
                        tracing::warn!(error = %e, "budget refund failed; the reservation stays counted");
                    }
                });
            }
            Err(_) => {
                tracing::warn!("budget reservation dropped outside a tokio runtime: not refunded");
            }
        }
    }
}
