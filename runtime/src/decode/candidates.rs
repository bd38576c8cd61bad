//! Contrastive search's steps in the loop (see [`crate::contrastive`]): the `top_k` most
//! likely allowed tokens become the next pass's candidates, each in a KV sequence of its
//! own; after that pass the winner joins the sequence.

use std::time::Instant;

use stencil_mask::Vocabulary;
use stencil_sampling::SamplingError;

use super::sequence::{masked_argmax, step_mask, timed_fill, Sequence};
use crate::contrastive::Search;
use crate::error::Result;
use crate::session::Session;

impl Sequence {
    pub(super) fn contrastive_next(
        &mut self,
        logits: &[f32],
        vocab: &Vocabulary,
        n_ctx: usize,
        room_in_batch: usize,
    ) -> Result<()> {
        let mut mask = std::mem::take(&mut self.mask);
        let go_on = self.before_sampling(&mut mask, vocab);
        let t = Instant::now();
        let mut candidates = Vec::new();
        if go_on {
            let step_mask = step_mask(self.matcher.is_some(), self.free_mask.as_deref(), &mask);
            let k = self.contrastive.as_ref().map_or(1, Search::top_k);
            candidates = self.sampler.top_logprobs(logits, step_mask, &self.history, k);
            if candidates.is_empty() {
                // As in sampling: when bias or penalties removed every allowed token, the
                // grammar wins with its most likely token.
                let token = step_mask.and_then(|m| masked_argmax(logits, m)).ok_or(SamplingError::NoCandidates)?;
                self.stats.fallback_steps += 1;
                candidates.push((token, f64::NAN));
            }
        }
        self.mask = mask;
        self.stats.sample += t.elapsed();
        match candidates.len() {
            0 => Ok(()),
            1 => {
                // One allowed token: no choice, left out of the mean log-probability.
                if self.matcher.is_some() {
                    self.stats.single_choice_steps += 1;
                }
                let (token, logprob) = candidates[0];
                self.take(token, logprob.is_finite().then_some(logprob), vocab, n_ctx, room_in_batch)
            }
            _ => {
                if let Some(search) = self.contrastive.as_mut() {
                    search.set_candidates(candidates);
                }
                Ok(())
            }
        }
    }

    /// After a candidate step's forward pass: the winner joins the sequence (its KV cell
    /// and hidden state are kept), then the tokens the grammar forces after it are queued,
    /// or, with none, the next candidates come from the winner's logits.
    pub(super) fn contrastive_step(
        &mut self,
        session: &mut Session<'_>,
        vocab: &Vocabulary,
        n_ctx: usize,
        room: usize,
    ) -> Result<()> {
        let Some(search) = self.contrastive.as_mut() else { return Ok(()) };
        let winner = search.keep_winner(&mut *session.forward, self.seq, self.n_past)?;
        self.n_past += 1;
        if self.seq == 0 {
            session.cached.push(winner.token);
        }
        self.stats.count_logprob(Some(winner.logprob));
        self.take(winner.token, Some(winner.logprob), vocab, n_ctx, room)?;
        // The winner is in the KV cache already: what is left to evaluate is what follows it.
        if !self.pending.is_empty() {
            self.pending.remove(0);
        }
        if self.stop.is_some() || !self.pending.is_empty() {
            return Ok(());
        }
        self.stats.mask += timed_fill(self.matcher.as_mut(), &mut self.mask)?;
        self.contrastive_next(session.forward.logits(winner.row), vocab, n_ctx, room)
    }
}
