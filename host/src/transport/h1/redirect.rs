//! Which redirects are followed, and how the next request differs. Only redirects within
//! the origin of the first request are followed: a request may carry a source's credential
//! in any header a plugin named, and nothing here can know which headers those are; a
//! cross-origin redirect is answered as the 3xx it is. The method and body rules are
//! reqwest's (RFC 9110 §15.4): 301, 302 and 303 turn the request into a `GET` without a
//! body (a `HEAD` stays `HEAD`); 307 and 308 send the same method and body again.

use http::Method;
use http::header::{
    CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, LOCATION, TRANSFER_ENCODING,
};

use super::Origin;

/// Most redirects followed for one request.
pub(super) const MAX_REDIRECTS: usize = 10;

/// The request a followed redirect makes.
pub(super) struct Next {
    pub url: url::Url,
    pub method: Method,
    /// The body (and the headers describing it) is not sent again.
    pub drop_body: bool,
}

/// The redirect to follow after a response `status` with `headers` to a request of
/// `method` to `current`, if it is one that is followed.
pub(super) fn follow(
    first: &Origin,
    current: &url::Url,
    method: &Method,
    status: u16,
    headers: &HeaderMap,
) -> Option<Next> {
    let drop_body = match status {
        301..=303 => true,
        307 | 308 => false,
        _ => return None,
    };
    let location = headers.get(LOCATION)?.to_str().ok()?;
    let url = current.join(location).ok()?;
    if Origin::of(&url).ok()?.key != first.key {
        return None;
    }
    let method = if drop_body && *method != Method::GET && *method != Method::HEAD {
        Method::GET
    } else {
        method.clone()
    };
    Some(Next {
        url,
        method,
        drop_body,
    })
}

/// Remove the headers that describe a body that is no longer sent.
pub(super) fn strip_body_headers(headers: &mut HeaderMap) {
    for name in [
        TRANSFER_ENCODING,
        CONTENT_ENCODING,
        CONTENT_TYPE,
        CONTENT_LENGTH,
    ] {
        headers.remove(name);
    }
}
