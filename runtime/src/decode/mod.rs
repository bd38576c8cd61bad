//! The decode loop: every generation — one sequence, N samples, a server's requests,
//! speculation, contrastive search — is sequences of one [`Decoder`], advanced together,
//! one forward pass per step.
//!
//! ```text
//!            add / add_samples (admit.rs)
//!   request ─────────────────────────────▶ prefill (prompt, shared prefix) ─┐
//!                                                                            ▼
//!   ┌──────────────────────────── step (mod.rs) ─────────────────────────────────────┐
//!   │ drafts (speculation.rs): prompt lookup, draft model, appended to `pending`      │
//!   │ forward pass over every sequence's pending rows (pass.rs) ∥ next masks (thread) │
//!   │ per sequence (sequence.rs): mask → sample → accept → forced tokens → commit     │
//!   │      → stop checks      or  verify its draft (speculation.rs)                   │
//!   │                         or  contrastive candidates (candidates.rs)              │
//!   └───────────────────────────────────┬─────────────────────────────────────────────┘
//!                                       ▼
//!             finished sequences leave (admit.rs) → Generation + record (record.rs)
//! ```
//!
//! A [`Decoder`] borrows a [`Session`] and keeps a set of live sequences. Each has a KV
//! sequence of its own (samples of one prompt share the prompt's cells: the prompt is
//! evaluated once and copied), and between steps each holds its *pending* tokens — the one
//! it sampled and those the grammar forces after it. A [`step`](Decoder::step) puts every
//! live sequence's pending tokens in one forward pass (one row per token, logits for each
//! sequence's last), while another thread computes every sequence's next mask, then
//! samples each sequence from its own logits. Finished sequences leave the batch at once;
//! their KV cells are freed when the next sequence is added, so that N samples decode bit
//! for bit as N separate generations do (reused cells change llama.cpp's summation order,
//! which a quantized model's logits show). Sampling right after the forward pass leaves no
//! logits waiting between steps, so a sequence can be [`add`](Decoder::add)ed at any time.
//!
//! One step of a sequence, in order:
//!
//! 1. **Prefill** (admit.rs): the prompt's tokens; the KV cache keeps the longest prefix a
//!    sequence already holds (sequence 0 is the session's prompt cache; a live sequence's
//!    cells are shared), the rest is evaluated in passes of `n_batch` rows while the second
//!    thread computes the grammar's first mask.
//! 2. **Mask and draw** (sequence.rs): the logits of the sequence's last row are read in
//!    place; the sampler builds its candidate list from the mask's set bits only, so a step
//!    costs nothing proportional to the vocabulary where the grammar allows few tokens. EOS
//!    is in the mask only where the grammar can end; where it must end, the sequence stops
//!    without a pass (`GrammarComplete`). Bias or penalties that remove every allowed token
//!    fall back to the most likely allowed one (the grammar wins).
//! 3. **Accept and fast-forward**: the matcher accepts the token; with fast-forward the
//!    tokens the grammar forces (`Matcher::forced_tokens`) follow it into the same pass.
//! 4. **Text out**: token bytes (the engine's vocabulary: the bytes the masks were built on)
//!    pass through `Utf8Stream` and `StopStrings` to the caller; the record counts tokens,
//!    passes and times (record.rs).
//! 5. **The pass** (pass.rs): every live sequence's pending rows in one
//!    [`Forward::decode`], logits at each sequence's last row (or at a draft's
//!    checkpoints); every next mask on the second thread meanwhile.
//!
//! Admission checks room: at most `n_seq_max` sequences, and prompt plus `n × max_tokens`
//! cells within the context ([`RuntimeError::TooManySequences`](crate::RuntimeError::TooManySequences)).
//! Finished sequences' cells are cleared only when a sequence is added: reused cells change
//! llama.cpp's summation order, and quantized models then move logits by up to 0.07 nats,
//! while without reuse N samples equal N separate generations bit for bit
//! (`runtime/tests/batch.rs`; 26 of 26 on both models in `BENCHMARKS.md`'s scaling
//! section, on the native build: AMX/VNNI kernels, `.cargo/config.toml`, and flash
//! attention, which evaluates each row apart). A portable AVX2 build repacks Q4_K weights
//! and multiplies 4 or more rows with a GEMM kernel that rounds otherwise than its 1–3-row
//! GEMV: there, steps of 4 or more rows move Gemma's logits slightly.
//!
//! N samples of one prompt evaluate it once into one KV sequence and copy it to the others
//! (cells shared: the context's KV cache is unified); sample `i` is seeded `seed + i`. A
//! sequence added mid-flight has its prefill as its own pass, reusing the cached prefix.
//! A cancelled sequence finishes with its text so far at the next step, without another
//! forward pass; each sequence can report the alternatives of every token
//! (`top_logprobs`).
//!
//! The model is anything that implements [`Forward`] (llama.cpp's context, or a test
//! double: `runtime/tests/exact.rs` checks the loop's output distribution against the exact
//! one on a table-driven model; `runtime/tests/table.rs` checks beam search against
//! enumeration).

