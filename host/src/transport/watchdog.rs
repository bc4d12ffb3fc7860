//! The stream liveness watchdog: TTFT, inter-token and total limits for one
//! attempt. Any token counts, reasoning included; keep-alive comments do not.
//! Time comes from `tokio::time::Instant`, so tests drive it with a paused clock.

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::Poll;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use crate::config::TimeoutSettings;

/// Which limit fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LivenessTimeout {
    /// No first token within `TTFT_TIMEOUT_S`.
    Ttft,
    /// Silence between tokens longer than `INTER_TOKEN_TIMEOUT_S`.
    InterToken,
    /// The attempt as a whole exceeded `TIMEOUT_S`.
    Total,
}

impl LivenessTimeout {
    /// Stable name for logs and telemetry.
    pub fn as_str(self) -> &'static str {
        match self {
            LivenessTimeout::Ttft => "ttft_timeout",
            LivenessTimeout::InterToken => "inter_token_timeout",
            LivenessTimeout::Total => "total_timeout",
        }
    }
}

/// One timer for every read of a stream: each read races the timer, reset to that read's
/// deadline. Pushing the deadline later (the usual case: a token arrived) only moves the
/// registered timer's expiry; it is not taken out of and put back into the timer wheel, as
/// a fresh `tokio::time::timeout` per read would be.
#[derive(Debug)]
pub struct LivenessTimer {
    sleep: Pin<Box<Sleep>>,
}

impl LivenessTimer {
    /// A timer first due at `deadline`.
    pub fn new(deadline: Instant) -> Self {
        Self {
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
        }
    }

    /// Run `fut` until it finishes (`Some`) or `deadline` passes first (`None`).
    ///
    /// The deadline is checked before every poll of `fut`, so a stream that always has
    /// bytes ready cannot keep an expired deadline from firing. Each poll also spends one
    /// unit of the task's cooperative budget (tokio's `coop`): a loop of reads that are
    /// always ready still hands the worker back now and then, so the timers around the
    /// attempt (the call deadline) get polled and other tasks on the worker run.
    pub async fn run<F: Future>(&mut self, deadline: Instant, fut: F) -> Option<F::Output> {
        if self.sleep.deadline() != deadline {
            self.sleep.as_mut().reset(deadline);
        }
        let mut fut = pin!(fut);
        let sleep = &mut self.sleep;
        std::future::poll_fn(|cx| {
            if Instant::now() >= deadline {
                return Poll::Ready(None);
            }
            let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
            if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                coop.made_progress();
                return Poll::Ready(Some(out));
            }
            match sleep.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }
}

/// Liveness state of one attempt.
#[derive(Debug, Clone)]
pub struct Watchdog {
    started: Instant,
    limits: TimeoutSettings,
    first_token: Option<Instant>,
    last_token: Option<Instant>,
    /// Whether a second token arrived (possibly at the same instant, in the same read).
    second_token: bool,
    max_gap: Duration,
}

impl Watchdog {
    /// Start watching now (the request is about to be sent).
    pub fn start(limits: TimeoutSettings) -> Self {
        Self {
            started: Instant::now(),
            limits,
            first_token: None,
            last_token: None,
            second_token: false,
            max_gap: Duration::ZERO,
        }
    }

    /// When the attempt started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The earliest instant at which some limit fires, and which.
    pub fn next_deadline(&self) -> (Instant, LivenessTimeout) {
        let total = self.started + self.limits.total;
        let (d, kind) = match self.last_token {
            None => (self.started + self.limits.ttft, LivenessTimeout::Ttft),
            Some(t) => (t + self.limits.inter_token, LivenessTimeout::InterToken),
        };
        if total <= d {
            (total, LivenessTimeout::Total)
        } else {
            (d, kind)
        }
    }

    /// The deadline of a non-streamed attempt: only the total limit applies.
    pub fn total_deadline(&self) -> Instant {
        self.started + self.limits.total
    }

    /// A token (content, reasoning or tool-call fragment) arrived at `now`. Tokens of one
    /// upstream read arrive at the same instant: a stream read whole has a longest gap of
    /// zero. A non-streamed answer reports one arrival for its whole body (its tokens have
    /// no gaps to measure).
    pub fn on_token(&mut self, now: Instant) {
        if self.first_token.is_none() {
            self.first_token = Some(now);
        }
        if let Some(last) = self.last_token {
            self.second_token = true;
            self.max_gap = self.max_gap.max(now.saturating_duration_since(last));
        }
        self.last_token = Some(now);
    }

    /// Time to first token, if one arrived.
    pub fn ttft(&self) -> Option<Duration> {
        self.first_token
            .map(|t| t.saturating_duration_since(self.started))
    }

