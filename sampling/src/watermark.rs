//! A greenlist watermark (Kirchenbauer et al. 2023, "A Watermark for Large Language
//! Models") and its detector.
//!
//! - [`WatermarkParams`]: the decoding side, [`SamplingParams::watermark`]: a secret
//!   [`WatermarkKey`], the green fraction γ, the bias δ, the context width h and the
//!   [`Seeding`] scheme.
//! - [`Greenlist`]: the keyed function both sides share: which tokens are green after a
//!   given context. It needs only the key, γ, h and the scheme (no model, no δ), so text can
//!   be audited with the key and the tokenizer alone.
//! - [`Greenlist::detect`] → [`Detection`]: the z-test over a token sequence.
//!
//! # The scheme
//!
//! At each decode step the last `h` tokens of the history (prompt and output, forced tokens
//! included) give a *seed*; each token of the vocabulary is then green, independently, with
//! probability γ, as a pseudorandom function of (key, seed, token). The sampler adds δ to
//! the logit of every green token that the grammar allows, between the mask and the
//! temperature ([stage 4](crate#the-pipeline)). With `V` tokens allowed, `G` of them green,
//! and a flat distribution, a green token is drawn with probability
//! `γe^δ / (γe^δ + 1 − γ)` (0.711 at γ = 0.25, δ = 2): text made so holds many more green
//! tokens than the γ any text made without the key holds.
//!
//! The detector re-derives every seed from the text's own tokens, counts the `green` tokens
//! among the `T` it scores, and computes
//!
//! ```text
//! z = (green − γT) / √(T γ (1 − γ)),        p = P(N(0, 1) ≥ z)
//! ```
//!
//! Without the key, each scored token is green with probability γ independently, so `z` is
//! approximately standard normal; the default threshold `z = 4` has a false-positive rate of
//! about 3·10⁻⁵ per text.
//!
//! # The pseudorandom function
//!
//! Everything is defined here, with no other library's random number generator, so that the
//! greenlists never change under a dependency update (a test pins them):
//!
//! 1. **Key**: the key text's UTF-8 bytes `K` give the 128-bit SipHash key
//!    `(k₀, k₁) = (SipHash-2-4₀(D ‖ 0x00 ‖ K), SipHash-2-4₀(D ‖ 0x01 ‖ K))`, where
//!    `SipHash-2-4₀` is SipHash-2-4 under the all-zero key and `D` is the ASCII text
//!    `stencil watermark v1`.
//! 2. **Seed** of a context `c₁ … c_h` (oldest first), each token as 4 little-endian bytes:
//!    - [`Seeding::LeftHash`]: `s = SipHash-2-4_(k₀,k₁)(c₁ ‖ … ‖ c_h)`.
//!    - [`Seeding::MinHash`]: `s = min_j SipHash-2-4_(k₀,k₁)(c_j)`.
//!
//!    With `h = 0` both are `SipHash-2-4_(k₀,k₁)` of the empty message: one fixed greenlist.
//! 3. **Green**: token `t` is green after seed `s` iff `u < ⌊γ · 2⁶⁴⌋`, where
//!    `u = mix(s + (t + 1) · 0x9E3779B97F4A7C15)` (wrapping) is the `(t + 1)`-th output of
//!    SplitMix64 started at state `s` (`mix` is SplitMix64's finalizer:
//!    `z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
//!    z ^= z >> 31`).
//!
//! SipHash-2-4 is a keyed PRF, so the seeds reveal nothing of the key; one SipHash per step
//! (per scored token in the detector), and one SplitMix64 output per allowed token: 2–6 ns
//! each, so 0.1–0.3 ms a step over SmolLM2's 49,152 tokens without a grammar (measured on
//! one core; a CPU forward pass of that model takes 10–20 ms). Unlike the paper, which
//! permutes the vocabulary and takes the first γ|V| tokens, each token is green on its own:
//! the greenlist's size varies a little (binomially) from step to step, and a token's
//! colour costs one hash, not a permutation of the vocabulary.
//!
//! # The context width h
//!
//! - `h = 1` (default): the previous token, as in the paper's main experiments.
//! - Larger `h`: more distinct seeds, so the greenlists are harder to learn from watermarked
//!   outputs (a spoofing attack needs token statistics per context), but one edited token
//!   changes the seeds of the `h` tokens after it as well as its own colour: less robust to
//!   paraphrase. [`Seeding::MinHash`] softens that: the seed is that of one token of the
//!   window (the one with the smallest hash), so an edit changes it only when it touches
//!   that token, and it does not depend on the window's order.
//! - `h = 0`: one greenlist for the whole text (Zhao et al. 2023, "Provable Robust
//!   Watermarking"): the most robust to edits, the easiest to learn. Each distinct token is
//!   then scored once, and the z-test's null holds over keys: one key's greenlist holds
//!   about, not exactly, γ|V| tokens (binomially: ±96 of 12,288 at γ = 0.25 on SmolLM2), so
//!   for one key the z of unwatermarked text is off by a little.
//!
//! The first `h` tokens of a text have no full context in the text, so the detector does
//! not score them (during generation their seeds come from the prompt, which the detector
//! does not see); a step whose history is shorter than `h` is not biased.
//!
//! # What the detector scores
//!
//! A token is scored only if its (seed, token) pair has not been scored before in the same
//! text: a repeated n-gram has the same colour every time, so counting it again would break
//! the independence the z-test assumes (the paper's recommendation; for
//! [`Seeding::LeftHash`] a seed stands for its context, so this is the (context, token)
//! pair). Everything else is scored — the detector sees text only.
//!
//! **Forced tokens.** Tokens the grammar forced (fast-forwarded, or the single allowed token
//! of a step) were not sampled, so the bias did not act on them: they are green with
//! probability γ, like unwatermarked tokens. From the text alone the detector cannot tell
//! them apart, so they count as scored tokens and dilute the signal: with `S` sampled tokens
//! of green rate `q` and `F` forced ones, `E[z] ≈ S(q − γ) / √((S + F) γ(1 − γ))`, smaller
//! by `√(S / (S + F))` than with the sampled tokens alone. Where the positions are known (the
//! generation's tokens with their log-probabilities, or a grammar replayed over the text),
//! [`Greenlist::detect_where`] leaves them out. So do repeats: a schema's keys, forced in
//! every record, are scored once per text.
//!
//! **Tokenization.** A text is re-tokenized canonically; a generation that took another
//! split of the same text (grammars often do) loses the signal of the tokens that differ.
//!
//! # Example
//!
//! ```
//! use stencil_sampling::{Sampler, SamplingParams, TokenHistory, WatermarkKey, WatermarkParams};
//!
//! // A flat "model" over 1,000 tokens, sampled with a watermark.
//! let watermark = WatermarkParams::new(WatermarkKey::new("secret"));
//! let params = SamplingParams { seed: Some(7), watermark: Some(watermark.clone()), ..Default::default() };
//! let mut sampler = Sampler::new(params)?;
//! let mut history = TokenHistory::with_prompt(&[0]);
//! for _ in 0..200 {
//!     let token = sampler.sample(&[0.0; 1000], None, &history)?;
//!     history.push(token);
//! }
//!
//! // The detector needs the key (and γ, h, the scheme), not the model.
//! let detection = watermark.greenlist()?.detect(history.output());
//! assert!(detection.green_fraction > 0.6 && detection.z > 4.0, "{detection:?}");
//!
//! // Another key sees nothing.
//! let other = WatermarkParams::new(WatermarkKey::new("guess")).greenlist()?;
//! assert!(other.detect(history.output()).z < 4.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`SamplingParams::watermark`]: crate::SamplingParams::watermark

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::SamplingError;

