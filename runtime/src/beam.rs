//! Beam search with length normalization. Each beam has its own KV-cache sequence and its
//! own forked matcher, so every beam stays inside the grammar; the beams are sequences of
//! the decode loop (`decode/beams.rs`).

use serde::Serialize;

use crate::error::Result;
use crate::session::{GenerateRequest, Session};

/// Beam search settings.
///
/// ```
/// let p = stencil_runtime::beam::BeamParams::default();
/// assert_eq!((p.n_beams, p.length_penalty), (4, 1.0));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BeamParams {
    /// Beams kept at each step (and results returned), default 4.
    pub n_beams: usize,
    /// Exponent α of the length normalization: a beam's score is
    /// `sum of token log-probabilities / (generated tokens)^α`. 0 ranks by raw
    /// log-probability (favouring short outputs), 1 (default) by the mean per token.
    pub length_penalty: f64,
}

impl Default for BeamParams {
    fn default() -> Self {
        BeamParams { n_beams: 4, length_penalty: 1.0 }
    }
}

/// One result of beam search.
#[derive(Clone, Debug, Serialize)]
pub struct Beam {
    /// The text (bytes decoded as UTF-8, invalid sequences replaced).
    pub text: String,
    pub tokens: Vec<u32>,
    /// Sum of the tokens' log-probabilities (the end-of-generation token's included when
    /// the beam ended with it).
    pub logprob: f64,
    /// `logprob / len^length_penalty`: what beams are ranked by.
    pub score: f64,
    /// False when the beam was cut by `max_tokens` (its text may be incomplete).
    pub finished: bool,
}

impl Session<'_> {
    /// Beam search for `request` (its prompt, grammar, logit bias and penalties, and
    /// `max_tokens`; temperature and truncation do not apply: beams are scored by
    /// log-probabilities among the allowed tokens at temperature 1). Returns up to
    /// `n_beams` beams, best score first; finished beams rank before unfinished ones. The
    /// beams are sequences of the decode loop ([`Decoder::add_beams`](crate::decode::Decoder::add_beams)); the session needs
    /// `n_seq_max >= 2 * n_beams` ([`crate::SessionOptions::n_seq_max`]).
    pub fn beam_search(&mut self, request: &GenerateRequest, beam: &BeamParams) -> Result<Vec<Beam>> {
        let mut decoder = self.decoder();
        let handle = decoder.add_beams(request, beam)?;
        loop {
            if let Some(beams) = decoder.take_beams(handle) {
                return beams;
            }
            decoder.step(|_, _| {})?;
        }
    }
}
