//! The `<think>…</think>` splitter: moves reasoning that a model inlines into its content
//! stream to the reasoning channel, across chunk boundaries.

use crate::Delta;

/// The tag that opens inline reasoning.
const OPEN: &str = "<think>";
/// The tag that closes inline reasoning.
const CLOSE: &str = "</think>";

/// A stateful splitter of content text into [`Delta::Content`] and [`Delta::Reasoning`].
///
/// Rules (deliberately simple):
/// - outside reasoning, any `<think>` opens reasoning; inside, any `</think>` closes it
///   (a `</think>` outside reasoning and a `<think>` inside it are ordinary text);
/// - the tags themselves are dropped, nothing else is (no whitespace or newline stripping);
/// - a tag may be split across chunks at any byte: a chunk's tail that could still become
///   the next tag is held back until the next chunk decides it;
/// - held text that turns out not to be a tag is emitted in the current mode;
/// - [`ThinkSplitter::finish`] flushes whatever is still held (as content outside reasoning,
///   as reasoning inside it);
/// - empty pieces are never emitted. Tags are matched case-sensitively.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{Delta, ThinkSplitter};
///
/// let mut split = ThinkSplitter::new();
/// let mut out = Vec::new();
/// split.push("<thi", &mut out);
/// split.push("nk>hmm</think>Hi", &mut out);
/// split.finish(&mut out);
/// assert_eq!(out, vec![Delta::Reasoning("hmm".into()), Delta::Content("Hi".into())]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThinkSplitter {
    /// Inside `<think>…</think>`.
    inside: bool,
    /// A tail of the input that is a proper prefix of the tag being looked for.
    held: String,
}

impl ThinkSplitter {
    /// A splitter in content mode with nothing held.
    ///
    /// # Example
    /// ```
    /// let split = polygateway_plugin_sdk::ThinkSplitter::new();
    /// assert!(!split.in_reasoning());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the splitter is currently inside `<think>…</think>`.
    ///
    /// # Example
    /// ```
    /// let mut split = polygateway_plugin_sdk::ThinkSplitter::new();
    /// split.push("<think>", &mut Vec::new());
    /// assert!(split.in_reasoning());
    /// ```
    pub fn in_reasoning(&self) -> bool {
        self.inside
    }

    /// Split one chunk of content text, appending the resulting deltas to `out` (at most one
    /// per mode switch; nothing for text that is held back).
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::{Delta, ThinkSplitter};
    ///
    /// let mut split = ThinkSplitter::new();
    /// let mut out = Vec::new();
    /// split.push("a <b> c", &mut out); // `<b>` is not a tag
    /// assert_eq!(out, vec![Delta::Content("a <b> c".into())]);
    /// ```
    pub fn push(&mut self, text: &str, out: &mut Vec<Delta>) {
        let mut buf = std::mem::take(&mut self.held);
        buf.push_str(text);
        let mut rest = buf.as_str();
        loop {
            let tag = if self.inside { CLOSE } else { OPEN };
            if let Some(pos) = rest.find(tag) {
                self.emit(rest.get(..pos).unwrap_or_default(), out);
                self.inside = !self.inside;
                rest = rest.get(pos + tag.len()..).unwrap_or_default();
                continue;
            }
            let keep = partial_tag_len(rest, tag);
            let cut = rest.len() - keep;
            self.emit(rest.get(..cut).unwrap_or_default(), out);
            self.held = rest.get(cut..).unwrap_or_default().to_owned();
            return;
        }
    }

    /// Flush anything held back (see the type's rules), appending it to `out`. The mode is
    /// kept, so a splitter may be reused after a flush.
    ///
    /// # Example
    /// ```
    /// use polygateway_plugin_sdk::{Delta, ThinkSplitter};
    ///
    /// let mut split = ThinkSplitter::new();
    /// let mut out = Vec::new();
    /// split.push("x <thi", &mut out);
    /// split.finish(&mut out);
    /// assert_eq!(out, vec![Delta::Content("x ".into()), Delta::Content("<thi".into())]);
    /// ```
    pub fn finish(&mut self, out: &mut Vec<Delta>) {
        let held = std::mem::take(&mut self.held);
        self.emit(&held, out);
    }

