//! A streamed call as Python sees it: `NativeStream` owns the `Gateway::chat_stream` stream
//! after its `Start`. `next_batch()` hands out every event that is ready at once (one
//! asyncio hand-over per upstream read, not per delta). Dropping the object — or `close()` —
//! drops the stream, which cancels the call as in Rust.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::{FutureExt, Stream, StreamExt};
use polygateway::CallEvent;
use polygateway::telemetry::Pricing;
use pyo3::prelude::*;
use tokio::sync::Mutex;

use crate::answer::Outcome;

/// Most events handed out by one `next_batch`.
const MAX_BATCH: usize = 256;

pub type EventStream = Pin<Box<dyn Stream<Item = CallEvent> + Send>>;

/// The rest of a streamed call.
#[pyclass(frozen, module = "polygateway._native")]
pub struct NativeStream {
    events: Arc<Mutex<Option<EventStream>>>,
    /// `close()` was called while a `next_batch` held the stream: it drops it when it wakes.
    closing: Arc<AtomicBool>,
    pricing: Option<Arc<Pricing>>,
}

impl NativeStream {
    pub fn new(events: EventStream, pricing: Option<Arc<Pricing>>) -> Self {
        Self {
            events: Arc::new(Mutex::new(Some(events))),
            closing: Arc::new(AtomicBool::new(false)),
            pricing,
        }
    }
}

#[pymethods]
impl NativeStream {
    /// Await the next events: `(items, error, done)` (see `answer::batch`).
    fn next_batch<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let events = self.events.clone();
        let closing = self.closing.clone();
        let pricing = self.pricing.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let mut guard = CloseOnDrop {
                guard: events.lock().await,
                closing: &closing,
            };
            if closing.load(Ordering::Acquire) {
                guard.guard.take();
            }
            let Some(stream) = guard.guard.as_mut() else {
                return Ok(Outcome::Batch {
                    events: Vec::new(),
                    pricing,
                    done: true,
                });
            };
            let mut batch = Vec::new();
            let mut done = false;
            match stream.next().await {
                None => done = true,
                Some(ev) => {
                    let terminal = matches!(ev, CallEvent::End(_) | CallEvent::Failed(_));
                    batch.push(ev);
                    if !terminal {
                        // Whatever else is ready now, without waiting.
                        while batch.len() < MAX_BATCH {
                            match stream.next().now_or_never() {
                                Some(Some(ev)) => {
                                    let terminal =
                                        matches!(ev, CallEvent::End(_) | CallEvent::Failed(_));
                                    batch.push(ev);
                                    if terminal {
                                        break;
                                    }
                                }
                                Some(None) => {
                                    done = true;
                                    break;
                                }
                                None => break,
                            }
                        }
                    }
                }
            }
            if done {
                guard.guard.take();
            }
            Ok(Outcome::Batch {
                events: batch,
                pricing,
                done,
            })
        })
    }

    /// Drop the stream now (cancelling the call if it has not ended).
    fn close(&self) {
        self.closing.store(true, Ordering::Release);
        drop_in_runtime(&self.events);
    }
}

/// The stream's lock while a `next_batch` runs: when it ends — or is cancelled, which drops
/// it — after `close()` was called, the stream is dropped with it.
struct CloseOnDrop<'a> {
    guard: tokio::sync::MutexGuard<'a, Option<EventStream>>,
    closing: &'a AtomicBool,
}

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        if self.closing.load(Ordering::Acquire) {
            self.guard.take();
        }
    }
}

impl Drop for NativeStream {
    fn drop(&mut self) {
        drop_in_runtime(&self.events);
    }
}

/// Drop the stream inside the tokio runtime: the call's guards settle their permits there
/// (a Redis permit dropped outside a runtime would wait for its lease to expire).
fn drop_in_runtime(events: &Mutex<Option<EventStream>>) {
    let _runtime = pyo3_async_runtimes::tokio::get_runtime().enter();
    if let Ok(mut guard) = events.try_lock() {
        guard.take();
    }
}
