//! One sequence and one step of it: the stop checks, the mask, the draw, the matcher's
//! acceptance, the tokens the grammar forces, the text out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use stencil_mask::{bitmask, Matcher, Vocabulary};
use stencil_sampling::{Sampler, SamplingError, TokenHistory};

use super::beams::BeamMember;
use super::budget::Budgets;
use super::speculation::draw;
use super::SequenceHandle;
use crate::contrastive::Search;
use crate::error::{Result, RuntimeError};
use crate::session::{GenerateRequest, TextOutput};
use crate::speculate::{Draft, LookupOrigin, LookupStats, SpeculationStats};
use crate::telemetry::StopReason;

/// One live sequence.
pub(super) struct Sequence {
    pub(super) handle: SequenceHandle,
    /// Its KV-cache sequence id.
    pub(super) seq: i32,
    pub(super) request: Arc<GenerateRequest>,
    pub(super) sampler: Sampler,
    pub(super) matcher: Option<Matcher>,
    /// The mask for the next sampling (computed during the forward pass).
    pub(super) mask: Vec<u32>,
    /// Free text with `ignore_eos`: every token but EOS.
    pub(super) free_mask: Option<Arc<Vec<u32>>>,
    pub(super) history: TokenHistory,
    pub(super) out: TextOutput,
    /// Final text not yet given to the caller's `on_text`.
    pub(super) unsent: String,
    /// Why the sequence failed (its matcher or sampler); it then leaves the batch.
    pub(super) error: Option<RuntimeError>,
    pub(super) tokens: Vec<u32>,
    pub(super) logprobs: Vec<Option<f32>>,
    /// Per token, its position's alternatives (only when the request asks for them).
    pub(super) top_logprobs: Vec<Vec<(u32, f32)>>,
    /// The alternatives of the position sampled last, until `commit` files them.
    pub(super) alternatives: Vec<(u32, f32)>,
    /// Tokens to go through the next forward pass: the step's own, then `draft`.
    pub(super) pending: Vec<u32>,
    /// The drafted tail of `pending` (prompt lookup), checked after the forward pass.
    pub(super) draft: Draft,
    /// The masks at the draft's later checkpoints, computed during the forward pass.
    pub(super) draft_masks: Vec<Vec<u32>>,
    /// Batch rows of the logits at the draft's checkpoints.
    pub(super) check_rows: Vec<usize>,
    /// The next draft model's draft's length at most (adapts to acceptance).
    pub(super) draft_cap: usize,
    /// A verified prompt-lookup draft's origin, drafted and accepted tokens, until the
    /// decoder counts it in the session's [`LookupStats`].
    pub(super) lookup_outcome: Option<(LookupOrigin, usize, usize)>,
    /// This sequence's own prompt-lookup counts.
    pub(super) lookup_own: LookupStats,
    /// Draft-model speculation: the draft's sampler (the request's parameters, its own
    /// seed), and the room the next draft has (set with the pending tokens).
    pub(super) draft_sampler: Option<Sampler>,
    pub(super) draft_room: usize,
    pub(super) room_in_batch: usize,
    /// KV positions this sequence holds (prompt + decoded tokens).
    pub(super) n_past: usize,
    /// The row of the last pass with its next logits.
    pub(super) logits_row: usize,
    /// KV cells reserved for it (released when it finishes).
    pub(super) reserved: usize,
    pub(super) stop: Option<StopReason>,
    pub(super) stats: Stats,
    /// The reasoning budgets of its structural tag, when it has any.
    pub(super) budgets: Option<Budgets>,
    /// Its part in a beam search, when it is a beam.
    pub(super) beam: Option<BeamMember>,
    /// Contrastive search's state, when the request asks for it.
    pub(super) contrastive: Option<Search>,
}

