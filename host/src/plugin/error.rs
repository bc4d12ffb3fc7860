//! Errors of loading and calling plugin components.

/// A plugin could not be loaded, or one call into it failed.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The component file could not be read, compiled or linked.
    #[error("cannot load plugin {origin}: {message}")]
    Load { origin: String, message: String },
    /// The component file was refused before loading: unreadable, not a regular file, or
    /// over `PGW_PLUGIN_MAX_BYTES`.
    #[error(transparent)]
    File(#[from] super::file::ComponentFileError),
    /// The component was built for a contract version this host does not support.
    /// `supported` lists the versions this host has a binding for (`0.1.0 and 0.2.0`).
    #[error(
        "plugin {origin} exports {interface}@{found}; this host supports {interface} versions {supported}"
    )]
    Version {
        origin: String,
        interface: String,
        found: String,
        supported: String,
    },
    /// `PLUGIN_SHA256` did not match the file.
    #[error("plugin {origin}: sha256 is {actual}, but PLUGIN_SHA256 pins {expected}")]
    Checksum {
        origin: String,
        expected: String,
        actual: String,
    },
    /// A call trapped, ran out of its time budget or hit the memory cap. The instance is
    /// discarded; only this call fails (HTTP 502 `plugin_fault`).
    #[error("plugin {plugin} faulted in {function}: {message}")]
    Fault {
        plugin: String,
        function: &'static str,
        message: String,
    },
}