/// The default green fraction γ.
pub const DEFAULT_GAMMA: f64 = 0.25;
/// The default bias δ.
pub const DEFAULT_DELTA: f32 = 2.0;
/// The default context width h: the previous token.
pub const DEFAULT_CONTEXT_WIDTH: u32 = 1;
/// The largest context width accepted.
pub const MAX_CONTEXT_WIDTH: u32 = 64;
/// The default detection threshold on the z-score (a one-sided p-value of about 3·10⁻⁵).
pub const DEFAULT_THRESHOLD: f64 = 4.0;
/// What a [`WatermarkKey`] shows in serialized records and in `Debug` output.
pub const REDACTED: &str = "<redacted>";

/// The domain-separation prefix of the key derivation (see the [module docs](self)).
const DOMAIN: &[u8] = b"stencil watermark v1";
/// SplitMix64's increment (2⁶⁴ / φ).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The secret key of a watermark: any non-empty text.
///
/// It never shows: `Debug` prints `WatermarkKey(<redacted>)`, and it serializes as
/// `"<redacted>"` (so generation records and logs do not hold it). No fingerprint is
/// shown either: a deterministic digest of a guessable key would let anyone holding a log
/// test guesses offline. It deserializes from the key text.
///
/// # Example
///
/// ```
/// use stencil_sampling::WatermarkKey;
///
/// let key = WatermarkKey::new("hunter2");
/// assert_eq!(format!("{key:?}"), "WatermarkKey(<redacted>)");
/// assert_eq!(serde_json::to_string(&key)?, r#""<redacted>""#);
/// let read: WatermarkKey = serde_json::from_str(r#""hunter2""#)?;
/// assert_eq!(read, key);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct WatermarkKey(String);

