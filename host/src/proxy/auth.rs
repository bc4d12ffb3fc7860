//! Client authentication: with `PGW_API_KEYS` set, `Authorization: Bearer <key>` — or, when
//! there is no `Authorization` header, `x-api-key: <key>`, the header Anthropic's clients send
//! — compared in constant time; with none, only loopback peers are served.

use std::net::SocketAddr;

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

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
    if keys.is_empty() {
        return if peer.ip().is_loopback() {
            Ok(())
        } else {
            Err(AuthError::NotLoopback)
        };
    }
    let token = match (
        headers.get(axum::http::header::AUTHORIZATION),
        headers.get("x-api-key"),
    ) {
        (Some(value), _) => value
            .to_str()
            .ok()
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .ok_or(AuthError::Unauthorized(
                "Authorization must be `Bearer <key>`",
            ))?,
        (None, Some(value)) => value
            .to_str()
            .map_err(|_| AuthError::Unauthorized("x-api-key must be visible ASCII"))?,
        (None, None) => {
            return Err(AuthError::Unauthorized(
                "missing Authorization (or x-api-key) header",
            ));
        }
    };
    let mut ok = subtle::Choice::from(0u8);
    for k in keys {
        ok |= k.as_bytes().ct_eq(token.trim().as_bytes());
    }
    if bool::from(ok) {
        Ok(())
    } else {
        Err(AuthError::Unauthorized("invalid API key"))
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
