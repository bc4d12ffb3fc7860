//! The stall budget (reference §7.3, issue-8 correction): only non-productive waiting
//! (429 back-off and 429 attempts, quota waits, breaker cooldown waits) is charged; time in
//! real attempts belongs to the retry budget. A call stalls when its charged waiting reaches
//! the window AND the scope produced nothing for as long (or never).

use std::time::Duration;

/// One call's stall account.
#[derive(Debug, Clone)]
pub struct StallBudget {
    window: Duration,
    waited: Duration,
}

impl StallBudget {
    /// A budget of `window` (`{SCOPE}__BACKPRESSURE__STALL_WINDOW_S`).
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            waited: Duration::ZERO,
        }
    }

    /// Charge non-productive time.
    pub fn charge(&mut self, d: Duration) {
        self.waited += d;
    }

    /// Budget left before condition A holds.
    pub fn remaining(&self) -> Duration {
        self.window.saturating_sub(self.waited)
    }

    /// Has the call stalled? `progress_age` = time since the scope's last answer (`None` =
    /// never answered).
    pub fn stalled(&self, progress_age: Option<Duration>) -> bool {
        self.waited >= self.window && progress_age.is_none_or(|age| age >= self.window)
    }

    /// Clamp a planned sleep to the budget left.
    pub fn clamp(&self, planned: Duration) -> Duration {
        planned.min(self.remaining())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_conditions_are_needed() {
        let mut b = StallBudget::new(Duration::from_secs(10));
        b.charge(Duration::from_secs(4));
        assert_eq!(b.remaining(), Duration::from_secs(6));
        assert_eq!(b.clamp(Duration::from_secs(60)), Duration::from_secs(6));
        assert!(!b.stalled(None));
        b.charge(Duration::from_secs(6));
        assert!(b.stalled(None));
        assert!(b.stalled(Some(Duration::from_secs(11))));
        // Another call of the scope answered 2 s ago: the scope is alive.
        assert!(!b.stalled(Some(Duration::from_secs(2))));
    }
}
