//! Incremental server-sent-events framing (WHATWG HTML §9.2.6): lines end in `\r\n`, `\n` or
//! `\r`; `:` lines are comments (keep-alives); `data:` lines of one event are joined with
//! `\n`; an event ends at a blank line. Bytes may be split anywhere across reads.

use bytes::{Buf, BytesMut};

/// One framed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The joined `data:` lines.
    pub data: String,
}

/// Stateful framer: push bytes as they arrive, take complete events.
#[derive(Debug, Default)]
pub struct SseFramer {
    buf: BytesMut,
    data: String,
    has_data: bool,
    event: Option<String>,
    /// Comment lines seen (keep-alives), for diagnostics.
    pub comments: u64,
}

impl SseFramer {
    /// A fresh framer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes; complete events are appended to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        self.buf.extend_from_slice(bytes);
        self.drain(out, false);
    }

    /// The stream ended: a final line without terminator is processed, and an event that
    /// was never terminated by a blank line is returned as incomplete (`Some`).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Option<SseEvent> {
        self.drain(out, true);
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.line(&line, out);
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

    fn drain(&mut self, out: &mut Vec<SseEvent>, eof: bool) {
        loop {
            let Some(pos) = self.buf.iter().position(|&b| b == b'\n' || b == b'\r') else {
                return;
            };
            let term = self.buf[pos];
            let skip = if term == b'\r' {
                match self.buf.get(pos + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A `\r` at the end of the buffer may be the first half of `\r\n`.
                    None if eof => 1,
                    None => return,
                }
            } else {
                1
            };
            let line = self.buf.split_to(pos);
            self.buf.advance(skip);
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
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                self.data.push_str(&String::from_utf8_lossy(value));
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {} // id, retry and unknown fields carry nothing for us
        }
    }
}

#[cfg(test)]
mod tests {
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
}