impl WatermarkKey {
    /// A key from its text.
    pub fn new(key: impl Into<String>) -> WatermarkKey {
        WatermarkKey(key.into())
    }

    /// Whether the key is the empty text (which [`WatermarkParams::validate`] rejects).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The 128-bit SipHash key derived from the key text.
    fn sip_key(&self) -> (u64, u64) {
        let derive = |i: u8| {
            let mut message = Vec::with_capacity(DOMAIN.len() + 1 + self.0.len());
            message.extend_from_slice(DOMAIN);
            message.push(i);
            message.extend_from_slice(self.0.as_bytes());
            siphash24((0, 0), &message)
        };
        (derive(0), derive(1))
    }
}

impl fmt::Debug for WatermarkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WatermarkKey({REDACTED})")
    }
}

impl Serialize for WatermarkKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

impl<'de> Deserialize<'de> for WatermarkKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(WatermarkKey)
    }
}

/// How the context tokens make a step's seed (see the [module docs](self#the-pseudorandom-function)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Seeding {
    /// The keyed hash of the whole context, in order (the paper's "LeftHash"; with `h = 1`,
    /// its scheme). The default.
    #[default]
    LeftHash,
    /// The smallest keyed hash of the context's tokens (Kirchenbauer et al. 2023b, "On the
    /// Reliability of Watermarks"): with `h > 1`, an edit changes the seed only when it
    /// touches the minimizing token, and the window's order does not matter.
    MinHash,
}

/// The watermark of one request: [`SamplingParams::watermark`](crate::SamplingParams::watermark).
///
/// In serialized form (JSON, TOML) `key` is required and the others are optional, with their
/// defaults; unknown fields are an error. The key serializes as `"<redacted>"`.
///
/// # Example
///
/// ```
/// use stencil_sampling::{Seeding, WatermarkKey, WatermarkParams};
///
/// let params: WatermarkParams = serde_json::from_str(r#"{"key": "k", "delta": 4.0}"#)?;
/// assert_eq!(params, WatermarkParams { delta: 4.0, ..WatermarkParams::new(WatermarkKey::new("k")) });
/// assert_eq!((params.gamma, params.context_width, params.seeding), (0.25, 1, Seeding::LeftHash));
/// params.validate()?;
/// assert!(!serde_json::to_string(&params)?.contains(r#""k""#));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatermarkParams {
    /// The secret key. Must not be empty (nor the redaction placeholder `<redacted>`, so that
    /// parameters read back from a record do not silently watermark with it).
    pub key: WatermarkKey,
    /// The green fraction γ: each token is green with probability γ after each context.
    /// Default 0.25; must be in `(0, 1)`. A small γ gives a stronger z-score per green token
    /// but a stronger bias on the text.
    #[serde(default = "default_gamma")]
    pub gamma: f64,
    /// The bias δ added to the logit of every green allowed token (before the temperature, so
    /// a temperature `T` makes it `δ / T` on the probabilities). Default 2.0; must be finite
    /// and `>= 0` (0 marks nothing).
    #[serde(default = "default_delta")]
    pub delta: f32,
    /// The context width h: how many previous tokens seed the greenlist. Default 1 (the
    /// previous token); 0 is one fixed greenlist; at most [`MAX_CONTEXT_WIDTH`]. See the
    /// [module docs](self#the-context-width-h).
    #[serde(default = "default_context_width")]
    pub context_width: u32,
    /// How the context makes the seed. Default [`Seeding::LeftHash`].
    #[serde(default)]
    pub seeding: Seeding,
}

fn default_gamma() -> f64 {
    DEFAULT_GAMMA
}

fn default_delta() -> f32 {
    DEFAULT_DELTA
}

