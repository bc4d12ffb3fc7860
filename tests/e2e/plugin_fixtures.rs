//! Helpers of the plugin-platform tests: building guest crates for `wasm32-wasip2` once per
//! test binary (the test-fixture plugins of `tests/fixtures/plugins/` and the out-of-tree
//! example) and running `polygateway plugin check`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use polygateway_tests::repo_root;
use tokio::process::Command;

/// Build a guest workspace (`cargo build --target wasm32-wasip2 --release --locked`) into
/// `$CARGO_TARGET_DIR/<target_name>` when the variable is set (a cache shared by test runs),
/// else into a directory under the system temp dir. The host's flags and wrappers are
/// removed from the child's environment, as `host/build.rs` does. Returns
/// `<target>/wasm32-wasip2/release`.
fn build_guest(manifest: &Path, target_name: &str) -> Result<PathBuf, String> {
    let target_dir = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join(target_name),
        None => std::env::temp_dir().join(format!("pgw-{target_name}")),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.current_dir(manifest.parent().unwrap_or(Path::new(".")))
        .arg("build")
        .arg("--manifest-path")
        .arg(manifest)
        .args(["--target", "wasm32-wasip2", "--release", "--locked"])
        .arg("--target-dir")
        .arg(&target_dir);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_LLVM_COV",
        "LLVM_PROFILE_FILE",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building {} failed ({}):\n{}",
            manifest.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(target_dir.join("wasm32-wasip2").join("release"))
}

/// The test-fixture components: `broken_provider.wasm`, `hostile_provider.wasm` and
/// `text_embedder.wasm`, built once per test binary.
pub async fn fixture_plugins() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = tokio::task::spawn_blocking(|| {
        BUILT
            .get_or_init(|| {
                let manifest = repo_root()
                    .join("tests")
                    .join("fixtures")
                    .join("plugins")
                    .join("Cargo.toml");
                build_guest(&manifest, "test-plugins")
            })
            .clone()
    })
    .await
    .expect("build task");
    built.unwrap_or_else(|e| panic!("{e}"))
}

/// The text-only embedding provider fixture (declines token-id arrays).
pub async fn text_embedder() -> PathBuf {
    fixture_plugins().await.join("text_embedder.wasm")
}

/// The broken provider fixture.
pub async fn broken_provider() -> PathBuf {
    fixture_plugins().await.join("broken_provider.wasm")
}

/// The hostile provider fixture.
pub async fn hostile_provider() -> PathBuf {
    fixture_plugins().await.join("hostile_provider.wasm")
}

/// The out-of-tree example `examples/acme-provider`, built from its sources (once per test
/// binary, into the same target dir as `external_plugin.rs` uses).
pub async fn acme_example() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = tokio::task::spawn_blocking(|| {
        BUILT
            .get_or_init(|| {
                let manifest = repo_root()
                    .join("examples")
                    .join("acme-provider")
                    .join("Cargo.toml");
                build_guest(&manifest, "acme-example").map(|d| d.join("acme.wasm"))
            })
            .clone()
    })
    .await
    .expect("build task");
    built.unwrap_or_else(|e| panic!("{e}"))
}

/// Run `polygateway plugin check <args>`: exit code, stdout, stderr.
pub async fn plugin_check(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_polygateway"))
        .arg("plugin")
        .arg("check")
        .args(args)
        .env_remove("PGW_PLUGIN_CACHE_DIR")
        .env_remove("PGW_PLUGIN_TIMEOUT_MS")
        .env_remove("PGW_PLUGIN_MEMORY_MB")
        .output()
        .await
        .expect("run polygateway plugin check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every file under `dir` (recursively), sorted, except wasmtime's cache statistics
/// (`*.stats`) and its work-in-progress files (`*.wip-*`): the compiled artifacts of a
/// compile-cache directory.
pub fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                // Not artifacts: wasmtime's usage statistics, and its work-in-progress files
                // (`*.wip-atomic-write-stats` while a statistics file is rewritten by its
                // background worker, `.cleanup.wip-<pid>` while it cleans up), which come and
                // go on that worker's schedule, not the start's.
                if !name.ends_with(".stats") && !name.contains(".wip-") {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}
