//! The generated bindings of the plugin worlds — `provider`, `selector` and `strategy` — once
//! per contract version the host loads: `v0_2` from `wit/` (the current contract) and `v0_1`
//! from `wit-frozen/0.1.0/` (frozen: never edited, so a 0.1 component keeps linking exactly
//! as it did). Exports are generated async: a guest call is a future whose guest code runs on
//! its own fiber, so it can yield when its slice is spent (see `schedule.rs`).
//!
//! The host works in 0.2 types only; `v0_1.rs` converts at the boundary of a 0.1 instance.
//! Nothing outside `plugin/` sees these types; `wire.rs`, `selector.rs` and `strategy.rs`
//! re-export the curated ones.

use wasmtime::Store;

use super::pool::World;
use super::schedule::GuestFuture;
use super::state::HostState;

/// `polygateway:plugin@0.2.0`, the current contract (`wit/`).
pub(crate) mod v0_2 {
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
}

/// `polygateway:plugin@0.1.0`, frozen (`wit-frozen/0.1.0/`).
pub(crate) mod v0_1 {
    #[allow(missing_docs, clippy::all)]
    pub(crate) mod provider {
        wasmtime::component::bindgen!({
            path: "../wit-frozen/0.1.0",
            world: "provider",
            exports: { default: async },
        });
    }

    #[allow(missing_docs, clippy::all)]
    pub(crate) mod selector {
        wasmtime::component::bindgen!({
            path: "../wit-frozen/0.1.0",
            world: "selector",
            exports: { default: async },
        });
    }

    #[allow(missing_docs, clippy::all)]
    pub(crate) mod strategy {
        wasmtime::component::bindgen!({
            path: "../wit-frozen/0.1.0",
            world: "strategy",
            exports: { default: async },
        });
    }
}

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

world!(
    v0_2::provider::Provider,
    v0_2::provider::ProviderPre<HostState>
);
world!(
    v0_2::selector::Selector,
    v0_2::selector::SelectorPre<HostState>
);
world!(
    v0_2::strategy::Strategy,
    v0_2::strategy::StrategyPre<HostState>
);
world!(
    v0_1::provider::Provider,
    v0_1::provider::ProviderPre<HostState>
);
world!(
    v0_1::selector::Selector,
    v0_1::selector::SelectorPre<HostState>
);
world!(
    v0_1::strategy::Strategy,
    v0_1::strategy::StrategyPre<HostState>
);
