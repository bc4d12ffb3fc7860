//! The stall budget: only non-productive waiting (429 back-off and 429 attempts, quota
//! waits, breaker cooldown waits) is charged; time in real attempts belongs to the retry
//! budget. A call stalls when its charged waiting reaches the window AND the scope produced
//! nothing for as long (or never). [`StallBudget::left`] is how long a call may still wait
//! before that holds, the bound of every wait and back-off.

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

    /// The longest wait after which the call is not yet stalled, if nothing else happens in
    /// between: condition A needs [`remaining`](Self::remaining) more charged time, and
    /// condition B needs the scope's last answer (`progress_age` ago; `None` = never) to
    /// become a window old. Zero when the call has stalled already.
    pub fn left(&self, progress_age: Option<Duration>) -> Duration {
        let until_b = progress_age.map_or(Duration::ZERO, |age| self.window.saturating_sub(age));
        self.remaining().max(until_b)
    }

    /// Has the call stalled? `progress_age` = time since the scope's last answer (`None` =
    /// never answered).
    pub fn stalled(&self, progress_age: Option<Duration>) -> bool {
        self.waited >= self.window && progress_age.is_none_or(|age| age >= self.window)
    }

    /// Clamp a planned sleep to [`left`](Self::left).
    pub fn clamp(&self, planned: Duration, progress_age: Option<Duration>) -> Duration {
        planned.min(self.left(progress_age))
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
        assert_eq!(
            b.clamp(Duration::from_secs(60), None),
            Duration::from_secs(6)
        );
        assert!(!b.stalled(None));
        b.charge(Duration::from_secs(6));
        assert!(b.stalled(None));
        assert!(b.stalled(Some(Duration::from_secs(11))));
        // Another call of the scope answered 2 s ago: the scope is alive.
        assert!(!b.stalled(Some(Duration::from_secs(2))));
    }

    #[test]
    fn left_is_the_wait_until_both_conditions_hold() {
        let s = Duration::from_secs;
        let mut b = StallBudget::new(s(10));
        b.charge(s(4));
        // Never answered: only the charged time counts.
        assert_eq!(b.left(None), s(6));
        // Answered 1 s ago: the scope is alive for 9 s more, longer than the budget.
        assert_eq!(b.left(Some(s(1))), s(9));
        assert_eq!(b.clamp(s(60), Some(s(1))), s(9));
        // Answered long ago: the budget decides.
        assert_eq!(b.left(Some(s(30))), s(6));
        b.charge(s(6));
        assert_eq!(b.left(None), Duration::ZERO);
        assert!(b.stalled(None));
        // Spent, but the scope answered 2 s ago: 8 s until it could stall.
        assert_eq!(b.left(Some(s(2))), s(8));
        // Whatever `left` says, waiting exactly that long makes the call stalled.
        for age in [
            None,
            Some(s(0)),
            Some(s(2)),
            Some(s(9)),
            Some(s(10)),
            Some(s(99)),
        ] {
            for charged in [0, 3, 10, 15] {
                let mut c = StallBudget::new(s(10));
                c.charge(s(charged));
                let l = c.left(age);
                let later = age.map(|a| a + l);
                let mut after = c.clone();
                after.charge(l);
                assert!(after.stalled(later), "{age:?} {charged}");
                if !l.is_zero() {
                    let mut before = c.clone();
                    before.charge(l - Duration::from_millis(1));
                    let earlier = age.map(|a| a + l - Duration::from_millis(1));
                    assert!(!before.stalled(earlier), "{age:?} {charged}");
                }
            }
        }
    }
}
