//! Governance on the host side: source selection (the seam where selector plugins plug in)
//! and back-off. Breaker, limiter, stall budget and deadline join here.

mod backoff;
pub mod breaker;
pub mod clock;
pub mod limiter;
mod selector;
pub mod stall;
pub mod stats;

pub use backoff::backoff_delay;
pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use selector::{RoundRobin, SourceSelector};
