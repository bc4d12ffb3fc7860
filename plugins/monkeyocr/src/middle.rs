//! The MinerU-style `*_middle.json` that MonkeyOCR's `/parse` archive carries, read into
//! layout elements and page sizes.
//!
//! ```text
//! {"pdf_info": [{"page_idx": 0, "page_size": [W, H],
//!                "para_blocks": [{"type": "text", "bbox": [x0, y0, x1, y1],
//!                                 "lines": [{"spans": [{"type": "text", "content": "…"}]}]},
//!                                {"type": "table", "bbox": […],
//!                                 "blocks": [{"type": "table_body", "lines": [{"spans":
//!                                   [{"type": "table", "html": "<table>…</table>"}]}]}, …]}]},
//!               …]}
//! ```
//!
//! Only the fields of the structs below are read; everything else (`preproc_blocks`, `discarded_blocks`,
//! `image_path`, scores, …) is skipped without being kept in memory.

use std::fmt;
use std::marker::PhantomData;

use polygateway_plugin_sdk::{
    Bbox, ClassifiedError, ErrorClass, LayoutDocument, LayoutElement, PageSize,
};
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::{cap, error, strip_bom};

/// A `T` read from a JSON object only. serde's derived structs also accept an array of the
/// fields in order (`[0, [W, H], […]]` as a page); this refuses that, so a structural field
/// of the wrong shape is an error rather than a positional reinterpretation.
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjVisitor<T>(PhantomData<fn() -> T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
            type Value = Obj<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Obj)
            }
        }

        deserializer.deserialize_map(ObjVisitor(PhantomData))
    }
}

#[derive(Deserialize)]
struct Middle {
    pdf_info: Vec<Obj<Page>>,
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    page_idx: Option<Box<RawValue>>,
    #[serde(default)]
    page_size: Option<Box<RawValue>>,
    #[serde(default)]
    para_blocks: Option<Vec<Obj<Block>>>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    bbox: Option<Box<RawValue>>,
    #[serde(default)]
    lines: Option<Vec<Obj<Line>>>,
    #[serde(default)]
    blocks: Option<Vec<Obj<Block>>>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    spans: Option<Vec<Obj<Span>>>,
}

#[derive(Deserialize)]
struct Span {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    html: Option<String>,
    #[serde(default)]
    latex: Option<String>,
}

/// Parse a `*_middle.json` into a [`LayoutDocument`].
///
/// For every page of `pdf_info`, in order:
/// - its index is `page_idx` when that is a non-negative integer that fits a `u32`, else its
///   position in `pdf_info`;
/// - its size is pushed when `page_size` is an array of exactly two finite numbers; otherwise
///   (missing, `null`, wrong length, a string, a number out of `f64` range) no size is
///   reported for that page — its elements are still reported;
/// - every block of `para_blocks` (none when missing or `null`), in order, becomes one
///   element: `kind` is the block's `type` verbatim (`""` when missing), `page_index` the
///   page's index, `text` as below, and `bbox` from the block's `bbox`.
///
/// Text: a line is its spans' texts concatenated; a block is its non-empty line texts, then
/// its nested `blocks`' non-empty texts (recursively: tables' `table_body`/`table_caption`/
/// `table_footnote`, images' `image_body`/`image_caption`, lists' items), joined with `\n`.
/// A span's text is its `content`, except a `table` span (its `html`, else `latex`, else
/// `content`) and an `image` span (nothing) — so an image block's text is its caption or `""`.
///
/// Boxes are never dropped here (the host drops and counts bad ones): a `bbox` that is not an
/// array of four elements gives four NaN coordinates; inside a four-element array, an element
/// that is not a finite JSON number (a string, `null`, `1e999`) gives a NaN coordinate.
///
/// Errors, all `result-invalid` with a message starting `layout document is not a
/// middle.json: ` (a bad image, not a bad service): not JSON; no `pdf_info` array; a
/// structural field of the wrong JSON type (`para_blocks`, `lines`, `spans` or `blocks` not
/// an array of objects, `type`/`content`/`html`/`latex` not a string or `null`); nesting
/// deeper than serde_json's recursion limit (128 levels of arrays and objects), which also
/// bounds this function's own recursion. A leading UTF-8 byte-order mark is ignored.
///
/// # Example
/// See `two_page_middle_json` in the crate's tests (a `cdylib` runs no doc tests).
pub fn parse_middle_json(member: &[u8]) -> Result<LayoutDocument, ClassifiedError> {
    let Obj(middle): Obj<Middle> = serde_json::from_slice(strip_bom(member)).map_err(|e| {
        error(
            ErrorClass::ResultInvalid,
            cap(&format!("layout document is not a middle.json: {e}")),
        )
    })?;
    let mut elements = Vec::new();
    let mut pages = Vec::with_capacity(middle.pdf_info.len());
    for (position, Obj(page)) in middle.pdf_info.iter().enumerate() {
        let page_index = page
            .page_idx
            .as_deref()
            .and_then(|raw| serde_json::from_str::<u32>(raw.get()).ok())
            .unwrap_or_else(|| u32::try_from(position).unwrap_or(u32::MAX));
        let size = page.page_size.as_deref().and_then(numbers::<2>);
        if let Some([width, height]) = size
            && width.is_finite()
            && height.is_finite()
        {
            pages.push(PageSize {
                page_index,
                width,
                height,
            });
        }
        for Obj(block) in page.para_blocks.iter().flatten() {
            elements.push(LayoutElement {
                kind: block.kind.clone().unwrap_or_default(),
                text: block_text(block),
                bbox: bbox(block.bbox.as_deref()),
                page_index,
            });
        }
    }
    Ok(LayoutDocument { elements, pages })
}

/// The block's non-empty line texts, then its nested blocks' non-empty texts, joined by `\n`.
fn block_text(block: &Block) -> String {
    let lines = block
        .lines
        .iter()
        .flatten()
        .map(|Obj(line)| line_text(line));
    let nested = block.blocks.iter().flatten().map(|Obj(b)| block_text(b));
    let parts: Vec<String> = lines.chain(nested).filter(|t| !t.is_empty()).collect();
    parts.join("\n")
}

fn line_text(line: &Line) -> String {
    line.spans
        .iter()
        .flatten()
        .map(|Obj(span)| span_text(span))
        .collect()
}

fn span_text(span: &Span) -> &str {
    let text = match span.kind.as_deref() {
        Some("image") => None,
        Some("table") => span
            .html
            .as_deref()
            .or(span.latex.as_deref())
            .or(span.content.as_deref()),
        _ => span.content.as_deref(),
    };
    text.unwrap_or("")
}

/// `[x0, y0, x1, y1]`, NaN for what is missing or not a finite number (see
/// [`parse_middle_json`]).
fn bbox(raw: Option<&RawValue>) -> Bbox {
    let [x0, y0, x1, y1] = raw.and_then(numbers::<4>).unwrap_or([f64::NAN; 4]);
    Bbox { x0, y0, x1, y1 }
}

/// An array of exactly `N` elements, each a finite number or NaN; none when `raw` is not an
/// array of `N` elements.
fn numbers<const N: usize>(raw: &RawValue) -> Option<[f64; N]> {
    let items: Vec<&RawValue> = serde_json::from_str(raw.get()).ok()?;
    if items.len() != N {
        return None;
    }
    let mut out = [f64::NAN; N];
    for (slot, item) in out.iter_mut().zip(items) {
        *slot = serde_json::from_str::<f64>(item.get())
            .ok()
            .filter(|v| v.is_finite())
            .unwrap_or(f64::NAN);
    }
    Some(out)
}
