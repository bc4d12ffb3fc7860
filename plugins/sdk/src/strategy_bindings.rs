//! The Rust bindings generated from the WIT contract (the crate's `wit/`, world `strategy`) by
//! `wit_bindgen::generate!`, and the `export_strategy!` macro that exports a structured-output
//! strategy component.
//!
//! The shared `types` interface is not generated again: it maps onto [`crate::bindings`]'s,
//! so a strategy's `Capabilities` is the very type a provider declares. Like the other
//! binding sets, the generated records are plain Rust values usable on any target; only the
//! export glue (invoked by `export_strategy!` in a component crate) needs `wasm32`.
#![allow(
    missing_docs,
    unsafe_code,
    clippy::all,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

wit_bindgen::generate!({
    world: "strategy",
    path: "wit",
    with: {
        "polygateway:plugin/types@0.2.0": crate::bindings::polygateway::plugin::types,
    },
    // Component crates export with `polygateway_plugin_sdk::export_strategy!(MyStrategy);`
    // without depending on wit-bindgen themselves.
    pub_export_macro: true,
    export_macro_name: "export_strategy",
    default_bindings_module: "polygateway_plugin_sdk::strategy_bindings",
    additional_derives: [PartialEq, Eq],
});