/// What a sequence's record reports, gathered as it runs.
#[derive(Default)]
pub(super) struct Stats {
    pub(super) started_at: f64,
    pub(super) start: Option<Instant>,
    pub(super) prefill: Duration,
    pub(super) decode_start: Option<Instant>,
    pub(super) prompt_tokens: usize,
    pub(super) cached_prompt_tokens: usize,
    pub(super) forced: usize,
    pub(super) passes: usize,
    pub(super) fallback_steps: usize,
    /// Sampled steps whose grammar mask allowed one token (watermark: no signal possible).
    pub(super) single_choice_steps: usize,
    pub(super) sample: Duration,
    pub(super) mask: Duration,
    pub(super) mask_wait: Duration,
    /// Sum of the sampled tokens' log-probabilities, and how many there were: tokens
    /// sampled with a choice only (not where the grammar allowed one token).
    pub(super) logprob_sum: f64,
    pub(super) sampled: usize,
    pub(super) speculation: SpeculationStats,
}

impl Stats {
    /// Counts a token sampled with a choice in the mean log-probability.
    pub(super) fn count_logprob(&mut self, logprob: Option<f64>) {
        if let Some(lp) = logprob {
            self.logprob_sum += lp;
            self.sampled += 1;
        }
    }
}

impl Sequence {
    /// Batch rows its next forward pass takes.
    pub(super) fn rows(&self) -> usize {
        match &self.contrastive {
            Some(search) if search.has_candidates() => search.rows(),
            _ => self.pending.len(),
        }
    }

    /// The next step from `logits` (this sequence's row): a sampled token, or contrastive
    /// search's candidates.
    pub(super) fn next(
        &mut self,
        logits: &[f32],
        vocab: &Vocabulary,
        n_ctx: usize,
        room_in_batch: usize,
    ) -> Result<()> {
        if self.contrastive.is_some() {
            self.contrastive_next(logits, vocab, n_ctx, room_in_batch)
        } else {
            self.sample_next(logits, vocab, n_ctx, room_in_batch)
        }
    }

    /// Takes `token` as this step's choice: EOS ends the sequence, any other token
    /// continues it ([`continue_with`](Self::continue_with)).
    pub(super) fn take(
        &mut self,
        token: u32,
        logprob: Option<f64>,
        vocab: &Vocabulary,
        n_ctx: usize,
        room: usize,
    ) -> Result<()> {
        if vocab.is_eos(token) {
            self.stop = Some(StopReason::Eos);
            return Ok(());
        }
        self.continue_with(token, logprob, vocab, n_ctx, room)
    }

    /// The stop checks before a sampled position (length, grammar complete; EOS cleared
    /// from `mask` with `ignore_eos`): false when the sequence stops here.
    pub(super) fn before_sampling(&mut self, mask: &mut [u32], vocab: &Vocabulary) -> bool {
        let params = &self.request.params;
        if self.stats.decode_start.is_none() {
            self.stats.decode_start = Some(Instant::now());
        }
        if self.tokens.len() >= params.max_tokens as usize {
            self.stop = Some(StopReason::Length);
            return false;
        }
        if let Some(m) = &self.matcher {
            if m.must_end() {
                self.stop = Some(StopReason::GrammarComplete);
                return false;
            }
            if params.ignore_eos {
                clear_eos(mask, vocab);
            }
        }
        true
    }

    /// Samples from `logits` (this sequence's row) and queues the sampled token, the tokens
    /// the grammar forces after it and a draft, or sets why the sequence stops.
    fn sample_next(&mut self, logits: &[f32], vocab: &Vocabulary, n_ctx: usize, room_in_batch: usize) -> Result<()> {
        let mut mask = std::mem::take(&mut self.mask);
        let chosen = self.choose(logits, &mut mask, vocab, None);
        self.mask = mask;
        match chosen? {
            Some((token, logprob)) => self.continue_with(token, logprob, vocab, n_ctx, room_in_batch),
            None => Ok(()),
        }
    }

