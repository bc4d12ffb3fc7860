//! Governance state and algorithms on the host side: the injected clock, back-off, the
//! circuit breaker, the rate limiter and AIMD pacer, the stall budget, and the per-source
//! statistics the selector plugins see. Each state store sits behind a backend trait.

mod backoff;
pub mod breaker;
pub mod budget;
pub mod clock;
#[cfg(test)]
mod contract_tests;
pub mod entropy;
pub mod limiter;
pub mod redis_conn;
pub mod scope_config;
pub mod stall;
pub mod stats;

pub use backoff::backoff_delay;
pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use entropy::Entropy;
