//! The problems of a configuration: [`ConfigProblem`] (one bad key), [`ConfigError`]
//! (start-up or a reload refused) and `Problems`, the list every section parser and the
//! validation add to, so that one run reports every problem, each naming its key.

/// One bad key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The env key (or file) at fault.
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

/// Start-up refused: every problem found, each naming its key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The settings have problems, sorted by key.
    #[error("invalid configuration:\n{}", format_problems(.0))]
    Invalid(Vec<ConfigProblem>),
    /// The `.env` file cannot be read or does not parse.
    #[error("cannot read {path}: {message}")]
    DotEnv {
        /// The file.
        path: String,
        /// What went wrong (a line by number, never its content).
        message: String,
    },
}

fn format_problems(problems: &[ConfigProblem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {}: {}", p.key, p.message))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The problems collected so far, in the order they were found.
#[derive(Debug, Default)]
pub(super) struct Problems(Vec<ConfigProblem>);

impl Problems {
    /// No problem yet.
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// Record that `key` is at fault.
    pub(super) fn add(&mut self, key: &str, message: impl Into<String>) {
        self.0.push(ConfigProblem {
            key: key.to_string(),
            message: message.into(),
        });
    }

    /// How many problems there are (a parser compares counts to tell whether its section
    /// added any).
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// Add those of `other` whose key has no problem here yet (a key the parser already
    /// found fault with is not reported twice by the rules).
    pub(super) fn add_unreported(&mut self, other: Problems) {
        for p in other.0 {
            if !self.0.iter().any(|q| q.key == p.key) {
                self.0.push(p);
            }
        }
    }

    /// `Ok` when there is no problem, else every problem sorted by key.
    pub(super) fn into_result(self) -> Result<(), ConfigError> {
        if self.0.is_empty() {
            return Ok(());
        }
        let mut list = self.0;
        list.sort_by(|a, b| a.key.cmp(&b.key));
        Err(ConfigError::Invalid(list))
    }

    /// The problems in the order they were found.
    #[cfg(test)]
    pub(super) fn into_list(self) -> Vec<ConfigProblem> {
        self.0
    }
}
