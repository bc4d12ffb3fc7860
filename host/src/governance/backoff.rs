//! Exponential back-off with jitter: `min(base × 2^retry, max) × uniform(0.5, 1.5)`, then
//! the larger of that and the upstream's retry hint (a hint above `max` is honoured). This is
//! the planned delay only: the retry loop bounds every sleep by what is left of the call's
//! stall window and deadline, and ends the call when the hint alone is beyond that.

use std::time::Duration;

/// The sleep before retry number `retry` (0 = the first retry). `jitter` is a uniform draw
/// in `[0, 1)` supplied by the caller, so the function is deterministic under test.
pub fn backoff_delay(
    base: Duration,
    max: Duration,
    retry: u32,
    jitter: f64,
    retry_after: Option<Duration>,
) -> Duration {
    let exp = base.as_secs_f64() * 2f64.powi(retry.min(30) as i32);
    let capped = exp.min(max.as_secs_f64());
    let jittered = capped * (0.5 + jitter.clamp(0.0, 1.0));
    let d = Duration::from_secs_f64(jittered.max(0.0));
    match retry_after {
        Some(ra) if ra > d => ra,
        _ => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_caps_and_honours_retry_after() {
        let b = Duration::from_millis(500);
        let m = Duration::from_secs(4);
        assert_eq!(
            backoff_delay(b, m, 0, 0.5, None),
            Duration::from_millis(500)
        );
        assert_eq!(backoff_delay(b, m, 2, 0.5, None), Duration::from_secs(2));
        assert_eq!(backoff_delay(b, m, 10, 0.5, None), Duration::from_secs(4));
        assert_eq!(
            backoff_delay(b, m, 0, 0.0, None),
            Duration::from_millis(250)
        );
        assert_eq!(
            backoff_delay(b, m, 10, 0.999_999_999, None).as_millis(),
            5999
        );
        assert_eq!(
            backoff_delay(b, m, 0, 0.5, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            backoff_delay(b, m, 3, 0.5, Some(Duration::from_secs(1))),
            Duration::from_secs(4)
        );
    }
}
