//! Contrastive search (Su et al. 2022, "A Contrastive Framework for Neural Text
//! Generation"): at each step, among the `k` most likely allowed tokens, the one that is
//! both probable and unlike what came before.
//!
//! The score of candidate `v` is `(1 − α)·p(v) − α·max_j cos(h_v, h_j)`, where `p` is the
//! model's distribution at this step (after bias, penalties and the grammar's mask, no
//! temperature), `h_v` the last hidden state of the model fed `v`, and `h_j` those of every
//! token so far, the prompt's included — as in Hugging Face's implementation. Ties go to the
//! more probable candidate.
//!
//! In the decode loop ([`crate::decode::Decoder`]) a sequence under contrastive search
//! alternates between two kinds of step: a *candidate* step puts its `k` candidates in one
//! batch, each in a KV-cache sequence of its own copied from the sequence's (so the `k`
//! hidden states come from one forward pass, next to the other sequences' rows), keeps the
//! winner's cell and its logits for the next step, and parks the losers' cells in a KV
//! sequence of their own until the sequence ends (so that cells stay in position order);
//! a *chain* step evaluates the tokens the grammar forces after a winner, whose hidden
//! states join the context. Needs a session with hidden states
//! ([`crate::SessionOptions::embeddings`]).
//! With `α = 0` or `k = 1` the score is the probability and the search is greedy decoding:
//! the request then decodes greedily, without candidate passes.

use serde::Serialize;

use crate::decode::{Forward, Row};
use crate::error::Result;

/// The score of one candidate: `(1 − α)·p − α·max_similarity`.
///
/// ```
/// assert_eq!(stencil_runtime::contrastive::contrastive_score(0.5, 0.75, 0.25), 0.25);
/// ```
pub fn contrastive_score(alpha: f64, probability: f64, max_similarity: f64) -> f64 {
    (1.0 - alpha) * probability - alpha * max_similarity
}

/// The degeneration penalty of hidden state `h`: its largest cosine similarity with the
/// rows of `context` (unit vectors of `h.len()` floats each, concatenated); `-1` is the
/// floor, and an empty context gives 0 (nothing to repeat).
///
/// ```
/// use stencil_runtime::contrastive::max_cosine;
/// let context = [1.0, 0.0, 0.0, 1.0]; // two unit vectors of width 2
/// assert!((max_cosine(&[3.0, 3.0], &context) - 0.5f64.sqrt()).abs() < 1e-6);
/// assert_eq!(max_cosine(&[1.0, 0.0], &[]), 0.0);
/// ```
pub fn max_cosine(h: &[f32], context: &[f32]) -> f64 {
    let norm = h.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    if context.is_empty() || h.is_empty() || norm == 0.0 {
        return 0.0;
    }
    context
        .chunks_exact(h.len())
        .map(|row| row.iter().zip(h).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum::<f64>() / norm)
        .fold(-1.0, f64::max)
}

/// The winner among candidates with probabilities `probs` and hidden states `hidden`,
/// against `context` (see [`max_cosine`]): the index of the highest
/// [`contrastive_score`], the first on ties. `None` without candidates.
///
/// ```
/// use stencil_runtime::contrastive::contrastive_pick;
/// let context = [1.0, 0.0];
/// // The likelier candidate repeats the context; the other does not.
/// let hidden: [&[f32]; 2] = [&[1.0, 0.0], &[0.0, 1.0]];
/// assert_eq!(contrastive_pick(&[0.6, 0.4], &hidden, &context, 0.0), Some(0));
/// assert_eq!(contrastive_pick(&[0.6, 0.4], &hidden, &context, 0.6), Some(1));
/// ```
pub fn contrastive_pick(probs: &[f64], hidden: &[&[f32]], context: &[f32], alpha: f64) -> Option<usize> {
    probs
        .iter()
        .zip(hidden)
        .map(|(&p, h)| contrastive_score(alpha, p, max_cosine(h, context)))
        .enumerate()
        .fold(None, |best: Option<(usize, f64)>, (i, s)| match best {
            Some((_, b)) if b >= s => best,
            _ => Some((i, s)),
        })
        .map(|(i, _)| i)
}

/// What contrastive search cost a generation (in its record).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ContrastiveStats {
    /// The degeneration penalty's weight α.
    pub penalty_alpha: f32,
    /// Candidates per step (`top_k`).
    pub top_k: usize,
    /// Steps that evaluated candidates (one batch row each).
    pub candidate_steps: usize,
    /// Candidate rows evaluated in all (the model's extra work: about `top_k` per step).
    pub candidate_rows: usize,
    /// Time spent scoring candidates against the context, in milliseconds.
    pub scoring_ms: f64,
}

