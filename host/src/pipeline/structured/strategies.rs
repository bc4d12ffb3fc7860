//! The strategy components of the process and the choice of one per call: the scope's
//! default (`{SCOPE}__STRUCTURED__STRATEGY`) or the caller's `x-pgw-structured-strategy`.
//!
//! Strategies from files are loaded at start-up (a bad path or component stops it). The
//! first-party ones are compiled on first use, once per process, off the async threads: a
//! gateway whose callers never ask for JSON never pays for them.

use std::sync::Arc;

use tokio::sync::OnceCell;

use crate::config::ScopeSettings;
use crate::error::GatewayError;
use crate::plugin::{BUILTIN_STRATEGIES, PluginEngine, StrategyComponent, builtin_strategy_bytes};

use super::super::runtime::error::StartError;

/// The header a caller picks a strategy with.
pub(crate) const HEADER: &str = "x-pgw-structured-strategy";

/// Which component serves a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    /// `BUILTIN_STRATEGIES[i]`.
    Builtin(usize),
    /// `files[i]`.
    File(usize),
}

/// The strategy components of the process.
pub(crate) struct Strategies {
    engine: PluginEngine,
    /// Per first-party name (same order as `BUILTIN_STRATEGIES`), compiled on first use.
    builtin: Vec<OnceCell<Arc<StrategyComponent>>>,
    /// Strategies scopes configured by path: (the configured path, the component).
    files: Vec<(String, Arc<StrategyComponent>)>,
}

impl std::fmt::Debug for Strategies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: Vec<&str> = self.files.iter().map(|(p, _)| p.as_str()).collect();
        f.debug_struct("Strategies")
            .field("files", &files)
            .finish_non_exhaustive()
    }
}

impl Strategies {
    /// Load the strategies the scopes configure by path (each distinct path once).
    pub(crate) fn load(
        engine: &PluginEngine,
        scopes: &[ScopeSettings],
    ) -> Result<Self, StartError> {
        let mut files: Vec<(String, Arc<StrategyComponent>)> = Vec::new();
        for scope in scopes {
            let want = &scope.structured.strategy;
            if BUILTIN_STRATEGIES.contains(&want.as_str()) || files.iter().any(|(p, _)| p == want) {
                continue;
            }
            let bytes = engine
                .read_component(std::path::Path::new(want))
                .map_err(|e| StartError::Source {
                    key: format!("{}__STRUCTURED__STRATEGY", scope.name),
                    message: e.to_string(),
                })?;
            files.push((want.clone(), StrategyComponent::load(engine, want, &bytes)?));
        }
        Ok(Self {
            engine: engine.clone(),
            builtin: BUILTIN_STRATEGIES.iter().map(|_| OnceCell::new()).collect(),
            files,
        })
    }

    /// Check the strategy a call names (`x-pgw-structured-strategy`: a first-party name or
    /// the `describe` name of a strategy some scope loaded from a file), or the scope's
    /// default when it names none. An unknown name is a 400 naming the header. Paths are
    /// never accepted from a caller.
    fn choose(&self, scope: &ScopeSettings, asked: Option<&str>) -> Result<Choice, GatewayError> {
        let builtin = |name: &str| BUILTIN_STRATEGIES.iter().position(|b| *b == name);
        match asked {
            Some(name) => builtin(name)
                .map(Choice::Builtin)
                .or_else(|| {
                    self.files
                        .iter()
                        .position(|(_, c)| c.name() == name)
                        .map(Choice::File)
                })
                .ok_or_else(|| {
                    let mut known: Vec<&str> = BUILTIN_STRATEGIES.to_vec();
                    known.extend(self.files.iter().map(|(_, c)| c.name()));
                    GatewayError::invalid(
                        HEADER,
                        format!(
                            "header `{HEADER}` names no structured-output strategy: `{name}` (known: {})",
                            known.join(", ")
                        ),
                    )
                }),
            None => {
                let want = scope.structured.strategy.as_str();
                builtin(want)
                    .map(Choice::Builtin)
                    .or_else(|| self.files.iter().position(|(p, _)| p == want).map(Choice::File))
                    .ok_or_else(|| {
                        GatewayError::Internal(format!(
                            "{}__STRUCTURED__STRATEGY `{want}` was not loaded",
                            scope.name
                        ))
                    })
            }
        }
    }

    /// Check a call's `x-pgw-structured-strategy` without loading anything (for calls that
    /// ask for no JSON: a wrong header is still a 400).
    pub(crate) fn check(
        &self,
        scope: &ScopeSettings,
        asked: Option<&str>,
    ) -> Result<(), GatewayError> {
        self.choose(scope, asked).map(|_| ())
    }

    /// The strategy component of a call (see [`Strategies::check`] for the rules), compiling
    /// a first-party one on its first use.
    pub(crate) async fn for_call(
        &self,
        scope: &ScopeSettings,
        asked: Option<&str>,
    ) -> Result<Arc<StrategyComponent>, GatewayError> {
        match self.choose(scope, asked)? {
            Choice::File(i) => self
                .files
                .get(i)
                .map(|(_, c)| c.clone())
                .ok_or_else(|| GatewayError::Internal("strategy index out of range".into())),
            Choice::Builtin(i) => {
                let (Some(cell), Some(name)) = (self.builtin.get(i), BUILTIN_STRATEGIES.get(i))
                else {
                    return Err(GatewayError::Internal("strategy index out of range".into()));
                };
                let engine = self.engine.clone();
                cell.get_or_try_init(|| async move {
                    let bytes = builtin_strategy_bytes(name).ok_or_else(|| {
                        GatewayError::Internal(format!("no first-party strategy `{name}`"))
                    })?;
                    let origin = format!("builtin:{name}");
                    tokio::task::spawn_blocking(move || {
                        StrategyComponent::load(&engine, &origin, bytes)
                    })
                    .await
                    .map_err(|e| GatewayError::Internal(format!("loading {name}: {e}")))?
                    .map_err(|e| GatewayError::Internal(e.to_string()))
                })
                .await
                .cloned()
            }
        }
    }
}
