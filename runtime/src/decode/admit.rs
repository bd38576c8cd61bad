//! Admitting sequences (a prompt evaluated once, shared by its samples, with the first
//! mask computed meanwhile) and letting finished ones go (their KV sequences given back).

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use stencil_mask::{bitmask, Matcher};
use stencil_sampling::{Sampler, SamplingParams, TokenHistory};

use super::beams::BeamMember;
use super::budget::Budgets;
use super::forward::clear_seq;
use super::sequence::{all_but_eos, join, timed_fill, Sequence, Stats};
use super::speculation::draft_seed;
use super::{sample_seed, Decoder, Finished, SequenceHandle};
use crate::beam::BeamParams;
use crate::contrastive::Search;
use crate::error::{Result, RuntimeError};
use crate::session::{check_grammar_vocab, common_prefix, GenerateRequest, TextOutput};
use crate::speculate::{Draft, LookupStats, Speculation};

impl Decoder<'_, '_> {
    /// Adds `n` samples of `request` sharing one evaluation of its prompt (see
    /// [`Session::generate_n`](crate::Session::generate_n) for the seeds). Returns their
    /// handles, in sample order.
    pub fn add_samples(&mut self, request: &GenerateRequest, n: usize) -> Result<Vec<SequenceHandle>> {
        self.admit(request, n, None)
    }

    /// Adds a beam search of `request` (see [`Session::beam_search`](crate::Session::beam_search)):
    /// its beams are sequences of this decoder, advanced in the same passes as the others.
    /// Returns its handle; [`take_beams`](Self::take_beams) gives its beams once
    /// [`step`](Self::step) has reported it finished.
    pub fn add_beams(&mut self, request: &GenerateRequest, params: &BeamParams) -> Result<SequenceHandle> {
        if request.speculation.is_some() {
            return Err(RuntimeError::SpeculationUnsupported("beam search: drafts verify one sequence's samples"));
        }
        if request.params.contrastive().is_some() {
            return Err(RuntimeError::ContrastiveUnsupported("beam search"));
        }
        if params.n_beams == 0 {
            return Err(RuntimeError::NoBeams);
        }
        Ok(self.admit(request, 1, Some(params))?[0])
    }

