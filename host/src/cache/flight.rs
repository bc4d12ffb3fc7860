//! Single-flight: callers asking for the same key while its work is in flight share one run
//! of that work. The work runs in its own task, so a caller that goes away (its future
//! dropped) never cancels it for the others; it is aborted only when every caller is gone
//! before it published its result. After publishing, the task may go on (e.g. to write
//! the cache) and callers that join meanwhile get the published result at once — the flight
//! stays registered until its task ends.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::watch;
use tokio::task::AbortHandle;

/// Key → the flight, from its start until its task ends (or is aborted).
type FlightMap<T> = Mutex<HashMap<String, Arc<Shared<T>>>>;

/// Coalesces work by key. Cheap to clone (clones share the flights).
pub struct SingleFlight<T> {
    flights: Arc<FlightMap<T>>,
    next_id: Arc<AtomicU64>,
}

impl<T> Clone for SingleFlight<T> {
    fn clone(&self) -> Self {
        Self {
            flights: self.flights.clone(),
            next_id: self.next_id.clone(),
        }
    }
}

impl<T> Default for SingleFlight<T> {
    fn default() -> Self {
        Self {
            flights: Arc::new(Mutex::new(HashMap::new())),
            next_id: Arc::new(AtomicU64::new(0)),
        }
    }
}

fn lock<T>(m: &FlightMap<T>) -> MutexGuard<'_, HashMap<String, Arc<Shared<T>>>> {
    // Only counters and handles live under the lock; a panic elsewhere cannot leave them
    // half-updated in a way worse than losing coalescing.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Shared<T> {
    id: u64,
    rx: watch::Receiver<Option<T>>,
    published: Arc<AtomicBool>,
    abort: AbortHandle,
    /// Callers holding a [`Flight`]; changed only under the map lock.
    callers: AtomicU64,
}

/// One caller's handle on a flight; dropping it withdraws this caller.
pub struct Flight<T> {
    shared: Arc<Shared<T>>,
    flights: Weak<FlightMap<T>>,
    key: String,
    leader: bool,
}

impl<T> Drop for Flight<T> {
    fn drop(&mut self) {
        let Some(flights) = self.flights.upgrade() else {
            return;
        };
        let mut map = lock(&flights);
        let left = self
            .shared
            .callers
            .fetch_sub(1, Ordering::SeqCst)
            .saturating_sub(1);
        // The last caller is gone before the result is out: stop the work, forget the flight.
        if left == 0 && !self.shared.published.load(Ordering::SeqCst) {
            self.shared.abort.abort();
            if map.get(&self.key).is_some_and(|s| s.id == self.shared.id) {
                map.remove(&self.key);
            }
        }
    }
}

impl<T: Clone> Flight<T> {
    /// True for the caller whose call started the work.
    pub fn is_leader(&self) -> bool {
        self.leader
    }

    /// The work's result; `None` when the work ended without publishing one (it panicked or
    /// was aborted).
    pub async fn wait(&self) -> Option<T> {
        let mut rx = self.shared.rx.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone(),
            Err(_) => None,
        }
    }
}

/// Given to the work to publish its result to every caller.
pub struct Publisher<T> {
    tx: watch::Sender<Option<T>>,
    published: Arc<AtomicBool>,
}

impl<T> Publisher<T> {
    /// Hand `value` to every caller, present and joining later while the task still runs.
    /// From now on the work is no longer aborted when the callers go away.
    pub fn publish(&self, value: T) {
        self.published.store(true, Ordering::SeqCst);
        self.tx.send_replace(Some(value));
    }
}

/// Removes the flight's map entry when its task ends (or is aborted).
struct Unregister<T> {
    flights: Weak<FlightMap<T>>,
    key: String,
    id: u64,
}

