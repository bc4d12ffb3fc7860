//! Builds the first-party plugin components (`plugins/`, a separate cargo workspace) for
//! `wasm32-wasip2` and copies them into `OUT_DIR`, where `plugin::builtin` embeds them:
//! six providers, three source selectors and three structured-output strategies.
//!
//! The guest build runs with its own target dir (`<target>/wasm-plugins`) and a cleaned
//! environment, so the host's RUSTFLAGS, wrappers (clippy, coverage) and target never leak in.
//! First of all it makes sure the `wasm32-wasip2` target is installed for the active
//! toolchain: rustup adds the targets of `rust-toolchain.toml` only when it installs the
//! toolchain itself, so a toolchain installed earlier may lack it. The build then adds it
//! (`rustup target add --toolchain <active> wasm32-wasip2`, announced as a cargo warning), or
//! fails at once naming that command.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build_support/wasm_target.rs"]
mod wasm_target;

use wasm_target::{TargetPlan, WASM_TARGET};

/// The component files (`<name>.wasm`) built and embedded: providers, selectors, then
/// strategies.
const COMPONENTS: [&str; 12] = [
    "openai",
    "anthropic",
    "gemini",
    "deepseek",
    "qwen",
    "monkeyocr",
    "health_aware",
    "round_robin",
    "least_inflight",
    "json_repair",
    "native_schema",
    "unwrap_parameters",
];

/// The crates of the plugin workspace whose sources the components are built from.
const CRATE_DIRS: [&str; 13] = [
    "sdk",
    "openai",
    "anthropic",
    "gemini",
    "deepseek",
    "qwen",
    "monkeyocr",
    "health-aware",
    "round-robin",
    "least-inflight",
    "json-repair",
    "native-schema",
    "unwrap-parameters",
];

fn main() {
    if let Err(e) = run() {
        // A build script reports failure through cargo's protocol; this is not user input.
        println!("cargo::error={e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let root = manifest_dir
        .parent()
        .ok_or("host/ has no parent directory")?
        .to_path_buf();
    let plugins = root.join("plugins");
    let out_dir = PathBuf::from(env("OUT_DIR")?);
    ensure_wasm_target()?;
    println!("cargo::rerun-if-changed={}", root.join("wit").display());
    println!(
        "cargo::rerun-if-changed={}",
        plugins.join("Cargo.toml").display()
    );
    println!(
        "cargo::rerun-if-changed={}",
        plugins.join("Cargo.lock").display()
    );
    for dir in CRATE_DIRS {
        println!("cargo::rerun-if-changed={}", plugins.join(dir).display());
    }
    println!("cargo::rerun-if-env-changed=POLYGATEWAY_PLUGIN_TARGET_DIR");

    let target_dir = match std::env::var_os("POLYGATEWAY_PLUGIN_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => cargo_target_dir(&out_dir).join("wasm-plugins"),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(plugins.join("Cargo.toml"))
        .arg("--target")
        .arg("wasm32-wasip2")
        .arg("--release")
        .arg("--locked")
        .arg("--target-dir")
        .arg(&target_dir);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "RUSTDOCFLAGS",
        "CARGO_LLVM_COV",
        "LLVM_PROFILE_FILE",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo for the plugins: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the plugin components failed ({status}); the cargo output above says why"
        ));
    }
    for name in COMPONENTS {
        let built = target_dir
            .join("wasm32-wasip2")
            .join("release")
            .join(format!("{name}.wasm"));
        let dest = out_dir.join(format!("{name}.wasm"));
        std::fs::copy(&built, &dest)
            .map_err(|e| format!("cannot copy {} to {}: {e}", built.display(), dest.display()))?;
    }
    Ok(())
}

/// Install the guest target if the active toolchain lacks it (see the module header).
fn ensure_wasm_target() -> Result<(), String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run `rustc --print sysroot`: {e}"))?;
    if !out.status.success() {
        return Err(format!("`rustc --print sysroot` failed ({})", out.status));
    }
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let installed = wasm_target::installed_in(&sysroot);
    let toolchain =
        wasm_target::active_toolchain(std::env::var("RUSTUP_TOOLCHAIN").ok().as_deref(), &sysroot);
    let rustup_runs = !installed
        && Command::new("rustup")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    match wasm_target::plan(installed, toolchain.as_deref(), rustup_runs) {
        TargetPlan::Ready => Ok(()),
        TargetPlan::Fail(message) => Err(message),
        TargetPlan::Install { toolchain, command } => {
            println!(
                "cargo::warning=the {WASM_TARGET} target is not installed for toolchain {toolchain}; installing it: {command}"
            );
            let status = Command::new("rustup")
                .args(["target", "add", "--toolchain", &toolchain, WASM_TARGET])
                .status()
                .map_err(|e| format!("cannot run `{command}`: {e}"))?;
            if status.success() && wasm_target::installed_in(&sysroot) {
                Ok(())
            } else {
                Err(format!(
                    "`{command}` failed ({status}); run it yourself, then build again"
                ))
            }
        }
    }
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

/// `<target>` from `<target>/<profile>/build/<pkg>-<hash>/out`.
fn cargo_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .nth(4)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out_dir.join("target"))
}
