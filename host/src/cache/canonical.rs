//! Canonical JSON for content addressing: object keys sorted by their UTF-8 bytes, no
//! whitespace, and numbers with an integral value (|x| < 2^53) written as integers, so `1.0`
//! and `1` are the same value. Independent of how `serde_json` orders its maps.

use std::io::Write;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Largest integer an `f64` holds exactly (2^53).
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// Write `v` in canonical form.
pub fn write_canonical<W: Write>(out: &mut W, v: &Value) -> std::io::Result<()> {
    match v {
        Value::Null | Value::Bool(_) | Value::String(_) => serde_json::to_writer(out, v)?,
        Value::Number(n) => match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < EXACT_INT => {
                write!(out, "{}", f as i64)?
            }
            _ => serde_json::to_writer(out, n)?,
        },
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_canonical(out, item)?;
            }
            out.write_all(b"]")?;
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.write_all(b"{")?;
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, k)?;
                out.write_all(b":")?;
                write_canonical(out, item)?;
            }
            out.write_all(b"}")?;
        }
    }
    Ok(())
}

/// The canonical form of `v` as a string.
pub fn canonical_json(v: &Value) -> String {
    let mut buf = Vec::new();
    // Writing into a Vec cannot fail, and the output is valid UTF-8 JSON.
    let _ = write_canonical(&mut buf, v);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Lower-case hex SHA-256 of the canonical form of `v`, hashed as it is written (a large
/// base64 image is never copied into a second buffer).
pub fn canonical_sha256(v: &Value) -> String {
    let mut hasher = HashWriter(Sha256::new());
    // The hasher never fails a write.
    let _ = write_canonical(&mut hasher, v);
    hex::encode(hasher.0.finalize())
}

struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorted_compact_and_number_normalised() {
        let a: Value =
            serde_json::from_str(r#"{"b": [1, 2.0, 2.5], "a": {"y": null, "x": "é\n"}}"#)
                .unwrap_or_default();
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":"é\n","y":null},"b":[1,2,2.5]}"#
        );
        let b: Value =
            serde_json::from_str(r#"{"a": {"x": "é\n", "y": null}, "b": [1.0, 2, 2.5]}"#)
                .unwrap_or_default();
        assert_eq!(canonical_sha256(&a), canonical_sha256(&b));
        assert_ne!(
            canonical_sha256(&json!({"t": 0.7})),
            canonical_sha256(&json!({"t": 0.70001}))
        );
        assert_eq!(canonical_json(&json!(-0.0)), "0");
        assert_eq!(canonical_json(&json!(1e300)), "1e+300");
    }
}
