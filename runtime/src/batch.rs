//! The multi-sequence decode loop: many sequences advanced together, one llama.cpp batch
//! per step, each with its own matcher, sampler, history and stop state.
//!
//! A [`BatchDecoder`] borrows a [`Session`] and keeps a set of live sequences. Each has a
//! KV-cache sequence of its own (samples of one prompt share the prompt's cells: the prompt
//! is evaluated once and copied), and between steps each holds its *pending* tokens — the
//! one it sampled and those the grammar forces after it. A [`step`](BatchDecoder::step)
//! puts every live sequence's pending tokens in one batch (one row per token, logits for
//! each sequence's last), runs the forward pass while another thread computes every
//! sequence's next mask, then samples each sequence from its own logits row. Finished
//! sequences leave the batch at once; their KV cells are freed when the next sequence is
//! added, so that N samples decode bit for bit as N separate generations do (reused cells
//! change llama.cpp's summation order, which a quantized model's logits show).
//!
//! Sampling right after the forward pass (not at the start of the next step) leaves no
//! logits waiting between steps, so a sequence with a new prompt can be
//! [`add`](BatchDecoder::add)ed at any time: its prefill is a forward pass of its own.
//!
//! [`Session::generate`] is this loop with one sequence; [`Session::generate_n`] runs N
//! samples of one request.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use llama_cpp_2::token::LlamaToken;
use stencil_mask::{bitmask, Matcher, Vocabulary};
use stencil_sampling::{speculative, Sampler, SamplingError, SamplingParams, TokenHistory};

use crate::contrastive::Search;
use crate::draft::{self, DraftStart};
use crate::error::{Result, RuntimeError};
use crate::session::{check_grammar_vocab, common_prefix, GenerateRequest, Generation, Session, TextOutput};
use crate::speculate::{self, Draft, LookupOrigin, LookupStats, Speculation, SpeculationStats};
use crate::telemetry::{GenerationRecord, StopReason, Timings};

/// The seed of sample `index` of a request whose seed is `seed`: `seed + index` (wrapping).
/// Sample 0 is the single generation with the same seed; each seed starts an independent
/// ChaCha8 stream.
///
/// ```
/// assert_eq!(stencil_runtime::sample_seed(7, 0), 7);
/// assert_eq!(stencil_runtime::sample_seed(u64::MAX, 1), 0);
/// ```
pub fn sample_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_add(index as u64)
}

/// A sequence's handle: the order in which the decoder took it (0, 1, 2, ...).
pub type SequenceHandle = usize;

/// Several sequences decoded together on one [`Session`]: each [`step`](Self::step) is one
/// llama.cpp batch with every live sequence's tokens (its sampled token and those its
/// grammar forces), each sequence with its own KV-cache sequence, matcher, sampler, history
/// and stop state; the next masks are computed on another thread during the forward pass.
/// Sequences can be [`add`](Self::add)ed between steps (samples of one prompt share its
/// evaluation: [`add_samples`](Self::add_samples)) and [`cancel`](Self::cancel)led.
/// [`Session::generate`] and [`Session::generate_n`] run on it; see [`Session::batch`]
/// for an example.
pub struct BatchDecoder<'s, 'm> {
    session: &'s mut Session<'m>,
    live: Vec<Sequence>,
    /// KV-cache sequence ids not in use (`0` last: it keeps the session's prompt cache).
    free_seqs: Vec<i32>,
    /// Free sequences whose cells are not cleared yet: they are cleared when a sequence is
    /// added (or the decoder is dropped), so that the sequences still running never have
    /// their tokens put in freed cells between other sequences' cells. Cell order changes
    /// llama.cpp's summation order, and on quantized models rounding then shows in the
    /// logits; without reuse, N samples decode exactly as N separate generations do.
    stale_seqs: Vec<i32>,
    /// KV cells promised to the live sequences (prompts + `max_tokens` each; a shared
    /// prompt counted once).
    reserved: usize,
    next_handle: SequenceHandle,
}

