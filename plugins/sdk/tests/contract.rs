//! The SDK's contract constant and generated exports agree with the WIT files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use polygateway_plugin_sdk::CONTRACT_VERSION;

#[test]
fn contract_version_is_the_wit_package_version() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wit");
    for file in ["types.wit", "provider.wit"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let package = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("package "))
            .unwrap();
        assert_eq!(
            package,
            format!("polygateway:plugin@{CONTRACT_VERSION};"),
            "{file}"
        );
    }
}
