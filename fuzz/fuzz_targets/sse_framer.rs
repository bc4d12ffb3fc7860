//! The SSE framer (`polygateway::transport::SseFramer`) on arbitrary bytes split at
//! arbitrary points. Properties: it never panics; however the bytes are split, it frames the
//! same events and reaches the same overflow verdict; no event exceeds the cap; the bytes it
//! holds stay within the cap plus one read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use polygateway::transport::{FramedEvent, SseFramer};

/// A small cap, so the fuzzer reaches the overflow path with short inputs.
const CAP: usize = 256;

fn frame(chunks: &[&[u8]]) -> (Vec<FramedEvent>, Option<FramedEvent>, bool) {
    let mut framer = SseFramer::with_max_event_bytes(CAP);
    let mut out = Vec::new();
    for chunk in chunks {
        framer.push(chunk, &mut out);
        assert!(
            framer.overflow().is_some() || framer.pending_bytes() <= CAP + chunk.len(),
            "holds {} bytes after a push of {}",
            framer.pending_bytes(),
            chunk.len()
        );
    }
    let last = framer.finish(&mut out);
    (out, last, framer.overflow().is_some())
}

fuzz_target!(|input: &[u8]| {
    let Some((&split, bytes)) = input.split_first() else {
        return;
    };
    let whole = frame(&[bytes]);
    // Split into pieces of `split % 7 + 1` bytes.
    let step = usize::from(split % 7) + 1;
    let pieces: Vec<&[u8]> = bytes.chunks(step).collect();
    let split_up = frame(&pieces);
    if !whole.2 && !split_up.2 {
        assert_eq!(
            whole, split_up,
            "framing depends on how the bytes were split"
        );
    }
    for e in whole.0.iter().chain(whole.1.iter()) {
        assert!(
            e.data.len() <= CAP,
            "an event of {} bytes passed the cap",
            e.data.len()
        );
    }
});
