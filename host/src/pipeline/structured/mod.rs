//! The structured-output ladder's parts (docs/structured-output.md): what a call asks for
//! ([`target`]: `response_format` → schema, host-side validation), which strategy component
//! serves it ([`strategies`]), and the ladder itself ([`ladder`]: prevent → repair →
//! validate → bounded re-ask → 422). `structured_layer` is the pipeline's seam onto it.
//!
//! **Architecture invariant:** validation and the decision to re-ask are host code; a
//! strategy component only prepares the request and repairs text, so no plugin can make
//! the gateway return JSON the caller's schema refuses.

pub(crate) mod ladder;
pub(crate) mod strategies;
pub(crate) mod target;

pub(crate) use strategies::Strategies;
pub(crate) use target::Target;