    /// Admits `n` samples of `request`, or one beam search: the prompt evaluated once (its
    /// first mask computed meanwhile) and shared, each sample's first token drawn.
    fn admit(
        &mut self,
        request: &GenerateRequest,
        n: usize,
        beams: Option<&BeamParams>,
    ) -> Result<Vec<SequenceHandle>> {
        let started_at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let start = Instant::now();
        let vocab = self.session.vocab.clone();
        if let Some(g) = &request.grammar {
            check_grammar_vocab(g, &vocab)?;
        }
        if matches!(request.speculation, Some(Speculation::DraftModel(_))) && self.session.draft.is_none() {
            return Err(RuntimeError::NoDraftModel);
        }
        let contrastive = request.params.contrastive();
        if contrastive.is_some() {
            if !self.session.options.embeddings {
                return Err(RuntimeError::ContrastiveNeedsEmbeddings);
            }
            if request.speculation.is_some() {
                return Err(RuntimeError::ContrastiveUnsupported("speculative decoding"));
            }
        }
        // Contrastive search takes KV sequences for its candidates, and a cell per candidate
        // and token.
        // Beams take two banks of KV sequences (each step's beams copy their parents'), and
        // a cell per beam and token in each.
        let k = contrastive.map_or(0, |(_, k)| k).max(beams.map_or(0, |b| 2 * b.n_beams - 1));
        let extra_seqs = if beams.is_some() {
            k
        } else if k > 0 {
            Search::sequences(k)
        } else {
            0
        };
        let max_tokens = request.params.max_tokens as usize;
        let prompt = self.session.prompt_tokens(&request.prompt, max_tokens)?;
        let n_ctx = self.session.forward.n_ctx();
        // A lone sequence may run into the end of the context (it then stops with
        // `ContextFull`); sequences that share it must all fit.
        let lone = n == 1 && self.live.is_empty();
        let per_sample = max_tokens * (1 + k);
        let cells = (prompt.len() + n * per_sample).min(if lone { n_ctx } else { usize::MAX });
        if n == 0 || n * (1 + extra_seqs) > self.free_seqs.len() || self.reserved + cells > n_ctx {
            return Err(RuntimeError::TooManySequences {
                n: n * (1 + extra_seqs),
                free: self.free_seqs.len(),
                needed: self.reserved + cells,
                n_ctx,
            });
        }
        // Sampler first: a bad parameter fails before any work.
        let base_seed = Sampler::new(request.params.clone())?.seed();
        for seq in std::mem::take(&mut self.stale_seqs) {
            clear_seq(&mut *self.session.forward, seq);
            if let Some(dc) = self.session.draft.as_mut() {
                dc.forget(seq);
            }
        }
        let request = Arc::new(request.clone());
        let seqs: Vec<i32> = (0..n).map(|_| self.free_seqs.pop().expect("checked above")).collect();
        let mut aux: Vec<Vec<i32>> =
            (0..n).map(|_| (0..extra_seqs).map(|_| self.free_seqs.pop().expect("checked above")).collect()).collect();
        // Contrastive search compares with the prompt's hidden states too.
        let mut prompt_hidden = contrastive.map(|_| Vec::new());

        // The prompt into the first sequence, the first mask alongside.
        let _span = tracing::debug_span!("prefill", prompt_tokens = prompt.len(), samples = n).entered();
        let mut matcher = request.grammar.clone().map(Matcher::new);
        let mut mask = bitmask::new_mask(vocab.mask_width());
        // The longest prefix of the prompt a live sequence holds (a system prompt, tool
        // definitions, the same request again) is shared, not evaluated again.
        let donor = self
            .live
            .iter()
            .filter(|s| s.contrastive.is_none())
            .map(|s| (s.seq, common_prefix(&s.history.tokens()[..s.n_past], &prompt)))
            .max_by_key(|&(_, n)| n);
        let (prefill, first_mask) = std::thread::scope(|s| {
            let worker = s.spawn(|| timed_fill(matcher.as_mut(), &mut mask));
            (self.session.prefill_seq(seqs[0], &prompt, donor, prompt_hidden.as_mut()), join(worker.join()))
        });
        let (cached, logits_row) = match prefill {
            Ok(prefilled) => prefilled,
            Err(e) => {
                self.free_seqs.extend(aux.iter().flatten().rev());
                self.free_seqs.extend(seqs.iter().rev());
                return Err(e);
            }
        };
        let first_mask_time = first_mask?;
        for &seq in &seqs[1..] {
            self.session.forward.copy(seqs[0], seq, 0, None)?;
        }
        let prefill_time = start.elapsed();
        self.reserved += cells;
        let free_mask = (request.params.ignore_eos && matcher.is_none()).then(|| Arc::new(all_but_eos(&vocab)));
        let mut handles = Vec::with_capacity(n);
        for (i, &seq) in seqs.iter().enumerate() {
            let mut params = request.params.clone();
            params.seed = Some(sample_seed(base_seed, i));
            if contrastive.is_some() || beams.is_some() {
                // Deterministic: candidates by probability at temperature 1, no truncation.
                params.temperature = 0.0;
            }
            let handle = self.next_handle;
            self.next_handle += 1;
            handles.push(handle);
            let mut sequence = Sequence {
                handle,
                seq,
                request: request.clone(),
                sampler: Sampler::new(params)?,
                matcher: matcher.as_ref().map(Matcher::fork),
                mask: mask.clone(),
                free_mask: free_mask.clone(),
                history: TokenHistory::with_prompt(&prompt),
                out: TextOutput::new(request.params.stop.clone()),
                unsent: String::new(),
                error: None,
                tokens: Vec::new(),
                logprobs: Vec::new(),
                top_logprobs: Vec::new(),
                alternatives: Vec::new(),
                pending: Vec::new(),
                draft: Draft::default(),
                draft_masks: Vec::new(),
                check_rows: Vec::new(),
                draft_cap: request.speculation.as_ref().map_or(0, Speculation::max_draft),
                lookup_outcome: None,
                lookup_own: LookupStats::empty(),
                draft_sampler: match &request.speculation {
                    Some(Speculation::DraftModel(_)) => Some(Sampler::new(SamplingParams {
                        seed: Some(draft_seed(sample_seed(base_seed, i))),
                        ..request.params.clone()
                    })?),
                    _ => None,
                },
                draft_room: 0,
                room_in_batch: 0,
                n_past: prompt.len(),
                logits_row,
                reserved: if i == 0 { cells - (n - 1) * per_sample } else { per_sample },
                stop: None,
                stats: Stats {
                    started_at,
                    start: Some(start),
                    prefill: prefill_time,
                    prompt_tokens: prompt.len(),
                    cached_prompt_tokens: if i == 0 { cached } else { prompt.len() },
                    mask: first_mask_time,
                    ..Stats::default()
                },
                budgets: match &request.structural_tag {
                    Some(tag) => Budgets::new(tag)?,
                    None => None,
                },
                beam: None,
                contrastive: contrastive.map(|(alpha, _)| {
                    Search::new(alpha, std::mem::take(&mut aux[i]), prompt_hidden.clone().unwrap_or_default())
                }),
            };
            let logits = self.session.forward.logits(logits_row);
            if let Some(params) = beams {
                let banks = std::mem::take(&mut aux[i]);
                sequence.beam =
                    Some(BeamMember { group: handle, width: params.n_beams, logprob: 0.0, candidates: None });
                sequence.beam_candidates(logits);
                self.live.push(sequence);
                self.start_beams(handle, seq, banks, params, max_tokens);
                self.select_beams()?;
                continue;
            }
            // Its first text reaches the caller at the next step (after it has the handle).
            let result = sequence.next(logits, &vocab, n_ctx, self.capacity(self.live.len() + n));
            sequence.fail_on(result);
            self.live.push(sequence);
        }
        Ok(handles)
    }

