//! # stencil-sampling
//!
//! Everything between a model's logits and the text the user sees, except the model and the
//! grammar: decoding parameters, the sampling pipeline, stop strings, UTF-8 streaming and
//! named presets. Pure Rust, no model code: the runtime hands it logits and a grammar mask
//! and gets back a token id.
//!
//! - [`SamplingParams`]: temperature, top-k/p, min-p, penalties, bias, seed, stop strings…,
//!   named as in vLLM and the OpenAI API, serde-ready, [`validate`](SamplingParams::validate)d.
//! - [`TokenHistory`]: prompt + output tokens with incremental counts, for the penalties.
//! - [`Sampler`]: logits + mask + history → token ([`sample`](Sampler::sample)), or the
//!   exact final distribution ([`distribution`](Sampler::distribution)), or the top
//!   log-probabilities for beam search ([`top_logprobs`](Sampler::top_logprobs)).
//! - [`StopStrings`]: ends the text at the first stop string, streaming what is safe.
//! - [`Utf8Stream`]: token bytes → valid UTF-8 pieces.
//! - [`Presets`]: built-in and TOML-defined named parameter sets.
//! - [`speculative`]: exact acceptance of drafted tokens (speculative sampling) against the
//!   target's [`distribution`](Sampler::distribution).
//! - [`watermark`]: a keyed greenlist watermark ([`WatermarkParams`], a pipeline stage) and
//!   its detector ([`Greenlist::detect`]), which needs only the key and the tokenizer.
//!
//! # The pipeline
//!
//! Each decode step runs these stages, in this order:
//!
//! 1. **Logit bias**: `l += logit_bias[t]`.
//! 2. **Penalties**: repetition (prompt + output, multiplicative), frequency and presence
//!    (output only, subtractive), then the no-repeat n-gram ban (`-inf`).
//! 3. **Grammar mask**: disallowed tokens are removed, as are tokens now at `-inf` (NaN
//!    logits count as `-inf`).
//! 4. **Watermark** (when [`SamplingParams::watermark`] is set): `l += δ` for every token
//!    still allowed that is green after the last h tokens of the history (see
//!    [`watermark`]).
//! 5. **Temperature**: `p ∝ exp(l / T)`; `T = 0` is greedy: the argmax of what stages 1–4
//!    left, and stages 6–9 are skipped (they would keep the argmax anyway).
//! 6. **Top-k**, 7. **top-p**, 8. **min-p**: truncations, each on the renormalized result
//!    of the one before.
//! 9. **Draw** one token with the seeded generator.
//!
//! Why this order:
//!
//! - *Bias and penalties before the mask*, so that nothing they do can bring back a masked
//!   token: a `+100` bias on a token the grammar forbids changes nothing.
//! - *The watermark after the mask*, so that it never brings back a masked token and acts
//!   only among the tokens the grammar leaves (a step with one allowed token carries no
//!   signal); *before temperature*, as in the paper, so a temperature `T` scales its effect
//!   to `δ / T`, and greedy decoding (`T = 0`) takes the argmax of the biased logits (a
//!   green token wins when it is within δ of the best). Truncation then sees the biased
//!   distribution, which is the one sampled.
//! - *The mask before temperature and truncation*, so that top-k, top-p and min-p choose
//!   among allowed tokens only. Truncating first could keep only tokens the grammar forbids
//!   and leave nothing to sample; it would also make the grammar's effect depend on k and p.
//! - *Temperature before truncation*, as in Hugging Face and vLLM: top-p and min-p then see
//!   the distribution that is actually sampled.
//! - *Top-k, then top-p, then min-p*: top-k is the cheapest cut and bounds the sort top-p
//!   needs; min-p is relative to the most likely token, which every earlier cut keeps.
//!
//! Each [`SamplingParams`] field's doc gives its exact math and default.
//!
//! # A decode loop
//!
//! ```
//! use stencil_sampling::{Sampler, SamplingParams, StopStrings, TokenHistory, Utf8Stream};
//!
//! // A fake model over a 4-token vocabulary: token 3 is end-of-sequence.
//! let pieces: [&[u8]; 4] = [b"ab", b"\xC3", b"\xA9", b""];
//! let model = |history: &TokenHistory| -> Vec<f32> {
//!     let mut logits = vec![0.0; 4];
//!     logits[history.output().len() % 4] = 5.0; // "ab", "\xC3", "\xA9", EOS
//!     logits
//! };
//! let eos = 3;
//!
//! let params = SamplingParams { temperature: 0.0, max_tokens: 16, stop: vec!["é".into()], ..Default::default() };
//! let mut sampler = Sampler::new(params.clone())?;
//! let mut history = TokenHistory::with_prompt(&[0, 1]); // the tokenized prompt
//! let mut bytes = Utf8Stream::new();
//! let mut stop = StopStrings::new(params.stop.iter().cloned());
//! let mut text = String::new();
//! for _ in 0..params.max_tokens {
//!     let logits = model(&history);
//!     let mask = [0b1111u32]; // from the grammar: `stencil_mask::Matcher::fill_mask`
//!     let token = sampler.sample(&logits, Some(&mask), &history)?;
//!     if token == eos && !params.ignore_eos {
//!         break;
//!     }
//!     history.push(token); // (and `matcher.accept_token(token)`)
//!     let out = stop.push(&bytes.push(pieces[token as usize]));
//!     text.push_str(&out.emit); // stream this to the user
//!     if out.stopped.is_some() {
//!         break;
//!     }
//! }
//! if !stop.is_stopped() {
//!     let tail = bytes.finish(); // an incomplete character at the end: U+FFFD
//!     text.push_str(&stop.push(&tail).emit);
//!     text.push_str(&stop.finish());
//! }
//! assert_eq!(text, "ab");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Reproducibility
//!
//! The generator is ChaCha8 ([`rand_chacha`]), seeded from [`SamplingParams::seed`] or, when
//! absent, from the OS; [`Sampler::seed`] reports the seed either way. The same seed and the
//! same logits give the same tokens on every platform. Ties between equal logits always go
//! to the lowest token id.

#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

mod error;
mod history;
mod params;
pub mod presets;
mod sampler;
pub mod speculative;
mod stop;
mod utf8;
pub mod watermark;

pub use error::SamplingError;
pub use history::{TokenCount, TokenHistory};
pub use params::SamplingParams;
pub use presets::Presets;
pub use sampler::Sampler;
pub use stop::{StopOutput, StopStrings};
pub use utf8::Utf8Stream;
pub use watermark::{Detection, Greenlist, Seeding, WatermarkKey, WatermarkParams};
