//! The Rust bindings generated from the WIT contract (world `provider`) by
//! `wit_bindgen::generate!`, and the `export_provider!` macro that exports a component.
//!
//! All three binding sets read the crate's own `wit/` (`plugins/sdk/wit/`), a copy of the
//! repository's `wit/` kept identical by `tests/e2e/sdk_wit.rs`, so the crate builds wherever
//! it is fetched from (a git checkout, a registry package). After editing `wit/`, refresh it:
//! `rm -r plugins/sdk/wit && cp -r wit plugins/sdk/`.
//!
//! The generated types (records, variants, enums) are plain Rust values that compile and work
//! on any target, so the SDK's logic and its tests use them directly; only the export glue
//! (invoked by `export_provider!` in a component crate) needs `wasm32`.
#![allow(
    missing_docs,
    unsafe_code,
    clippy::all,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

wit_bindgen::generate!({
    world: "provider",
    path: "wit",
    // Component crates export with `polygateway_plugin_sdk::export_provider!(MyProvider);`
    // without depending on wit-bindgen themselves.
    pub_export_macro: true,
    export_macro_name: "export_provider",
    default_bindings_module: "polygateway_plugin_sdk::bindings",
    // Not `Eq`: embedding vectors and OCR boxes are floats.
    additional_derives: [PartialEq],
});
