//! OpenAI content (a string or an array of parts) → Anthropic content blocks: `text` parts
//! (with their `cache_control`), `image_url` parts as `image` blocks (a `data:` URL →
//! `base64` source, an `http(s)` URL → `url` source), and the text-only content of system
//! and assistant messages.

use polygateway_plugin_sdk::BuildError;
use serde_json::value::RawValue;

use crate::json::{self, Kind, Obj};

/// One piece of an Anthropic turn's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// Plain text without `cache_control`, as a JSON string literal: a turn made of exactly
    /// one of these is sent with string content.
    Text(String),
    /// A complete content block object (JSON text).
    Block(String),
}

impl Part {
    /// The part as a content block object.
    pub(crate) fn into_block(self) -> String {
        match self {
            Self::Text(text) => text_block(&text, None),
            Self::Block(block) => block,
        }
    }
}

/// `{"type":"text","text":…,"cache_control":…}` from a raw JSON string literal.
pub(crate) fn text_block(raw_text: &str, cache_control: Option<&str>) -> String {
    Obj::new()
        .str("type", "text")
        .raw("text", raw_text)
        .opt("cache_control", cache_control)
        .build()
}

/// A request error naming the place (`at`) in `messages-json`.
pub(crate) fn invalid(at: &str, problem: &str) -> BuildError {
    BuildError::InvalidRequest(format!("messages-json: {at}: {problem}"))
}

/// Which content parts a message may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Allowed {
    /// Text and images (user messages, tool results).
    TextAndImages,
    /// Text (and an assistant's `refusal` parts, sent as text).
    TextOnly,
}

/// The parts of a message's `content` (a string or an array of parts; `null` = none).
/// Empty texts are dropped (Anthropic refuses empty text blocks).
///
/// Errors: a content that is neither → `invalid-request`; a malformed part or image →
/// `invalid-request` naming it; a part type Anthropic cannot take here → `unsupported` (another
/// provider may serve it).
pub(crate) fn parts(
    content: Option<&RawValue>,
    at: &str,
    allowed: Allowed,
) -> Result<Vec<Part>, BuildError> {
    let Some(content) = content else {
        return Ok(Vec::new());
    };
    match json::kind(content) {
        Kind::String => Ok(non_empty_text(content.get())),
        Kind::Array => {
            let items = json::array(content.get())
                .ok_or_else(|| invalid(&format!("{at}.content"), "invalid array"))?;
            let mut out = Vec::with_capacity(items.len());
            for (j, item) in items.iter().enumerate() {
                out.extend(part(item, &format!("{at}.content[{j}]"), allowed)?);
            }
            Ok(out)
        }
        _ => Err(invalid(
            &format!("{at}.content"),
            "expected a string or an array of content parts",
        )),
    }
}

/// `[Text(raw)]` unless `raw` is the empty string.
fn non_empty_text(raw: &str) -> Vec<Part> {
    if json::is_empty_string(raw) {
        Vec::new()
    } else {
        vec![Part::Text(raw.to_owned())]
    }
}

/// One content part (`at` names it).
fn part(item: &RawValue, at: &str, allowed: Allowed) -> Result<Vec<Part>, BuildError> {
    let obj =
        json::object(item.get()).ok_or_else(|| invalid(at, "expected a content part object"))?;
    let kind = json::string_field(&obj, "type").unwrap_or_default();
    let cache_control = json::field(&obj, "cache_control").map(RawValue::get);
    let text_key = match kind.as_str() {
        "text" => "text",
        "refusal" if allowed == Allowed::TextOnly => "refusal",
        "image_url" if allowed == Allowed::TextAndImages => {
            let url = json::field(&obj, "image_url")
                .ok_or_else(|| invalid(at, "an image_url part needs `image_url`"))?;
            return Ok(vec![Part::Block(image_block(url, cache_control, at)?)]);
        }
        other => {
            return Err(BuildError::Unsupported(format!(
                "messages-json: {at}: anthropic cannot take a content part of type `{other}` here"
            )));
        }
    };
    let text = json::raw_string(&obj, text_key)
        .ok_or_else(|| invalid(at, &format!("a {kind} part needs a string `{text_key}`")))?;
    if json::is_empty_string(text) {
        return Ok(Vec::new());
    }
    Ok(vec![match cache_control {
        None => Part::Text(text.to_owned()),
        Some(cc) => Part::Block(text_block(text, Some(cc))),
    }])
}

/// An `image` block from an OpenAI `image_url` value (a URL string or `{"url", "detail"?}`).
fn image_block(
    image_url: &RawValue,
    cache_control: Option<&str>,
    at: &str,
) -> Result<String, BuildError> {
    let url = match json::kind(image_url) {
        Kind::String => serde_json::from_str::<String>(image_url.get()).ok(),
        Kind::Object => json::object(image_url.get()).and_then(|o| json::string_field(&o, "url")),
        _ => None,
    }
    .ok_or_else(|| invalid(at, "image_url needs a string `url`"))?;
    let source = if let Some(rest) = url.strip_prefix("data:") {
        let (media_type, data) = parse_data_url(rest).ok_or_else(|| {
            invalid(
                at,
                "malformed data URL (expected data:<media type>;base64,<data>)",
            )
        })?;
        Obj::new()
            .str("type", "base64")
            .str("media_type", media_type)
            .str("data", data)
            .build()
    } else if url.starts_with("https://") || url.starts_with("http://") {
        Obj::new().str("type", "url").str("url", &url).build()
    } else {
        return Err(invalid(
            at,
            "image URL must be a data: URL or an http(s) URL",
        ));
    };
    Ok(Obj::new()
        .str("type", "image")
        .raw("source", &source)
        .opt("cache_control", cache_control)
        .build())
}

/// Split the part of a data URL after `data:` into (media type, base64 data): the header
/// must be `<type>/<subtype>;base64` and the data non-empty.
fn parse_data_url(rest: &str) -> Option<(&str, &str)> {
    let (header, data) = rest.split_once(',')?;
    let media_type = header.strip_suffix(";base64")?;
    let valid_type = media_type
        .split_once('/')
        .is_some_and(|(t, s)| !t.is_empty() && !s.is_empty())
        && !media_type.contains(';');
    (valid_type && !data.is_empty()).then_some((media_type, data))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn data_urls() {
        assert_eq!(
            parse_data_url("image/png;base64,iVBO"),
            Some(("image/png", "iVBO"))
        );
        for bad in [
            "image/png,iVBO",
            "image/png;base64,",
            "png;base64,x",
            ";base64,x",
            "image/png;charset=x;base64,x",
            "image/png;base64",
        ] {
            assert_eq!(parse_data_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn text_parts_collapse_unless_cached() {
        let raw = serde_json::value::RawValue::from_string(
            r#"[{"type":"text","text":"a"},{"type":"text","text":""},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]"#.into(),
        )
        .unwrap();
        let got = parts(Some(&raw), "messages[0]", Allowed::TextAndImages).unwrap();
        assert_eq!(
            got,
            vec![
                Part::Text("\"a\"".into()),
                Part::Block(
                    r#"{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}"#.into()
                ),
            ]
        );
    }
}
