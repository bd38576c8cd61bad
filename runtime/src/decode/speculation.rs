//! Speculation in the loop (see [`crate::speculate`]): drafts made before the forward pass
//! (prompt lookup, a draft model) and appended to the pending rows, their checkpoints'
//! masks computed during the pass, then verified position by position from the target's
//! logits. The KV cells of rejected draft tokens are removed from the cache.

use std::time::{Duration, Instant};

use stencil_mask::{bitmask, Vocabulary};
use stencil_sampling::{speculative, Sampler, SamplingError, TokenHistory};

use super::sequence::Sequence;
use super::Decoder;
use crate::error::Result;
use crate::session::Session;
use crate::speculate::{self, DraftContext, DraftStart, LookupStats, Speculation};
use crate::telemetry::StopReason;

impl Decoder<'_, '_> {
    /// Drafts for every live sequence that speculates: the draft model's first (its passes
    /// run now), then prompt lookup's, cut by the session's acceptance counts and the
    /// measured cost of a pass.
    pub(super) fn draft(&mut self) {
        let session = &mut *self.session;
        let vocab = session.vocab.clone();
        if let Some(dc) = session.draft.as_mut() {
            for s in self.live.iter_mut().filter(|s| s.draft_sampler.is_some()) {
                let result = s.draft_with_model(dc, &vocab);
                s.fail_on(result);
            }
        }
        let (cost, live) = (session.pass_cost.estimate(), self.live.len());
        for s in &mut self.live {
            s.draft_by_lookup(&vocab, &session.lookup_stats, cost, live);
        }
    }
}

impl Sequence {
    /// After the forward pass of a step with a draft: [`verify`](Self::verify) from the
    /// logits at its checkpoints, then the rejected drafts' cells go (and sequence 0's
    /// cache forgets them).
    pub(super) fn verify_draft(
        &mut self,
        session: &mut Session<'_>,
        vocab: &Vocabulary,
        n_ctx: usize,
        room: usize,
    ) -> Result<()> {
        let rejected = {
            let forward = &*session.forward;
            let rows: Vec<&[f32]> = self.check_rows.iter().map(|&r| forward.logits(r)).collect();
            self.verify(&rows, vocab, n_ctx, room)?
        };
        if rejected > 0 {
            session.forward.remove(self.seq, self.n_past, None);
            if self.seq == 0 {
                session.cached.truncate(self.n_past);
            }
        }
        Ok(())
    }

    /// sharing the pass).
    pub(super) fn draft_by_lookup(&mut self, vocab: &Vocabulary, stats: &LookupStats, cost: (f64, f64), live: usize) {
        let (true, None, None) = (self.draft.is_empty() && !self.pending.is_empty(), &self.stop, &self.error) else {
            return;
        };
        let Some(Speculation::PromptLookup(params)) = &self.request.speculation else { return };
        let room = self.draft_room;
        let Some(found) = speculate::lookup(self.history.tokens(), self.stats.prompt_tokens, params, room) else {
            return;
        };
        let max_tokens = self.request.params.max_tokens as usize;
        let (base, room_in_batch) = (self.tokens.len(), self.room_in_batch);
        let forced_room =
            |drafted: usize| max_tokens.saturating_sub(base + drafted + 1).min(room_in_batch.saturating_sub(1));
        let (matcher, fast_forward) = (self.matcher.as_ref(), self.request.fast_forward);
        let mut draft = speculate::grammar_draft(&found.tokens, matcher, vocab, fast_forward, room, forced_room);
        if params.cut {
            draft.truncate(speculate::cut(&draft, stats.chances(&self.lookup_own, found.origin), cost, live));
        }
        if !draft.is_empty() {
            draft.origin = Some(found.origin);
            self.pending.extend_from_slice(&draft.tokens);
            self.draft = draft;
        }
    }

