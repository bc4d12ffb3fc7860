//! Cost (docs/telemetry.md#cost): a price table read from
//! `PGW_PRICING_FILE`, a JSON object mapping the configured `MODEL` of a source to its prices
//! per million tokens:
//!
//! ```json
//! {
//!   "deepseek-chat": {"input": 0.27, "output": 1.10, "cached_input": 0.07},
//!   "claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cached_input": 0.30, "cache_write_input": 3.75},
//!   "gemini-2.5-flash": {"input": 0.30, "output": 2.50, "cached_input": 0.075},
//!   "qwen-plus": {"input": 0.4, "output": 1.2}
//! }
//! ```
//!
//! `cost = (prompt − cached − written) × input + cached × cached_input + written ×
//! cache_write_input + completion × output`, all divided by 10⁶. Each split applies only
//! when its price is configured: without `cached_input` cache reads are billed at `input`,
//! without `cache_write_input` cache writes are (prompt tokens count both, see the contract's
//! `usage`). Anthropic's cache-write rate is 1.25× its input rate (2× for the one-hour
//! cache) and its read rate 0.1×: write them as the prices they come to, as above. Reasoning
//! tokens are part of `completion_tokens` and are billed at `output`. An unknown model or unavailable usage
//! gives no cost (NULL) and one warning per model.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Mutex;

/// The prices of one model, per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million prompt tokens.
    pub input: f64,
    /// Per million completion tokens (reasoning included).
    pub output: f64,
    /// Per million prompt tokens served from the provider's prompt cache; unset = billed at
    /// `input`.
    #[serde(default)]
    pub cached_input: Option<f64>,
    /// Per million prompt tokens written to the provider's prompt cache (Anthropic
    /// `cache_creation_input_tokens`); unset = billed at `input`.
    #[serde(default)]
    pub cache_write_input: Option<f64>,
}

/// Why the price table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PricingError {
    #[error("PGW_PRICING_FILE: cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error(
        "PGW_PRICING_FILE: {path} is not a JSON object of model → {{\"input\", \"output\", \"cached_input\"?, \"cache_write_input\"?}} prices per million tokens: {message}"
    )]
    Parse { path: String, message: String },
    #[error(
        "PGW_PRICING_FILE: {path}: price `{field}` of model `{model}` must be a finite number ≥ 0"
    )]
    Invalid {
        path: String,
        model: String,
        field: &'static str,
    },
}

/// Token counts of one answer, as the upstream reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BilledTokens {
    pub prompt: u64,
    pub completion: u64,
    /// Prompt tokens from the provider's prompt cache; `None` = not reported.
    pub cached_prompt: Option<u64>,
    /// Prompt tokens written to the provider's prompt cache; `None` = not reported.
    pub cache_write: Option<u64>,
}

/// The price table.
#[derive(Debug)]
pub struct Pricing {
    prices: BTreeMap<String, Price>,
    warned: Mutex<HashSet<String>>,
}

impl Pricing {
    /// Read the table from a JSON file.
    pub fn load(path: &Path) -> Result<Self, PricingError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| PricingError::Read {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        Self::from_json(&shown, &text)
    }

    /// Parse a table; `origin` names it in errors.
    pub fn from_json(origin: &str, text: &str) -> Result<Self, PricingError> {
        let prices: BTreeMap<String, Price> =
            serde_json::from_str(text).map_err(|e| PricingError::Parse {
                path: origin.to_string(),
                message: e.to_string(),
            })?;
        for (model, p) in &prices {
            let fields = [
                ("input", Some(p.input)),
                ("output", Some(p.output)),
                ("cached_input", p.cached_input),
                ("cache_write_input", p.cache_write_input),
            ];
            for (field, v) in fields {
                if let Some(v) = v
                    && !(v.is_finite() && v >= 0.0)
                {
                    return Err(PricingError::Invalid {
                        path: origin.to_string(),
                        model: model.clone(),
                        field,
                    });
                }
            }
        }
        Ok(Self {
            prices,
            warned: Mutex::new(HashSet::new()),
        })
    }

