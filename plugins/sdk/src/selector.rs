//! The [`Selector`] trait — a source selector described by a name and one pure `choose`
//! function — its blanket implementation of the generated `source-selector` exports, and
//! small helpers for writing one: [`available`], [`weight_of`] and the deterministic
//! [`SplitMix64`] generator (selectors get no randomness but the host's `seed`).

use crate::{CONTRACT_VERSION, SelectorCandidate as Candidate, SelectorGuest, SelectorInfo};

/// A source selector. Implement [`Selector::NAME`] and [`Selector::choose`]; any
/// `S: Selector` implements the WIT exports ([`SelectorGuest`]), so a component is exported
/// with `polygateway_plugin_sdk::export_selector!(S);`.
///
/// `choose` must be a pure function of its arguments (no clock, no I/O, no global state, no
/// `wasi:random`): the same candidates and seed give the same answer.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{Selector, SelectorCandidate, available};
///
/// /// Always the first available source.
/// struct First;
///
/// impl Selector for First {
///     const NAME: &'static str = "first";
///
///     fn choose(candidates: &[SelectorCandidate], _seed: u64) -> Option<u32> {
///         available(candidates).next().map(|c| c.index)
///     }
/// }
/// // In the component crate (wasm32 only):
/// // polygateway_plugin_sdk::export_selector!(First);
///
/// let info = First::describe();
/// assert_eq!((info.name.as_str(), info.contract_version.as_str()), ("first", "0.2.0"));
/// ```
pub trait Selector: 'static {
    /// Short stable name returned by `describe`, e.g. `round-robin`.
    ///
    /// # Example
    /// See the trait's example.
    const NAME: &'static str;

    /// `describe`: [`Selector::NAME`] and [`CONTRACT_VERSION`].
    ///
    /// # Example
    /// See the trait's example.
    fn describe() -> SelectorInfo {
        SelectorInfo {
            name: Self::NAME.to_owned(),
            contract_version: CONTRACT_VERSION.to_owned(),
        }
    }

    /// `choose`: the `index` of the candidate the next attempt goes to, or `None` when no
    /// candidate is available. Must never answer an unavailable or unknown index (the host
    /// overrides such an answer with the first available candidate and logs a warning).
    /// `candidates` are in ascending `index` order; `seed` is the host's per-call seed (a
    /// per-scope counter: mix it before using it as randomness, e.g. with [`SplitMix64`]).
    ///
    /// # Example
    /// See the trait's example.
    fn choose(candidates: &[Candidate], seed: u64) -> Option<u32>;
}

impl<S: Selector> SelectorGuest for S {
    fn describe() -> SelectorInfo {
        <S as Selector>::describe()
    }

    fn choose(candidates: Vec<Candidate>, seed: u64) -> Option<u32> {
        <S as Selector>::choose(&candidates, seed)
    }
}

/// The available candidates, in the order given (ascending `index`).
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{SelectorCandidate, available};
///
/// let c = |index, available| SelectorCandidate { index, name: format!("s{index}"), weight: 1,
///     in_flight: 0, success_ewma: 1.0, latency_ewma_ms: 0.0, available,
///     cooldown_remaining_ms: 0, previous: false };
/// let all = [c(0, false), c(1, true), c(2, true)];
/// let indexes: Vec<u32> = available(&all).map(|c| c.index).collect();
/// assert_eq!(indexes, [1, 2]);
/// ```
pub fn available(candidates: &[Candidate]) -> impl Iterator<Item = &Candidate> {
    candidates.iter().filter(|c| c.available)
}

/// A candidate's weight as the first-party selectors use it: the configured `weight`, with
/// 0 treated as 1 (a unitless ratio, ≥ 1).
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::{SelectorCandidate, weight_of};
///
/// let mut c = SelectorCandidate { index: 0, name: "a".into(), weight: 0, in_flight: 0,
///     success_ewma: 1.0, latency_ewma_ms: 0.0, available: true, cooldown_remaining_ms: 0,
///     previous: false };
/// assert_eq!(weight_of(&c), 1);
/// c.weight = 3;
/// assert_eq!(weight_of(&c), 3);
/// ```
pub fn weight_of(candidate: &Candidate) -> u32 {
    candidate.weight.max(1)
}

/// The splitmix64 generator (Steele, Lea & Flood 2014): a tiny, fast, deterministic PRNG
/// whose first output already mixes its seed well, so consecutive host seeds (a counter)
/// give unrelated streams. Not cryptographic.
///
/// # Example
/// ```
/// use polygateway_plugin_sdk::SplitMix64;
///
/// let mut a = SplitMix64::new(7);
/// let mut b = SplitMix64::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert!(a.below(10) < 10);
/// let x = a.unit_f64();
/// assert!((0.0..1.0).contains(&x));
/// ```
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed` (typically the `seed` argument of `choose`).
    ///
    /// # Example
    /// See [`SplitMix64`].
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 uniformly distributed bits.
    ///
    /// # Example
    /// ```
    /// // The reference splitmix64 sequence for seed 0.
    /// let mut r = polygateway_plugin_sdk::SplitMix64::new(0);
    /// assert_eq!(r.next_u64(), 0xE220A8397B1DCDAF);
    /// ```
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (multiply-high reduction; bias below 2⁻³² for the small
    /// `n` of a source list). Returns 0 when `n` is 0.
    ///
    /// # Example
    /// ```
    /// let mut r = polygateway_plugin_sdk::SplitMix64::new(1);
    /// assert!((0..1000).all(|_| r.below(3) < 3));
    /// assert_eq!(r.below(0), 0);
    /// ```
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform float in `[0.0, 1.0)` (53 random bits).
    ///
    /// # Example
    /// See [`SplitMix64`].
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}
