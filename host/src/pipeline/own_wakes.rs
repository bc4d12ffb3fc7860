//! Wakes a streamed call raises for itself while it is being polled, turned into another turn
//! of the poll instead of another scheduling of the task.
//!
//! A streamed call runs inside the task that reads its events (`CallStream` in
//! `gateway.rs`), and two of the channels it passes data through have both ends in that task:
//! the upstream connection's driver hands each body read to hyper's body channel, whose reader
//! (the attempt) is the same task, and the call hands its deltas to the call's event channel,
//! whose reader is the stream itself. Each hand-over wakes the reader, so every upstream read
//! woke the task that was already running it: tokio ran it a second time right after, through
//! the client connection's dispatcher, the body encoder and every layer of the call, to find
//! nothing new. Under paced streams (each delta its own read) that was one wasted poll per
//! chunk — two task polls per chunk where one does the work.
//!
//! [`OwnWakes`] gives the call a waker of its own. A wake raised while the call is being
//! polled (on any thread) is recorded, and when the poll answered `Pending` the call is polled
//! again (another turn) before the task's poll ends; a wake raised at any other time (the
//! socket readable, a timer, another task's send) wakes the task as before. What is saved is
//! the task's rescheduling and the layers around the call (the client connection's
//! dispatcher, the body encoder); a turn that produced nothing still polls the whole call
//! once more. A call that keeps waking itself gets at most [`MAX_TURNS`] extra turns in one
//! poll, and none once the task's cooperative budget is spent; then the task is woken and the
//! poll ends, so it cannot spin. (Inside a runtime worker, tokio defers the wakes of a spent
//! budget and of `yield_now` until after the task's poll: they reach the task, never a turn.)
//!
//! **No wake is lost.** After a turn the poller stores `polling = false` and then takes
//! `woken` (a swap, the only place `woken` is cleared); a waker stores `woken = true` and
//! then loads `polling`, waking the task itself when no turn is running. With sequentially
//! consistent accesses at least one of the two sees the other's store: a wake that races with
//! the end of a turn is either taken by that turn's swap or a later one (another turn, or a
//! spurious one) or passed to the task. A `Ready` answer drops a wake raised during its turn:
//! the caller is a stream whose consumer polls it again after every item (or a future that
//! has finished), and that poll polls the call again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// Extra turns one poll may take for wakes raised during the previous turn.
pub(crate) const MAX_TURNS: u32 = 4;

/// What the call's waker and its poller share.
#[derive(Default)]
struct Shared {
    /// A turn of the poll is running.
    polling: AtomicBool,
    /// A wake arrived while `polling` was set.
    woken: AtomicBool,
    /// The task's own waker, from its latest poll.
    task: AtomicWaker,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.polling.load(Ordering::SeqCst) {
            self.woken.store(true, Ordering::SeqCst);
            if self.polling.load(Ordering::SeqCst) {
                // The poller will see `woken` after its turn.
                return;
            }
        }
        self.task.wake();
    }
}

/// A call's own waker and the loop that polls the call with it.
pub(crate) struct OwnWakes {
    shared: Arc<Shared>,
    waker: Waker,
}

impl Default for OwnWakes {
    fn default() -> Self {
        let shared = Arc::new(Shared::default());
        Self {
            waker: Waker::from(shared.clone()),
            shared,
        }
    }
}

impl OwnWakes {
    /// Poll `f` (a turn: the call, then what it produced) with the call's waker, again while
    /// the turn answered `Pending` and woke the call during it, at most [`MAX_TURNS`] extra
    /// times and only while the task's cooperative budget lasts. When the answer is
    /// `Pending`, a later wake is sure to reach the task. `&mut self`: one poller at a time.
    pub(crate) fn poll<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut f: impl FnMut(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.shared.task.register(cx.waker());
        let mut own = Context::from_waker(&self.waker);
        let mut turns = 0;
        loop {
            let out = {
                let _turn = Turn::start(&self.shared);
                f(&mut own)
            };
            let woken = self.shared.woken.swap(false, Ordering::SeqCst);
            if out.is_ready() || !woken {
                return out;
            }
            if turns == MAX_TURNS || !tokio::task::coop::has_budget_remaining() {
                cx.waker().wake_by_ref();
                return out;
            }
            turns += 1;
        }
    }
}

/// `polling` set for one turn, cleared when it ends — also when the turn panics, so a caught
/// panic does not leave every later wake recorded and never delivered.
struct Turn<'a>(&'a Shared);

