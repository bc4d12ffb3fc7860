//! Token secrets (docs/keys.md#tokens): the `sk-pgw-<id>-<secret>` format, drawing ids and
//! secrets from the operating system's CSPRNG, and the HMAC-SHA256 hash that is all the
//! store keeps. A secret is returned once (create, rotate) inside a [`SecretToken`] whose
//! `Debug` is redacted; it is never stored, logged or put in an error.

use hmac::{Hmac, Mac};
// The OS generator, not `governance::entropy`: that source is seeded and predictable by
// design (jitter, ids that sort), which a secret must never be.
use rand::TryRngCore;
use rand::rngs::OsRng;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::KeysError;
use crate::config::KeyHashSecret;

/// Every virtual-key token starts with this; any other token is left to the static keys.
pub const TOKEN_PREFIX: &str = "sk-pgw-";
/// A key id's prefix.
pub const KEY_ID_PREFIX: &str = "key_";
/// A generated team id's prefix.
pub const TEAM_ID_PREFIX: &str = "team_";
/// Random characters after an id's prefix (`[a-z2-7]`, 5 bits each: 80 bits).
const ID_CHARS: usize = 16;
/// Random bytes of a secret (256 bits).
const SECRET_BYTES: usize = 32;
/// A secret's length as base64url without padding.
const SECRET_CHARS: usize = 43;

/// A full token, shown to its owner once. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretToken(String);

impl SecretToken {
    /// The token text, for the one response that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretToken(<redacted>)")
    }
}

/// HMAC-SHA256 keyed once with `PGW_KEY_HASH_SECRET`; each hash clones the keyed state (no
/// allocation). `Debug` never shows the key.
#[derive(Clone)]
pub struct Hasher {
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for Hasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hasher(<redacted>)")
    }
}

impl Hasher {
    /// A hasher keyed with `secret`.
    pub fn new(secret: &KeyHashSecret) -> Self {
        // HMAC takes a key of any length; this never fails.
        let mac = match <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()) {
            Ok(m) => m,
            Err(_) => <Hmac<Sha256> as Mac>::new(&Default::default()),
        };
        Self { mac }
    }

    /// `HMAC-SHA256(key, secret)`.
    pub fn hash(&self, secret: &str) -> [u8; 32] {
        let mut mac = self.mac.clone();
        mac.update(secret.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// The hash as the store keeps it: 64 lowercase hex characters.
    pub fn hash_hex(&self, secret: &str) -> String {
        hex::encode(self.hash(secret))
    }

    /// Whether `secret` hashes to `expected`, compared in constant time.
    pub fn verify(&self, secret: &str, expected: &[u8; 32]) -> bool {
        self.hash(secret).ct_eq(expected).into()
    }
}

/// A stored hash (hex) as bytes; `None` when it is not 64 hex characters.
pub fn decode_hash(hex_hash: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_hash, &mut out).ok()?;
    Some(out)
}

/// `(id, secret)` of a token of the `sk-pgw-<id>-<secret>` form; `None` when the token has
/// the prefix but not the form. Allocates nothing.
pub fn parse_token(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    // The id has no '-'; the secret (base64url) may.
    let (id, secret) = rest.split_once('-')?;
    let ok_id = id.len() == KEY_ID_PREFIX.len() + ID_CHARS
        && id.starts_with(KEY_ID_PREFIX)
        && id[KEY_ID_PREFIX.len()..]
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'2'..=b'7'));
    let ok_secret = secret.len() == SECRET_CHARS
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (ok_id && ok_secret).then_some((id, secret))
}

/// Fill `buf` from the OS generator.
fn os_random(buf: &mut [u8]) -> Result<(), KeysError> {
    OsRng
        .try_fill_bytes(buf)
        .map_err(|e| KeysError::Entropy(e.to_string()))
}