/// One sequence's contrastive search state.
pub(crate) struct Search {
    alpha: f64,
    /// KV-cache sequences for the candidates, one each.
    aux: Vec<i32>,
    /// A KV-cache sequence that keeps the losing candidates' cells until the sequence ends,
    /// so that no cell is reused while it runs: every sequence's cells then stay in position
    /// order, and a search decodes the same alone and in a batch (cell order changes
    /// llama.cpp's summation order, which a quantized model's hidden states show).
    graveyard: i32,
    /// Unit hidden states of every token so far, concatenated.
    context: Vec<f32>,
    /// The candidates (token, log-probability) of the next forward pass; empty for a
    /// chain step.
    candidates: Vec<(u32, f64)>,
    /// Their rows of the forward pass, once in it.
    rows: Vec<usize>,
    /// The first row of a chain step's tokens.
    pub(crate) chain_row: usize,
    pub(crate) stats: ContrastiveStats,
}

/// The candidate a step kept.
pub(crate) struct Winner {
    pub(crate) token: u32,
    pub(crate) logprob: f64,
    /// Its row of the pass: the logits of the next step.
    pub(crate) row: usize,
}

impl Search {
    /// Sequences a search takes besides its own, for `top_k` candidates.
    pub(crate) fn sequences(top_k: usize) -> usize {
        top_k + 1
    }

    /// A search with weight `alpha` over KV sequences `seqs` ([`Search::sequences`]: one
    /// per candidate, then the losers' cells), the prompt's unit hidden states in `context`
    /// ([`push_unit_rows`]).
    pub(crate) fn new(alpha: f32, mut seqs: Vec<i32>, context: Vec<f32>) -> Search {
        let graveyard = seqs.pop().unwrap_or(-1);
        let stats = ContrastiveStats { penalty_alpha: alpha, top_k: seqs.len(), ..ContrastiveStats::default() };
        Search {
            alpha: f64::from(alpha),
            aux: seqs,
            graveyard,
            context,
            candidates: Vec::new(),
            rows: Vec::new(),
            chain_row: 0,
            stats,
        }
    }

    /// Candidates per step.
    pub(crate) fn top_k(&self) -> usize {
        self.aux.len()
    }

    /// Whether the next forward pass evaluates candidates (else the pending tokens).
    pub(crate) fn has_candidates(&self) -> bool {
        !self.candidates.is_empty()
    }

    /// The next step's candidates.
    pub(crate) fn set_candidates(&mut self, candidates: Vec<(u32, f64)>) {
        self.candidates = candidates;
    }

    /// Batch rows the next forward pass takes.
    pub(crate) fn rows(&self) -> usize {
        self.candidates.len()
    }

    /// Appends the hidden states of the pass's rows `rows` to the context.
    pub(crate) fn extend_context(&mut self, forward: &dyn Forward, rows: std::ops::Range<usize>) -> Result<()> {
        for row in rows {
            push_unit(forward.hidden(row)?, &mut self.context);
        }
        Ok(())
    }

    /// Puts the candidates in `rows` at position `pos`, each in its own KV sequence holding
    /// a copy of sequence `seq`.
    pub(crate) fn add_rows(
        &mut self,
        forward: &mut dyn Forward,
        rows: &mut Vec<Row>,
        seq: i32,
        pos: usize,
    ) -> Result<()> {
        self.rows.clear();
        for (&(token, _), &aux) in self.candidates.iter().zip(&self.aux) {
            forward.remove(aux, 0, None);
            forward.copy(seq, aux, 0, None)?;
            self.rows.push(rows.len());
            rows.push(Row { token, pos, seq: aux, logits: true });
        }
        self.stats.candidate_steps += 1;
        self.stats.candidate_rows += self.candidates.len();
        Ok(())
    }

    /// After the forward pass: scores the candidates, keeps the winner's KV cell (at `pos`)
    /// in sequence `seq` and its hidden state in the context, and frees the others.
    pub(crate) fn keep_winner(&mut self, forward: &mut dyn Forward, seq: i32, pos: usize) -> Result<Winner> {
        let start = std::time::Instant::now();
        let candidates = std::mem::take(&mut self.candidates);
        let hidden = self.rows.iter().map(|&r| forward.hidden(r)).collect::<Result<Vec<_>>>()?;
        let probs: Vec<f64> = candidates.iter().map(|&(_, lp)| lp.exp()).collect();
        let w = contrastive_pick(&probs, &hidden, &self.context, self.alpha).unwrap_or(0);
        push_unit(hidden[w], &mut self.context);
        self.stats.scoring_ms += start.elapsed().as_secs_f64() * 1e3;
        for (i, &aux) in self.aux.iter().enumerate().take(candidates.len()) {
            let keeper = if i == w { seq } else { self.graveyard };
            forward.copy(aux, keeper, pos, Some(pos + 1))?;
            forward.remove(aux, 0, None);
        }
        let (token, logprob) = candidates[w];
        Ok(Winner { token, logprob, row: self.rows[w] })
    }

    /// The KV sequences it holds, to give back (and clear) when the sequence finishes.
    pub(crate) fn seqs(&self) -> impl Iterator<Item = i32> + '_ {
        self.aux.iter().copied().chain([self.graveyard])
    }
}

/// Appends `h` to `out`, scaled to unit length.
pub(crate) fn push_unit(h: &[f32], out: &mut Vec<f32>) {
    let norm = h.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
    out.extend(h.iter().map(|&x| (f64::from(x) * scale) as f32));
}