    /// One sampled position: the stop checks that come before it, then the draw from
    /// `logits` under `mask` (the grammar's mask at this position) — or, for a token a
    /// draft model proposed from `q`, its verification ([`speculative::verify`]). `None`
    /// when the sequence stops here (length, grammar complete, EOS).
    pub(super) fn choose(
        &mut self,
        logits: &[f32],
        mask: &mut [u32],
        vocab: &Vocabulary,
        proposal: Option<(u32, &[(u32, f64)])>,
    ) -> Result<Option<(u32, Option<f64>)>> {
        if !self.before_sampling(mask, vocab) {
            return Ok(None);
        }
        let t = Instant::now();
        let step_mask = step_mask(self.matcher.is_some(), self.free_mask.as_deref(), mask);
        let single_choice = self.matcher.is_some() && bitmask::count(mask) == 1;
        if single_choice {
            self.stats.single_choice_steps += 1;
        }
        let n = self.request.top_logprobs;
        // The common step (no draft model's proposal, no alternatives asked): one pass.
        let drawn = match (proposal, n) {
            (None, 0) => {
                self.sampler.sample_with_logprob(logits, step_mask, &self.history).map(|(t, lp)| (t, Some(lp)))
            }
            _ => draw(&mut self.sampler, logits, step_mask, &self.history, proposal).map(|t| (t, None)),
        };
        let (token, known_logprob) = match drawn {
            // Bias or penalties removed every token the grammar allows: the grammar wins,
            // and the step takes the most likely allowed token.
            Err(SamplingError::NoCandidates) if step_mask.is_some() => {
                self.stats.fallback_steps += 1;
                (masked_argmax(logits, step_mask.unwrap_or(&[])).ok_or(SamplingError::NoCandidates)?, None)
            }
            other => other?,
        };
        let logprob = match known_logprob {
            Some(logprob) => logprob,
            None if n > 0 => {
                let (logprob, top) = self.sampler.logprob_and_top(logits, step_mask, &self.history, token, n);
                self.alternatives = top.into_iter().map(|(t, lp)| (t, lp as f32)).collect();
                logprob
            }
            None => self.sampler.logprob(logits, step_mask, &self.history, token),
        };
        if !single_choice {
            self.stats.count_logprob(logprob);
        }
        self.stats.sample += t.elapsed();
        if vocab.is_eos(token) {
            self.stop = Some(StopReason::Eos);
            return Ok(None);
        }
        Ok(Some((token, logprob)))
    }

    /// After sampling `token`: the matcher accepts it, the forced tokens follow, the text
    /// goes out, and the next forward pass's tokens (with a draft) are queued.
    pub(super) fn continue_with(
        &mut self,
        token: u32,
        logprob: Option<f64>,
        vocab: &Vocabulary,
        n_ctx: usize,
        room_in_batch: usize,
    ) -> Result<()> {
        let max_tokens = self.request.params.max_tokens as usize;
        let mut step = vec![token];
        if let Some(m) = self.matcher.as_mut() {
            m.accept_token(token)?;
            if self.request.fast_forward {
                let room = (max_tokens - self.tokens.len() - 1).min(room_in_batch.saturating_sub(1));
                let more = m.forced_tokens(room);
                m.accept_tokens(&more).map_err(|(_, e)| e)?;
                self.stats.forced += more.len();
                step.extend(more);
            }
        }
        if self.commit(&step, logprob, vocab) {
            return Ok(());
        }
        // A spent reasoning budget: what closes its text is forced, and what the grammar
        // forces after that.
        if let (Some(budgets), Some(m)) = (self.budgets.as_ref(), self.matcher.as_mut()) {
            let mut close = budgets.close(m, vocab);
            close.truncate(max_tokens - self.tokens.len());
            if !close.is_empty() {
                m.accept_tokens(&close).map_err(|(_, e)| e)?;
                if self.request.fast_forward {
                    let room = (max_tokens - self.tokens.len() - close.len()).min(room_in_batch.saturating_sub(1));
                    let more = m.forced_tokens(room);
                    m.accept_tokens(&more).map_err(|(_, e)| e)?;
                    close.extend(more);
                }
                self.stats.forced += close.len();
                step.extend_from_slice(&close);
                if self.commit(&close, None, vocab) {
                    return Ok(());
                }
            }
        }
        if self.tokens.len() >= max_tokens {
            self.stop = Some(StopReason::Length);
        } else if self.n_past + step.len() > n_ctx {
            self.stop = Some(StopReason::ContextFull);
        } else {
            // The room a draft has (drafts are made at the start of the next step).
            let mut room = (max_tokens - self.tokens.len())
                .min(room_in_batch.saturating_sub(step.len()))
                .min(n_ctx - self.n_past - step.len());
            // Inside a budgeted text a draft and its bonus token must not overspend it.
            if let Some(left) = self.budgets.as_ref().and_then(Budgets::left) {
                room = room.min(left.saturating_sub(1));
            }
            (self.draft_room, self.room_in_batch) = (room, room_in_batch);
            self.pending = step;
        }
        Ok(())
    }