impl<'a> Turn<'a> {
    fn start(shared: &'a Shared) -> Self {
        shared.polling.store(true, Ordering::SeqCst);
        Self(shared)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.polling.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    use super::{MAX_TURNS, OwnWakes};

    /// A task waker that counts its wakes.
    #[derive(Default)]
    pub(crate) struct Count(pub(crate) AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A task's waker and the count of its wakes (also for `CallStream`'s tests).
    pub(crate) fn task() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count::default());
        (c.clone(), Waker::from(c))
    }

    /// A wake raised during the poll is another turn, not a wake of the task.
    #[test]
    fn a_wake_during_the_poll_is_another_turn() {
        let (count, waker) = task();
        let mut cx = Context::from_waker(&waker);
        let mut own = OwnWakes::default();
        let mut polls = 0;
        let out = own.poll(&mut cx, |cx| {
            polls += 1;
            if polls == 1 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(polls)
            }
        });
        assert_eq!(out, Poll::Ready(2));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    /// A wake after the poll reaches the task, once per wake.
    #[test]
    fn a_wake_after_the_poll_wakes_the_task() {
        let (count, waker) = task();
        let mut cx = Context::from_waker(&waker);
        let mut own = OwnWakes::default();
        let mut kept = None;
        let out: Poll<()> = own.poll(&mut cx, |cx| {
            kept = Some(cx.waker().clone());
            Poll::Pending
        });
        assert_eq!(out, Poll::Pending);
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        kept.as_ref().unwrap().wake_by_ref();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // From another thread, as a socket's or a timer's wake comes.
        let w = kept.take().unwrap();
        std::thread::spawn(move || w.wake()).join().unwrap();
        // The task's waker was taken by the first wake and not registered again (no poll
        // since): a second wake before the next poll has nothing more to do.
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        let _: Poll<()> = own.poll(&mut cx, |_| Poll::Pending);
        own.waker.wake_by_ref();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
    }

    /// A call that wakes itself at every poll takes MAX_TURNS extra turns, then the task is
    /// woken and the poll ends.
    #[test]
    fn a_call_that_always_wakes_itself_gets_bounded_turns() {
        let (count, waker) = task();
        let mut cx = Context::from_waker(&waker);
        let mut own = OwnWakes::default();
        let mut polls = 0;
        let out: Poll<()> = own.poll(&mut cx, |cx| {
            polls += 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        });
        assert_eq!(out, Poll::Pending);
        assert_eq!(polls, 1 + MAX_TURNS);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }

    /// A call handing data to itself through a channel (an upstream driver feeding its body
    /// reader in the same task): polled directly, every hand-over wakes the task; through
    /// `OwnWakes` the hand-over's wake is one more turn of the call, and the task is not woken.
    #[test]
    fn a_hand_over_within_the_call_is_a_turn_not_a_wake_of_the_task() {
        let (count, waker) = task();
        let mut cx = Context::from_waker(&waker);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        // Items the "socket" has ready for the next poll.
        let arrived = std::cell::Cell::new(0u32);
        let polls = std::cell::Cell::new(0u32);
        let mut got = Vec::new();
        let call = std::future::poll_fn(|cx| {
            polls.set(polls.get() + 1);
            // The driver hands over what arrived, then the reader reads.
            while arrived.get() > 0 {
                arrived.set(arrived.get() - 1);
                tx.send(polls.get()).unwrap();
            }
            while let Poll::Ready(Some(v)) = rx.poll_recv(cx) {
                got.push(v);
            }
            Poll::<()>::Pending
        });
        let mut call = pin!(call);
        assert!(call.as_mut().poll(&mut cx).is_pending());
        arrived.set(1);
        assert!(call.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "polled directly: a wake of the task"
        );
        let mut own = OwnWakes::default();
        // A first poll with nothing arrived registers the call's waker with its channel.
        assert!(own.poll(&mut cx, |cx| call.as_mut().poll(cx)).is_pending());
        for _ in 0..3 {
            arrived.set(1);
            polls.set(0);
            assert!(own.poll(&mut cx, |cx| call.as_mut().poll(cx)).is_pending());
            assert_eq!(polls.get(), 2, "the hand-over's wake is one more turn");
        }
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "through OwnWakes: no wake of the task"
        );
        assert_eq!(got.len(), 4);
    }
}