/// One live sequence.
struct Sequence {
    handle: SequenceHandle,
    /// Its KV-cache sequence id.
    seq: i32,
    request: Arc<GenerateRequest>,
    sampler: Sampler,
    matcher: Option<Matcher>,
    /// The mask for the next sampling (computed during the forward pass).
    mask: Vec<u32>,
    /// Free text with `ignore_eos`: every token but EOS.
    free_mask: Option<Arc<Vec<u32>>>,
    history: TokenHistory,
    out: TextOutput,
    /// Final text not yet given to the caller's `on_text`.
    unsent: String,
    /// Why the sequence failed (its matcher or sampler); it then leaves the batch.
    error: Option<RuntimeError>,
    tokens: Vec<u32>,
    logprobs: Vec<Option<f32>>,
    /// Per token, its position's alternatives (only when the request asks for them).
    top_logprobs: Vec<Vec<(u32, f32)>>,
    /// The alternatives of the position sampled last, until `commit` files them.
    alternatives: Vec<(u32, f32)>,
    /// Tokens to go through the next forward pass: the step's own, then `draft`.
    pending: Vec<u32>,
    /// The drafted tail of `pending` (prompt lookup), checked after the forward pass.
    draft: Draft,
    /// The masks at the draft's later checkpoints, computed during the forward pass.
    draft_masks: Vec<Vec<u32>>,
    /// Batch rows of the logits at the draft's checkpoints.
    check_rows: Vec<i32>,
    /// The next draft model's draft's length at most (adapts to acceptance).
    draft_cap: usize,
    /// A verified prompt-lookup draft's origin, drafted and accepted tokens, until the
    /// decoder counts it in the session's [`LookupStats`].
    lookup_outcome: Option<(LookupOrigin, usize, usize)>,
    /// This sequence's own prompt-lookup counts.
    lookup_own: LookupStats,
    /// Draft-model speculation: the draft's sampler (the request's parameters, its own
    /// seed), and the room the next draft has (set with the pending tokens).
    draft_sampler: Option<Sampler>,
    draft_room: usize,
    room_in_batch: usize,
    /// KV positions this sequence holds (prompt + decoded tokens).
    n_past: usize,
    logits_index: i32,
    /// KV cells reserved for it (released when it finishes).
    reserved: usize,
    stop: Option<StopReason>,
    stats: Stats,
    /// Contrastive search's state, when the request asks for it.
    contrastive: Option<Search>,
}

/// What a sequence's record reports, gathered as it runs.
#[derive(Default)]
struct Stats {
    started_at: f64,
    start: Option<Instant>,
    prefill: Duration,
    decode_start: Option<Instant>,
    prompt_tokens: usize,
    cached_prompt_tokens: usize,
    forced: usize,
    passes: usize,
    fallback_steps: usize,
    /// Sampled steps whose grammar mask allowed one token (watermark: no signal possible).
    single_choice_steps: usize,
    sample: Duration,
    mask: Duration,
    mask_wait: Duration,
    /// Sum of the sampled tokens' log-probabilities, and how many there were.
    logprob_sum: f64,
    sampled: usize,
    speculation: SpeculationStats,
}

impl<'m> Session<'m> {
    /// A multi-sequence decoder over this session (see [`BatchDecoder`]).
    ///
    /// ```no_run
    /// use stencil_runtime::{GenerateRequest, Model, ModelOptions, Prompt, SessionOptions};
    /// let model = Model::load("model.gguf", &ModelOptions::default())?;
    /// let mut session = model.session(&SessionOptions { n_seq_max: 4, ..SessionOptions::default() })?;
    /// let request = GenerateRequest::new(Prompt::Text("Once upon a time".into()));
    /// let mut batch = session.batch();
    /// let samples = batch.add_samples(&request, 3)?; // handles 0, 1, 2
    /// let other = batch.add(&GenerateRequest::new(Prompt::Text("Dear diary,".into())))?;
    /// let mut done = Vec::new();
    /// while !batch.is_idle() {
    ///     done.extend(batch.step(|handle, piece| println!("{handle}: {piece}"))?);
    /// }
    /// assert_eq!(done.len(), samples.len() + 1);
    /// # let _ = other;
    /// # Ok::<(), stencil_runtime::RuntimeError>(())
    /// ```
    pub fn batch(&mut self) -> BatchDecoder<'_, 'm> {
        let n = self.options.n_seq_max.max(1) as i32;
        BatchDecoder {
            session: self,
            live: Vec::new(),
            free_seqs: (0..n).rev().collect(),
            stale_seqs: Vec::new(),
            reserved: 0,
            next_handle: 0,
        }
    }