    /// After the forward pass of a step with a draft: checks the draft position by position
    /// (a draw from the target's distribution; the draft token is kept when the draw is
    /// it), then continues with the first draw that differs, or the bonus draw after a
    /// wholly accepted draft. `rows[k]` are the logits at checkpoint `k`
    /// ([`Draft::checkpoints`]). Returns how many drafted tokens were rejected: the caller
    /// drops their KV cells (`n_past` already excludes them).
    fn verify(&mut self, rows: &[&[f32]], vocab: &Vocabulary, n_ctx: usize, room_in_batch: usize) -> Result<usize> {
        let draft = std::mem::take(&mut self.draft);
        let checkpoints = draft.checkpoints();
        let mut masks = std::mem::take(&mut self.draft_masks);
        let (mut consumed, mut accepted, mut next) = (0, 0, None);
        for (k, &j) in checkpoints.iter().enumerate() {
            // Free text has no masks (its mask is the fixed `free_mask`).
            let mut mask = match k {
                0 => std::mem::take(&mut self.mask),
                _ => masks.get_mut(k - 1).map(std::mem::take).unwrap_or_default(),
            };
            let proposal = draft.proposal(j).map(|q| (draft.tokens[j], q));
            let chosen = self.choose(rows[k], &mut mask, vocab, proposal);
            self.mask = mask;
            let Some((token, logprob)) = chosen? else {
                // A drafted EOS that verification kept ends the sequence: accepted too.
                if self.stop == Some(StopReason::Eos) && draft.tokens.get(j).is_some_and(|&t| vocab.is_eos(t)) {
                    accepted += 1;
                }
                break;
            };
            if j == draft.len() || token != draft.tokens[j] {
                next = Some((token, logprob));
                break;
            }
            if draft.open_tail(j) {
                // Accepted, but drafted without the tokens the grammar forces after it: it
                // goes through the next pass again, followed by them, as a sampled token
                // would (its cell is dropped with the rejected ones).
                accepted += 1;
                next = Some((token, logprob));
                break;
            }
            // Accepted: the drafted token and the forced ones after it.
            let end = checkpoints.get(k + 1).copied().unwrap_or(draft.len());
            let run = &draft.tokens[j..end];
            if let Some(m) = self.matcher.as_mut() {
                m.accept_tokens(run).map_err(|(_, e)| e)?;
            }
            self.stats.forced += run.len() - 1;
            accepted += 1;
            consumed = end;
            if self.commit(run, logprob, vocab) {
                break;
            }
        }
        let rejected = draft.len() - consumed;
        self.n_past -= rejected;
        let spec = &mut self.stats.speculation;
        spec.draft_steps += 1;
        spec.drafted += draft.sampled();
        spec.accepted += accepted;
        match draft.origin {
            // A stop cut the check short: it says nothing of the draft.
            Some(origin) if self.stop.is_none() => {
                self.lookup_own.record(origin, draft.sampled(), accepted);
                self.lookup_outcome = Some((origin, draft.sampled(), accepted));
            }
            Some(_) => {}
            None => {
                self.draft_cap = if accepted == 0 {
                    (self.draft_cap / 2).max(1)
                } else if accepted == draft.sampled() {
                    (self.draft_cap + 1).min(self.max_draft())
                } else {
                    self.draft_cap
                }
            }
        }
        if let (Some((token, logprob)), None) = (next, &self.stop) {
            self.continue_with(token, logprob, vocab, n_ctx, room_in_batch)?;
        }
        Ok(rejected)
    }

    /// The request's longest draft (0 without speculation).
    fn max_draft(&self) -> usize {
        self.request.speculation.as_ref().map_or(0, Speculation::max_draft)
    }

    /// Draft-model speculation: drafts after the pending tokens (see `speculate/draft.rs`).
    pub(super) fn draft_with_model(&mut self, dc: &mut DraftContext<'_>, vocab: &Vocabulary) -> Result<()> {
        let (true, None, None) = (self.draft.is_empty() && !self.pending.is_empty(), &self.stop, &self.error) else {
            return Ok(());
        };
        let Some(sampler) = self.draft_sampler.as_mut() else { return Ok(()) };
        let max_tokens = self.request.params.max_tokens as usize;
        let (base, room_in_batch) = (self.tokens.len(), self.room_in_batch);
        let forced_room =
            |drafted: usize| max_tokens.saturating_sub(base + drafted + 1).min(room_in_batch.saturating_sub(1));
        let start = DraftStart {
            seq: self.seq,
            history: &self.history,
            matcher: self.matcher.as_ref(),
            free_mask: self.free_mask.as_deref().map(|m| &m[..]),
            ignore_eos: self.request.params.ignore_eos,
            fast_forward: self.request.fast_forward,
            vocab,
            limit: self.draft_room.min(self.draft_cap),
        };
        let drafted = speculate::draft(dc, sampler, &start, forced_room);
        self.stats.speculation.draft_passes += dc.take_passes();
        self.draft = drafted?;
        self.pending.extend_from_slice(&self.draft.tokens);
        Ok(())
    }

    /// The masks at a draft's later checkpoints (the first is [`Sequence::mask`]): the
    /// matcher forked and walked through the draft.
    pub(super) fn fill_draft_masks(&mut self) -> Result<Duration> {
        let start = Instant::now();
        let (Some(matcher), false) = (&self.matcher, self.draft.is_empty()) else { return Ok(Duration::ZERO) };
        let checkpoints = self.draft.checkpoints();
        self.draft_masks.resize_with(checkpoints.len() - 1, || bitmask::new_mask(self.mask.len() * 32));
        let mut fork = matcher.fork();
        let mut from = 0;
        for (k, &j) in checkpoints.iter().enumerate().skip(1) {
            fork.accept_tokens(&self.draft.tokens[from..j]).map_err(|(_, e)| e)?;
            from = j;
            fork.fill_mask(&mut self.draft_masks[k - 1])?;
        }
        Ok(start.elapsed())
    }
}

/// The draw at one position: from the sampler, or, for a drafted token proposed from `q`,
/// the exact accept-or-replace of speculative sampling against the same distribution.
pub(super) fn draw(
    sampler: &mut Sampler,
    logits: &[f32],
    mask: Option<&[u32]>,
    history: &TokenHistory,
    proposal: Option<(u32, &[(u32, f64)])>,
) -> std::result::Result<u32, SamplingError> {
    let Some((drafted, q)) = proposal else { return sampler.sample(logits, mask, history) };
    let p = sampler.distribution(logits, mask, history);
    let (accept_u, residual_u) = (sampler.uniform(), sampler.uniform());
    match speculative::verify(&p, Some(q), drafted, accept_u, residual_u) {
        Some(speculative::Verdict::Accepted) => Ok(drafted),
        Some(speculative::Verdict::Replaced(token)) => Ok(token),
        None => Err(SamplingError::NoCandidates),
    }
}

/// The draft sampler's seed for a sample seeded `seed`: its own stream.
pub(super) fn draft_seed(seed: u64) -> u64 {
    seed ^ 0xD2AF_7000_5EED_0001
}
