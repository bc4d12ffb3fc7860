//! The page's files, embedded at compile time (`include_bytes!`): the HTML, our script and
//! style, and the vendored chart library (uPlot 1.6.32, MIT, `assets/vendor/uplot/`, the
//! files of its npm package unmodified — a test compares them). Each answer carries its
//! content type, a strong `ETag` (a hash of the bytes) and `Cache-Control: no-cache`, so a
//! browser revalidates and an upgraded gateway never serves a stale script.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

use crate::proxy::errors::plain_error;

struct Asset {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $ty:literal) => {
        Asset {
            path: $path,
            content_type: $ty,
            bytes: include_bytes!(concat!("assets/", $path)),
        }
    };
}

const INDEX: Asset = asset!("index.html", "text/html; charset=utf-8");

const ASSETS: &[Asset] = &[
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("app.css", "text/css; charset=utf-8"),
    asset!(
        "vendor/uplot/uPlot.iife.min.js",
        "text/javascript; charset=utf-8"
    ),
    asset!("vendor/uplot/uPlot.min.css", "text/css; charset=utf-8"),
    asset!("vendor/uplot/LICENSE", "text/plain; charset=utf-8"),
];

/// FNV-1a of the bytes: a strong validator that changes with the file.
fn etag(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("\"{h:016x}\"")
}

fn serve(a: &Asset, headers: &HeaderMap) -> Response {
    let tag = etag(a.bytes);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(a.content_type),
            )],
            a.bytes,
        )
            .into_response()
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&tag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// `GET /ui` → `/ui/` (the page's relative asset paths need the slash).
pub(super) async fn redirect_to_index() -> Redirect {
    Redirect::permanent("/ui/")
}

/// `GET /ui/`: the page, with a content security policy that allows only its own files
/// and requests to its own origin.
pub(super) async fn index(headers: HeaderMap) -> Response {
    let mut resp = serve(&INDEX, &headers);
    resp.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    resp.headers_mut().insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    resp
}

/// `GET /ui/assets/{file}`: an embedded file, or a JSON 404 naming it.
pub(super) async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.path == file) {
        Some(a) => serve(a, &headers),
        None => plain_error(
            404,
            "not_found_error",
            &format!("no dashboard asset `{file}`"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_the_page_names_is_embedded() {
        let html = std::str::from_utf8(INDEX.bytes).unwrap();
        for part in html.split("assets/").skip(1) {
            let name = &part[..part.find('"').unwrap()];
            assert!(
                ASSETS.iter().any(|a| a.path == name),
                "index.html names assets/{name}, which is not embedded"
            );
        }
    }

    #[test]
    fn etags_differ_by_content() {
        assert_ne!(etag(b"a"), etag(b"b"));
        assert_eq!(etag(b"a"), etag(b"a"));
    }
}