/// 16 random characters of `[a-z2-7]` (RFC 4648 base32, lowercase).
fn random_chars() -> Result<String, KeysError> {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut bytes = [0u8; ID_CHARS];
    os_random(&mut bytes)?;
    Ok(bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(b & 31)]))
        .collect())
}

/// A new key id: `key_` + 16 random characters.
pub fn new_key_id() -> Result<String, KeysError> {
    Ok(format!("{KEY_ID_PREFIX}{}", random_chars()?))
}

/// A new team id: `team_` + 16 random characters.
pub fn new_team_id() -> Result<String, KeysError> {
    Ok(format!("{TEAM_ID_PREFIX}{}", random_chars()?))
}

/// A new secret for key `id`: the token to hand out once, and the hash (hex) to store.
pub fn new_secret(id: &str, hasher: &Hasher) -> Result<(SecretToken, String), KeysError> {
    use base64::Engine;
    let mut bytes = [0u8; SECRET_BYTES];
    os_random(&mut bytes)?;
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let hash = hasher.hash_hex(&secret);
    Ok((SecretToken(format!("{TOKEN_PREFIX}{id}-{secret}")), hash))
}

/// Whether `id` is a team slug a caller may choose: `[a-z0-9_-]{1,64}`.
pub fn is_team_slug(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hasher(key: &str) -> Hasher {
        Hasher::new(&KeyHashSecret::new(key))
    }

    #[test]
    fn a_token_round_trips_and_verifies() {
        let h = hasher("0123456789abcdef0123456789abcdef");
        let id = new_key_id().unwrap();
        assert_eq!(id.len(), 20);
        let (token, hash) = new_secret(&id, &h).unwrap();
        let (pid, secret) = parse_token(token.expose()).unwrap();
        assert_eq!(pid, id);
        assert_eq!(secret.len(), 43);
        assert_eq!(hash.len(), 64);
        let stored = decode_hash(&hash).unwrap();
        assert!(h.verify(secret, &stored));
        // A wrong secret, and the right secret under another HMAC key, fail.
        let mut wrong = secret.to_string();
        wrong.replace_range(0..1, if wrong.starts_with('A') { "B" } else { "A" });
        assert!(!h.verify(&wrong, &stored));
        assert!(!hasher("another-key-another-key-another-k").verify(secret, &stored));
        assert_eq!(format!("{token:?}"), "SecretToken(<redacted>)");
        assert_eq!(format!("{h:?}"), "Hasher(<redacted>)");
    }

    #[test]
    fn the_hash_is_hmac_sha256_hex() {
        // RFC 4231 test case 2.
        let h = Hasher::new(&KeyHashSecret::new("Jefe"));
        assert_eq!(
            h.hash_hex("what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn malformed_tokens_do_not_parse() {
        let s = "A".repeat(43);
        assert!(parse_token(&format!("sk-pgw-key_abcdefghijklmnop-{s}")).is_some());
        assert!(parse_token(&format!("sk-pgw-key_abcdefghijklmno-{s}")).is_none());
        assert!(parse_token(&format!("sk-pgw-key_abcdefghijklmno1-{s}")).is_none());
        assert!(parse_token(&format!("sk-pgw-tok_abcdefghijklmnop-{s}")).is_none());
        assert!(parse_token(&format!("sk-pgw-key_abcdefghijklmnop-{s}x")).is_none());
        assert!(parse_token("sk-pgw-key_abcdefghijklmnop").is_none());
        assert!(parse_token("sk-other").is_none());
    }

    #[test]
    fn ids_are_random_and_slugs_are_checked() {
        assert_ne!(new_key_id().unwrap(), new_key_id().unwrap());
        assert!(new_team_id().unwrap().starts_with("team_"));
        assert!(is_team_slug("acme-eu_1"));
        assert!(!is_team_slug(""));
        assert!(!is_team_slug("Acme"));
        assert!(!is_team_slug(&"a".repeat(65)));
    }
}
