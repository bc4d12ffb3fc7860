//! Keeping secrets out of error text: the credentials the host sent to an upstream (which
//! an upstream may echo back in its error message) and the userinfo of URLs. Used on error
//! paths only, before a message reaches the client, a log line or a telemetry row.

use std::borrow::Cow;

/// What replaces a secret in a message.
pub const REDACTED: &str = "[redacted]";

/// `text` with every occurrence of each secret replaced by [`REDACTED`]. A secret's
/// `Bearer` form goes as a whole (`Bearer <key>` → `[redacted]`), so no `Bearer` prefix is
/// left pointing at the gap. Empty secrets are ignored. Borrowed when nothing matched.
pub fn redact_secrets<'a, S: AsRef<str>>(text: &'a str, secrets: &[S]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for s in secrets {
        let s = s.as_ref();
        if s.is_empty() || !out.contains(s) {
            continue;
        }
        let bearer = format!("Bearer {s}");
        let replaced = out.replace(&bearer, REDACTED).replace(s, REDACTED);
        out = Cow::Owned(replaced);
    }
    out
}

/// `text` with the userinfo (`user:password@`) of every URL in it removed:
/// `connect to http://u:p@host/v1` → `connect to http://host/v1`. A URL is recognised by its
/// `://`; its authority runs to the next `/`, `?`, `#`, whitespace or quote, and the
/// userinfo is everything up to its last `@`. Borrowed when there is none.
pub fn strip_userinfo(text: &str) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '`' | '\'' | '"' | '<' | '>' | ')')
                    || c.is_whitespace()
            })
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => out.push_str(&authority[at + 1..]),
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_their_bearer_form_are_replaced() {
        let cases: &[(&str, &[&str], &str)] = &[
            ("bad key Bearer sk-1234", &["sk-1234"], "bad key [redacted]"),
            (
                "key sk-1234 (sk-1234)",
                &["sk-1234"],
                "key [redacted] ([redacted])",
            ),
            ("nothing here", &["sk-1234"], "nothing here"),
            ("empty secrets", &[""], "empty secrets"),
            ("a sk-1 b pw", &["sk-1", "pw"], "a [redacted] b [redacted]"),
        ];
        for (text, secrets, want) in cases {
            assert_eq!(redact_secrets(text, secrets), *want, "{text}");
        }
        assert!(matches!(
            redact_secrets("clean", &["sk-1"]),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn userinfo_is_removed_from_every_url() {
        let cases = [
            (
                "connect to http://user:pass@127.0.0.1:9/v1/chat: refused",
                "connect to http://127.0.0.1:9/v1/chat: refused",
            ),
            (
                "a https://u@h.example and `http://x:y@z:1`",
                "a https://h.example and `http://z:1`",
            ),
            ("http://user:p@ss@host?q=1", "http://host?q=1"),
            ("no url user@host", "no url user@host"),
            ("http://host/path@x", "http://host/path@x"),
            ("plain", "plain"),
        ];
        for (text, want) in cases {
            assert_eq!(strip_userinfo(text), want, "{text}");
        }
    }
}
