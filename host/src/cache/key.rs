//! The cache key (docs/cache.md#key): `{prefix}cache:` + lower-case hex SHA-256 of the canonical
//! JSON of the key material — the scope's model fingerprint, the messages digest, the
//! namespace, the salt, the sampling parameters and the structured-output strategy. The
//! messages digest is exported so telemetry stores messages the same way.

use serde_json::{Map, Value, json};

use crate::config::SourceSettings;

use super::canonical::canonical_sha256;

/// Request fields that never change the answer's content and so never enter the key: a
/// streamed and a non-streamed call of the same question share one entry.
const NOT_SAMPLING: [&str; 2] = ["stream", "stream_options"];

/// The messages as the cache key and telemetry see them: text as is; every content part
/// whose `type` is not `text` (an `image_url` with a `data:` URL, `input_audio`, a file, …)
/// replaced by `{"type": <type>, "sha256": <hex SHA-256 of the part's canonical JSON>}`.
/// Everything else of a message (role, name, tool calls, tool_call_id, …) is kept.
pub fn digest_messages(messages: &[Value]) -> Vec<Value> {
    messages.iter().map(digest_message).collect()
}

fn digest_message(message: &Value) -> Value {
    let Value::Object(m) = message else {
        return message.clone();
    };
    let mut out = Map::with_capacity(m.len());
    for (k, v) in m {
        let v = match (k.as_str(), v) {
            ("content", Value::Array(parts)) => {
                Value::Array(parts.iter().map(digest_part).collect())
            }
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

/// One content part: a `text` part (or anything without a `type`) as is, any other part by
/// its type and digest.
pub fn digest_part(part: &Value) -> Value {
    match part.get("type").and_then(Value::as_str) {
        None | Some("text") => part.clone(),
        Some(t) => json!({ "type": t, "sha256": canonical_sha256(part) }),
    }
}

/// The model fingerprint of a scope: the set of its sources' `(model, extra_body,
/// enable_thinking)` — sorted and deduplicated, so the order of sources and their names do
/// not matter. `extra_body` is left out when empty, `enable_thinking` when unset.
pub fn model_fingerprint(sources: &[SourceSettings]) -> Value {
    let mut entries: Vec<(String, Value)> = sources
        .iter()
        .map(|s| {
            let mut e = Map::new();
            e.insert("model".into(), Value::String(s.model.clone()));
            if !s.extra_body.is_empty() {
                e.insert("extra_body".into(), Value::Object(s.extra_body.clone()));
            }
            if let Some(t) = s.enable_thinking {
                e.insert("enable_thinking".into(), Value::Bool(t));
            }
            let e = Value::Object(e);
            (canonical_sha256(&e), e)
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|a, b| a.0 == b.0);
    Value::Array(entries.into_iter().map(|(_, e)| e).collect())
}

/// What a key is computed from.
#[derive(Debug, Clone, Copy)]
pub struct KeyInput<'a> {
    /// [`model_fingerprint`] of the scope.
    pub fingerprint: &'a Value,
    /// The request's messages (digested here).
    pub messages: &'a [Value],
    /// Tenant isolation: the call's `x-pgw-cache-namespace`, else the scope's
    /// `{SCOPE}__CACHE__NAMESPACE`, else the scope name.
    pub namespace: &'a str,
    /// The partition of the call's virtual key (`team:<id>` or `key:<id>`, docs/keys.md):
    /// set by the gateway from the authenticated key, never by a client, so no header can
    /// reach another team's entries. `None` (a static key, an embedded call) leaves the key
    /// material as it always was.
    pub partition: Option<&'a str>,
    /// `x-pgw-cache-salt`; `Some("")` is a real salt, different from `None`.
    pub salt: Option<&'a str>,
    /// The sampling overlay (temperature, seed, tools, …); `null` values count as absent.
    pub sampling: &'a Map<String, Value>,
    /// The structured-output strategy of the call, when one was asked for.
    pub structured: Option<&'a str>,
}

/// The key material as a JSON value (before canonicalisation and hashing).
pub fn key_material(input: &KeyInput<'_>) -> Value {
    let mut m = Map::new();
    m.insert("model".into(), input.fingerprint.clone());
    m.insert(
        "messages".into(),
        Value::Array(digest_messages(input.messages)),
    );
    m.insert("namespace".into(), Value::String(input.namespace.into()));
    if let Some(p) = input.partition {
        m.insert("partition".into(), Value::String(p.into()));
    }
    if let Some(salt) = input.salt {
        m.insert("salt".into(), Value::String(salt.into()));
    }
    let sampling: Map<String, Value> = input
        .sampling
        .iter()
        .filter(|(k, v)| !v.is_null() && !NOT_SAMPLING.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !sampling.is_empty() {
        m.insert("sampling".into(), Value::Object(sampling));
    }
    if let Some(s) = input.structured {
        m.insert("structured".into(), Value::String(s.into()));
    }
    Value::Object(m)
}

/// The full key: `{redis_prefix}cache:{hex sha256 of the canonical key material}`.
pub fn cache_key(redis_prefix: &str, input: &KeyInput<'_>) -> String {
    format!(
        "{redis_prefix}cache:{}",
        canonical_sha256(&key_material(input))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(messages: &Value, sampling: &Value, ns: &str, salt: Option<&str>) -> String {
        let fp = json!([{"model": "m"}]);
        let messages = messages.as_array().cloned().unwrap_or_default();
        let sampling = sampling.as_object().cloned().unwrap_or_default();
        cache_key(
            "pgw:",
            &KeyInput {
                fingerprint: &fp,
                messages: &messages,
                namespace: ns,
                partition: None,
                salt,
                sampling: &sampling,
                structured: None,
            },
        )
    }

    #[test]
    fn a_partition_separates_keys_and_its_absence_keeps_the_old_ones() {
        let fp = json!([{"model": "m"}]);
        let messages = vec![json!({"role": "user", "content": "hi"})];
        let sampling = Map::new();
        let with = |partition| {
            cache_key(
                "pgw:",
                &KeyInput {
                    fingerprint: &fp,
                    messages: &messages,
                    namespace: "LLM",
                    partition,
                    salt: None,
                    sampling: &sampling,
                    structured: None,
                },
            )
        };
        let none = with(None);
        assert_eq!(
            none,
            key(
                &json!([{"role": "user", "content": "hi"}]),
                &json!({}),
                "LLM",
                None
            )
        );
        let a = with(Some("team:a"));
        let b = with(Some("team:b"));
        assert!(a != b && a != none && b != none);
        // A client cannot forge a partition through the namespace: the two are separate
        // fields of the key material.
        assert_ne!(
            with(Some("team:a")),
            key(
                &json!([{"role": "user", "content": "hi"}]),
                &json!({}),
                "team:a",
                None
            )
        );
    }

    #[test]
    fn what_changes_the_key_and_what_does_not() {
        let msgs = json!([{"role": "user", "content": "hi"}]);
        let base = key(&msgs, &json!({"temperature": 0.2, "seed": 1}), "LLM", None);
        assert!(base.starts_with("pgw:cache:") && base.len() == "pgw:cache:".len() + 64);
        // Field order and integral floats do not matter; null equals absent.
        assert_eq!(
            base,
            key(
                &msgs,
                &json!({"seed": 1.0, "temperature": 0.2, "top_p": null}),
                "LLM",
                None
            )
        );
        // stream options never enter the key.
        assert_eq!(
            base,
            key(
                &msgs,
                &json!({"seed": 1, "temperature": 0.2, "stream": true}),
                "LLM",
                None
            )
        );
        for other in [
            key(&msgs, &json!({"temperature": 0.2, "seed": 2}), "LLM", None),
            key(&msgs, &json!({"temperature": 0.3, "seed": 1}), "LLM", None),
            key(&msgs, &json!({"temperature": 0.2}), "LLM", None),
            key(&msgs, &json!({"temperature": 0.2, "seed": 1}), "acme", None),
            key(
                &msgs,
                &json!({"temperature": 0.2, "seed": 1}),
                "LLM",
                Some(""),
            ),
            key(
                &json!([{"role": "user", "content": "hi!"}]),
                &json!({"temperature": 0.2, "seed": 1}),
                "LLM",
                None,
            ),
        ] {
            assert_ne!(base, other);
        }
        assert_ne!(
            key(&msgs, &json!({}), "LLM", Some("")),
            key(&msgs, &json!({}), "LLM", Some("a"))
        );
    }

    #[test]
    fn binary_parts_are_digested_text_is_not() {
        let msgs = json!([{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "input_audio", "input_audio": {"data": "BBBB", "format": "wav"}},
        ]}]);
        let d = digest_messages(msgs.as_array().map(Vec::as_slice).unwrap_or_default());
        assert_eq!(
            d[0]["content"][0],
            json!({"type": "text", "text": "what is this?"})
        );
        assert_eq!(d[0]["content"][1]["type"], "image_url");
        assert_eq!(
            d[0]["content"][1]["sha256"].as_str().map(str::len),
            Some(64)
        );
        assert!(!d[0].to_string().contains("AAAA") && !d[0].to_string().contains("BBBB"));
        let mut changed = msgs.clone();
        changed[0]["content"][1]["image_url"]["url"] = json!("data:image/png;base64,AAAB");
        assert_ne!(
            key(&msgs, &json!({}), "LLM", None),
            key(&changed, &json!({}), "LLM", None)
        );
    }

    #[test]
    fn fingerprint_ignores_source_order_and_names() {
        let vars = |order: &[(&str, &str, &str)]| {
            let mut v: Vec<(String, String)> = Vec::new();
            for (p, model, extra) in order {
                v.push((format!("LLM__{p}__1__BASE_URL"), "http://a".into()));
                v.push((format!("LLM__{p}__1__MODEL"), (*model).into()));
                if !extra.is_empty() {
                    v.push((format!("LLM__{p}__1__EXTRA_BODY"), (*extra).into()));
                }
            }
            crate::config::settings_from_vars(v)
                .map(|s| model_fingerprint(&s.scopes[0].sources))
                .unwrap_or_default()
        };
        let a = vars(&[
            ("OPENAI", "m1", r#"{"top_k": 3, "x": 1}"#),
            ("QWEN", "m2", ""),
        ]);
        let b = vars(&[
            ("QWEN", "m1", r#"{"x": 1, "top_k": 3}"#),
            ("OPENAI", "m2", ""),
        ]);
        assert_eq!(a, b);
        let c = vars(&[
            ("OPENAI", "m1", r#"{"top_k": 4, "x": 1}"#),
            ("QWEN", "m2", ""),
        ]);
        assert_ne!(a, c);
        assert_eq!(
            vars(&[("OPENAI", "m1", ""), ("QWEN", "m1", "")]),
            json!([{"model": "m1"}])
        );
    }
}