    /// Longest gap between two tokens (none before the second token).
    pub fn max_inter_token(&self) -> Option<Duration> {
        self.second_token.then_some(self.max_gap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tokens_of_one_read_have_a_longest_gap_of_zero() {
        let mut w = Watchdog::start(TimeoutSettings {
            total: Duration::from_secs(10),
            ttft: Duration::from_secs(4),
            inter_token: Duration::from_secs(2),
        });
        tokio::time::advance(Duration::from_millis(30)).await;
        let now = Instant::now();
        w.on_token(now);
        assert_eq!(w.max_inter_token(), None);
        w.on_token(now);
        w.on_token(now);
        assert_eq!(w.ttft(), Some(Duration::from_millis(30)));
        assert_eq!(w.max_inter_token(), Some(Duration::ZERO));
    }

    #[tokio::test(start_paused = true)]
    async fn deadlines_follow_tokens() {
        let limits = TimeoutSettings {
            total: Duration::from_secs(10),
            ttft: Duration::from_secs(4),
            inter_token: Duration::from_secs(2),
        };
        let mut w = Watchdog::start(limits);
        let t0 = w.started();
        assert_eq!(
            w.next_deadline(),
            (t0 + Duration::from_secs(4), LivenessTimeout::Ttft)
        );
        tokio::time::advance(Duration::from_secs(3)).await;
        w.on_token(Instant::now());
        assert_eq!(w.ttft(), Some(Duration::from_secs(3)));
        assert_eq!(w.max_inter_token(), None);
        assert_eq!(
            w.next_deadline(),
            (t0 + Duration::from_secs(5), LivenessTimeout::InterToken)
        );
        tokio::time::advance(Duration::from_millis(1500)).await;
        w.on_token(Instant::now());
        assert_eq!(w.max_inter_token(), Some(Duration::from_millis(1500)));
        // A third token in the same read: no longer gap.
        w.on_token(Instant::now());
        assert_eq!(w.max_inter_token(), Some(Duration::from_millis(1500)));
        tokio::time::advance(Duration::from_secs(5)).await;
        w.on_token(Instant::now());
        // 9.5 s in: the total limit (10 s) is nearer than the inter-token one (11.5 s).
        assert_eq!(
            w.next_deadline(),
            (t0 + Duration::from_secs(10), LivenessTimeout::Total)
        );
    }

    /// The one timer fires at each read's own deadline, later or earlier than the last.
    #[tokio::test(start_paused = true)]
    async fn timer_follows_each_deadline() {
        let t0 = Instant::now();
        let mut timer = LivenessTimer::new(t0 + Duration::from_secs(4));
        // A read that never finishes times out exactly at its deadline.
        assert_eq!(
            timer
                .run(t0 + Duration::from_secs(4), std::future::pending::<()>())
                .await,
            None
        );
        assert_eq!(Instant::now(), t0 + Duration::from_secs(4));
        // A later deadline after a read that finished in time.
        let sleep_1s = tokio::time::sleep(Duration::from_secs(1));
        assert_eq!(
            timer.run(t0 + Duration::from_secs(7), sleep_1s).await,
            Some(())
        );
        assert_eq!(Instant::now(), t0 + Duration::from_secs(5));
        assert_eq!(
            timer
                .run(t0 + Duration::from_secs(7), std::future::pending::<()>())
                .await,
            None
        );
        assert_eq!(Instant::now(), t0 + Duration::from_secs(7));
        // An earlier deadline than the pending one (moved back after a longer one).
        let mut timer = LivenessTimer::new(t0 + Duration::from_secs(60));
        let slow = tokio::time::sleep(Duration::from_secs(30));
        assert_eq!(timer.run(t0 + Duration::from_secs(9), slow).await, None);
        assert_eq!(Instant::now(), t0 + Duration::from_secs(9));
    }

    /// A deadline already past wins over an answer already there: a stream that always has
    /// bytes ready must still time out.
    #[tokio::test(start_paused = true)]
    async fn expired_deadline_wins_over_a_ready_read() {
        let t0 = Instant::now();
        let mut timer = LivenessTimer::new(t0 + Duration::from_secs(1));
        assert_eq!(
            timer
                .run(t0 + Duration::from_secs(1), std::future::ready(5))
                .await,
            Some(5)
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            timer
                .run(t0 + Duration::from_secs(1), std::future::ready(5))
                .await,
            None
        );
        assert_eq!(timer.run(t0, std::future::pending::<u8>()).await, None);
    }

    /// A loop of reads that are always ready, under an outer timeout (the call deadline):
    /// the reads spend the task's budget, the loop yields, and the outer timeout fires on
    /// time. Without that the loop never returned `Pending` and the timeout never fired.
    #[test]
    fn always_ready_reads_cannot_starve_an_outer_timeout() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            let started = std::time::Instant::now();
            let out = rt.block_on(async {
                let far = Instant::now() + Duration::from_secs(3600);
                let mut timer = LivenessTimer::new(far);
                tokio::time::timeout(Duration::from_millis(100), async {
                    let mut reads = 0u64;
                    while timer.run(far, std::future::ready(())).await.is_some() {
                        reads += 1;
                    }
                    reads
                })
                .await
            });
            let _ = tx.send((out.is_err(), started.elapsed()));
        });
        let (timed_out, took) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the outer timeout never fired: the read loop starved it");
        assert!(timed_out);
        assert!(took < std::time::Duration::from_secs(2), "took {took:?}");
    }
}
