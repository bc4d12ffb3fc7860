//! Incremental server-sent-events framing (WHATWG HTML §9.2.6): lines end in `\r\n`, `\n` or
//! `\r`; `:` lines are comments (keep-alives); `data:` lines of one event are joined with
//! `\n`; an event ends at a blank line. Bytes may be split anywhere across reads.
//!
//! Framing is linear in the bytes pushed: each byte is scanned for a line end once, however
//! the stream is split. One event (its `data` so far plus the unterminated line) is capped
//! (`PGW_SSE_MAX_EVENT_BYTES`), so an upstream that never ends a line cannot grow the buffer
//! without bound.

use bytes::{Buf, BytesMut};

/// The default cap of one event, in bytes: far above any real chunk of a chat stream (a few
/// hundred bytes to a few KiB), small enough that a hostile line is refused early.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// One framed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The joined `data:` lines.
    pub data: String,
}

/// One event grew past the framer's cap. The framer discards the rest of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an SSE event exceeds {max_bytes} bytes (PGW_SSE_MAX_EVENT_BYTES)")]
pub struct EventTooLarge {
    /// The cap that was exceeded, in bytes.
    pub max_bytes: usize,
}

/// Stateful framer: push bytes as they arrive, take complete events.
#[derive(Debug)]
pub struct SseFramer {
    buf: BytesMut,
    /// Leading bytes of `buf` already scanned and holding no line end, so a long line is
    /// scanned once, not again on every push.
    scanned: usize,
    data: String,
    has_data: bool,
    event: Option<String>,
    max_event_bytes: usize,
    /// Set once an event exceeded the cap; from then on input is discarded.
    overflow: Option<EventTooLarge>,
    /// Comment lines seen (keep-alives), for diagnostics.
    pub comments: u64,
}

impl Default for SseFramer {
    fn default() -> Self {
        Self::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseFramer {
    /// A fresh framer with the default event cap ([`DEFAULT_MAX_EVENT_BYTES`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh framer whose events may hold at most `max_event_bytes` bytes (data lines and
    /// the line being read; at least 1).
    pub fn with_max_event_bytes(max_event_bytes: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            scanned: 0,
            data: String::new(),
            has_data: false,
            event: None,
            max_event_bytes: max_event_bytes.max(1),
            overflow: None,
            comments: 0,
        }
    }

    /// Feed bytes; complete events are appended to `out`. An event over the cap ends the
    /// framing: this and later pushes return the error and frame nothing more.
    pub fn try_push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), EventTooLarge> {
        if let Some(e) = self.overflow {
            return Err(e);
        }
        self.buf.extend_from_slice(bytes);
        self.drain(out, false);
        self.check_size()
    }

    /// Feed bytes; complete events are appended to `out`. Like [`SseFramer::try_push`]
    /// with the error left to [`SseFramer::overflow`].
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        // The error stays in `self.overflow`.
        let _ = self.try_push(bytes, out);
    }

    /// Whether (and at which cap) an event exceeded the cap.
    pub fn overflow(&self) -> Option<EventTooLarge> {
        self.overflow
    }

    /// The stream ended: a final line without terminator is processed, and an event that
    /// was never terminated by a blank line is returned as incomplete (`Some`). After an
    /// overflow nothing is returned.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Option<SseEvent> {
        if self.overflow.is_some() {
            return None;
        }
        self.drain(out, true);
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.scanned = 0;
            self.line(&line, out);
        }
        if self.overflow.is_some() {
            return None;
        }
        if self.has_data {
            self.has_data = false;
            Some(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            })
        } else {
            None
        }
    }

    /// Bytes held that do not yet form a complete line.
    pub fn pending_bytes(&self) -> usize {
        self.buf.len()
    }

    /// The event being read (its data so far and the unterminated line) against the cap.
    fn check_size(&mut self) -> Result<(), EventTooLarge> {
        if self.overflow.is_none() && self.data.len() + self.buf.len() > self.max_event_bytes {
            self.overflowed();
        }
        match self.overflow {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn overflowed(&mut self) {
        self.overflow = Some(EventTooLarge {
            max_bytes: self.max_event_bytes,
        });
        self.buf = BytesMut::new();
        self.scanned = 0;
        self.data = String::new();
        self.has_data = false;
        self.event = None;
    }

    fn drain(&mut self, out: &mut Vec<SseEvent>, eof: bool) {
        while self.overflow.is_none() {
            let from = self.scanned;
            let Some(rel) = memchr::memchr2(b'\n', b'\r', &self.buf[from..]) else {
                self.scanned = self.buf.len();
                return;
            };
            let pos = from + rel;
            let term = self.buf[pos];
            let skip = if term == b'\r' {
                match self.buf.get(pos + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A `\r` at the end of the buffer may be the first half of `\r\n`.
                    None if eof => 1,
                    None => {
                        self.scanned = pos;
                        return;
                    }
                }
            } else {
                1
            };
            let line = self.buf.split_to(pos);
            self.buf.advance(skip);
            self.scanned = 0;
            self.line(&line, out);
        }
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                self.has_data = false;
                out.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                });
            } else {
                self.event = None;
            }
            return;
        }
        if line[0] == b':' {
            self.comments += 1;
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                // Measured after decoding: an invalid UTF-8 byte becomes U+FFFD (3 bytes),
                // so the raw length alone would let an event grow to 3× the cap.
                let text = lossy(value);
                let len = self.data.len() + usize::from(self.has_data) + text.len();
                if len > self.max_event_bytes {
                    self.overflowed();
                    return;
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                self.data.push_str(&text);
            }
            b"event" => self.event = Some(lossy(value).into_owned()),
            _ => {} // id, retry and unknown fields carry nothing for us
        }
    }
}

