//! Native tests of the monkeyocr component: capabilities, the upload and health requests,
//! the text and layout answers (and their error classes), and the `_middle.json` reader.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::{
    ArchiveFetch, AuthScheme, Bbox, BuildError, ChatRequest, ClassifiedError, EmbeddingGuest,
    EmbeddingInputs, EmbeddingRequest, ErrorClass, Guest, Header, ImageInfo, LayoutElement,
    OcrGuest, OcrOperation, PageSize, SourceInfo, ThinkingStyle,
};

use super::{MAX_MESSAGE_CHARS, MonkeyOcr};

fn source() -> SourceInfo {
    SourceInfo {
        model: "monkeyocr".into(),
        base_url: "http://ocr.lan:7861".into(),
        enable_thinking: None,
        extra_body_json: "{}".into(),
        max_tokens: None,
        thinking_budget_tokens: None,
    }
}

fn image() -> ImageInfo {
    ImageInfo {
        size_bytes: 1234,
        media_type: "image/png".into(),
        file_name: "image.png".into(),
    }
}

fn accept_json() -> Vec<Header> {
    vec![Header {
        name: "accept".into(),
        value: "application/json".into(),
    }]
}

fn text(body: &str) -> Result<String, ClassifiedError> {
    <MonkeyOcr as OcrGuest>::parse_text_response(body.as_bytes().to_vec())
}

fn layout(body: &str) -> Result<ArchiveFetch, ClassifiedError> {
    <MonkeyOcr as OcrGuest>::parse_layout_response(body.as_bytes().to_vec())
}

fn document(body: &[u8]) -> Result<polygateway_plugin_sdk::LayoutDocument, ClassifiedError> {
    <MonkeyOcr as OcrGuest>::parse_layout_document(body.to_vec())
}

fn err(class: ErrorClass, message: &str) -> ClassifiedError {
    ClassifiedError {
        class,
        message: message.into(),
        code: None,
        retry_after_ms: None,
    }
}

fn element(kind: &str, text: &str, bbox: [f64; 4], page_index: u32) -> LayoutElement {
    let [x0, y0, x1, y1] = bbox;
    LayoutElement {
        kind: kind.into(),
        text: text.into(),
        bbox: Bbox { x0, y0, x1, y1 },
        page_index,
    }
}

/// Compares boxes bit for bit, so NaN equals NaN (the derived `PartialEq` says it does not).
fn assert_elements(actual: &[LayoutElement], expected: &[LayoutElement]) {
    assert_eq!(actual.len(), expected.len(), "{actual:#?}");
    for (a, e) in actual.iter().zip(expected) {
        assert_eq!(
            (&a.kind, &a.text, a.page_index),
            (&e.kind, &e.text, e.page_index)
        );
        let bits = |b: &Bbox| [b.x0, b.y0, b.x1, b.y1].map(f64::to_bits);
        assert_eq!(bits(&a.bbox), bits(&e.bbox), "{a:?} vs {e:?}");
    }
}

#[test]
fn describes_an_ocr_only_provider() {
    let info = <MonkeyOcr as Guest>::describe();
    assert_eq!(info.name, "monkeyocr");
    assert_eq!(info.contract_version, "0.2.0");
    let c = info.capabilities;
    assert!(c.ocr);
    assert!(!c.chat && !c.streaming && !c.native_json_schema && !c.prefill_continuation);
    assert!(!c.embedding && !c.audio);
    assert_eq!(c.thinking, ThinkingStyle::None);
}

#[test]
fn chat_and_embeddings_are_unsupported() {
    let req = ChatRequest {
        messages_json: r#"[{"role":"user","content":"hi"}]"#.into(),
        overlay_json: "{}".into(),
        stream: false,
        prefill: None,
    };
    let e = <MonkeyOcr as Guest>::build_request(req, source()).unwrap_err();
    assert_eq!(
        e,
        BuildError::Unsupported("provider `monkeyocr` serves OCR only, not chat".into())
    );
    let req = EmbeddingRequest {
        inputs: EmbeddingInputs::Texts(vec!["a".into()]),
        dimensions: None,
    };
    let e = <MonkeyOcr as EmbeddingGuest>::build_embedding_request(req, source()).unwrap_err();
    assert!(matches!(e, BuildError::Unsupported(_)), "{e:?}");
}

#[test]
fn upload_requests() {
    for (op, path) in [
        (OcrOperation::Text, "/ocr/text"),
        (OcrOperation::Layout, "/parse"),
    ] {
        let up = <MonkeyOcr as OcrGuest>::build_ocr_request(op, image(), source()).unwrap();
        assert_eq!(up.path, path);
        assert_eq!(up.headers, accept_json());
        assert_eq!(up.auth, AuthScheme::None);
        assert_eq!(up.file_field, "file");
        assert!(up.fields.is_empty());
    }
}

