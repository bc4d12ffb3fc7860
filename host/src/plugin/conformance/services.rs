//! Embeddings and OCR: a provider that declares `embedding` or `ocr` must build
//! its requests for them; every provider, declared or not, must answer hostile bodies to the
//! embedding and OCR parse functions with typed errors, never a trap; `audio` is reserved
//! and must be declared false.

use std::sync::Arc;

use super::report::{Case, Report};
use super::streams::stream_source;
use super::{CheckOptions, selected};
use crate::plugin::{
    BuildError, EmbeddingInputs, EmbeddingRequest, ErrorClass, ImageInfo, OcrOperation,
    ProviderComponent,
};

/// Run the embedding and OCR cases.
pub(super) fn run(c: &Arc<ProviderComponent>, opts: &CheckOptions, report: &mut Report) {
    let caps = c.info().capabilities;
    let mut check = |name: &str, f: &dyn Fn(&mut Case)| {
        if selected(opts, name) {
            let mut case = report.case(name);
            f(&mut case);
            report.finish(case);
        }
    };
    check("describe::audio_reserved", &|case| {
        if caps.audio {
            case.fail("capability `audio` is reserved in this contract version: declare it false");
        }
    });
    if caps.embedding {
        check("embedding::build", &|case| embedding_build(c, case));
    }
    if caps.ocr {
        check("ocr::build", &|case| ocr_build(c, case));
    }
    check("embedding::hostile_bodies", &|case| {
        for body in hostile_bodies() {
            case.call("parse-embedding-response", || {
                c.instance()
                    .and_then(|mut i| i.parse_embedding_response(&body))
            });
        }
    });
    check("ocr::hostile_bodies", &|case| {
        for body in hostile_bodies() {
            case.call("parse-text-response", || {
                c.instance().and_then(|mut i| i.parse_text_response(&body))
            });
            case.call("parse-layout-response", || {
                c.instance()
                    .and_then(|mut i| i.parse_layout_response(&body))
            });
            let doc = case.call("parse-layout-document", || {
                c.instance()
                    .and_then(|mut i| i.parse_layout_document(&body))
            });
            if let Some(Ok(d)) = doc
                && !d.elements.is_empty()
            {
                case.fail(format!(
                    "parse-layout-document found {} elements in {} bytes of garbage",
                    d.elements.len(),
                    body.len()
                ));
            }
        }
    });
    check("ocr::garbage_document_is_result_invalid", &|case| {
        if !caps.ocr {
            return;
        }
        let got = case.call("parse-layout-document", || {
            c.instance()
                .and_then(|mut i| i.parse_layout_document(b"<html>no</html>"))
        });
        if let Some(r) = got
            && !matches!(&r, Err(e) if e.class == ErrorClass::ResultInvalid)
        {
            case.fail(format!(
                "a member that is not a layout document must be result-invalid (a bad image, not a bad service), got {r:?}"
            ));
        }
    });
}

/// Bodies no parser may trap on: empty, not UTF-8, deep nesting, 8 MiB of one byte.
fn hostile_bodies() -> Vec<Vec<u8>> {
    vec![
        Vec::new(),
        vec![0xff, 0xfe, b'{'],
        "[".repeat(100_000).into_bytes(),
        r#"{"data":[{"index":1e999,"embedding":"%%%"}],"pdf_info":7,"download_url":null}"#
            .as_bytes()
            .to_vec(),
        vec![b'a'; 8 * 1024 * 1024],
    ]
}

fn embedding_build(c: &Arc<ProviderComponent>, case: &mut Case) {
    let req = EmbeddingRequest {
        inputs: EmbeddingInputs::Texts(vec!["first text".into(), "second text".into()]),
        dimensions: Some(8),
    };
    let source = stream_source();
    let Some(built) = case.call("build-embedding-request", || {
        c.instance()
            .and_then(|mut i| i.build_embedding_request(&req, &source))
    }) else {
        return;
    };
    match built {
        Ok(http) => {
            if !http.path.starts_with('/') {
                case.fail(format!("path {:?} must start with `/`", http.path));
            }
            if reqwest::Method::from_bytes(http.method.as_bytes()).is_err() {
                case.fail(format!("method {:?} is not an HTTP method", http.method));
            }
        }
        Err(BuildError::Unsupported(m)) | Err(BuildError::InvalidRequest(m)) => case.fail(format!(
            "the provider declares `embedding` but refused a plain two-text batch: {m}"
        )),
    }
}

fn ocr_build(c: &Arc<ProviderComponent>, case: &mut Case) {
    let image = ImageInfo {
        size_bytes: 1024,
        media_type: "image/png".into(),
        file_name: "image.png".into(),
    };
    let source = stream_source();
    let mut served = 0;
    for op in [OcrOperation::Text, OcrOperation::Layout] {
        let Some(built) = case.call("build-ocr-request", || {
            c.instance()
                .and_then(|mut i| i.build_ocr_request(op, &image, &source))
        }) else {
            continue;
        };
        match built {
            Ok(up) => {
                served += 1;
                if !up.path.starts_with('/') {
                    case.fail(format!("{op:?}: path {:?} must start with `/`", up.path));
                }
                if up.file_field.is_empty() {
                    case.fail(format!("{op:?}: the file field has no name"));
                }
            }
            Err(BuildError::Unsupported(_)) => {}
            Err(BuildError::InvalidRequest(m)) => {
                case.fail(format!("{op:?}: a 1 KiB PNG was refused as invalid: {m}"))
            }
        }
    }
    if served == 0 {
        case.fail("the provider declares `ocr` but supports neither text nor layout");
    }
}
