//! The guest SDK carries its own copy of the WIT contract (`plugins/sdk/wit/`, what its
//! bindings are generated from), so a plugin outside this repository can depend on the SDK by
//! version or git: the copy is byte-identical to `wit/` (same files both ways), and the
//! example provider `examples/acme-provider` builds for `wasm32-wasip2` against the SDK as
//! `cargo package` ships it, with nothing else of the repository within reach.
//!
//! After editing `wit/`, refresh the copy: `rm -r plugins/sdk/wit && cp -r wit plugins/sdk/`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use polygateway::plugin::{PluginEngine, PluginLimits, ProviderComponent};
use polygateway_tests::repo_root;

/// The files under `dir` (recursively), as `/`-separated paths relative to `dir`.
fn tree(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for e in entries {
            let path = e.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).expect("under dir");
                out.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out
}

/// Why the WIT tree `copy` is not `wit/` byte for byte (one line per differing file), or
/// `None` when it is: a file on one side only, or with other contents, is named.
fn wit_differences(copy: &Path) -> Option<String> {
    let root = repo_root();
    let wit = root.join("wit");
    // The copy as the message names it: relative to the repository when it is inside.
    let shown = copy.strip_prefix(&root).unwrap_or(copy);
    let shown = shown.to_string_lossy().replace('\\', "/");
    if !copy.is_dir() {
        return Some(format!("{shown}/ does not exist"));
    }
    let (ours, theirs) = (tree(&wit), tree(copy));
    let mut problems = Vec::new();
    for f in ours.difference(&theirs) {
        problems.push(format!("wit/{f} is missing from {shown}/"));
    }
    for f in theirs.difference(&ours) {
        problems.push(format!("{shown}/{f} is not in wit/"));
    }
    for f in ours.intersection(&theirs) {
        let read = |p: PathBuf| fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        if read(wit.join(f)) != read(copy.join(f)) {
            problems.push(format!("wit/{f} and {shown}/{f} differ"));
        }
    }
    (!problems.is_empty()).then(|| problems.join("\n"))
}

#[test]
fn sdk_wit_copy_is_identical_to_wit() {
    let copy = repo_root().join("plugins").join("sdk").join("wit");
    if let Some(problems) = wit_differences(&copy) {
        panic!(
            "the SDK's WIT copy differs from wit/ (refresh it: \
             `rm -r plugins/sdk/wit && cp -r wit plugins/sdk/`):\n{problems}"
        );
    }
}

/// Run a command to completion; panics with its stderr unless it succeeds.
fn run(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Copy the directory `from` to `to`, skipping build output (`target`).
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create dir");
    for e in fs::read_dir(from).expect("read dir").flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            if e.file_name() != "target" {
                copy_dir(&src, &dst);
            }
        } else {
            fs::copy(&src, &dst).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        }
    }
}

/// `cargo package` the SDK (no verification build, dirty tree allowed so the working copy is
/// what is packaged) and extract the `.crate` to `<scratch>/plugins/sdk`: the normalized
/// manifest and exactly the files a registry user would get.
fn packaged_sdk(scratch: &Path) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let pkg_target = scratch.join("package-target");
    run(
        Command::new(&cargo)
            .arg("package")
            .arg("--manifest-path")
            .arg(repo_root().join("plugins").join("Cargo.toml"))
            .args([
                "-p",
                "polygateway-plugin-sdk",
                "--no-verify",
                "--allow-dirty",
            ])
            .args(["--offline", "--locked", "--quiet"])
            .arg("--target-dir")
            .arg(&pkg_target),
        "cargo package",
    );
    let crates: Vec<PathBuf> = fs::read_dir(pkg_target.join("package"))
        .expect("cargo package output")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "crate"))
        .collect();
    assert_eq!(crates.len(), 1, "one packaged crate: {crates:?}");
    let plugins = scratch.join("plugins");
    fs::create_dir_all(&plugins).expect("create dir");
    run(
        Command::new("tar")
            .arg("-xzf")
            .arg(&crates[0])
            .arg("-C")
            .arg(&plugins),
        "tar -xzf (extract the packaged SDK)",
    );
    let stem = crates[0].file_stem().expect("crate file name");
    let sdk = plugins.join("sdk");
    fs::rename(plugins.join(stem), &sdk).expect("rename the extracted crate");
    sdk
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_example_builds_against_the_packaged_sdk_alone() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let sdk = packaged_sdk(scratch.path());

    // The package carries the WIT, identical to the contract, and no workspace inheritance.
    if let Some(problems) = wit_differences(&sdk.join("wit")) {
        panic!("the packaged SDK's WIT is not wit/:\n{problems}");
    }
    let manifest = fs::read_to_string(sdk.join("Cargo.toml")).expect("packaged Cargo.toml");
    assert!(
        !manifest.contains(".workspace") && !manifest.contains("workspace = true"),
        "the packaged manifest still inherits from a workspace:\n{manifest}"
    );

    // The example, unchanged, beside it: its `path = "../../plugins/sdk"` now reaches the
    // packaged crate, and nothing else of the repository exists around it. Offline: every
    // dependency is in the plugin workspace's lock file, which the host's build fetched.
    let example = scratch.path().join("examples").join("acme-provider");
    copy_dir(
        &repo_root().join("examples").join("acme-provider"),
        &example,
    );
    fs::create_dir_all(scratch.path().join(".cargo")).expect("create dir");
    fs::write(
        scratch.path().join(".cargo").join("config.toml"),
        "[net]\noffline = true\n",
    )
    .expect("write cargo config");
    let target_dir = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join("acme-packaged-sdk"),
        None => scratch.path().join("target"),
    };
    let wasm =
        polygateway_tests::build_guest_component(&example.join("Cargo.toml"), &target_dir, "acme")
            .await;

    // It is the Acme provider component.
    let engine = PluginEngine::new(PluginLimits::default(), None).expect("engine");
    let bytes = fs::read(&wasm).expect("read acme.wasm");
    let component =
        ProviderComponent::load(&engine, &wasm.display().to_string(), &bytes).expect("loads");
    assert_eq!(component.info().name, "acme");
}
