//! Idle connections per origin (`scheme://host:port`): a lock-free bounded queue per origin,
//! the origins in a copy-on-write map (a new origin copies the map once; lookups never
//! lock). A connection is taken only if it has been idle for less than the idle timeout and
//! its driver, polled once, shows it still open and ready for a request; the rest are
//! dropped (closed) as they are found.

use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Duration;

use arc_swap::ArcSwap;
use crossbeam_queue::ArrayQueue;
use tokio::time::Instant;

use super::conn::Conn;
use crate::config::ConfigKeyed;

/// One origin's idle connections, oldest first.
pub(crate) struct Queue {
    idle: ArrayQueue<Idle>,
    idle_timeout: Duration,
}

struct Idle {
    conn: Box<Conn>,
    since: Instant,
}

type Origins = ConfigKeyed<String, Arc<Queue>>;

pub(super) struct Pool {
    /// Origin → its idle connections, looked up on every request.
    origins: ArcSwap<Origins>,
    max_idle: usize,
    idle_timeout: Duration,
}

impl Pool {
    pub(super) fn new(max_idle: usize, idle_timeout: Duration) -> Self {
        Self {
            origins: ArcSwap::from_pointee(Origins::default()),
            max_idle,
            idle_timeout,
        }
    }

    /// The queue of the origin `key`, created on first use.
    pub(super) fn queue(&self, key: &str) -> Arc<Queue> {
        if let Some(q) = self.origins.load().get(key) {
            return q.clone();
        }
        let fresh = Arc::new(Queue {
            idle: ArrayQueue::new(self.max_idle),
            idle_timeout: self.idle_timeout,
        });
        let mut found = None;
        self.origins.rcu(|map| {
            if let Some(q) = map.get(key) {
                found = Some(q.clone());
                return Arc::clone(map);
            }
            found = None;
            let mut next = Origins::clone(map);
            next.insert(key.to_owned(), fresh.clone());
            Arc::new(next)
        });
        found.unwrap_or(fresh)
    }

    /// Idle connections of the origin `key` (tests).
    #[cfg(test)]
    pub(super) fn idle(&self, key: &str) -> usize {
        self.origins.load().get(key).map_or(0, |q| q.idle.len())
    }
}

impl Queue {
    /// A live idle connection, if there is one.
    pub(super) fn take(&self) -> Option<Box<Conn>> {
        let mut cx = Context::from_waker(Waker::noop());
        while let Some(idle) = self.idle.pop() {
            if idle.since.elapsed() >= self.idle_timeout {
                continue;
            }
            let mut conn = idle.conn;
            // An upstream that closed the connection while it was idle: the driver reads
            // the end of the stream and ends.
            if conn.poll_ended(&mut cx) || !conn.tx.is_ready() {
                continue;
            }
            return Some(conn);
        }
        None
    }

    /// Return `conn` to the queue; when it is full the connection is closed instead.
    pub(super) fn put(&self, conn: Box<Conn>) {
        let _ = self.idle.push(Idle {
            conn,
            since: Instant::now(),
        });
    }
}