    /// `n` samples of `request` decoded together: the prompt evaluated once, its KV cells
    /// shared by `n` sequences, one batch per step. Sample `i` is seeded with
    /// [`sample_seed`]`(seed, i)`, where `seed` is the request's (or one drawn at random,
    /// in every record). `on_text(i, piece)` streams sample `i`. Returns the samples in
    /// order. Needs `n <= n_seq_max` and the prompt plus `n * max_tokens` within the
    /// context ([`RuntimeError::TooManySequences`] otherwise).
    pub fn generate_n(
        &mut self,
        request: &GenerateRequest,
        n: usize,
        mut on_text: impl FnMut(usize, &str),
    ) -> Result<Vec<Generation>> {
        let mut batch = self.batch();
        let handles = batch.add_samples(request, n)?;
        let mut done: Vec<Option<Result<Generation>>> = (0..n).map(|_| None).collect();
        let first = handles.first().copied().unwrap_or(0);
        for (handle, result) in batch.take_finished(|h, piece| on_text(h - first, piece)) {
            done[handle - first] = Some(result);
        }
        while !batch.is_idle() {
            for (handle, result) in batch.step(|h, piece| on_text(h - first, piece))? {
                done[handle - first] = Some(result);
            }
        }
        done.into_iter().map(|g| g.expect("every sample finishes")).collect()
    }
}

