//! Per-attempt stream parsers (`stream-parser` resources) and the instances they live in.
//!
//! A streamed attempt parses its upstream's events for its whole life, seconds to minutes,
//! with the parser's state (a `<think>` tag split across chunks, a tool call's index) in the
//! guest. Holding a whole instance for that made one instance per concurrent stream: ~80 KiB
//! of resident memory each (the component's data pages, the guest's stack and heap pages,
//! the fiber stack) plus its store, ~40 MiB for 512 streams. The component model lets one
//! instance own many resources, and the contract already keeps every stream's state in its
//! resource (`wit/provider.wit`), so up to [`super::PluginLimits::streams_per_instance`] parsers
//! share one instance here (a [`Host`]); 512 streams need 32 instances at the default of 16.
//!
//! **What sharing trades.** A shared instance is entered by one call at a time: a parser
//! takes its host's lock for one guest call (a few microseconds) and never across an
//! `.await`. A parser whose host is busy spins briefly and then waits off the runtime's
//! worker ([`tokio::task::block_in_place`], as `schedule.rs` does for slow calls), so a
//! guest call that runs long (up to its budget) delays the other parsers of its host, never
//! the runtime. A fault (trap, budget, memory cap) discards the instance and with it every
//! parser on it: the faulting call fails as before, and each other parser's next call fails
//! with [`PluginError::Fault`] saying the instance it shared was discarded. So one stream
//! whose upstream makes the plugin trap ends at most `streams_per_instance − 1` other
//! streams of the same component; `PGW_PLUGIN_STREAMS_PER_INSTANCE=1` gives every stream an
//! instance of its own (its old behaviour: a fault ends only that stream).
//!
//! Hosts are kept per component in a list that grows when every host is full (read without a
//! lock, grown under one); a new parser joins the next host with room, round-robin, so the
//! streams of a busy component spread over all its hosts and two runtime workers rarely want
//! the same one. A host's instance stays for the next parsers when its last parser ends,
//! unless its linear memory grew past [`RETIRE_MEMORY_BYTES`]. A generation number tells a
//! parser that its instance was replaced after a fault: its resource belonged to the old one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use arc_swap::ArcSwap;
use wasmtime::component::ResourceAny;

use super::error::PluginError;
use super::pool::{RETIRE_MEMORY_BYTES, instantiate_fault};
use super::provider::{ProviderComponent, ProviderInstance, WarmProvider};
use super::provider_calls::ProviderCalls;
use super::schedule;
use super::versioned::CallFn;
use super::wire::{ClassifiedError, Delta, SourceInfo, SseEvent};

/// `try_lock` attempts (each after a short spin) before a parser waits for its host off the
/// runtime's worker: a normal guest call takes 1–5 µs, and these attempts cover about 20 µs.
const SPIN_ATTEMPTS: u32 = 64;
/// `spin_loop` hints between two attempts.
const SPINS_PER_ATTEMPT: u32 = 32;

/// The stream parsers' hosts of one provider component.
pub(crate) struct ParserHosts {
    /// Most parsers per host; 1 = parsers do not share (no hosts are made).
    per_instance: usize,
    hosts: ArcSwap<Vec<Arc<Host>>>,
    /// Serialises growing the list (never taken by a parse call).
    grow: Mutex<()>,
    /// Where the next parser's search for room starts.
    next: AtomicUsize,
}

/// One shared instance and the parsers that live in it.
pub(crate) struct Host {
    /// Parsers that joined and have not yet left (reserved before their constructor runs).
    members: AtomicUsize,
    slot: Mutex<Slot>,
}

struct Slot {
    /// The instance; `None` before the first parser and after a fault or a retirement.
    warm: Option<WarmProvider>,
    /// Raised every time the instance is discarded: a parser made in an older generation
    /// holds a resource of a dead instance.
    generation: u64,
}

impl ParserHosts {
    /// No hosts yet; parsers share instances when `per_instance > 1`.
    pub(crate) fn new(per_instance: usize) -> Self {
        Self {
            per_instance,
            hosts: ArcSwap::from_pointee(Vec::new()),
            grow: Mutex::new(()),
            next: AtomicUsize::new(0),
        }
    }

    /// A host with room for one more parser, already counting it; `None` when parsers do not
    /// share instances.
    fn join(&self) -> Option<Member> {
        if self.per_instance <= 1 {
            return None;
        }
        if let Some(m) = self.join_existing(&self.hosts.load()) {
            return Some(m);
        }
        let _grow = self.grow.lock().unwrap_or_else(|p| p.into_inner());
        // Another parser may have grown the list while this one waited.
        let hosts = self.hosts.load_full();
        if let Some(m) = self.join_existing(&hosts) {
            return Some(m);
        }
        let host = Arc::new(Host {
            members: AtomicUsize::new(1),
            slot: Mutex::new(Slot {
                warm: None,
                generation: 0,
            }),
        });
        let mut grown = Vec::with_capacity(hosts.len() + 1);
        grown.extend(hosts.iter().cloned());
        grown.push(host.clone());
        self.hosts.store(Arc::new(grown));
        Some(Member::new(host))
    }

