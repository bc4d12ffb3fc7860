//! Building a future in the heap allocation it will stay in: the one helper every layer that
//! keeps a large or short-lived future out of its own state uses. Imports nothing else of
//! the pipeline, so any of its files may use it.

/// The future `make` returns, in a heap allocation made before `make` runs. `Box::pin(make())`
/// builds it on the stack and copies it into the box — the whole size of the type, though a
/// future that has not started holds little more than its arguments; allocating first lets
/// an optimised build construct it where it will stay.
///
/// Also what keeps a large future that runs only part of a call (the upstream request's
/// send; the rest of the stack under the structured-output ladder, which would otherwise be
/// held beside the ladder's own state) out of the futures that await it: an `async fn` is as
/// large as its largest await, held for the whole call. Boxed, that part costs one
/// allocation while it runs, and a streamed call's state while it waits between deltas —
/// held 512 times under 512 streams — does not include it.
pub(crate) fn boxed_in_place<F: Future>(make: impl FnOnce() -> F) -> std::pin::Pin<Box<F>> {
    let slot = Box::<F>::new_uninit();
    Box::into_pin(Box::write(slot, make()))
}
