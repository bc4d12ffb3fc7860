//! The build script's decision about the `wasm32-wasip2` target (`host/build_support/`):
//! build when it is installed, install it with the exact rustup command for the active
//! toolchain when rustup can, otherwise fail at once naming that command.

#[path = "../../host/build_support/wasm_target.rs"]
mod wasm_target;

use std::path::Path;

use wasm_target::{TargetPlan, active_toolchain, install_command, installed_in, plan};

const TOOLCHAIN: &str = "1.95.0-x86_64-unknown-linux-gnu";

#[test]
fn an_installed_target_builds_and_a_missing_one_is_installed_or_named() {
    assert_eq!(plan(true, Some(TOOLCHAIN), true), TargetPlan::Ready);
    assert_eq!(plan(true, None, false), TargetPlan::Ready);
    assert_eq!(
        plan(false, Some(TOOLCHAIN), true),
        TargetPlan::Install {
            toolchain: TOOLCHAIN.into(),
            command: "rustup target add --toolchain 1.95.0-x86_64-unknown-linux-gnu wasm32-wasip2"
                .into(),
        }
    );
    let TargetPlan::Fail(m) = plan(false, Some(TOOLCHAIN), false) else {
        panic!("a missing target without rustup must fail");
    };
    assert!(
        m.contains("`rustup target add --toolchain 1.95.0-x86_64-unknown-linux-gnu wasm32-wasip2`"),
        "{m}"
    );
    let TargetPlan::Fail(m) = plan(false, None, true) else {
        panic!("a toolchain rustup does not manage must fail");
    };
    assert!(m.contains("not managed by rustup"), "{m}");
}

#[test]
fn the_active_toolchain_comes_from_rustup_or_its_toolchains_directory() {
    let sysroot = Path::new("/home/u/.rustup/toolchains/1.95.0-x86_64-unknown-linux-gnu");
    assert_eq!(
        active_toolchain(Some("stable-x86_64-unknown-linux-gnu"), sysroot).as_deref(),
        Some("stable-x86_64-unknown-linux-gnu")
    );
    assert_eq!(active_toolchain(None, sysroot).as_deref(), Some(TOOLCHAIN));
    assert_eq!(
        active_toolchain(Some(" "), sysroot).as_deref(),
        Some(TOOLCHAIN)
    );
    assert_eq!(active_toolchain(None, Path::new("/usr")), None);
    assert_eq!(
        install_command("nightly"),
        "rustup target add --toolchain nightly wasm32-wasip2"
    );
}

#[test]
fn the_sysroot_check_looks_for_the_targets_standard_library() {
    let dir = tempfile::tempdir().unwrap();
    assert!(!installed_in(dir.path()));
    std::fs::create_dir_all(dir.path().join("lib/rustlib/wasm32-wasip2")).unwrap();
    assert!(installed_in(dir.path()));
    // This very test binary was built, so its toolchain has the target.
    let out = std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .unwrap();
    let sysroot = String::from_utf8(out.stdout).unwrap();
    assert!(installed_in(Path::new(sysroot.trim())), "{sysroot}");
}