mod admit;
mod beams;
mod budget;
mod candidates;
pub mod forward;
mod pass;
mod record;
mod sequence;
mod speculation;

pub use forward::{Forward, Row};

use crate::contrastive::Search;
use crate::error::Result;
use crate::session::{GenerateRequest, Generation, Session};
use sequence::Sequence;

/// The seed of sample `index` of a request whose seed is `seed`: `seed + index` (wrapping).
/// Sample 0 is the single generation with the same seed; each seed starts an independent
/// ChaCha8 stream.
///
/// ```
/// assert_eq!(stencil_runtime::decode::sample_seed(7, 0), 7);
/// assert_eq!(stencil_runtime::decode::sample_seed(u64::MAX, 1), 0);
/// ```
pub fn sample_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_add(index as u64)
}

/// A sequence's handle: the order in which the decoder took it (0, 1, 2, ...).
pub type SequenceHandle = usize;

/// Several sequences decoded together on one [`Session`]: each [`step`](Self::step) is one
/// forward pass with every live sequence's tokens (its sampled token and those its grammar
/// forces), each sequence with its own KV sequence, matcher, sampler, history and stop
/// state; the next masks are computed on another thread during the forward pass.
/// Sequences can be [`add`](Self::add)ed between steps (samples of one prompt share its
/// evaluation: [`add_samples`](Self::add_samples)) and [`cancel`](Self::cancel)led.
/// [`Session::generate`] and [`Session::generate_n`] run on it; see [`Session::decoder`]
/// for an example.
pub struct Decoder<'s, 'm> {
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
    /// Beam searches running, and those finished until their beams are taken.
    beams: Vec<beams::BeamGroup>,
    beam_results: Vec<(SequenceHandle, Result<Vec<crate::beam::Beam>>)>,
}

/// What a step returns: the sequences that finished, each with its generation or its own
/// error.
pub type Finished = Vec<(SequenceHandle, Result<Generation>)>;

impl<'m> Session<'m> {
    /// A multi-sequence decoder over this session (see [`Decoder`]).
    ///
    /// ```no_run
    /// use stencil_runtime::{GenerateRequest, Model, ModelOptions, Prompt, SessionOptions};
    /// let model = Model::load("model.gguf", &ModelOptions::default())?;
    /// let mut session = model.session(&SessionOptions { n_seq_max: 4, ..SessionOptions::default() })?;
    /// let request = GenerateRequest::new(Prompt::Text("Once upon a time".into()));
    /// let mut decoder = session.decoder();
    /// let samples = decoder.add_samples(&request, 3)?; // handles 0, 1, 2
    /// let other = decoder.add(&GenerateRequest::new(Prompt::Text("Dear diary,".into())))?;
    /// let mut done = Vec::new();
    /// while !decoder.is_idle() {
    ///     done.extend(decoder.step(|handle, piece| println!("{handle}: {piece}"))?);
    /// }
    /// assert_eq!(done.len(), samples.len() + 1);
    /// # let _ = other;
    /// # Ok::<(), stencil_runtime::RuntimeError>(())
    /// ```
    pub fn decoder(&mut self) -> Decoder<'_, 'm> {
        let n = self.options.n_seq_max.max(1) as i32;
        Decoder {
            session: self,
            live: Vec::new(),
            free_seqs: (0..n).rev().collect(),
            stale_seqs: Vec::new(),
            reserved: 0,
            next_handle: 0,
            beams: Vec::new(),
            beam_results: Vec::new(),
        }
    }