impl<'m> BatchDecoder<'_, 'm> {
    /// No live sequence.
    pub fn is_idle(&self) -> bool {
        self.live.is_empty()
    }

    /// Live sequences.
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// KV-cache sequences still free (each [`add`](Self::add) takes one).
    pub fn free_sequences(&self) -> usize {
        self.free_seqs.len()
    }

    /// Adds one sequence with its own prompt: evaluates the prompt (reusing the session's
    /// cached prefix when it gets sequence 0) and samples its first token. Returns its
    /// handle; it may already be finished (see [`take_finished`](Self::take_finished)).
    pub fn add(&mut self, request: &GenerateRequest) -> Result<SequenceHandle> {
        Ok(self.add_samples(request, 1)?[0])
    }

    /// Adds `n` samples of `request` sharing one evaluation of its prompt (see
    /// [`Session::generate_n`] for the seeds). Returns their handles, in sample order.
    pub fn add_samples(&mut self, request: &GenerateRequest, n: usize) -> Result<Vec<SequenceHandle>> {
        let started_at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let start = Instant::now();
        let vocab = self.session.model.vocab().clone();
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
        let k = contrastive.map_or(0, |(_, k)| k);
        let extra_seqs = if k > 0 { Search::sequences(k) } else { 0 };
        let max_tokens = request.params.max_tokens as usize;
        let prompt = self.session.prompt_tokens(&request.prompt, max_tokens)?;
        let n_ctx = self.session.ctx.n_ctx() as usize;
        // A lone sequence may run into the end of the context (it then stops with
        // `ContextFull`); sequences that share it must all fit.
        let lone = n == 1 && self.live.is_empty();
        let per_sample = max_tokens * (1 + k);
        let cells = (prompt.len() + n * per_sample).min(if lone { n_ctx } else { usize::MAX });
        if n == 0 || n * (1 + extra_seqs) > self.free_seqs.len() || self.reserved + cells > n_ctx {
            return Err(RuntimeError::TooManySequences {
                n,
                free: self.free_seqs.len(),
                needed: self.reserved + cells,
                n_ctx,
            });
        }
        // Sampler first: a bad parameter fails before any work.
        let base_seed = Sampler::new(request.params.clone())?.seed();
        for seq in std::mem::take(&mut self.stale_seqs) {
            let _ = self.session.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
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
            (self.session.prefill_seq_with(seqs[0], &prompt, donor, prompt_hidden.as_mut()), join(worker.join()))
        });
        let cached = match prefill {
            Ok(cached) => cached,
            Err(e) => {
                self.free_seqs.extend(aux.iter().flatten().rev());
                self.free_seqs.extend(seqs.iter().rev());
                return Err(e);
            }
        };
        let first_mask_time = first_mask?;
        for &seq in &seqs[1..] {
            self.session.ctx.copy_kv_cache_seq(seqs[0], seq, None, None).map_err(kv_err)?;
        }
        let prefill_time = start.elapsed();
        let logits_index = self.session.batch.n_tokens() - 1;
        self.reserved += cells;
        let free_mask = (request.params.ignore_eos && matcher.is_none()).then(|| Arc::new(all_but_eos(&vocab)));
        let mut handles = Vec::with_capacity(n);
        for (i, &seq) in seqs.iter().enumerate() {
            let mut params = request.params.clone();
            params.seed = Some(sample_seed(base_seed, i));
            if contrastive.is_some() {
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
                logits_index,
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
                contrastive: contrastive.map(|(alpha, _)| {
                    Search::new(alpha, std::mem::take(&mut aux[i]), prompt_hidden.clone().unwrap_or_default())
                }),
            };
            // Its first text reaches the caller at the next step (after it has the handle).
            let logits = self.session.ctx.get_logits_ith(logits_index);
            let result = sequence.next(logits, &vocab, n_ctx, self.capacity(self.live.len() + n));
            sequence.fail_on(result);
            self.live.push(sequence);
        }
        Ok(handles)
    }

    /// Stops sequence `handle`: it finishes with [`StopReason::Cancelled`] (its text so far)
    /// at the next [`step`](Self::step) or [`take_finished`](Self::take_finished), without
    /// another forward pass. False when it is not live.
    pub fn cancel(&mut self, handle: SequenceHandle) -> bool {
        match self.live.iter_mut().find(|s| s.handle == handle) {
            Some(s) => {
                s.stop.get_or_insert(StopReason::Cancelled);
                true
            }
            None => false,
        }
    }

    /// The sequences that finished outside a [`step`](Self::step) (right after being added:
    /// an empty grammar, a stop string in the first token, an error), with their results;
    /// `on_text` gets their last text as [`step`](Self::step) would.
    pub fn take_finished(
        &mut self,
        mut on_text: impl FnMut(SequenceHandle, &str),
    ) -> Vec<(SequenceHandle, Result<Generation>)> {
        self.collect_finished(&mut on_text)
    }

    /// One forward pass for every live sequence, then each samples its next tokens.
    /// `on_text(handle, piece)` gets each sequence's final text as it comes. Returns the
    /// sequences that finished in this step (and any finished since the last call), each
    /// with its generation or its own error (a grammar engine failure ends only that
    /// sequence); `Err` only when the forward pass itself fails.
    pub fn step(
        &mut self,
        mut on_text: impl FnMut(SequenceHandle, &str),
    ) -> Result<Vec<(SequenceHandle, Result<Generation>)>> {
        let mut finished = self.collect_finished(&mut on_text);
        if self.live.is_empty() {
            return Ok(finished);
        }
        let _span = tracing::debug_span!("step", sequences = self.live.len()).entered();
        // Text sampled when a sequence was added.
        for s in &mut self.live {
            s.send(&mut on_text);
        }
        let vocab = self.session.model.vocab().clone();
        let n_ctx = self.session.ctx.n_ctx() as usize;
        let capacity = self.session.options.n_batch.max(1) as usize;
        if let Some(dc) = self.session.draft.as_mut() {
            for s in self.live.iter_mut().filter(|s| s.draft_sampler.is_some()) {
                let result = s.draft_with_model(dc, &vocab);
                s.fail_on(result);
            }
        }
        let (cost, live) = (self.session.pass_cost.estimate(), self.live.len());
        for s in &mut self.live {
            s.draft_by_lookup(&vocab, &self.session.lookup_stats, cost, live);
        }
        // Whole sequences per forward pass, as many as fit the batch (usually all).
        let mut from = 0;
        while from < self.live.len() {
            let mut to = from;
            let mut rows = 0;
            while to < self.live.len() && (to == from || rows + self.live[to].rows() <= capacity) {
                rows += self.live[to].rows();
                to += 1;
            }
            self.forward(from..to)?;
            let room = self.capacity(self.live.len());
            for s in &mut self.live[from..to] {
                if s.error.is_none() {
                    let result = if s.contrastive.as_ref().is_some_and(Search::has_candidates) {
                        s.contrastive_step(self.session, &vocab, n_ctx, room)
                    } else if s.draft.is_empty() {
                        s.next(self.session.ctx.get_logits_ith(s.logits_index), &vocab, n_ctx, room)
                    } else {
                        let ctx = &self.session.ctx;
                        let rows: Vec<&[f32]> = s.check_rows.iter().map(|&r| ctx.get_logits_ith(r)).collect();
                        s.verify(&rows, &vocab, n_ctx, room).map(|rejected| {
                            // The rejected drafts' cells go; sequence 0's cache forgets them.
                            if rejected > 0 {
                                let _ = self.session.ctx.clear_kv_cache_seq(
                                    Some(s.seq as u32),
                                    Some(s.n_past as u32),
                                    None,
                                );
                                if s.seq == 0 {
                                    self.session.cached.truncate(s.n_past);
                                }
                            }
                        })
                    };
                    s.fail_on(result);
                }
                if let Some((origin, sampled, accepted)) = s.lookup_outcome.take() {
                    self.session.lookup_stats.record(origin, sampled, accepted);
                }
                s.send(&mut on_text);
            }
            from = to;
        }
        finished.extend(self.collect_finished(&mut on_text));
        Ok(finished)
    }

    /// Tokens one sequence may put in a step when `live` share the batch.
    fn capacity(&self, live: usize) -> usize {
        (self.session.options.n_batch.max(1) as usize / live.max(1)).max(1)
    }

    /// The forward pass over the pending tokens of `range`, with their next masks computed
    /// on another thread meanwhile.
    fn forward(&mut self, range: std::ops::Range<usize>) -> Result<()> {
        let session = &mut *self.session;
        session.batch.clear();
        for s in &mut self.live[range.clone()] {
            if let Some(search) = s.contrastive.as_mut() {
                if search.has_candidates() {
                    search.add_to_batch(&mut session.ctx, &mut session.batch, s.seq, s.n_past)?;
                    continue;
                }
                search.chain_row = session.batch.n_tokens();
            }
            // Logits for the last token, or, with a draft, at each of its checkpoints.
            let step_len = s.pending.len() - s.draft.len();
            let checkpoints = if s.draft.is_empty() { Vec::new() } else { s.draft.checkpoints() };
            let mut rows_wanted = checkpoints.iter().map(|&j| step_len + j - 1).peekable();
            s.check_rows.clear();
            for (i, &tok) in s.pending.iter().enumerate() {
                let wanted =
                    if checkpoints.is_empty() { i + 1 == s.pending.len() } else { rows_wanted.peek() == Some(&i) };
                if wanted && !checkpoints.is_empty() {
                    rows_wanted.next();
                    s.check_rows.push(session.batch.n_tokens());
                }
                session
                    .batch
                    .add(LlamaToken(tok as i32), (s.n_past + i) as i32, &[s.seq], wanted)
                    .map_err(|e| RuntimeError::Decode(e.to_string()))?;
            }
            s.logits_index = session.batch.n_tokens() - 1;
        }
        let group = &mut self.live[range];
        let _span = tracing::debug_span!("forward", rows = session.batch.n_tokens(), sequences = group.len()).entered();
        let (decoded, waited) = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                // (A candidate step's mask depends on the winner: it is filled after.)
                for s in group.iter_mut().filter(|s| !s.contrastive.as_ref().is_some_and(Search::has_candidates)) {
                    let filled = timed_fill(s.matcher.as_mut(), &mut s.mask);
                    match filled.and_then(|t| Ok(t + s.fill_draft_masks()?)) {
                        Ok(t) => s.stats.mask += t,
                        Err(e) => s.error = Some(e),
                    }
                }
            });
            let (rows, start) = (session.batch.n_tokens() as usize, Instant::now());
            let decoded = session.ctx.decode(&mut session.batch).map_err(|e| RuntimeError::Decode(e.to_string()));
            session.pass_cost.observe(rows, start.elapsed().as_secs_f64());
            let wait = Instant::now();
            join(worker.join());
            (decoded, wait.elapsed())
        });
        decoded?;
        for s in group.iter_mut() {
            if let Some(search) = s.contrastive.as_mut().filter(|c| !c.has_candidates()) {
                let start = search.chain_row;
                search.extend_context(&session.ctx, start..start + s.pending.len() as i32)?;
            }
            if s.seq == 0 {
                session.cached.extend_from_slice(&s.pending);
            }
            s.n_past += s.pending.len();
            s.pending.clear();
            s.stats.passes += 1;
            s.stats.mask_wait += waited;
        }
        Ok(())
    }

    /// Removes the finished sequences, frees their KV cells, and builds their results.
    fn collect_finished(
        &mut self,
        on_text: &mut impl FnMut(SequenceHandle, &str),
    ) -> Vec<(SequenceHandle, Result<Generation>)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.live.len() {
            if self.live[i].stop.is_none() && self.live[i].error.is_none() {
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
    fn release_seq(&mut self, seq: i32) {
        if seq == 0 {
            self.free_seqs.push(0);
        } else {
            self.stale_seqs.push(seq);
            self.free_seqs.insert(0, seq);
        }
    }
}

impl Drop for BatchDecoder<'_, '_> {
    fn drop(&mut self) {
        // Sequences left unfinished free their cells (sequence 0 keeps its prompt cache).
        let live = std::mem::take(&mut self.live).into_iter().flat_map(|s| {
            let aux: Vec<i32> = s.contrastive.iter().flat_map(Search::seqs).collect();
            std::iter::once(s.seq).chain(aux)
        });
        for seq in live.chain(std::mem::take(&mut self.stale_seqs)).filter(|&s| s != 0) {
            let _ = self.session.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
        }
    }
}

impl Sequence {
    /// Batch rows its next forward pass takes.
    fn rows(&self) -> usize {
        match &self.contrastive {
            Some(search) if search.has_candidates() => search.rows(),
            _ => self.pending.len(),
        }
    }

    /// The next step from `logits` (this sequence's row): a sampled token, or contrastive
    /// search's candidates.
    fn next(&mut self, logits: &[f32], vocab: &Vocabulary, n_ctx: usize, room_in_batch: usize) -> Result<()> {
        if self.contrastive.is_some() {
            self.contrastive_next(logits, vocab, n_ctx, room_in_batch)
        } else {
            self.sample_next(logits, vocab, n_ctx, room_in_batch)
        }
    }

    /// Contrastive search: the `top_k` most likely allowed tokens become the next forward
    /// pass's candidates (one allowed token is taken as it is).
    fn contrastive_next(
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
    fn contrastive_step(
        &mut self,
        session: &mut Session<'_>,
        vocab: &Vocabulary,
        n_ctx: usize,
        room: usize,
    ) -> Result<()> {
        let Some(search) = self.contrastive.as_mut() else { return Ok(()) };
        let winner = search.keep_winner(&mut session.ctx, self.seq, self.n_past)?;
        self.n_past += 1;
        if self.seq == 0 {
            session.cached.push(winner.token);
        }
        self.take(winner.token, Some(winner.logprob), vocab, n_ctx, room)?;
        // The winner is in the KV cache already: what is left to evaluate is what follows it.
        if !self.pending.is_empty() {
            self.pending.remove(0);
        }
        if self.stop.is_some() || !self.pending.is_empty() {
            return Ok(());
        }
        self.stats.mask += timed_fill(self.matcher.as_mut(), &mut self.mask)?;
        self.contrastive_next(session.ctx.get_logits_ith(winner.row), vocab, n_ctx, room)
    }

    /// Takes `token` as this step's choice: EOS ends the sequence, any other token
    /// continues it ([`continue_with`](Self::continue_with)).
    fn take(&mut self, token: u32, logprob: Option<f64>, vocab: &Vocabulary, n_ctx: usize, room: usize) -> Result<()> {
        if let Some(lp) = logprob {
            self.stats.logprob_sum += lp;
            self.stats.sampled += 1;
        }
        if vocab.is_eos(token) {
            self.stop = Some(StopReason::Eos);
            return Ok(());
        }
        self.continue_with(token, logprob, vocab, n_ctx, room)
    }

    /// The stop checks before a sampled position (length, grammar complete; EOS cleared
    /// from `mask` with `ignore_eos`): false when the sequence stops here.
    fn before_sampling(&mut self, mask: &mut [u32], vocab: &Vocabulary) -> bool {
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
    fn choose(
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
        if self.matcher.is_some() && bitmask::count(mask) == 1 {
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
        if let Some(lp) = logprob {
            self.stats.logprob_sum += lp;
            self.stats.sampled += 1;
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
    fn continue_with(
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
        if self.tokens.len() >= max_tokens {
            self.stop = Some(StopReason::Length);
        } else if self.n_past + step.len() > n_ctx {
            self.stop = Some(StopReason::ContextFull);
        } else {
            // The room a draft has (drafts are made at the start of the next step).
            let room = (max_tokens - self.tokens.len())
                .min(room_in_batch.saturating_sub(step.len()))
                .min(n_ctx - self.n_past - step.len());
            (self.draft_room, self.room_in_batch) = (room, room_in_batch);
            self.pending = step;
        }
        Ok(())
    }

    /// Appends `tokens` (the first sampled with `logprob`, the rest forced) to the output;
    /// true when a stop string ended it.
    fn commit(&mut self, tokens: &[u32], logprob: Option<f64>, vocab: &Vocabulary) -> bool {
        for (i, &tok) in tokens.iter().enumerate() {
            self.history.push(tok);
            self.tokens.push(tok);
            self.logprobs.push(if i == 0 { logprob.map(|lp| lp as f32) } else { None });
            if self.request.top_logprobs > 0 {
                let alternatives = if i == 0 { std::mem::take(&mut self.alternatives) } else { Vec::new() };
                self.top_logprobs.push(alternatives);
            }
            if vocab.is_text(tok) {
                let unsent = &mut self.unsent;
                if let Some(stop) = self.out.push(vocab.token_bytes(tok), &mut |p: &str| unsent.push_str(p)) {
                    self.stop = Some(StopReason::Stop(stop));
                    return true;
                }
            }
        }
        false
    }

    /// Prompt-lookup speculation: a draft after the pending tokens, copied from the prompt
    /// and the output, cut where its expected gain is largest ([`speculate::cut`], from the
    /// session's acceptance counts `stats`, the pass cost `(a, b)` and the `live` sequences
    /// sharing the pass).
    fn draft_by_lookup(&mut self, vocab: &Vocabulary, stats: &LookupStats, cost: (f64, f64), live: usize) {
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
            let Some((token, logprob)) = chosen? else { break };
            if j == draft.len() || token != draft.tokens[j] {
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

    /// Draft-model speculation: drafts after the pending tokens (see [`crate::draft`]).
    fn draft_with_model(&mut self, dc: &mut crate::draft::DraftContext<'_>, vocab: &Vocabulary) -> Result<()> {
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
        let drafted = draft::draft(dc, sampler, &start, forced_room);
        self.stats.speculation.draft_passes += dc.take_passes();
        self.draft = drafted?;
        self.pending.extend_from_slice(&self.draft.tokens);
        Ok(())
    }

    /// The masks at a draft's later checkpoints (the first is [`Sequence::mask`]): the
    /// matcher forked and walked through the draft.
    fn fill_draft_masks(&mut self) -> Result<Duration> {
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

    /// Ends the sequence with `result`'s error, if it is one.
    fn fail_on(&mut self, result: Result<()>) {
        if let Err(e) = result {
            self.error = Some(e);
        }
    }

    /// Gives the caller the text that became final since the last call.
    fn send(&mut self, on_text: &mut impl FnMut(SequenceHandle, &str)) {
        if !self.unsent.is_empty() {
            on_text(self.handle, &self.unsent);
            self.unsent.clear();
        }
    }

    /// The sequence's generation (or its error), its text flushed.
    fn finish(mut self, session: &Session<'_>, on_text: &mut impl FnMut(SequenceHandle, &str)) -> Result<Generation> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let stop_reason = self.stop.take().unwrap_or(StopReason::Length);
        let out = std::mem::replace(&mut self.out, TextOutput::new(Vec::new()));
        let unsent = &mut self.unsent;
        let text = out.finish(&mut |p: &str| unsent.push_str(p), &stop_reason);
        self.send(on_text);
        let Sequence { request, sampler, tokens, logprobs, top_logprobs, stats, contrastive, .. } = self;
        let now = Instant::now();
        let start = stats.start.unwrap_or(now);
        let decode_time = stats.decode_start.map_or(Duration::ZERO, |d| now - d);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let per_second = |n: usize, d: Duration| if d.is_zero() { 0.0 } else { n as f64 / d.as_secs_f64() };
        let evaluated = stats.prompt_tokens - stats.cached_prompt_tokens;
        let mut params = request.params.clone();
        params.seed = Some(sampler.seed());
        // (A contrastive sequence's sampler runs at temperature 0; the record keeps the request's.)
        let record = GenerationRecord {
            started_at: stats.started_at,
            model: session.model.info().clone(),
            preset: request.preset.clone(),
            params,
            seed: sampler.seed(),
            constraint: request.constraint_label.clone(),
            stop_reason: stop_reason.clone(),
            prompt_tokens: stats.prompt_tokens,
            cached_prompt_tokens: stats.cached_prompt_tokens,
            generated_tokens: tokens.len(),
            forced_tokens: stats.forced,
            forward_passes: stats.passes,
            fallback_steps: stats.fallback_steps,
            single_choice_steps: stats.single_choice_steps,
            mean_logprob: (stats.sampled > 0).then(|| stats.logprob_sum / stats.sampled as f64),
            speculation: request.speculation.is_some().then(|| stats.speculation.finish()),
            contrastive: contrastive.map(|c| c.stats),
            timings: Timings {
                prefill_ms: ms(stats.prefill),
                decode_ms: ms(decode_time),
                total_ms: ms(now - start),
                mask_ms: ms(stats.mask),
                mask_ms_per_token: if tokens.is_empty() { 0.0 } else { ms(stats.mask) / tokens.len() as f64 },
                mask_wait_ms: ms(stats.mask_wait),
                sample_ms: ms(stats.sample),
                tokens_per_second: per_second(tokens.len(), decode_time),
                prefill_tokens_per_second: per_second(evaluated, stats.prefill),
            },
        };
        Ok(Generation { text, tokens, logprobs, top_logprobs, stop_reason, record })
    }
}

/// Fills the next mask if there is a matcher, timing it.
/// The draw at one position: from the sampler, or, for a drafted token proposed from `q`,
/// the exact accept-or-replace of speculative sampling against the same distribution.
fn draw(
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

/// The mask a sampled position uses: the grammar's (with a matcher), or free text's fixed
/// one (`ignore_eos`), or none.
fn step_mask<'a>(grammar: bool, free_mask: Option<&'a Vec<u32>>, mask: &'a [u32]) -> Option<&'a [u32]> {
    if grammar {
        Some(mask)
    } else {
        free_mask.map(|m| &m[..])
    }
}

/// The draft sampler's seed for a sample seeded `seed`: its own stream.
fn draft_seed(seed: u64) -> u64 {
    seed ^ 0xD2AF_7000_5EED_0001
}

fn timed_fill(matcher: Option<&mut Matcher>, mask: &mut [u32]) -> Result<Duration> {
    let start = Instant::now();
    if let Some(m) = matcher {
        m.fill_mask(mask)?;
    }
    Ok(start.elapsed())
}

fn join<T>(joined: std::thread::Result<T>) -> T {
    joined.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

fn kv_err(e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Decode(format!("KV cache: {e}"))
}

/// The allowed token with the largest finite logit.
fn masked_argmax(logits: &[f32], mask: &[u32]) -> Option<u32> {
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
fn all_but_eos(vocab: &Vocabulary) -> Vec<u32> {
    let mut mask = bitmask::new_mask(vocab.mask_width());
    for id in 0..vocab.mask_width() as u32 {
        bitmask::set(&mut mask, id);
    }
    clear_eos(&mut mask, vocab);
    mask
}
