//! The numeric defence of layout answers (docs/ocr.md#numeric-defence): the host never hands
//! on a box a renderer cannot draw. An element whose box has a non-finite coordinate, is
//! reversed (x1 < x0 or y1 < y0) or has zero width or height is dropped with a warning and
//! counted; a page size that is non-finite or ≤ 0 is dropped too.

use crate::plugin::{Bbox, LayoutDocument};

use super::types::{OcrElement, OcrPageSize};

/// A layout document after the defence.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CleanLayout {
    pub elements: Vec<OcrElement>,
    pub page_sizes: Vec<OcrPageSize>,
    /// Elements dropped for their box.
    pub dropped_boxes: u32,
    /// Page sizes dropped.
    pub dropped_pages: u32,
}

/// Why a box is refused; `None` for a usable one.
fn box_fault(b: &Bbox) -> Option<&'static str> {
    let c = [b.x0, b.y0, b.x1, b.y1];
    if c.iter().any(|v| !v.is_finite()) {
        Some("non-finite")
    } else if b.x1 < b.x0 || b.y1 < b.y0 {
        Some("reversed")
    } else if b.x1 == b.x0 || b.y1 == b.y0 {
        Some("degenerate")
    } else {
        None
    }
}

/// Apply the defence to `doc` (from `source`, for the warnings).
pub(crate) fn clean(doc: LayoutDocument, source: &str) -> CleanLayout {
    let mut dropped_boxes = 0u32;
    let mut elements = Vec::with_capacity(doc.elements.len());
    for e in doc.elements {
        let b = &e.bbox;
        if let Some(why) = box_fault(b) {
            tracing::warn!(
                source = %source,
                page_index = e.page_index,
                kind = %e.kind,
                "OCR layout element dropped: {why} box [{}, {}, {}, {}]",
                b.x0, b.y0, b.x1, b.y1
            );
            dropped_boxes = dropped_boxes.saturating_add(1);
            continue;
        }
        elements.push(OcrElement {
            bbox: [b.x0, b.y0, b.x1, b.y1],
            kind: e.kind,
            text: e.text,
            page_index: e.page_index,
        });
    }
    let mut dropped_pages = 0u32;
    let mut page_sizes = Vec::with_capacity(doc.pages.len());
    for p in doc.pages {
        let ok = p.width.is_finite() && p.height.is_finite() && p.width > 0.0 && p.height > 0.0;
        if !ok {
            tracing::warn!(
                source = %source,
                page_index = p.page_index,
                "OCR page size dropped: {} x {}",
                p.width, p.height
            );
            dropped_pages = dropped_pages.saturating_add(1);
            continue;
        }
        page_sizes.push(OcrPageSize {
            page_index: p.page_index,
            width: p.width,
            height: p.height,
        });
    }
    CleanLayout {
        elements,
        page_sizes,
        dropped_boxes,
        dropped_pages,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{LayoutElement, PageSize};

    fn el(kind: &str, b: [f64; 4]) -> LayoutElement {
        LayoutElement {
            kind: kind.into(),
            text: format!("{kind} text"),
            bbox: Bbox {
                x0: b[0],
                y0: b[1],
                x1: b[2],
                y1: b[3],
            },
            page_index: 0,
        }
    }

    #[test]
    fn drops_non_finite_reversed_and_degenerate_boxes_and_bad_pages() {
        let doc = LayoutDocument {
            elements: vec![
                el("title", [10.0, 20.0, 300.5, 40.0]),
                el("nan", [f64::NAN, 0.0, 1.0, 1.0]),
                el("inf", [0.0, 0.0, f64::INFINITY, 1.0]),
                el("reversed_x", [5.0, 0.0, 4.0, 1.0]),
                el("reversed_y", [0.0, 5.0, 1.0, 4.0]),
                el("zero_width", [3.0, 0.0, 3.0, 9.0]),
                el("zero_height", [0.0, 7.0, 9.0, 7.0]),
                el("text", [0.0, 0.0, 0.5, 0.25]),
            ],
            pages: vec![
                PageSize {
                    page_index: 0,
                    width: 612.0,
                    height: 792.0,
                },
                PageSize {
                    page_index: 1,
                    width: 0.0,
                    height: 792.0,
                },
                PageSize {
                    page_index: 2,
                    width: f64::NAN,
                    height: 1.0,
                },
                PageSize {
                    page_index: 3,
                    width: 1.0,
                    height: -2.0,
                },
            ],
        };
        let c = clean(doc, "s1");
        assert_eq!(c.dropped_boxes, 6);
        assert_eq!(c.dropped_pages, 3);
        assert_eq!(
            c.elements,
            vec![
                OcrElement {
                    kind: "title".into(),
                    text: "title text".into(),
                    bbox: [10.0, 20.0, 300.5, 40.0],
                    page_index: 0
                },
                OcrElement {
                    kind: "text".into(),
                    text: "text text".into(),
                    bbox: [0.0, 0.0, 0.5, 0.25],
                    page_index: 0
                },
            ]
        );
        assert_eq!(
            c.page_sizes,
            vec![OcrPageSize {
                page_index: 0,
                width: 612.0,
                height: 792.0
            }]
        );
    }
}
