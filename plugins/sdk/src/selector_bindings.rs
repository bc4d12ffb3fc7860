//! The Rust bindings generated from the WIT contract (the crate's `wit/`, world `selector`) by
//! `wit_bindgen::generate!`, and the `export_selector!` macro that exports a selector
//! component.
//!
//! Like [`crate::bindings`], the generated records are plain Rust values usable on any
//! target; only the export glue (invoked by `export_selector!` in a component crate) needs
//! `wasm32`.
#![allow(
    missing_docs,
    unsafe_code,
    clippy::all,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

wit_bindgen::generate!({
    world: "selector",
    path: "wit",
    // Component crates export with `polygateway_plugin_sdk::export_selector!(MySelector);`
    // without depending on wit-bindgen themselves.
    pub_export_macro: true,
    export_macro_name: "export_selector",
    default_bindings_module: "polygateway_plugin_sdk::selector_bindings",
    // `candidate` carries `f64`s: `PartialEq` only.
    additional_derives: [PartialEq],
});