    /// Appends `tokens` (the first sampled with `logprob`, the rest forced) to the output;
    /// true when a stop string ended it.
    pub(super) fn commit(&mut self, tokens: &[u32], logprob: Option<f64>, vocab: &Vocabulary) -> bool {
        for (i, &tok) in tokens.iter().enumerate() {
            self.history.push(tok);
            self.tokens.push(tok);
            self.logprobs.push(if i == 0 { logprob.map(|lp| lp as f32) } else { None });
            if self.request.top_logprobs > 0 {
                let alternatives = if i == 0 { std::mem::take(&mut self.alternatives) } else { Vec::new() };
                self.top_logprobs.push(alternatives);
            }
            if let Some(budgets) = self.budgets.as_mut() {
                if let Err(e) = budgets.feed(vocab.token_bytes(tok)) {
                    self.error = Some(e);
                    return true;
                }
            }
            // Under a structural tag, a control token its grammar took (a `token` marker such
            // as `<think>`) is text of the reply: what reads the reply back sees it.
            let marker = self.request.structural_tag.is_some() && !vocab.is_eos(tok);
            if vocab.is_text(tok) || (marker && !vocab.token_bytes(tok).is_empty()) {
                let unsent = &mut self.unsent;
                if let Some(stop) = self.out.push(vocab.token_bytes(tok), &mut |p: &str| unsent.push_str(p)) {
                    self.stop = Some(StopReason::Stop(stop));
                    return true;
                }
            }
        }
        false
    }

    /// Ends the sequence with `result`'s error, if it is one.
    pub(super) fn fail_on(&mut self, result: Result<()>) {
        if let Err(e) = result {
            self.error = Some(e);
        }
    }

    /// Gives the caller the text that became final since the last call.
    pub(super) fn send(&mut self, on_text: &mut impl FnMut(SequenceHandle, &str)) {
        if !self.unsent.is_empty() {
            on_text(self.handle, &self.unsent);
            self.unsent.clear();
        }
    }
}

/// The mask a sampled position uses: the grammar's (with a matcher), or free text's fixed
/// one (`ignore_eos`), or none.
pub(super) fn step_mask<'a>(grammar: bool, free_mask: Option<&'a Vec<u32>>, mask: &'a [u32]) -> Option<&'a [u32]> {
    if grammar {
        Some(mask)
    } else {
        free_mask.map(|m| &m[..])
    }
}

/// Fills the next mask if there is a matcher, timing it.
pub(super) fn timed_fill(matcher: Option<&mut Matcher>, mask: &mut [u32]) -> Result<Duration> {
    let start = Instant::now();
    if let Some(m) = matcher {
        m.fill_mask(mask)?;
    }
    Ok(start.elapsed())
}

pub(super) fn join<T>(joined: std::thread::Result<T>) -> T {
    joined.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The allowed token with the largest finite logit.
pub(super) fn masked_argmax(logits: &[f32], mask: &[u32]) -> Option<u32> {
    bitmask::allowed(mask)
        .filter_map(|id| logits.get(id as usize).filter(|l| l.is_finite()).map(|&l| (id, l)))
        .fold(
            None,
            |best: Option<(u32, f32)>, (id, l)| if best.is_some_and(|(_, b)| b >= l) { best } else { Some((id, l)) },
        )
        .map(|(id, _)| id)
}

fn clear_eos(mask: &mut [u32], vocab: &Vocabulary) {
    for &id in vocab.eos_ids() {
        bitmask::clear(mask, id);
    }
}

/// Every token but the end-of-generation ones (free text with `ignore_eos`).
pub(super) fn all_but_eos(vocab: &Vocabulary) -> Vec<u32> {
    let mut mask = bitmask::new_mask(vocab.mask_width());
    for id in 0..vocab.mask_width() as u32 {
        bitmask::set(&mut mask, id);
    }
    clear_eos(&mut mask, vocab);
    mask
}