/// `bytes` as text, an invalid sequence as U+FFFD. Valid text (every chunk of a real stream)
/// is checked by `str::from_utf8`, which runs through ASCII a word at a time; the lossy
/// decoder it falls back to goes byte by byte (~7 instructions a byte, as much as the rest
/// of the framing of a chunk).
fn lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cap_counts_the_decoded_bytes_of_invalid_utf8() {
        // Found by the `sse_framer` fuzz target: 100 invalid bytes decode to 300.
        let mut framer = SseFramer::with_max_event_bytes(256);
        let mut out = Vec::new();
        let mut line = b"data: ".to_vec();
        line.extend([0xCA; 100]);
        line.extend(b"\n\n");
        assert_eq!(
            framer.try_push(&line, &mut out),
            Err(EventTooLarge { max_bytes: 256 })
        );
        assert!(out.is_empty());
    }

    use super::*;

    fn frame(chunks: &[&[u8]]) -> (Vec<SseEvent>, Option<SseEvent>) {
        let mut f = SseFramer::new();
        let mut out = Vec::new();
        for c in chunks {
            f.push(c, &mut out);
        }
        let tail = f.finish(&mut out);
        (out, tail)
    }

    fn ev(data: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: data.into(),
        }
    }

    #[test]
    fn lf_crlf_and_cr_line_endings() {
        let (out, tail) = frame(&[b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\n"]);
        assert_eq!(out, vec![ev("a"), ev("b"), ev("c"), ev("d")]);
        assert_eq!(tail, None);
    }

    #[test]
    fn split_anywhere_including_between_cr_and_lf() {
        let whole = b"data: {\"x\":1}\r\n\r\n: keep-alive\r\n\r\ndata: [DONE]\r\n\r\n";
        for cut in 0..whole.len() {
            let (out, tail) = frame(&[&whole[..cut], &whole[cut..]]);
            assert_eq!(out, vec![ev("{\"x\":1}"), ev("[DONE]")], "cut at {cut}");
            assert_eq!(tail, None);
        }
    }

    #[test]
    fn comments_multiline_data_and_event_names() {
        let mut f = SseFramer::new();
        let mut out = Vec::new();
        f.push(
            b": ping\n\nevent: message_delta\ndata: line1\ndata:line2\nid: 7\n\n",
            &mut out,
        );
        assert_eq!(
            out,
            vec![SseEvent {
                event: Some("message_delta".into()),
                data: "line1\nline2".into()
            }]
        );
        assert_eq!(f.comments, 1);
    }

    #[test]
    fn unterminated_event_at_eof_is_reported() {
        let (out, tail) = frame(&[b"data: a\n\ndata: partial"]);
        assert_eq!(out, vec![ev("a")]);
        assert_eq!(tail, Some(ev("partial")));
    }

    #[test]
    fn non_utf8_is_lossy_not_fatal() {
        let (out, _) = frame(&[b"data: \xff\xfe ok\n\n"]);
        assert_eq!(out, vec![ev("\u{fffd}\u{fffd} ok")]);
    }

    /// A line of 32 MiB in 16 KiB reads is framed in linear time: each byte is scanned once
    /// (rescanning the buffer on every read took minutes for such a line).
    #[test]
    fn a_long_line_is_framed_in_linear_time() {
        let mut f = SseFramer::with_max_event_bytes(usize::MAX);
        let mut out = Vec::new();
        let chunk = vec![b'x'; 16 * 1024];
        let started = std::time::Instant::now();
        f.try_push(b"data: ", &mut out).unwrap();
        for _ in 0..2048 {
            f.try_push(&chunk, &mut out).unwrap();
        }
        f.try_push(b"\n\n", &mut out).unwrap();
        let took = started.elapsed();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data.len(), 32 * 1024 * 1024);
        assert!(took < std::time::Duration::from_secs(3), "took {took:?}");
    }

    /// An event over the cap fails the framing, whether it grows as one unterminated line,
    /// as many data lines, or arrives whole in one read; an event at the cap passes.
    #[test]
    fn an_event_over_the_cap_is_refused() {
        let too_large = Err(EventTooLarge { max_bytes: 16 });
        // One line that never ends: refused as soon as it holds more than the cap.
        let mut f = SseFramer::with_max_event_bytes(16);
        let mut out = Vec::new();
        assert_eq!(f.try_push(b"data: 0123456789", &mut out), Ok(()));
        assert_eq!(f.try_push(b"x", &mut out), too_large);
        assert_eq!(f.pending_bytes(), 0, "the buffer is released");
        assert_eq!(f.try_push(b"\n\n", &mut out), too_large);
        assert_eq!(f.finish(&mut out), None);
        assert!(out.is_empty());
        // Many short data lines of one event.
        let mut f = SseFramer::with_max_event_bytes(16);
        assert_eq!(
            f.try_push(b"data: 01234567\ndata: 01234567\n", &mut out),
            too_large
        );
        assert_eq!(f.overflow(), Some(EventTooLarge { max_bytes: 16 }));
        // Whole in one read.
        let mut f = SseFramer::with_max_event_bytes(16);
        assert_eq!(
            f.try_push(b"data: 0123456789abcdefg\n\n", &mut out),
            too_large
        );
        assert!(out.is_empty());
        // At the cap (the two lines joined with `\n`), and many events each under it.
        let mut f = SseFramer::with_max_event_bytes(16);
        assert_eq!(
            f.try_push(b"data: 0123456\ndata: 01234567\n\n", &mut out),
            Ok(())
        );
        assert_eq!(out, vec![ev("0123456\n01234567")]);
        out.clear();
        for _ in 0..100 {
            assert_eq!(f.try_push(b"data: 0123456789\n\n", &mut out), Ok(()));
        }
        assert_eq!(out.len(), 100);
    }

    /// The default cap is `DEFAULT_MAX_EVENT_BYTES`: a 5 MiB line without a newline fails.
    #[test]
    fn the_default_cap_refuses_a_five_mib_line() {
        let mut f = SseFramer::new();
        let mut out = Vec::new();
        let chunk = vec![b'x'; 64 * 1024];
        let mut refused_after = None;
        for i in 0..80 {
            if f.try_push(&chunk, &mut out).is_err() {
                refused_after = Some((i + 1) * chunk.len());
                break;
            }
        }
        assert_eq!(refused_after, Some(DEFAULT_MAX_EVENT_BYTES + chunk.len()));
    }

    /// The fast path decodes exactly as the lossy decoder: valid text borrowed, anything else
    /// through `from_utf8_lossy`.
    #[test]
    fn lossy_matches_the_lossy_decoder() {
        let cases: [&[u8]; 7] = [
            b"",
            b"plain ascii",
            "caf\u{e9} \u{4f60}\u{597d} \u{1f600}".as_bytes(),
            b"\xff\xfe ok",
            b"cut \xe4\xbd",
            b"\xed\xa0\x80 surrogate",
            b"mid \xc3\x28 bad",
        ];
        for c in cases {
            let got = super::lossy(c);
            assert_eq!(got, String::from_utf8_lossy(c), "{c:?}");
            assert_eq!(
                matches!(got, std::borrow::Cow::Borrowed(_)),
                std::str::from_utf8(c).is_ok()
            );
        }
    }
}
