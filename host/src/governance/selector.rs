//! Source selection. `SourceSelector` is the seam the selector plugins implement; the host
//! only ever offers it sources that are available for this attempt.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Picks the source of the next attempt.
pub trait SourceSelector: Send + Sync {
    /// Index (into the scope's source list) of the source to try, chosen among
    /// `available` (non-empty, ascending indexes). `previous` is the source of the call's
    /// previous attempt, if any.
    fn pick(&self, available: &[usize], previous: Option<usize>) -> usize;
}

/// Round-robin: successive calls start at successive sources; within a call, failover moves
/// to the next available source after the previous one.
#[derive(Debug, Default)]
pub struct RoundRobin {
    cursor: AtomicUsize,
}

impl SourceSelector for RoundRobin {
    fn pick(&self, available: &[usize], previous: Option<usize>) -> usize {
        match previous {
            Some(prev) => available
                .iter()
                .copied()
                .find(|&i| i > prev)
                .or_else(|| available.first().copied())
                .unwrap_or(prev),
            None => {
                let n = self.cursor.fetch_add(1, Ordering::Relaxed);
                available[n % available.len()]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_and_fails_over_in_order() {
        let rr = RoundRobin::default();
        assert_eq!(rr.pick(&[0, 1, 2], None), 0);
        assert_eq!(rr.pick(&[0, 1, 2], None), 1);
        assert_eq!(rr.pick(&[0, 1, 2], None), 2);
        assert_eq!(rr.pick(&[0, 1, 2], None), 0);
        assert_eq!(rr.pick(&[0, 1, 2], Some(0)), 1);
        assert_eq!(rr.pick(&[0, 2], Some(0)), 2);
        assert_eq!(rr.pick(&[0, 1, 2], Some(2)), 0);
        assert_eq!(rr.pick(&[1], Some(1)), 1);
    }
}
