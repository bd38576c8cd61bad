//! Beam search on the decode loop: a search's beams are sequences of the [`Decoder`], each
//! with its own KV sequence and forked matcher, evaluated in the same forward passes as
//! every other sequence (their next masks on the second thread). After each pass every
//! beam lists its `n` best next tokens ([`Sequence::beam_candidates`]); the search keeps
//! the `n` best (beam, token) pairs over all its beams ([`Decoder::select_beams`]), each
//! new beam in a KV sequence of the other bank holding a copy of its parent's.

use std::sync::Arc;

use stencil_mask::{bitmask, Matcher, Vocabulary};

use super::forward::clear_seq;
use super::sequence::{step_mask, Sequence, Stats};
use super::{Decoder, SequenceHandle};
use crate::beam::{Beam, BeamParams};
use crate::error::Result;
use crate::session::{text_bytes, TextOutput};
use crate::speculate::{Draft, LookupStats};

/// A sequence's part in a beam search.
pub(super) struct BeamMember {
    /// The search's handle.
    pub(super) group: SequenceHandle,
    /// Its beams (`n_beams`): the candidates each lists.
    pub(super) width: usize,
    /// The beam's cumulative log-probability.
    pub(super) logprob: f64,
    /// Its `n` best next tokens and their log-probabilities, once its logits are in.
    pub(super) candidates: Option<Vec<(u32, f64)>>,
}

/// One beam search's state.
pub(super) struct BeamGroup {
    handle: SequenceHandle,
    params: BeamParams,
    /// Two banks of `n` KV sequences: the live beams hold `banks[bank]`.
    banks: [Vec<i32>; 2],
    bank: usize,
    /// Tokens each live beam has.
    steps: usize,
    max_tokens: usize,
    /// KV cells promised to it.
    reserved: usize,
    finished: Vec<Beam>,
}

impl Sequence {
    /// After a pass: this beam's `n` best next tokens, from its logits under its mask
    /// (log-probabilities at temperature 1, no truncation: its sampler runs greedy).
    pub(super) fn beam_candidates(&mut self, logits: &[f32]) {
        let n = self.beam.as_ref().map_or(0, |b| b.width);
        let mask = step_mask(self.matcher.is_some(), self.free_mask.as_deref(), &self.mask);
        let top = self.sampler.top_logprobs(logits, mask, &self.history, n);
        if let Some(b) = self.beam.as_mut() {
            b.candidates = Some(top);
        }
    }

    /// The beam that extends this one with `token`, in KV sequence `seq` (a copy of this
    /// one's cells is made by the caller), under `matcher` (this one's, past `token`).
    fn beam_child(&self, handle: SequenceHandle, seq: i32, token: u32, matcher: Option<Matcher>, logprob: f64) -> Self {
        let mut history = self.history.clone();
        history.push(token);
        let mut tokens = self.tokens.clone();
        tokens.push(token);
        Sequence {
            handle,
            seq,
            request: self.request.clone(),
            sampler: self.sampler.clone(),
            matcher,
            mask: bitmask::new_mask(self.mask.len() * 32),
            free_mask: self.free_mask.clone(),
            history,
            out: TextOutput::new(Vec::new()),
            unsent: String::new(),
            error: None,
            tokens,
            logprobs: Vec::new(),
            top_logprobs: Vec::new(),
            alternatives: Vec::new(),
            pending: vec![token],
            draft: Draft::default(),
            draft_masks: Vec::new(),
            check_rows: Vec::new(),
            draft_cap: 0,
            lookup_outcome: None,
            lookup_own: LookupStats::empty(),
            draft_sampler: None,
            draft_room: 0,
            room_in_batch: 0,
            n_past: self.n_past,
            logits_row: 0,
            reserved: 0,
            stop: None,
            stats: Stats::default(),
            budgets: None,
            beam: self.beam.as_ref().map(|b| BeamMember { group: b.group, width: b.width, logprob, candidates: None }),
            contrastive: None,
        }
    }
}

impl Decoder<'_, '_> {
    /// Starts the search `handle` whose first beam (the prompt) is the live sequence in KV
    /// sequence `seq`; `aux` are its other `2n - 1` KV sequences.
    pub(super) fn start_beams(
        &mut self,
        handle: SequenceHandle,
        seq: i32,
        mut aux: Vec<i32>,
        params: &BeamParams,
        max_tokens: usize,
    ) {
        let n = params.n_beams;
        let second = aux.split_off(n - 1);
        let mut first = vec![seq];
        first.extend(aux);
        let member = self.live.iter_mut().find(|s| s.handle == handle).expect("the first beam is live");
        let reserved = std::mem::take(&mut member.reserved);
        self.beams.push(BeamGroup {
            handle,
            params: params.clone(),
            banks: [first, second],
            bank: 0,
            steps: 0,
            max_tokens,
            reserved,
            finished: Vec::new(),
        });
    }

    /// The next step of every search whose beams all have their candidates: the `n` best
    /// (beam, token) pairs over its beams; a pair ending at EOS or a complete grammar is a
    /// finished beam; the search ends when `n` beams finished, none is left, or the beams
    /// reached `max_tokens`.
    pub(super) fn select_beams(&mut self) -> Result<()> {
        let vocab = self.session.vocab.clone();
        for g in (0..self.beams.len()).rev() {
            let handle = self.beams[g].handle;
            let members: Vec<usize> = (0..self.live.len())
                .filter(|&i| self.live[i].beam.as_ref().is_some_and(|b| b.group == handle))
                .collect();
            if let Some(i) = members.iter().copied().find(|&i| self.live[i].error.is_some()) {
                let error = self.live[i].error.take().expect("found above");
                self.end_beams(g, Err(error));
                continue;
            }
            if members.iter().any(|&i| self.live[i].beam.as_ref().is_some_and(|b| b.candidates.is_none())) {
                continue;
            }
            self.select_group(g, &members, &vocab)?;
        }
        Ok(())
    }

