//! `Retry-After` parsing (`polygateway::transport::parse_retry_after`: delta-seconds or an
//! HTTP-date) on arbitrary text. Properties: it never panics, and a hint it returns is at
//! most 24 hours.
#![no_main]

use std::time::{Duration, SystemTime};

use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &str| {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    if let Some(d) = polygateway::transport::parse_retry_after(raw, now, "fuzz") {
        assert!(d <= Duration::from_secs(24 * 3600), "{raw:?} gave {d:?}");
    }
});