fn default_context_width() -> u32 {
    DEFAULT_CONTEXT_WIDTH
}

impl WatermarkParams {
    /// A watermark with `key` and every other parameter at its default.
    pub fn new(key: WatermarkKey) -> WatermarkParams {
        WatermarkParams {
            key,
            gamma: DEFAULT_GAMMA,
            delta: DEFAULT_DELTA,
            context_width: DEFAULT_CONTEXT_WIDTH,
            seeding: Seeding::default(),
        }
    }

    /// Checks every field's range.
    ///
    /// # Errors
    ///
    /// [`SamplingError::InvalidParam`] naming the field (`watermark.key`, `watermark.gamma`,
    /// …); the key's value is never shown.
    ///
    /// # Example
    ///
    /// ```
    /// use stencil_sampling::{WatermarkKey, WatermarkParams};
    ///
    /// let params = WatermarkParams { gamma: 1.0, ..WatermarkParams::new(WatermarkKey::new("k")) };
    /// assert_eq!(
    ///     params.validate().unwrap_err().to_string(),
    ///     "invalid sampling parameter `watermark.gamma` = 1: expected 0 < gamma < 1"
    /// );
    /// ```
    pub fn validate(&self) -> Result<(), SamplingError> {
        if self.key.is_empty() {
            return Err(SamplingError::invalid("watermark.key", "\"\"", "expected a non-empty key"));
        }
        if self.key.0 == REDACTED {
            return Err(SamplingError::invalid(
                "watermark.key",
                REDACTED,
                "expected the key itself, not the placeholder records show",
            ));
        }
        check_gamma(self.gamma)?;
        if !(self.delta.is_finite() && self.delta >= 0.0) {
            return Err(SamplingError::invalid("watermark.delta", self.delta, "expected a finite delta >= 0"));
        }
        check_context_width(self.context_width)
    }

    /// The greenlist these parameters bias toward (δ plays no part in it).
    ///
    /// # Errors
    ///
    /// As [`Greenlist::new`].
    pub fn greenlist(&self) -> Result<Greenlist, SamplingError> {
        Greenlist::new(&self.key, self.gamma, self.context_width, self.seeding)
    }
}

fn check_gamma(gamma: f64) -> Result<(), SamplingError> {
    if gamma > 0.0 && gamma < 1.0 {
        Ok(())
    } else {
        Err(SamplingError::invalid("watermark.gamma", gamma, "expected 0 < gamma < 1"))
    }
}

fn check_context_width(h: u32) -> Result<(), SamplingError> {
    if h <= MAX_CONTEXT_WIDTH {
        Ok(())
    } else {
        Err(SamplingError::invalid("watermark.context_width", h, "expected a context width <= 64"))
    }
}

/// The keyed greenlists: which tokens are green after which context. Shared by the sampler
/// (which biases them) and the detector (which counts them).
///
/// `Debug` shows γ, h and the scheme, never the key.
///
/// # Example
///
/// ```
/// use stencil_sampling::{Greenlist, Seeding, WatermarkKey};
///
/// let greenlist = Greenlist::new(&WatermarkKey::new("k"), 0.25, 1, Seeding::LeftHash)?;
/// let seed = greenlist.seed(&[17, 42]).unwrap(); // after token 42 (h = 1)
/// let green = (0..10_000).filter(|&t| greenlist.is_green(seed, t)).count();
/// assert!((2300..2700).contains(&green), "{green}");
/// assert_eq!(greenlist.seed(&[]), None); // no context yet
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Greenlist {
    sip_key: (u64, u64),
    threshold: u64,
    gamma: f64,
    context_width: usize,
    seeding: Seeding,
}

impl fmt::Debug for Greenlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Greenlist")
            .field("key", &REDACTED)
            .field("gamma", &self.gamma)
            .field("context_width", &self.context_width)
            .field("seeding", &self.seeding)
            .finish()
    }
}