    /// One step of search `g`, whose beams are the live sequences `members`.
    fn select_group(&mut self, g: usize, members: &[usize], vocab: &Arc<Vocabulary>) -> Result<()> {
        let group = &mut self.beams[g];
        let (n, penalty) = (group.params.n_beams, group.params.length_penalty);
        let score = |logprob: f64, len: usize| logprob / (len.max(1) as f64).powf(penalty);
        if group.steps >= group.max_tokens {
            let unfinished = members.iter().map(|&i| {
                let s = &self.live[i];
                let logprob = s.beam.as_ref().map_or(0.0, |b| b.logprob);
                beam(vocab, s.tokens.clone(), logprob, score(logprob, s.tokens.len()), false)
            });
            let done: Vec<Beam> = unfinished.collect();
            group.finished.extend(done);
            let finished = std::mem::take(&mut group.finished);
            self.end_beams(g, Ok(finished));
            return Ok(());
        }
        // Every (beam, next token) pair, best cumulative log-probability first.
        let mut candidates: Vec<(usize, u32, f64)> = Vec::new();
        for (m, &i) in members.iter().enumerate() {
            let b = self.live[i].beam.as_mut().expect("a member");
            let parent = b.logprob;
            candidates.extend(b.candidates.take().unwrap_or_default().into_iter().map(|(t, lp)| (m, t, parent + lp)));
        }
        candidates.sort_by(|a, b| b.2.total_cmp(&a.2));
        let mut next: Vec<(usize, u32, f64, Option<Matcher>)> = Vec::new();
        for (m, token, logprob) in candidates {
            if next.len() == n || group.finished.len() >= n {
                break;
            }
            let parent = &self.live[members[m]];
            if vocab.is_eos(token) {
                let len = parent.tokens.len();
                group.finished.push(beam(vocab, parent.tokens.clone(), logprob, score(logprob, len), true));
                continue;
            }
            let mut matcher = parent.matcher.as_ref().map(Matcher::fork);
            if let Some(m) = matcher.as_mut() {
                m.accept_token(token)?;
            }
            if matcher.as_ref().is_some_and(Matcher::must_end) {
                let mut tokens = parent.tokens.clone();
                tokens.push(token);
                let s = score(logprob, tokens.len());
                group.finished.push(beam(vocab, tokens, logprob, s, true));
                continue;
            }
            next.push((m, token, logprob, matcher));
        }
        group.steps += 1;
        if group.finished.len() >= n || next.is_empty() || group.steps >= group.max_tokens {
            for (m, token, logprob, _) in next {
                let mut tokens = self.live[members[m]].tokens.clone();
                tokens.push(token);
                let s = score(logprob, tokens.len());
                group.finished.push(beam(vocab, tokens, logprob, s, false));
            }
            let finished = std::mem::take(&mut group.finished);
            self.end_beams(g, Ok(finished));
            return Ok(());
        }
        // Each new beam gets its parent's cells in a KV sequence of the other bank.
        group.bank = 1 - group.bank;
        let bank = group.bank;
        let mut children = Vec::with_capacity(next.len());
        for (j, (m, token, logprob, matcher)) in next.into_iter().enumerate() {
            let dst = self.beams[g].banks[bank][j];
            let parent = &self.live[members[m]];
            let forward = &mut *self.session.forward;
            clear_seq(forward, dst);
            forward.copy(parent.seq, dst, 0, None)?;
            if dst == 0 {
                self.session.cached = parent.history.tokens()[..parent.n_past].to_vec();
            }
            children.push(parent.beam_child(self.next_handle, dst, token, matcher, logprob));
            self.next_handle += 1;
        }
        // The parents leave (their bank's cells are cleared as the next step reuses it).
        let mut i = 0;
        let mut k = 0;
        self.live.retain(|_| {
            let keep = members.get(k) != Some(&i);
            if !keep {
                k += 1;
            }
            i += 1;
            keep
        });
        self.live.extend(children);
        Ok(())
    }

    /// Ends search `g` with `result`: its beams leave, its KV sequences are given back.
    fn end_beams(&mut self, g: usize, result: Result<Vec<Beam>>) {
        let group = self.beams.swap_remove(g);
        self.live.retain(|s| !s.beam.as_ref().is_some_and(|b| b.group == group.handle));
        self.reserved -= group.reserved;
        let result = result.map(|mut beams| {
            beams.sort_by(|a, b| b.finished.cmp(&a.finished).then(b.score.total_cmp(&a.score)));
            beams.truncate(group.params.n_beams);
            beams
        });
        for seq in group.banks.into_iter().flatten() {
            self.release_seq(seq);
        }
        self.beam_results.push((group.handle, result));
    }

    /// The beams of search `handle` ([`add_beams`](Self::add_beams)) once it has finished:
    /// up to `n_beams`, best score first, finished beams before unfinished ones. `None`
    /// while it runs (or for another handle).
    pub fn take_beams(&mut self, handle: SequenceHandle) -> Option<Result<Vec<Beam>>> {
        let i = self.beam_results.iter().position(|(h, _)| *h == handle)?;
        Some(self.beam_results.swap_remove(i).1)
    }
}

fn beam(vocab: &Vocabulary, tokens: Vec<u32>, logprob: f64, score: f64, finished: bool) -> Beam {
    let text = String::from_utf8_lossy(&text_bytes(vocab, &tokens)).into_owned();
    Beam { text, tokens, logprob, score, finished }
}