    fn join_existing(&self, hosts: &[Arc<Host>]) -> Option<Member> {
        let n = hosts.len();
        if n == 0 {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        (0..n)
            .map(|i| &hosts[(start + i) % n])
            .find(|h| {
                h.members
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |m| {
                        (m < self.per_instance).then_some(m + 1)
                    })
                    .is_ok()
            })
            .map(|h| Member::new(h.clone()))
    }

    /// Shared instances alive right now (for `/healthz` and tests). Never waits for a guest
    /// call: a host whose lock is held is running one, so it has an instance (or is making
    /// its first).
    pub(crate) fn instances(&self) -> usize {
        self.hosts
            .load()
            .iter()
            .filter(|h| match h.slot.try_lock() {
                Ok(slot) => slot.warm.is_some(),
                Err(TryLockError::WouldBlock) => true,
                Err(TryLockError::Poisoned(p)) => p.into_inner().warm.is_some(),
            })
            .count()
    }

    /// Parsers living in shared instances right now.
    pub(crate) fn parsers(&self) -> usize {
        self.hosts
            .load()
            .iter()
            .map(|h| h.members.load(Ordering::Acquire))
            .sum()
    }
}

impl Host {
    /// The slot, for one guest call: uncontended, a compare-and-swap; contended, a short spin
    /// and then a wait that frees the runtime's worker. A lock poisoned by a panic in a call
    /// discards the instance (its state is whatever the panic left).
    fn lock(&self) -> MutexGuard<'_, Slot> {
        for _ in 0..SPIN_ATTEMPTS {
            match self.slot.try_lock() {
                Ok(g) => return g,
                Err(TryLockError::Poisoned(p)) => return self.recover(p.into_inner()),
                Err(TryLockError::WouldBlock) => {
                    for _ in 0..SPINS_PER_ATTEMPT {
                        std::hint::spin_loop();
                    }
                }
            }
        }
        let wait = || self.slot.lock();
        let locked = if schedule::on_worker_pool() {
            tokio::task::block_in_place(wait)
        } else {
            wait()
        };
        match locked {
            Ok(g) => g,
            Err(p) => self.recover(p.into_inner()),
        }
    }

    fn recover<'a>(&'a self, mut slot: MutexGuard<'a, Slot>) -> MutexGuard<'a, Slot> {
        slot.discard();
        self.slot.clear_poison();
        slot
    }
}

impl Slot {
    fn discard(&mut self) {
        self.warm = None;
        self.generation += 1;
    }
}

/// A parser's place in a host; leaving (or dropping it) frees the place once.
struct Member(Arc<Host>, bool);

impl Member {
    fn new(host: Arc<Host>) -> Self {
        Self(host, true)
    }

    /// Leave the host; true when this was its last member. Called with the host's slot
    /// locked, so two parsers leaving together cannot both miss being the last.
    fn leave(&mut self) -> bool {
        std::mem::take(&mut self.1) && self.0.members.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.leave();
    }
}

/// The per-attempt `stream-parser` resource and the instance it lives in: shared with other
/// parsers of the same component ([`super::PluginLimits::streams_per_instance`] > 1) or its own.
pub struct StreamParser {
    component: Arc<ProviderComponent>,
    place: Place,
    /// `None` once a call faulted (or the instance it lived in was discarded).
    resource: Option<ResourceAny>,
}

enum Place {
    /// An instance of its own, back to the pool when the parser is dropped.
    Own(ProviderInstance),
    /// A shared instance, in the generation the parser was made in.
    Shared { member: Member, generation: u64 },
}

impl StreamParser {
    /// A parser for one streamed attempt to `source`: in a shared instance when the
    /// component's parsers share, else in an instance of its own — `instance` if given (the
    /// caller's checked-out one; it goes back to the pool at once when the parser shares),
    /// else one from the pool.
    ///
    /// Errors: [`PluginError::Fault`] when the constructor (or a new instance's
    /// instantiation) failed.
    pub(crate) fn new(
        component: &Arc<ProviderComponent>,
        instance: Option<ProviderInstance>,
        source: &SourceInfo,
    ) -> Result<Self, PluginError> {
        let component = component.clone();
        let Some(member) = component.parsers().join() else {
            let instance = match instance {
                Some(i) => i,
                None => component.instance()?,
            };
            return Self::own(component, instance, source);
        };
        drop(instance);
        let host = member.0.clone();
        let mut slot = host.lock();
        if slot.warm.is_none() {
            let fresh = component
                .pool()
                .instantiate()
                .map_err(|e| instantiate_fault(&component.info().name, &e))?;
            slot.warm = Some(fresh);
        }
        let resource = shared_call(
            &component,
            &mut slot,
            "stream-parser.constructor",
            source,
            move |store, b, source| b.stream_parser_new(store, source),
        )?;
        let generation = slot.generation;
        drop(slot);
        Ok(Self {
            component,
            place: Place::Shared { member, generation },
            resource: Some(resource),
        })
    }

