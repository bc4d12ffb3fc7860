//! What a mock scenario answers: a list of steps consumed one per request, then `then`
//! (a normal answer by default). Chat completions, embeddings, OCR `/ocr/text` and OCR
//! `/parse` requests consume steps; OCR archive downloads and health probes do not. The
//! fields `status`, `headers`, `body` and `first_token_delay_ms` apply to every kind; the
//! others say which kind they shape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The default answer text.
pub const DEFAULT_CONTENT: &str = "Hello from the mock upstream.";

/// One scripted answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Step {
    /// HTTP status; non-2xx answers send `body` (or an OpenAI-shaped error) and `headers`.
    pub status: u16,
    /// Extra response headers (e.g. `Retry-After`).
    pub headers: BTreeMap<String, String>,
    /// A raw body to send instead of a generated answer.
    pub body: Option<String>,
    /// A streamed answer sent as these `data:` payloads verbatim, one event each (chunk
    /// objects written exactly as the vendor sends them: refusals, `logprobs`,
    /// `system_fingerprint`, a legacy `function_call`, …), `inter_chunk_delay_ms` apart, then
    /// `data: [DONE]` unless `missing_done`. Only streamed requests use it (a non-streamed
    /// one gets `body`, or the generated answer).
    pub events: Option<Vec<String>>,
    /// Answer text.
    pub content: String,
    /// Reasoning text sent before the answer.
    pub reasoning: Option<String>,
    /// `field` (`reasoning_content`, DeepSeek/Qwen) or `think_tags` (`<think>` inline).
    pub reasoning_style: ReasoningStyle,
    /// Number of content chunks (the text is split evenly); 0 = one chunk per word.
    pub chunks: usize,
    /// Delay before the first byte of the answer, in ms.
    pub first_token_delay_ms: u64,
    /// Delay between chunks, in ms.
    pub inter_chunk_delay_ms: u64,
    /// Break the connection after this many content chunks.
    pub cut_after_chunks: Option<usize>,
    /// Stop sending (keep the connection open) after this many content chunks.
    pub stall_after_chunks: Option<usize>,
    /// End the stream without `[DONE]` (usage still sent).
    pub missing_done: bool,
    /// Send a usage chunk (`choices: []`) at the end of streams, usage in bodies.
    pub usage: bool,
    /// Streams: also report the usage on the first chunk, as providers that stream a
    /// running usage total do (so a stream cut early has already reported some).
    pub usage_on_first_chunk: bool,
    /// Reported `prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u64>,
    /// Send `: keep-alive` comments between chunks.
    pub keepalive: bool,
    /// Use `\r\n` line endings.
    pub crlf: bool,
    /// Embeddings: answer vectors of this many dimensions whatever the request asked
    /// (a wrong-dimension batch).
    pub embedding_dims: Option<usize>,
    /// Embeddings: leave the last N vectors out of `data` (a wrong vector count).
    pub drop_vectors: usize,
    /// Embeddings: write `data` in reverse index order (clients must sort by `index`).
    pub shuffle: bool,
    /// Embeddings: include `usage` (default true; false answers without it).
    pub embedding_usage: bool,
    /// OCR `/parse`: an absolute `download_url` (`http://<addr>/sc/<name>/static/<id>.zip`)
    /// instead of the relative `/static/<id>.zip`.
    pub absolute_url: bool,
    /// OCR `/parse`: what the archive behind `download_url` holds.
    pub layout: Layout,
    /// Anthropic: tool calls the answer makes (`tool_use` blocks after the text; streamed as
    /// `input_json_delta` fragments), with `stop_reason: tool_use`.
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Anthropic: `cache_creation_input_tokens` (prompt tokens written to the cache).
    pub cache_write_tokens: Option<u64>,
    /// Anthropic: a `redacted_thinking` block with this `data`, after the thinking block.
    pub redacted_thinking: Option<String>,
    /// Anthropic streams: an `error` event of this error type (e.g. `overloaded_error`)
    /// after the text, in place of the rest of the stream. Gemini streams: an `{"error": …}`
    /// chunk of this status (e.g. `UNAVAILABLE`) after the text.
    pub stream_error: Option<String>,
    /// Gemini: the `finishReason` to report instead of `STOP` (e.g. `SAFETY`).
    pub finish_reason: Option<String>,
    /// Gemini: a 429's `RetryInfo.retryDelay` (e.g. `"1s"`) in the error's `details`.
    pub retry_delay: Option<String>,
}

/// One scripted tool call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// The call id (`toolu_…`).
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments, a JSON object.
    pub arguments: serde_json::Value,
}

impl Default for Step {
    fn default() -> Self {
        Self {
            status: 200,
            headers: BTreeMap::new(),
            body: None,
            events: None,
            content: DEFAULT_CONTENT.to_string(),
            reasoning: None,
            reasoning_style: ReasoningStyle::Field,
            chunks: 0,
            first_token_delay_ms: 0,
            inter_chunk_delay_ms: 0,
            cut_after_chunks: None,
            stall_after_chunks: None,
            missing_done: false,
            usage: true,
            usage_on_first_chunk: false,
            cached_tokens: None,
            keepalive: false,
            crlf: false,
            embedding_dims: None,
            drop_vectors: 0,
            shuffle: false,
            embedding_usage: true,
            absolute_url: false,
            layout: Layout::Good,
            tool_calls: Vec::new(),
            cache_write_tokens: None,
            redacted_thinking: None,
            stream_error: None,
            finish_reason: None,
            retry_delay: None,
        }
    }
}

/// How reasoning is sent.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningStyle {
    Field,
    ThinkTags,
}

/// The archive an OCR `/parse` answer points at (fixtures in `mock/fixtures/`, whose
/// `README.md` lists the exact elements).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// `<id>/<id>_middle.json` (`layout_good.json`), `<id>/<id>.md`, `<id>/images/fig1.jpg`.
    #[default]
    Good,
    /// As `good` with three bad boxes added (`layout_bad_box.json`).
    BadBox,
    /// Only `<id>/<id>.md`: no `_middle.json`.
    NoMiddle,
    /// A `_middle.json` that is not valid JSON.
    BadJson,
    /// Bytes that are not a ZIP archive.
    NotZip,
}

/// A scenario's script.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Script {
    /// Consumed one per request, in order.
    pub steps: Vec<Step>,
    /// Answer once the steps are used up (default: a normal answer).
    pub then: Option<Step>,
}

/// Split `text` into pieces: `n` even pieces (by chars), or one per word when `n` is 0.
pub fn split_text(text: &str, n: usize) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    if n == 0 {
        let mut out = Vec::new();
        let mut cur = String::new();
        for ch in text.chars() {
            cur.push(ch);
            if ch == ' ' {
                out.push(std::mem::take(&mut cur));
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        return out;
    }
    let chars: Vec<char> = text.chars().collect();
    let n = n.min(chars.len());
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let a = i * chars.len() / n;
        let b = (i + 1) * chars.len() / n;
        out.push(chars[a..b].iter().collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits() {
        assert_eq!(split_text("a bc d", 0), vec!["a ", "bc ", "d"]);
        assert_eq!(split_text("abcdef", 3), vec!["ab", "cd", "ef"]);
        assert_eq!(split_text("ab", 5), vec!["a", "b"]);
        assert_eq!(split_text("", 3), Vec::<String>::new());
    }
}
