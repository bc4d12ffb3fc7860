//! Client authentication: `Authorization: Bearer <key>` or `x-api-key: <key>` (the header
//! Anthropic's clients send; either may match), against the virtual keys
//! (`PGW_VIRTUAL_KEYS`, docs/keys.md: the key's identity comes with the call) and the static
//! `PGW_API_KEYS` (unrestricted), each compared in constant time. With neither configured,
//! only loopback peers are served. The admin endpoints check their own keys the same way.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

use crate::keys::{Authn, KeyRegistry, Principal};

/// Why a request was refused.
#[derive(Debug)]
pub(crate) enum AuthError {
    /// Missing or wrong key (401).
    Unauthorized(&'static str),
    /// A non-loopback peer while no keys are configured (403).
    NotLoopback,
}

/// Check the request's credentials against `keys`.
pub(crate) fn check(
    keys: &[String],
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Result<(), AuthError> {
    identify(keys, None, headers, peer).map(|_| ())
}

/// Who is calling: `Ok(Some(principal))` for a virtual key of `registry`, `Ok(None)` for a
/// static key (or a loopback peer when no keys of either kind exist).
///
/// Errors: 401 naming what was wrong with the credential (missing, malformed, unknown,
/// revoked, expired — never echoing it); 403 for a non-loopback peer without any keys.
pub(crate) fn identify(
    keys: &[String],
    registry: Option<&KeyRegistry>,
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Result<Option<Arc<Principal>>, AuthError> {
    if keys.is_empty() && registry.is_none() {
        return if peer.ip().is_loopback() {
            Ok(None)
        } else {
            Err(AuthError::NotLoopback)
        };
    }
    let bearer = headers.get(axum::http::header::AUTHORIZATION).map(|value| {
        value.to_str().ok().and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
    });
    let api_key = headers.get("x-api-key").map(|v| v.to_str().ok());
    // Either header may carry the key (a client may send both: a stray bearer token of its
    // own and the gateway's key in `x-api-key`); one that matches is enough.
    let candidates: Vec<&str> = [bearer.flatten(), api_key.flatten()]
        .into_iter()
        .flatten()
        .collect();
    if candidates.is_empty() {
        return Err(match (bearer, api_key) {
            (None, None) => AuthError::Unauthorized("missing Authorization (or x-api-key) header"),
            (Some(_), _) => AuthError::Unauthorized("Authorization must be `Bearer <key>`"),
            (None, Some(_)) => AuthError::Unauthorized("x-api-key must be visible ASCII"),
        });
    }
    let mut refused = None;
    if let Some(registry) = registry {
        for token in &candidates {
            match registry.authenticate(token.trim()) {
                Authn::Valid(p) => return Ok(Some(p)),
                Authn::Refused(why) => refused = Some(why),
                Authn::NotVirtual => {}
            }
        }
    }
    let mut ok = subtle::Choice::from(0u8);
    for token in candidates {
        for k in keys {
            ok |= k.as_bytes().ct_eq(token.trim().as_bytes());
        }
    }
    if bool::from(ok) {
        Ok(None)
    } else {
        Err(AuthError::Unauthorized(
            refused.unwrap_or("invalid API key"),
        ))
    }
}

impl AuthError {
    pub(crate) fn into_gateway_error(self) -> (u16, &'static str, String) {
        match self {
            AuthError::Unauthorized(m) => (401, "authentication_error", m.to_string()),
            AuthError::NotLoopback => (
                403,
                "permission_error",
                "no PGW_API_KEYS configured: only loopback clients are served".to_string(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_with(headers: &[(&'static str, &str)]) -> Result<(), &'static str> {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.insert(*k, v.parse().unwrap());
        }
        let peer: SocketAddr = "10.0.0.1:5".parse().unwrap();
        check(&["k1".to_string()], &h, peer).map_err(|e| match e {
            AuthError::Unauthorized(m) => m,
            AuthError::NotLoopback => "not loopback",
        })
    }

    #[test]
    fn either_header_may_carry_the_key() {
        assert_eq!(check_with(&[("authorization", "Bearer k1")]), Ok(()));
        assert_eq!(check_with(&[("x-api-key", "k1")]), Ok(()));
        assert_eq!(
            check_with(&[("authorization", "Bearer other"), ("x-api-key", "k1")]),
            Ok(())
        );
        assert_eq!(
            check_with(&[("authorization", "Bearer other"), ("x-api-key", "k2")]),
            Err("invalid API key")
        );
        assert_eq!(
            check_with(&[]),
            Err("missing Authorization (or x-api-key) header")
        );
        assert_eq!(
            check_with(&[("authorization", "Basic k1")]),
            Err("Authorization must be `Bearer <key>`")
        );
    }
}
