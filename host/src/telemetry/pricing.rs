//! Cost (docs/telemetry.md#cost): a price table read from
//! `PGW_PRICING_FILE`, a JSON object mapping the configured `MODEL` of a source to its prices
//! per million tokens:
//!
//! ```json
//! {
//!   "deepseek-chat": {"input": 0.27, "output": 1.10, "cached_input": 0.07},
//!   "qwen-plus": {"input": 0.4, "output": 1.2}
//! }
//! ```
//!
//! `cost = (prompt − cached) × input + cached × cached_input + completion × output`, all
//! divided by 10⁶, where the cached split applies only when `cached_input` is configured
//! (otherwise every prompt token is billed at `input`). Reasoning tokens are part of
//! `completion_tokens` and are billed at `output`. An unknown model or unavailable usage
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
}

/// Why the price table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PricingError {
    #[error("PGW_PRICING_FILE: cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error(
        "PGW_PRICING_FILE: {path} is not a JSON object of model → {{\"input\", \"output\", \"cached_input\"?}} prices per million tokens: {message}"
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
        let mut cached = 0;
        if let (Some(c), Some(_)) = (t.cached_prompt, price.cached_input) {
            if c > t.prompt {
                tracing::warn!(
                    model,
                    cached = c,
                    prompt = t.prompt,
                    "cached prompt tokens exceed prompt tokens; clamped"
                );
            }
            cached = c.min(t.prompt);
        }
        let uncached = (t.prompt - cached) as f64;
        let cost = uncached * price.input
            + cached as f64 * price.cached_input.unwrap_or(price.input)
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
        })
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
