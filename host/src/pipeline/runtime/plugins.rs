//! Loading a configuration's components: each source's provider (first-party bytes or a
//! `.wasm` file, its `PLUGIN_SHA256` pin checked first) and each scope's selector, each
//! distinct component loaded once per configuration. Every failure names the env key that
//! chose the component.

use std::sync::Arc;

use crate::config::{PluginRef, ScopeSettings, SelectorRef, SourceSettings};
use crate::plugin::{
    PluginEngine, PluginError, ProviderComponent, SelectSource, SelectorComponent,
    builtin_provider_bytes, builtin_selector_bytes,
};

use super::StartError;

/// The components loaded so far for one configuration, so a component several sources or
/// scopes name is loaded once.
#[derive(Default)]
pub(super) struct Loaded {
    providers: Vec<(PluginRef, Arc<ProviderComponent>)>,
    selectors: Vec<(SelectorRef, Arc<SelectorComponent>)>,
}

impl Loaded {
    /// The provider component of source `s` of `scope`, its pin checked when it has one.
    pub(super) fn provider(
        &mut self,
        engine: &PluginEngine,
        scope: &ScopeSettings,
        s: &SourceSettings,
    ) -> Result<Arc<ProviderComponent>, StartError> {
        if let (Some(pin), PluginRef::File(path)) = (&s.plugin_sha256, &s.plugin) {
            check_pin(engine, scope, s, path, pin)?;
        }
        if let Some((_, c)) = self.providers.iter().find(|(r, _)| *r == s.plugin) {
            return Ok(c.clone());
        }
        let c = load_provider(engine, scope, s)?;
        self.providers.push((s.plugin.clone(), c.clone()));
        Ok(c)
    }

    /// The scope's selector component (`{SCOPE}__SELECTOR`: a first-party name or a path).
    pub(super) fn selector(
        &mut self,
        engine: &PluginEngine,
        scope: &ScopeSettings,
    ) -> Result<Arc<dyn SelectSource>, StartError> {
        let want = &scope.governance.selector;
        if let Some((_, c)) = self.selectors.iter().find(|(r, _)| r == want) {
            return Ok(c.clone());
        }
        let key = format!("{}__SELECTOR", scope.name);
        let origin = selector_origin(want);
        let component = match want {
            SelectorRef::FirstParty(fp) => match builtin_selector_bytes(fp.name()) {
                Some(bytes) => {
                    SelectorComponent::load(engine, &origin, bytes).map_err(keyed(key))?
                }
                None => {
                    return Err(StartError::Source {
                        key,
                        message: format!(
                            "`{}` is not a selector built into this binary",
                            fp.name()
                        ),
                    });
                }
            },
            SelectorRef::File(path) => {
                let bytes = engine.read_component(path).map_err(keyed(key.clone()))?;
                SelectorComponent::load(engine, &origin, &bytes).map_err(keyed(key))?
            }
        };
        self.selectors.push((want.clone(), component.clone()));
        Ok(component)
    }
}

/// The origin a selector reference loads from: `builtin:<name>` or the path.
pub(super) fn selector_origin(selector: &SelectorRef) -> String {
    match selector {
        SelectorRef::FirstParty(fp) => format!("builtin:{}", fp.name()),
        SelectorRef::File(path) => path.display().to_string(),
    }
}

/// The env key of a source field, e.g. `LLM__ACME__1__PLUGIN`.
fn source_key(scope: &ScopeSettings, s: &SourceSettings, field: &str) -> String {
    format!(
        "{}__{}__{}__{field}",
        scope.name,
        s.provider.to_ascii_uppercase(),
        s.index
    )
}

/// A plugin error as a start error naming the key that chose the plugin.
fn keyed(key: String) -> impl FnOnce(PluginError) -> StartError {
    move |e| StartError::Source {
        key,
        message: e.to_string(),
    }
}

fn load_provider(
    engine: &PluginEngine,
    scope: &ScopeSettings,
    s: &SourceSettings,
) -> Result<Arc<ProviderComponent>, StartError> {
    let key = source_key(scope, s, "PLUGIN");
    match &s.plugin {
        PluginRef::FirstParty(fp) => ProviderComponent::load(
            engine,
            &format!("builtin:{}", fp.name()),
            builtin_provider_bytes(*fp),
        )
        .map_err(keyed(key)),
        PluginRef::File(path) => {
            let bytes = engine.read_component(path).map_err(keyed(key.clone()))?;
            ProviderComponent::load(engine, &path.display().to_string(), &bytes).map_err(keyed(key))
        }
    }
}

/// Check a file component against its `PLUGIN_SHA256` pin (hex SHA-256 of the file).
fn check_pin(
    engine: &PluginEngine,
    scope: &ScopeSettings,
    s: &SourceSettings,
    path: &std::path::Path,
    pin: &str,
) -> Result<(), StartError> {
    use sha2::Digest;
    let bytes = engine
        .read_component(path)
        .map_err(keyed(source_key(scope, s, "PLUGIN")))?;
    let actual = hex::encode(sha2::Sha256::digest(&bytes));
    if actual != pin {
        return Err(keyed(source_key(scope, s, "PLUGIN_SHA256"))(
            PluginError::Checksum {
                origin: path.display().to_string(),
                expected: pin.to_string(),
                actual,
            },
        ));
    }
    Ok(())
}