    /// The prices of `model`, if listed.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.prices.get(model).copied()
    }

    /// The cost of an answer from `model`; `None` (with one warning per model) when the
    /// model has no price or the usage is unknown.
    pub fn cost(&self, model: &str, tokens: Option<BilledTokens>) -> Option<f64> {
        let Some(price) = self.price(model) else {
            self.warn_once(model, "has no price in PGW_PRICING_FILE; its cost is NULL");
            return None;
        };
        let Some(t) = tokens else {
            self.warn_once(
                model,
                "answered without a usage report; its cost is NULL (unknown, not free)",
            );
            return None;
        };
        let split = |reported: Option<u64>, price: Option<f64>, left: u64, what: &str| match (
            reported, price,
        ) {
            (Some(n), Some(_)) => {
                if n > left {
                    tracing::warn!(
                        model,
                        tokens = n,
                        prompt = t.prompt,
                        "{what} prompt tokens exceed the prompt tokens not yet billed; clamped"
                    );
                }
                n.min(left)
            }
            _ => 0,
        };
        let cached = split(t.cached_prompt, price.cached_input, t.prompt, "cached");
        let written = split(
            t.cache_write,
            price.cache_write_input,
            t.prompt - cached,
            "cache-written",
        );
        let uncached = (t.prompt - cached - written) as f64;
        let cost = uncached * price.input
            + cached as f64 * price.cached_input.unwrap_or(price.input)
            + written as f64 * price.cache_write_input.unwrap_or(price.input)
            + t.completion as f64 * price.output;
        Some(cost / 1_000_000.0)
    }

    fn warn_once(&self, model: &str, what: &str) {
        let first = self
            .warned
            .lock()
            .map(|mut w| w.insert(model.to_string()))
            .unwrap_or(false);
        if first {
            tracing::warn!(model, "model {model} {what}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Pricing {
        Pricing::from_json(
            "t",
            r#"{"a": {"input": 2.0, "output": 8.0, "cached_input": 0.5}, "b": {"input": 1.0, "output": 3.0}}"#,
        )
        .unwrap()
    }

    fn tokens(prompt: u64, completion: u64, cached: Option<u64>) -> Option<BilledTokens> {
        Some(BilledTokens {
            prompt,
            completion,
            cached_prompt: cached,
            cache_write: None,
        })
    }

    #[test]
    fn cache_writes_are_billed_at_their_own_rate_when_configured() {
        // Anthropic-style: reads at 0.1×, writes at 1.25× the input rate.
        let p = Pricing::from_json(
            "t",
            r#"{"c": {"input": 3.0, "output": 15.0, "cached_input": 0.3, "cache_write_input": 3.75},
                "g": {"input": 0.3, "output": 2.5, "cached_input": 0.075}}"#,
        )
        .unwrap();
        let t = |prompt, cached, written| {
            Some(BilledTokens {
                prompt,
                completion: 100,
                cached_prompt: cached,
                cache_write: written,
            })
        };
        // (3000 − 1000 − 1500) × 3 + 1000 × 0.3 + 1500 × 3.75 + 100 × 15
        assert_eq!(
            p.cost("c", t(3000, Some(1000), Some(1500))),
            Some((1500.0 + 300.0 + 5625.0 + 1500.0) / 1e6)
        );
        // No write price: written tokens are billed at `input`.
        assert_eq!(
            p.cost("g", t(3000, Some(1000), Some(1500))),
            Some((2000.0 * 0.3 + 1000.0 * 0.075 + 250.0) / 1e6)
        );
        // More written than left unbilled: clamped, never negative.
        assert_eq!(
            p.cost("c", t(100, Some(60), Some(90))),
            Some((60.0 * 0.3 + 40.0 * 3.75 + 1500.0) / 1e6)
        );
        assert!(matches!(
            Pricing::from_json(
                "t",
                r#"{"a": {"input": 1, "output": 1, "cache_write_input": -2}}"#
            ),
            Err(PricingError::Invalid {
                field: "cache_write_input",
                ..
            })
        ));
    }

    #[test]
    fn cached_price_applies_only_when_configured() {
        let p = table();
        // (1000 − 400) × 2 + 400 × 0.5 + 500 × 8 = 1200 + 200 + 4000
        assert_eq!(
            p.cost("a", tokens(1000, 500, Some(400))),
            Some(5400.0 / 1e6)
        );
        assert_eq!(p.cost("a", tokens(1000, 500, None)), Some(6000.0 / 1e6));
        // No cached price: every prompt token at `input`.
        assert_eq!(
            p.cost("b", tokens(1000, 500, Some(400))),
            Some(2500.0 / 1e6)
        );
        // More cached than prompt: clamped, never negative.
        assert_eq!(p.cost("a", tokens(10, 0, Some(50))), Some(5.0 / 1e6));
    }

    #[test]
    fn unknown_model_or_usage_is_null() {
        let p = table();
        assert_eq!(p.cost("zzz", tokens(1, 1, None)), None);
        assert_eq!(p.cost("a", None), None);
    }

    #[test]
    fn bad_tables_are_refused() {
        assert!(matches!(
            Pricing::from_json("t", r#"{"a": {"input": -1, "output": 1}}"#),
            Err(PricingError::Invalid { field: "input", .. })
        ));
        assert!(matches!(
            Pricing::from_json("t", r#"{"a": {"input": 1, "output": 1, "cache": 1}}"#),
            Err(PricingError::Parse { .. })
        ));
        assert!(matches!(
            Pricing::from_json("t", "[]"),
            Err(PricingError::Parse { .. })
        ));
    }
}