#[test]
fn health_request_is_get_health() {
    let h = <MonkeyOcr as OcrGuest>::health_request(source()).unwrap();
    assert_eq!(h.method, "GET");
    assert_eq!(h.path, "/health");
    assert_eq!(h.headers, accept_json());
    assert!(h.body.is_empty());
    assert_eq!(h.auth, AuthScheme::None);
}

#[test]
fn text_answers() {
    let ok = r#"{"success":true,"task_type":"text","content":"第一行\nline 2","message":"Text extraction completed successfully"}"#;
    assert_eq!(text(ok).unwrap(), "第一行\nline 2");
    assert_eq!(text(r#"{"content":""}"#).unwrap(), "");
    assert_eq!(text("\u{feff}{\"content\":\"x\"}").unwrap(), "x");
}

#[test]
fn text_refusals_are_result_invalid() {
    // What MonkeyOCR answers (HTTP 200) for an image it cannot read.
    let body = r#"{"success":false,"task_type":"text","content":"","message":"OCR task failed: cannot identify image file"}"#;
    assert_eq!(
        text(body).unwrap_err(),
        err(
            ErrorClass::ResultInvalid,
            "OCR task failed: cannot identify image file"
        )
    );
    assert_eq!(
        text(r#"{"success":false,"detail":"bad image"}"#).unwrap_err(),
        err(ErrorClass::ResultInvalid, "bad image")
    );
    assert_eq!(
        text(r#"{"success":false,"message":"  "}"#).unwrap_err(),
        err(
            ErrorClass::ResultInvalid,
            "the OCR service could not process this text request"
        )
    );
}

#[test]
fn text_broken_answers_are_transient() {
    let cases = [
        (
            "",
            "OCR text answer is not JSON: EOF while parsing a value at line 1 column 0",
        ),
        (
            "<html>502</html>",
            "OCR text answer is not JSON: expected value at line 1 column 1",
        ),
        ("[1]", "OCR text answer is not a JSON object but an array"),
        ("null", "OCR text answer is not a JSON object but null"),
        (
            r#"{"detail":"Model not initialized"}"#,
            "OCR text answer is an error in a 2xx: Model not initialized",
        ),
        (
            r#"{"detail":[{"loc":["body","file"],"msg":"field required"}]}"#,
            r#"OCR text answer is an error in a 2xx: [{"loc":["body","file"],"msg":"field required"}]"#,
        ),
        (r#"{"success":true}"#, "OCR text answer has no `content`"),
        (r#"{"content":null}"#, "OCR text answer has no `content`"),
        (
            r#"{"content":42}"#,
            "OCR text answer has a `content` that is a number, not a string",
        ),
        // `success` must be the JSON boolean `false` to be a refusal.
        (r#"{"success":"false"}"#, "OCR text answer has no `content`"),
    ];
    for (body, message) in cases {
        assert_eq!(
            text(body).unwrap_err(),
            err(ErrorClass::Transient, message),
            "{body}"
        );
    }
}

#[test]
fn long_messages_are_capped() {
    let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
    let body = serde_json::json!({"success": false, "message": long}).to_string();
    let e = text(&body).unwrap_err();
    assert_eq!(e.class, ErrorClass::ResultInvalid);
    assert_eq!(e.message, format!("{}…", "é".repeat(MAX_MESSAGE_CHARS)));
}

#[test]
fn layout_answers_relative_and_absolute() {
    let relative = r#"{"success":true,"message":"Document parsing (standard) completed successfully","output_dir":"/tmp/x","files":["a.md"],"download_url":"/static/doc_parsed_1760000000.zip"}"#;
    assert_eq!(
        layout(relative).unwrap(),
        ArchiveFetch {
            url: "/static/doc_parsed_1760000000.zip".into(),
            member_suffix: "_middle.json".into(),
        }
    );
    let absolute =
        r#"{"success":true,"message":"ok","download_url":" http://ocr.lan:7861/static/d.zip "}"#;
    assert_eq!(
        layout(absolute).unwrap(),
        ArchiveFetch {
            url: "http://ocr.lan:7861/static/d.zip".into(),
            member_suffix: "_middle.json".into(),
        }
    );
}

#[test]
fn layout_errors() {
    assert_eq!(
        layout(r#"{"success":false,"message":"Parsing failed: not a PDF"}"#).unwrap_err(),
        err(ErrorClass::ResultInvalid, "Parsing failed: not a PDF")
    );
    let transient = [
        (
            "garbage",
            "OCR layout answer is not JSON: expected value at line 1 column 1",
        ),
        (
            r#"{"success":true,"message":"ok"}"#,
            "OCR layout answer has no `download_url`",
        ),
        (
            r#"{"success":true,"download_url":null}"#,
            "OCR layout answer has no `download_url`",
        ),
        (
            r#"{"success":true,"download_url":"  "}"#,
            "OCR layout answer has an empty `download_url`",
        ),
        (
            r#"{"download_url":["/static/a.zip"]}"#,
            "OCR layout answer has a `download_url` that is an array, not a string",
        ),
        (
            r#"{"detail":"Parsing failed: CUDA out of memory"}"#,
            "OCR layout answer is an error in a 2xx: Parsing failed: CUDA out of memory",
        ),
    ];
    for (body, message) in transient {
        assert_eq!(
            layout(body).unwrap_err(),
            err(ErrorClass::Transient, message),
            "{body}"
        );
    }
}

#[test]
fn non_2xx_uses_fastapi_detail() {
    let e = <MonkeyOcr as Guest>::classify_error(
        500,
        vec![],
        br#"{"detail":"Parsing failed: boom"}"#.to_vec(),
    );
    assert_eq!(e, err(ErrorClass::Transient, "Parsing failed: boom"));
    let e = <MonkeyOcr as Guest>::classify_error(
        400,
        vec![],
        br#"{"detail":"Only PDF files are supported for document parsing"}"#.to_vec(),
    );
    assert_eq!(
        e,
        err(
            ErrorClass::RequestRejected,
            "Only PDF files are supported for document parsing"
        )
    );
    let e = <MonkeyOcr as Guest>::classify_error(503, vec![], b"Service Unavailable".to_vec());
    assert_eq!(e, err(ErrorClass::Transient, "Service Unavailable"));
}

/// A realistic two-page MinerU/MonkeyOCR `_middle.json`, with the fields the reader skips.
const TWO_PAGES: &str = r#"{
  "pdf_info": [
    {
      "preproc_blocks": [{"type": "text", "bbox": [0, 0, 1, 1], "lines": []}],
      "layout_bboxes": [],
      "page_idx": 0,
      "page_size": [612.0, 792.0],
      "images": [], "tables": [], "interline_equations": [],
      "discarded_blocks": [{"type": "discarded", "bbox": [10, 770, 60, 780],
        "lines": [{"bbox": [10, 770, 60, 780], "spans": [{"type": "text", "content": "page 1"}]}]}],
      "para_blocks": [
        {"type": "title", "bbox": [72.0, 60.5, 540.0, 90.0], "index": 0,
         "lines": [{"bbox": [72, 60, 540, 90], "spans": [
           {"bbox": [72, 60, 540, 90], "score": 0.99, "content": "年度报告", "type": "text"}]}]},
        {"type": "text", "bbox": [72, 100, 540, 140], "index": 1,
         "lines": [
           {"bbox": [72, 100, 540, 118], "spans": [
             {"type": "text", "content": "Revenue grew by "},
             {"type": "inline_equation", "content": "12\\%"}]},
           {"bbox": [72, 120, 540, 140], "spans": [
             {"type": "text", "content": "in 2025, "},
             {"type": "text", "content": "as expected."}]}]},
        {"type": "table", "bbox": [72, 150, 540, 300], "index": 2,
         "blocks": [
           {"type": "table_caption", "bbox": [72, 150, 540, 165],
            "lines": [{"spans": [{"type": "text", "content": "Table 1: Sales"}]}]},
           {"type": "table_body", "bbox": [72, 170, 540, 290],
            "lines": [{"spans": [{"type": "table", "image_path": "abc.jpg",
              "html": "<table><tr><td>Q1</td><td>10</td></tr></table>"}]}]},
           {"type": "table_footnote", "bbox": [72, 292, 540, 300],
            "lines": [{"spans": [{"type": "text", "content": "Unaudited."}]}]}]}
      ]
    },
    {
      "page_idx": 1,
      "page_size": [595, 842],
      "para_blocks": [
        {"type": "image", "bbox": [100, 100, 400, 300],
         "blocks": [
           {"type": "image_body", "bbox": [100, 100, 400, 280],
            "lines": [{"spans": [{"type": "image", "image_path": "fig.jpg"}]}]},
           {"type": "image_caption", "bbox": [100, 282, 400, 300],
            "lines": [{"spans": [{"type": "text", "content": "Figure 1: "},
                                 {"type": "text", "content": "Trend"}]}]}]},
        {"type": "image", "bbox": [100, 400, 200, 500],
         "blocks": [{"type": "image_body",
            "lines": [{"spans": [{"type": "image", "image_path": "logo.jpg"}]}]}]},
        {"type": "text", "bbox": [72, "310", 540, null],
         "lines": [{"spans": [{"type": "text", "content": "Bad box."}]}]},
        {"type": "interline_equation", "bbox": [72, 520, 540, 1e999],
         "lines": [{"spans": [{"type": "interline_equation", "content": "E=mc^2"}]}]},
        {"type": "text", "bbox": [1, 2, 3],
         "lines": [{"spans": [{"type": "text", "content": "Short box."}]}]},
        {"type": "text",
         "lines": [{"spans": [{"type": "text", "content": "No box."}]}]}
      ]
    }
  ],
  "_backend": "pipeline",
  "_version_name": "1.0"
}"#;

#[test]
fn two_page_middle_json() {
    let doc = document(TWO_PAGES.as_bytes()).unwrap();
    let nan = f64::NAN;
    assert_elements(
        &doc.elements,
        &[
            element("title", "年度报告", [72.0, 60.5, 540.0, 90.0], 0),
            element(
                "text",
                "Revenue grew by 12\\%\nin 2025, as expected.",
                [72.0, 100.0, 540.0, 140.0],
                0,
            ),
            element(
                "table",
                "Table 1: Sales\n<table><tr><td>Q1</td><td>10</td></tr></table>\nUnaudited.",
                [72.0, 150.0, 540.0, 300.0],
                0,
            ),
            element("image", "Figure 1: Trend", [100.0, 100.0, 400.0, 300.0], 1),
            element("image", "", [100.0, 400.0, 200.0, 500.0], 1),
            element("text", "Bad box.", [72.0, nan, 540.0, nan], 1),
            element("interline_equation", "E=mc^2", [72.0, 520.0, 540.0, nan], 1),
            element("text", "Short box.", [nan; 4], 1),
            element("text", "No box.", [nan; 4], 1),
        ],
    );
    assert_eq!(
        doc.pages,
        vec![
            PageSize {
                page_index: 0,
                width: 612.0,
                height: 792.0
            },
            PageSize {
                page_index: 1,
                width: 595.0,
                height: 842.0
            },
        ]
    );
}

#[test]
fn page_index_and_size_fallbacks() {
    let body = br#"{"pdf_info":[
        {"page_size":[10,20],"para_blocks":[{"type":"text","bbox":[0,0,1,1],"lines":[{"spans":[{"type":"text","content":"a"}]}]}]},
        {"page_idx":-1,"page_size":[10],"para_blocks":[{"type":"text","bbox":[0,0,1,1]}]},
        {"page_idx":7,"page_size":"A4"},
        {"page_idx":1.5,"page_size":[10,1e999],"para_blocks":null},
        {"page_idx":"4","page_size":[30,40]}
    ]}"#;
    let doc = document(body).unwrap();
    assert_elements(
        &doc.elements,
        &[
            element("text", "a", [0.0, 0.0, 1.0, 1.0], 0),
            element("text", "", [0.0, 0.0, 1.0, 1.0], 1),
        ],
    );
    assert_eq!(
        doc.pages,
        vec![
            PageSize {
                page_index: 0,
                width: 10.0,
                height: 20.0
            },
            PageSize {
                page_index: 4,
                width: 30.0,
                height: 40.0
            },
        ]
    );
}

#[test]
fn table_span_falls_back_to_latex_then_content() {
    let body = br#"{"pdf_info":[{"para_blocks":[
        {"type":"table","bbox":[0,0,1,1],"blocks":[{"type":"table_body","lines":[{"spans":[{"type":"table","latex":"\\begin{tabular}\\end{tabular}","content":"c"}]}]}]},
        {"type":"table","bbox":[0,0,1,1],"lines":[{"spans":[{"type":"table","content":"plain"}]}]},
        {"bbox":[0,0,1,1],"lines":[{"spans":[{"content":"untyped"},{"type":"text","content":null}]},{"spans":[]},{}]}
    ]}]}"#;
    let doc = document(body).unwrap();
    assert_elements(
        &doc.elements,
        &[
            element(
                "table",
                "\\begin{tabular}\\end{tabular}",
                [0.0, 0.0, 1.0, 1.0],
                0,
            ),
            element("table", "plain", [0.0, 0.0, 1.0, 1.0], 0),
            element("", "untyped", [0.0, 0.0, 1.0, 1.0], 0),
        ],
    );
    assert!(doc.pages.is_empty());
}

#[test]
fn empty_document_is_valid() {
    let doc = document(br#"{"pdf_info":[]}"#).unwrap();
    assert!(doc.elements.is_empty() && doc.pages.is_empty());
}

#[test]
fn not_a_middle_json_is_result_invalid() {
    let cases: [(&[u8], &str); 9] = [
        (b"PK\x03\x04garbage", "expected value at line 1 column 1"),
        (b"", "EOF while parsing a value at line 1 column 0"),
        (
            b"[]",
            "invalid type: sequence, expected a JSON object at line 1 column 0",
        ),
        (
            b"[[]]",
            "invalid type: sequence, expected a JSON object at line 1 column 0",
        ),
        (
            br#"{"pdf_info":[[0,[1,2],[]]]}"#,
            "invalid type: sequence, expected a JSON object at line 1 column 13",
        ),
        (
            br#"{"pages":[]}"#,
            "missing field `pdf_info` at line 1 column 12",
        ),
        (
            br#"{"pdf_info":{}}"#,
            "invalid type: map, expected a sequence at line 1 column 12",
        ),
        (
            br#"{"pdf_info":[{"para_blocks":"x"}]}"#,
            "invalid type: string \"x\", expected a sequence at line 1 column 31",
        ),
        (
            br#"{"pdf_info":[{"para_blocks":[{"lines":[{"spans":[{"content":7}]}]}]}]}"#,
            "invalid type: integer `7`, expected a string at line 1 column 61",
        ),
    ];
    for (body, detail) in cases {
        let e = document(body).unwrap_err();
        assert_eq!(
            e,
            err(
                ErrorClass::ResultInvalid,
                &format!("layout document is not a middle.json: {detail}")
            ),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn deep_nesting_is_refused_not_a_crash() {
    // 64 levels of nested blocks fit serde_json's recursion limit (2 levels per block)...
    let nested = |depth: usize| {
        let mut block =
            r#"{"type":"text","lines":[{"spans":[{"type":"text","content":"deep"}]}]}"#.to_owned();
        for _ in 0..depth {
            block = format!(r#"{{"type":"list","blocks":[{block}]}}"#);
        }
        format!(r#"{{"pdf_info":[{{"para_blocks":[{block}]}}]}}"#)
    };
    let doc = document(nested(58).as_bytes()).unwrap();
    assert_eq!(doc.elements.len(), 1);
    assert_eq!(doc.elements[0].text, "deep");
    // ...much deeper is `result-invalid`, never a stack overflow.
    let e = document(nested(10_000).as_bytes()).unwrap_err();
    assert_eq!(e.class, ErrorClass::ResultInvalid);
    assert!(
        e.message
            .starts_with("layout document is not a middle.json: recursion limit exceeded"),
        "{}",
        e.message
    );
    // Deep garbage where the reader keeps raw numbers: not numbers, so NaN / no page size.
    let deep_array = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let body = format!(
        r#"{{"pdf_info":[{{"page_size":{deep_array},"para_blocks":[{{"bbox":{deep_array}}}]}}]}}"#
    );
    let doc = document(body.as_bytes()).unwrap();
    assert_elements(&doc.elements, &[element("", "", [f64::NAN; 4], 0)]);
    assert!(doc.pages.is_empty());
    // Deep garbage as an upload answer.
    let e = text(&deep_array).unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient);
    let e = layout(&deep_array).unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient);
}

#[test]
fn large_document_is_linear() {
    let block =
        r#"{"type":"text","bbox":[1,2,3,4],"lines":[{"spans":[{"type":"text","content":"x"}]}]}"#;
    let blocks = vec![block; 20_000].join(",");
    let pages: Vec<String> = (0..10)
        .map(|i| format!(r#"{{"page_idx":{i},"page_size":[100,200],"para_blocks":[{blocks}]}}"#))
        .collect();
    let body = format!(r#"{{"pdf_info":[{}]}}"#, pages.join(","));
    let doc = document(body.as_bytes()).unwrap();
    assert_eq!(doc.elements.len(), 200_000);
    assert_eq!(doc.pages.len(), 10);
    assert_eq!(doc.elements[199_999].page_index, 9);
    assert_eq!(doc.elements[199_999].text, "x");
}

#[test]
fn huge_bbox_numbers_do_not_break_the_document() {
    let body = br#"{"pdf_info":[{"page_idx":0,"para_blocks":[
        {"type":"text","bbox":[1e308,-1e999,18446744073709551616,-0.0]}]}]}"#;
    let doc = document(body).unwrap();
    assert_elements(
        &doc.elements,
        &[element(
            "text",
            "",
            [1e308, f64::NAN, 18_446_744_073_709_551_616.0, -0.0],
            0,
        )],
    );
}