    fn emit(&self, text: &str, out: &mut Vec<Delta>) {
        if text.is_empty() {
            return;
        }
        out.push(if self.inside {
            Delta::Reasoning(text.to_owned())
        } else {
            Delta::Content(text.to_owned())
        });
    }
}

/// The length of the longest proper prefix of `tag` that `text` ends with (0 if none).
/// Tags are ASCII, so the returned cut is always a char boundary of `text`.
fn partial_tag_len(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&k| text.ends_with(tag.get(..k).unwrap_or_default()))
        .unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn run(chunks: &[&str]) -> Vec<Delta> {
        let mut split = ThinkSplitter::new();
        let mut out = Vec::new();
        for c in chunks {
            split.push(c, &mut out);
        }
        split.finish(&mut out);
        out
    }

    fn c(s: &str) -> Delta {
        Delta::Content(s.into())
    }

    fn r(s: &str) -> Delta {
        Delta::Reasoning(s.into())
    }

    #[test]
    fn plain_text_is_content() {
        assert_eq!(run(&["hello", " world"]), vec![c("hello"), c(" world")]);
    }

    #[test]
    fn whole_tags_in_one_chunk() {
        assert_eq!(
            run(&["<think>a</think>b"]),
            vec![r("a"), c("b")],
            "tags are dropped, nothing else"
        );
        assert_eq!(
            run(&["x<think>a</think>\n\nb"]),
            vec![c("x"), r("a"), c("\n\nb")]
        );
    }

    #[test]
    fn tags_split_at_every_byte() {
        let text = "pre<think>reason</think>post";
        for i in 0..=text.len() {
            for j in i..=text.len() {
                let out = run(&[&text[..i], &text[i..j], &text[j..]]);
                let (mut content, mut reasoning) = (String::new(), String::new());
                for d in out {
                    match d {
                        Delta::Content(s) => content.push_str(&s),
                        Delta::Reasoning(s) => reasoning.push_str(&s),
                        other => panic!("unexpected {other:?}"),
                    }
                }
                assert_eq!(
                    (content.as_str(), reasoning.as_str()),
                    ("prepost", "reason"),
                    "{i} {j}"
                );
            }
        }
    }

    #[test]
    fn split_open_and_close_tags() {
        assert_eq!(
            run(&["<thi", "nk>Let me", " think.</th", "ink>Answer"]),
            vec![r("Let me"), r(" think."), c("Answer")]
        );
    }

    #[test]
    fn false_prefix_is_emitted_in_current_mode() {
        assert_eq!(run(&["a<th", "e end"]), vec![c("a"), c("<the end")]);
        assert_eq!(run(&["<think>a</thi", "s"]), vec![r("a"), r("</this")]);
    }

    #[test]
    fn finish_flushes_held_text_in_mode() {
        assert_eq!(run(&["ok <"]), vec![c("ok "), c("<")]);
        assert_eq!(run(&["<think>x</"]), vec![r("x"), r("</")]);
        assert_eq!(run(&["<think>unterminated"]), vec![r("unterminated")]);
    }

    #[test]
    fn stray_tags_are_text() {
        assert_eq!(run(&["a</think>b"]), vec![c("a</think>b")]);
        assert_eq!(run(&["<think>a<think>b</think>"]), vec![r("a<think>b")]);
    }

    #[test]
    fn multibyte_text_around_tags() {
        assert_eq!(
            run(&["é<think>思", "考</think>答"]),
            vec![c("é"), r("思"), r("考"), c("答")]
        );
    }

    #[test]
    fn many_angle_brackets() {
        assert_eq!(run(&["<<<<", "<think>x"]), vec![c("<<<"), c("<"), r("x")]);
    }
}