    /// Removes the finished sequences, frees their KV cells, and builds their results.
    pub(super) fn collect_finished(&mut self, on_text: &mut impl FnMut(SequenceHandle, &str)) -> Finished {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.live.len() {
            if (self.live[i].stop.is_none() || self.live[i].beam.is_some()) && self.live[i].error.is_none() {
                i += 1;
                continue;
            }
            let s = self.live.swap_remove(i);
            self.reserved -= s.reserved;
            self.release_seq(s.seq);
            for seq in s.contrastive.iter().flat_map(Search::seqs) {
                self.release_seq(seq);
            }
            let handle = s.handle;
            out.push((handle, s.finish(self.session, on_text)));
        }
        out.sort_by_key(|(h, _)| *h);
        // Keep the live ones in the order they were added (the batch rows' order).
        self.live.sort_by_key(|s| s.handle);
        out
    }

    /// Gives a KV-cache sequence back: its cells are freed, except sequence 0's, which
    /// stay as the session's prompt cache for the next generation.
    /// Sequence 0 is taken first (its cached prefix may serve the next prompt); the others'
    /// cells are cleared later (see `stale_seqs`).
    pub(super) fn release_seq(&mut self, seq: i32) {
        if seq == 0 {
            self.free_seqs.push(0);
        } else {
            self.stale_seqs.push(seq);
            self.free_seqs.insert(0, seq);
        }
    }
}

impl Drop for Decoder<'_, '_> {
    fn drop(&mut self) {
        // Sequences left unfinished free their cells (sequence 0 keeps its prompt cache).
        let live = std::mem::take(&mut self.live).into_iter().flat_map(|s| {
            let aux: Vec<i32> = s.contrastive.iter().flat_map(Search::seqs).collect();
            std::iter::once(s.seq).chain(aux)
        });
        for seq in live.chain(std::mem::take(&mut self.stale_seqs)).filter(|&s| s != 0) {
            clear_seq(&mut *self.session.forward, seq);
        }
    }
}
