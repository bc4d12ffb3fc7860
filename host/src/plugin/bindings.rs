//! The generated bindings of the three plugin worlds of `wit/` — `provider`, `selector` and
//! `strategy` — in one place. Exports are generated async: a guest call is a future whose
//! guest code runs on its own fiber, so it can yield when its slice is spent (see
//! `schedule.rs`). Nothing outside `plugin/` sees these types; `wire.rs`, `selector.rs` and
//! `strategy.rs` re-export the curated ones.

#[allow(missing_docs, clippy::all)]
pub(crate) mod provider {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "provider",
        exports: { default: async },
    });
}

#[allow(missing_docs, clippy::all)]
pub(crate) mod selector {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "selector",
        exports: { default: async },
    });
}

#[allow(missing_docs, clippy::all)]
pub(crate) mod strategy {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "strategy",
        exports: { default: async },
    });
}

use wasmtime::Store;

use super::pool::World;
use super::schedule::GuestFuture;
use super::state::HostState;

/// `World` for a generated world: instantiation is its `…Pre::instantiate_async`.
macro_rules! world {
    ($bindings:ty, $pre:ty) => {
        impl World for $bindings {
            type Pre = $pre;

            fn instantiate<'a>(
                pre: &'a Self::Pre,
                store: &'a mut Store<HostState>,
            ) -> GuestFuture<'a, Self> {
                Box::pin(pre.instantiate_async(store))
            }
        }
    };
}

world!(provider::Provider, provider::ProviderPre<HostState>);
world!(selector::Selector, selector::SelectorPre<HostState>);
world!(strategy::Strategy, strategy::StrategyPre<HostState>);