    /// `n` samples of `request` decoded together: the prompt evaluated once, its KV cells
    /// shared by `n` sequences, one batch per step. Sample `i` is seeded with
    /// [`sample_seed`]`(seed, i)`, where `seed` is the request's (or one drawn at random,
    /// in every record). `on_text(i, piece)` streams sample `i`. Returns the samples in
    /// order. Needs `n <= n_seq_max` and the prompt plus `n * max_tokens` within the
    /// context ([`RuntimeError::TooManySequences`](crate::RuntimeError::TooManySequences)
    /// otherwise).
    pub fn generate_n(
        &mut self,
        request: &GenerateRequest,
        n: usize,
        mut on_text: impl FnMut(usize, &str),
    ) -> Result<Vec<Generation>> {
        let mut decoder = self.decoder();
        let handles = decoder.add_samples(request, n)?;
        let mut done: Vec<Option<Result<Generation>>> = (0..n).map(|_| None).collect();
        let first = handles.first().copied().unwrap_or(0);
        for (handle, result) in decoder.take_finished(|h, piece| on_text(h - first, piece)) {
            done[handle - first] = Some(result);
        }
        while !decoder.is_idle() {
            for (handle, result) in decoder.step(|h, piece| on_text(h - first, piece))? {
                done[handle - first] = Some(result);
            }
        }
        done.into_iter().map(|g| g.expect("every sample finishes")).collect()
    }
}

impl Decoder<'_, '_> {
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

    /// Stops sequence `handle`: it finishes with
    /// [`StopReason::Cancelled`](crate::StopReason::Cancelled) (its text so far) at the next
    /// [`step`](Self::step) or [`take_finished`](Self::take_finished), without another
    /// forward pass. False when it is not live.
    pub fn cancel(&mut self, handle: SequenceHandle) -> bool {
        match self.live.iter_mut().find(|s| s.handle == handle) {
            Some(s) => {
                s.stop.get_or_insert(crate::StopReason::Cancelled);
                true
            }
            None => false,
        }
    }

    /// The sequences that finished outside a [`step`](Self::step) (right after being added:
    /// an empty grammar, a stop string in the first token, an error), with their results;
    /// `on_text` gets their last text as [`step`](Self::step) would.
    pub fn take_finished(&mut self, mut on_text: impl FnMut(SequenceHandle, &str)) -> Finished {
        self.collect_finished(&mut on_text)
    }

    /// One forward pass for every live sequence, then each samples its next tokens.
    /// `on_text(handle, piece)` gets each sequence's final text as it comes. Returns the
    /// sequences that finished in this step (and any finished since the last call), each
    /// with its generation or its own error (a grammar engine failure ends only that
    /// sequence); `Err` only when the forward pass itself fails.
    pub fn step(&mut self, mut on_text: impl FnMut(SequenceHandle, &str)) -> Result<Finished> {
        let mut finished = self.collect_finished(&mut on_text);
        if self.live.is_empty() {
            return Ok(finished);
        }
        let _span = tracing::debug_span!("step", sequences = self.live.len()).entered();
        // Text sampled when a sequence was added.
        for s in &mut self.live {
            s.send(&mut on_text);
        }
        self.draft();
        // Whole sequences per forward pass, as many as fit the batch (usually all).
        let capacity = self.session.options.n_batch.max(1) as usize;
        let mut from = 0;
        while from < self.live.len() {
            let mut to = from;
            let mut rows = 0;
            while to < self.live.len() && (to == from || rows + self.live[to].rows() <= capacity) {
                rows += self.live[to].rows();
                to += 1;
            }
            self.forward(from..to)?;
            self.advance(from..to, &mut on_text);
            from = to;
        }
        self.select_beams()?;
        finished.extend(self.collect_finished(&mut on_text));
        Ok(finished)
    }

    /// After the forward pass over `range`: each of its sequences takes its next step from
    /// its logits — a sample, its draft's verification, or contrastive candidates.
    fn advance(&mut self, range: std::ops::Range<usize>, on_text: &mut impl FnMut(SequenceHandle, &str)) {
        let room = self.capacity(self.live.len());
        let session = &mut *self.session;
        let vocab = session.vocab.clone();
        let n_ctx = session.forward.n_ctx();
        for s in &mut self.live[range] {
            if s.beam.is_some() && s.error.is_none() {
                s.beam_candidates(session.forward.logits(s.logits_row));
            } else if s.error.is_none() {
                let result = if s.contrastive.as_ref().is_some_and(Search::has_candidates) {
                    s.contrastive_step(session, &vocab, n_ctx, room)
                } else if s.draft.is_empty() {
                    s.next(session.forward.logits(s.logits_row), &vocab, n_ctx, room)
                } else {
                    s.verify_draft(session, &vocab, n_ctx, room)
                };
                s.fail_on(result);
            }
            if let Some((origin, sampled, accepted)) = s.lookup_outcome.take() {
                session.lookup_stats.record(origin, sampled, accepted);
            }
            s.send(on_text);
        }
    }

    /// Tokens one sequence may put in a step when `live` share the batch.
    fn capacity(&self, live: usize) -> usize {
        (self.session.options.n_batch.max(1) as usize / live.max(1)).max(1)
    }
}
