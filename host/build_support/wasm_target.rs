//! Whether the `wasm32-wasip2` target the plugin components are built for is installed for
//! the active toolchain, and what the build does when it is not: install it with rustup
//! (announced in the build output) or stop at once with the exact command. Included by
//! `host/build.rs`, and by the end-to-end test crate, which tests the decision.

use std::path::Path;

/// The target the first-party plugin components are compiled for.
pub const WASM_TARGET: &str = "wasm32-wasip2";

/// What the build does about the guest target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetPlan {
    /// Installed: build the components.
    Ready,
    /// Missing, and rustup can add it to this toolchain: run `command`, telling the user.
    Install {
        /// The toolchain to add it to (the active one).
        toolchain: String,
        /// The exact command, as announced.
        command: String,
    },
    /// Missing and not installable here: fail with this message (it names the command).
    Fail(String),
}

/// `rustup target add --toolchain <toolchain> wasm32-wasip2`.
pub fn install_command(toolchain: &str) -> String {
    format!("rustup target add --toolchain {toolchain} {WASM_TARGET}")
}

/// Whether the sysroot holds the target's standard library (`lib/rustlib/wasm32-wasip2`).
pub fn installed_in(sysroot: &Path) -> bool {
    sysroot
        .join("lib")
        .join("rustlib")
        .join(WASM_TARGET)
        .is_dir()
}

/// The active rustup toolchain: `RUSTUP_TOOLCHAIN` (set by rustup's proxies, e.g.
/// `1.95.0-x86_64-unknown-linux-gnu`), else the name of a sysroot that lies in rustup's
/// `toolchains/` directory; `None` for a toolchain rustup does not manage.
pub fn active_toolchain(rustup_toolchain: Option<&str>, sysroot: &Path) -> Option<String> {
    if let Some(t) = rustup_toolchain.map(str::trim).filter(|t| !t.is_empty()) {
        return Some(t.to_string());
    }
    let parent = sysroot.parent()?;
    if parent.file_name()? != "toolchains" {
        return None;
    }
    Some(sysroot.file_name()?.to_str()?.to_string())
}

/// The decision: `installed` (the target is in the sysroot), the active rustup toolchain if
/// any, and whether the `rustup` command runs here.
pub fn plan(installed: bool, toolchain: Option<&str>, rustup_runs: bool) -> TargetPlan {
    if installed {
        return TargetPlan::Ready;
    }
    match (toolchain, rustup_runs) {
        (Some(t), true) => TargetPlan::Install {
            toolchain: t.to_string(),
            command: install_command(t),
        },
        (Some(t), false) => TargetPlan::Fail(format!(
            "the {WASM_TARGET} target the plugin components are built for is not installed for toolchain {t}, and rustup does not run here; install it: `{}`",
            install_command(t)
        )),
        (None, _) => TargetPlan::Fail(format!(
            "the {WASM_TARGET} target the plugin components are built for is not installed, and this toolchain is not managed by rustup; install the target's standard library for it (with rustup: `{}`)",
            install_command("<toolchain>")
        )),
    }
}