impl Greenlist {
    /// The greenlists of `key` with green fraction `gamma`, context width `context_width` and
    /// `seeding`.
    ///
    /// # Errors
    ///
    /// [`SamplingError::InvalidParam`] for an empty key, `gamma` outside `(0, 1)` or a
    /// context width above [`MAX_CONTEXT_WIDTH`].
    pub fn new(
        key: &WatermarkKey,
        gamma: f64,
        context_width: u32,
        seeding: Seeding,
    ) -> Result<Greenlist, SamplingError> {
        if key.is_empty() {
            return Err(SamplingError::invalid("watermark.key", "\"\"", "expected a non-empty key"));
        }
        check_gamma(gamma)?;
        check_context_width(context_width)?;
        // In (0, 2⁶⁴): the cast saturates only for gamma within 2⁻⁵³ of 1.
        let threshold = (gamma * 2f64.powi(64)) as u64;
        Ok(Greenlist { sip_key: key.sip_key(), threshold, gamma, context_width: context_width as usize, seeding })
    }

    /// The green fraction γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// The context width h.
    pub fn context_width(&self) -> usize {
        self.context_width
    }

    /// The seeding scheme.
    pub fn seeding(&self) -> Seeding {
        self.seeding
    }

    /// The seed of the step after `context` (the tokens so far; only the last h count), or
    /// `None` when `context` holds fewer than h tokens.
    pub fn seed(&self, context: &[u32]) -> Option<u64> {
        let h = self.context_width;
        let window = context.get(context.len().checked_sub(h)?..)?;
        Some(match self.seeding {
            Seeding::LeftHash => {
                let mut message = [0u8; 4 * MAX_CONTEXT_WIDTH as usize];
                for (bytes, token) in message.chunks_exact_mut(4).zip(window) {
                    bytes.copy_from_slice(&token.to_le_bytes());
                }
                siphash24(self.sip_key, &message[..4 * h])
            }
            Seeding::MinHash => window
                .iter()
                .map(|t| siphash24(self.sip_key, &t.to_le_bytes()))
                .min()
                .unwrap_or_else(|| siphash24(self.sip_key, &[])),
        })
    }

    /// Whether `token` is green after a context whose [`seed`](Greenlist::seed) is `seed`.
    #[inline]
    pub fn is_green(&self, seed: u64, token: u32) -> bool {
        splitmix64(seed.wrapping_add((u64::from(token) + 1).wrapping_mul(GOLDEN))) < self.threshold
    }

    /// The z-test over `tokens`, a text's tokens (the model's tokenizer on the text, or a
    /// generation's tokens): every token from the (h+1)-th on is scored, except repeats of
    /// a (seed, token) pair already scored (see the [module docs](self#what-the-detector-scores)).
    ///
    /// # Example
    ///
    /// ```
    /// use stencil_sampling::{Greenlist, Seeding, WatermarkKey};
    ///
    /// let greenlist = Greenlist::new(&WatermarkKey::new("k"), 0.25, 1, Seeding::LeftHash)?;
    /// let d = greenlist.detect(&[5, 6, 5, 6, 5, 6, 7]);
    /// // (5,6) and (6,5) repeat: 3 pairs scored out of 6 with a context.
    /// assert_eq!((d.tokens, d.scored, d.repeated), (7, 3, 3));
    /// assert!(d.p_value > 0.0 && d.p_value <= 1.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detect(&self, tokens: &[u32]) -> Detection {
        self.detect_where(tokens, |_| true)
    }

    /// [`detect`](Greenlist::detect), scoring only the positions `i` where `score(i)` is true
    /// (the others still serve as context): e.g. only a generation's sampled tokens, leaving
    /// out those the grammar forced.
    ///
    /// # Example
    ///
    /// ```
    /// use stencil_sampling::{Greenlist, Seeding, WatermarkKey};
    ///
    /// let greenlist = Greenlist::new(&WatermarkKey::new("k"), 0.5, 1, Seeding::LeftHash)?;
    /// let tokens = [1, 2, 3, 4, 5];
    /// let forced = [false, false, true, true, false];
    /// let d = greenlist.detect_where(&tokens, |i| !forced[i]);
    /// assert_eq!((d.scored, d.skipped), (2, 2)); // positions 1 and 4; 0 has no context
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detect_where(&self, tokens: &[u32], mut score: impl FnMut(usize) -> bool) -> Detection {
        let mut seen = HashSet::new();
        let (mut scored, mut green, mut repeated, mut skipped) = (0, 0, 0, 0);
        for i in self.context_width.min(tokens.len())..tokens.len() {
            if !score(i) {
                skipped += 1;
                continue;
            }
            let Some(seed) = self.seed(&tokens[..i]) else { continue };
            if !seen.insert((seed, tokens[i])) {
                repeated += 1;
                continue;
            }
            scored += 1;
            green += usize::from(self.is_green(seed, tokens[i]));
        }
        Detection::from_counts(tokens.len(), scored, green, repeated, skipped, self.gamma)
    }
}