    fn own(
        component: Arc<ProviderComponent>,
        mut instance: ProviderInstance,
        source: &SourceInfo,
    ) -> Result<Self, PluginError> {
        let resource = instance.call(
            "stream-parser.constructor",
            source,
            move |store, b, source| b.stream_parser_new(store, source),
        )?;
        Ok(Self {
            component,
            place: Place::Own(instance),
            resource: Some(resource),
        })
    }

    /// Parse a batch of SSE events into deltas (`Ok(Err(..))`: the stream carried an error).
    ///
    /// Errors: [`PluginError::Fault`] when the call faulted, or when the instance the parser
    /// lived in was discarded (after its own or, shared, another parser's fault).
    pub fn parse(
        &mut self,
        events: &[SseEvent],
    ) -> Result<Result<Vec<Delta>, ClassifiedError>, PluginError> {
        let Some(res) = self.resource else {
            return Err(self.gone("stream-parser.parse"));
        };
        self.call("stream-parser.parse", events, move |store, b, events| {
            b.stream_parser_parse(store, res, events)
        })
    }

    /// Flush what the parser still holds at the end of the stream.
    ///
    /// Errors: as [`StreamParser::parse`].
    pub fn finish(&mut self) -> Result<Vec<Delta>, PluginError> {
        let Some(res) = self.resource else {
            return Err(self.gone("stream-parser.finish"));
        };
        self.call("stream-parser.finish", &(), move |store, b, _| {
            b.stream_parser_finish(store, res)
        })
    }

    /// One call on the parser's instance; after a fault the parser is unusable.
    fn call<A: ?Sized + Sync, R: Send>(
        &mut self,
        function: &'static str,
        args: &A,
        f: impl CallFn<dyn ProviderCalls, A, R>,
    ) -> Result<R, PluginError> {
        let out = match &mut self.place {
            Place::Own(instance) => instance.call(function, args, f),
            Place::Shared { member, generation } => {
                let mut slot = member.0.lock();
                if slot.generation != *generation {
                    drop(slot);
                    self.resource = None;
                    return Err(self.evicted(function));
                }
                shared_call(&self.component, &mut slot, function, args, f)
            }
        };
        if out.is_err() {
            self.resource = None;
        }
        out
    }

    fn gone(&self, function: &'static str) -> PluginError {
        PluginError::Fault {
            plugin: self.component.info().name.clone(),
            function,
            message: "the parser's instance was discarded after an earlier fault".into(),
        }
    }

    fn evicted(&self, function: &'static str) -> PluginError {
        PluginError::Fault {
            plugin: self.component.info().name.clone(),
            function,
            message: format!(
                "the instance this stream's parser shared was discarded after a fault in another stream's call (PGW_PLUGIN_STREAMS_PER_INSTANCE={} parsers share an instance; 1 isolates every stream)",
                self.component.limits().streams_per_instance
            ),
        }
    }
}

/// One guest call on a shared instance (the slot's lock held); a fault discards it.
fn shared_call<A: ?Sized + Sync, R: Send>(
    component: &ProviderComponent,
    slot: &mut Slot,
    function: &'static str,
    args: &A,
    f: impl CallFn<dyn ProviderCalls, A, R>,
) -> Result<R, PluginError> {
    let Some(warm) = slot.warm.as_mut() else {
        return Err(PluginError::Fault {
            plugin: component.info().name.clone(),
            function,
            message: "instance already discarded".into(),
        });
    };
    match warm.call::<dyn ProviderCalls, _, _>(component.pool().limits(), args, f) {
        Ok(r) => Ok(r),
        Err(e) => {
            slot.discard();
            Err(component.pool().fault(&component.info().name, function, &e))
        }
    }
}

impl Drop for StreamParser {
    fn drop(&mut self) {
        let Some(res) = self.resource.take() else {
            return;
        };
        // Dropping the guest resource runs guest code; on failure the instance is discarded
        // (an own one instead of going back to the pool).
        match &mut self.place {
            Place::Own(instance) => {
                let _ = instance.call("stream-parser.drop", &(), move |store, _, _| {
                    drop_resource(store, res)
                });
            }
            Place::Shared { member, generation } => {
                let host = member.0.clone();
                let mut slot = host.lock();
                if slot.generation != *generation {
                    // A resource of a discarded instance: nothing to drop in the guest.
                    member.leave();
                    return;
                }
                let _ = shared_call(
                    &self.component,
                    &mut slot,
                    "stream-parser.drop",
                    &(),
                    move |store, _, _| drop_resource(store, res),
                );
                // The last parser out retires an instance that grew large (a huge event),
                // as the pool does with the instances it gets back.
                let last = member.leave();
                if last
                    && slot
                        .warm
                        .as_ref()
                        .is_some_and(|w| w.memory_high_water() > RETIRE_MEMORY_BYTES)
                {
                    slot.discard();
                }
            }
        }
    }
}

/// The guest call that drops a `stream-parser` resource.
fn drop_resource(
    store: &mut wasmtime::Store<super::state::HostState>,
    res: ResourceAny,
) -> schedule::GuestFuture<'_, ()> {
    Box::pin(async move { res.resource_drop_async(store).await })
}