impl<T> Drop for Unregister<T> {
    fn drop(&mut self) {
        let Some(flights) = self.flights.upgrade() else {
            return;
        };
        let mut map = lock(&flights);
        if map.get(&self.key).is_some_and(|s| s.id == self.id) {
            map.remove(&self.key);
        }
    }
}

impl<T: Clone + Send + Sync + 'static> SingleFlight<T> {
    /// A set of flights.
    pub fn new() -> Self {
        Self::default()
    }

    /// Join the flight of `key`, or — when none is registered — start one: `work` is called
    /// (only then) and its future spawned on the runtime. The work must call
    /// [`Publisher::publish`] once with its result.
    pub fn join<F, Fut>(&self, key: &str, work: F) -> Flight<T>
    where
        F: FnOnce(Publisher<T>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut map = lock(&self.flights);
        if let Some(shared) = map.get(key) {
            shared.callers.fetch_add(1, Ordering::SeqCst);
            return Flight {
                shared: shared.clone(),
                flights: Arc::downgrade(&self.flights),
                key: key.to_string(),
                leader: false,
            };
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(None);
        let published = Arc::new(AtomicBool::new(false));
        let publisher = Publisher {
            tx,
            published: published.clone(),
        };
        let unregister = Unregister {
            flights: Arc::downgrade(&self.flights),
            key: key.to_string(),
            id,
        };
        let fut = work(publisher);
        // The task cannot touch the map before this function releases the lock.
        let handle = tokio::spawn(async move {
            let _unregister = unregister;
            fut.await;
        });
        let shared = Arc::new(Shared {
            id,
            rx,
            published,
            abort: handle.abort_handle(),
            callers: AtomicU64::new(1),
        });
        map.insert(key.to_string(), shared.clone());
        Flight {
            shared,
            flights: Arc::downgrade(&self.flights),
            key: key.to_string(),
            leader: true,
        }
    }

    /// Flights currently registered (running, or writing after publishing).
    pub fn in_flight(&self) -> usize {
        lock(&self.flights).len()
    }

    /// Callers currently holding a flight (leaders and followers).
    pub fn callers(&self) -> u64 {
        lock(&self.flights)
            .values()
            .map(|s| s.callers.load(Ordering::SeqCst))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[tokio::test]
    async fn one_run_for_many_callers_and_a_dropped_caller_does_not_cancel_it() {
        let sf: SingleFlight<u32> = SingleFlight::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let (go_tx, go_rx) = watch::channel(false);
        let start = |sf: &SingleFlight<u32>| {
            let runs = runs.clone();
            let mut go = go_rx.clone();
            sf.join("k", move |p| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let _ = go.wait_for(|g| *g).await;
                p.publish(7);
            })
        };
        let leader = start(&sf);
        let followers: Vec<_> = (0..10).map(|_| start(&sf)).collect();
        assert!(leader.is_leader() && followers.iter().all(|f| !f.is_leader()));
        assert_eq!(sf.callers(), 11);
        drop(leader);
        let _ = go_tx.send(true);
        for f in &followers {
            assert_eq!(f.wait().await, Some(7));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        drop(followers);
        for _ in 0..100 {
            if sf.in_flight() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(sf.in_flight(), 0);
    }

    #[tokio::test]
    async fn work_is_aborted_when_every_caller_is_gone() {
        let sf: SingleFlight<u32> = SingleFlight::new();
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let d = dropped.clone();
        let f = sf.join("k", move |p| async move {
            let _flag = Flag(d);
            std::future::pending::<()>().await;
            p.publish(1);
        });
        tokio::task::yield_now().await;
        drop(f);
        for _ in 0..100 {
            if dropped.load(Ordering::SeqCst) && sf.in_flight() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(dropped.load(Ordering::SeqCst));
        assert_eq!(sf.in_flight(), 0);
        // A new caller starts a new flight.
        let again = sf.join("k", |p| async move { p.publish(2) });
        assert!(again.is_leader());
        assert_eq!(again.wait().await, Some(2));
    }
}