/// The result of the z-test over one text.
///
/// With nothing scored, `green_fraction` and `z` are 0 and `p_value` is 1.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Detection {
    /// The tokens of the text.
    pub tokens: usize,
    /// The tokens scored: those with a full context, neither repeated nor skipped.
    pub scored: usize,
    /// Tokens not scored because their (seed, token) pair was scored before.
    pub repeated: usize,
    /// Tokens left out by [`Greenlist::detect_where`]'s `score` (0 for [`Greenlist::detect`]).
    pub skipped: usize,
    /// The green tokens among those scored.
    pub green: usize,
    /// `green / scored`.
    pub green_fraction: f64,
    /// `(green − γT) / √(Tγ(1 − γ))`, `T` the tokens scored.
    pub z: f64,
    /// The one-sided p-value `P(N(0, 1) ≥ z)` ([`normal_tail`]): how likely so many green
    /// tokens are in a text made without the key.
    pub p_value: f64,
}

impl Detection {
    /// The detection from its counts, for a green fraction `gamma`.
    ///
    /// # Example
    ///
    /// ```
    /// use stencil_sampling::Detection;
    ///
    /// let d = Detection::from_counts(200, 192, 100, 8, 0, 0.25);
    /// assert!((d.z - (100.0 - 48.0) / (192.0f64 * 0.25 * 0.75).sqrt()).abs() < 1e-12);
    /// assert!(d.is_watermarked(4.0));
    /// ```
    pub fn from_counts(
        tokens: usize,
        scored: usize,
        green: usize,
        repeated: usize,
        skipped: usize,
        gamma: f64,
    ) -> Detection {
        let (z, green_fraction) = if scored == 0 {
            (0.0, 0.0)
        } else {
            let t = scored as f64;
            ((green as f64 - gamma * t) / (t * gamma * (1.0 - gamma)).sqrt(), green as f64 / t)
        };
        let p_value = if scored == 0 { 1.0 } else { normal_tail(z) };
        Detection { tokens, scored, repeated, skipped, green, green_fraction, z, p_value }
    }

    /// The verdict at a z threshold (default [`DEFAULT_THRESHOLD`]): `z >= threshold`, with
    /// at least one token scored.
    pub fn is_watermarked(&self, threshold: f64) -> bool {
        self.scored > 0 && self.z >= threshold
    }
}

/// The standard normal upper tail `P(N(0, 1) ≥ z) = erfc(z / √2) / 2`: the one-sided p-value
/// of a z-score.
///
/// `erfc` is the Chebyshev fit of Press et al., *Numerical Recipes* (2nd ed., §6.2,
/// `erfcc`), whose relative error is below 1.2·10⁻⁷ everywhere, deep tails included (so
/// a p-value of 10⁻³⁰ is right to 7 digits); it underflows to 0 beyond `z ≈ 38`.
///
/// # Example
///
/// ```
/// use stencil_sampling::watermark::normal_tail;
///
/// assert!((normal_tail(0.0) - 0.5).abs() < 1e-7);
/// assert!((normal_tail(4.0) - 3.167124183311992e-5).abs() < 1e-11);
/// assert!((normal_tail(-1.0) - 0.8413447460685429).abs() < 1e-7);
/// ```
pub fn normal_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function (see [`normal_tail`]).
fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * (-z * z + poly).exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// SplitMix64's output function.
#[inline]
fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SipHash-2-4 (Aumasson and Bernstein 2012) of `message` under the key `(k0, k1)` (the
/// 16 key bytes read as two little-endian words).
fn siphash24((k0, k1): (u64, u64), message: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut chunks = message.chunks_exact(8);
    for chunk in &mut chunks {
        let m = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        v[3] ^= m;
        sip_round(&mut v);
        sip_round(&mut v);
        v[0] ^= m;
    }
    let mut last = (message.len() as u64) << 56;
    for (i, &b) in chunks.remainder().iter().enumerate() {
        last |= u64::from(b) << (8 * i);
    }
    v[3] ^= last;
    sip_round(&mut v);
    sip_round(&mut v);
    v[0] ^= last;
    v[2] ^= 0xff;
    for _ in 0..4 {
        sip_round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[inline]
fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

#[cfg(test)]
mod tests;
