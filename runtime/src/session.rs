//! A decoding session: one llama.cpp context, and the constrained decode loop.
//!
//! Each step: the logits of the last position go through the sampling pipeline (with the
//! grammar's mask), the token is accepted by the matcher, tokens the grammar forces are
//! appended without sampling, and the step's tokens go through llama.cpp in one forward
//! pass — while another thread computes the next mask, which depends only on the tokens.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use stencil_mask::{bitmask, CompiledGrammar, Matcher, Vocabulary};
use stencil_sampling::{Sampler, SamplingError, SamplingParams, StopStrings, TokenHistory, Utf8Stream};

use crate::error::{Result, RuntimeError};
use crate::model::{Model, Prompt, SessionOptions};
use crate::telemetry::{GenerationRecord, StopReason, Timings};

/// What to generate.
///
/// ```
/// use stencil_runtime::{GenerateRequest, Prompt};
/// let request = GenerateRequest::new(Prompt::Text("Once upon a time".into()));
/// assert!(request.grammar.is_none() && request.fast_forward);
/// ```
#[derive(Clone, Debug)]
pub struct GenerateRequest {
    pub prompt: Prompt,
    /// The grammar the output must follow, compiled against the model's
    /// [`Model::vocab`]; `None` for free text.
    pub grammar: Option<Arc<CompiledGrammar>>,
    /// What the constraint is, for the record (`"json-schema"`, `"gbnf"`, ...).
    pub constraint_label: String,
    pub params: SamplingParams,
    /// The preset `params` came from, for the record.
    pub preset: Option<String>,
    /// Append tokens the grammar forces without sampling them (one forward pass for all
    /// of them). Default true.
    pub fast_forward: bool,
}

impl GenerateRequest {
    /// A request with default parameters and no constraint.
    pub fn new(prompt: Prompt) -> Self {
        GenerateRequest {
            prompt,
            grammar: None,
            constraint_label: "none".into(),
            params: SamplingParams::default(),
            preset: None,
            fast_forward: true,
        }
    }

    /// Constrains the output by `grammar`, labelled `label` in the record.
    pub fn with_grammar(mut self, grammar: Arc<CompiledGrammar>, label: impl Into<String>) -> Self {
        self.grammar = Some(grammar);
        self.constraint_label = label.into();
        self
    }

    /// Uses `params`.
    pub fn with_params(mut self, params: SamplingParams) -> Self {
        self.params = params;
        self
    }
}

/// A finished generation.
#[derive(Clone, Debug)]
pub struct Generation {
    /// The output text (without a matched stop string, without EOS).
    pub text: String,
    /// Every generated token, forced ones included (EOS excluded).
    pub tokens: Vec<u32>,
    pub stop_reason: StopReason,
    pub record: GenerationRecord,
}

/// One llama.cpp context and what its KV cache holds.
pub struct Session<'m> {
    pub(crate) model: &'m Model,
    pub(crate) ctx: LlamaContext<'m>,
    pub(crate) options: SessionOptions,
    pub(crate) batch: LlamaBatch<'static>,
    /// The tokens in sequence 0 of the KV cache, in order.
    cached: Vec<u32>,
}

impl<'m> Session<'m> {
    pub(crate) fn new(model: &'m Model, ctx: LlamaContext<'m>, options: SessionOptions) -> Self {
        let batch = LlamaBatch::new(options.n_batch.max(1) as usize, options.n_seq_max.max(1) as i32);
        Session { model, ctx, options, batch, cached: Vec::new() }
    }

    /// The model this session runs.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// Generates text for `request`, calling `on_text` with each piece of output as soon
    /// as it is final (valid UTF-8, never part of a stop string).
    pub fn generate(&mut self, request: &GenerateRequest, mut on_text: impl FnMut(&str)) -> Result<Generation> {
        let started_at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let start = Instant::now();
        let params = &request.params;
        let vocab = self.model.vocab().clone();
        let mut sampler = Sampler::new(params.clone())?;
        let mut matcher = match &request.grammar {
            Some(g) => {
                check_grammar_vocab(g, &vocab)?;
                Some(Matcher::new(g.clone()))
            }
            None => None,
        };
        let prompt = self.prompt_tokens(&request.prompt, params.max_tokens as usize)?;
        let mut history = TokenHistory::with_prompt(&prompt);
        let mut mask = bitmask::new_mask(vocab.mask_width());
        let free_mask = (params.ignore_eos && matcher.is_none()).then(|| all_but_eos(&vocab));

        // The first mask is computed while the prompt is evaluated.
        let mut mask_time = Duration::ZERO;
        let (prefill, first_mask) = std::thread::scope(|s| {
            let worker = s.spawn(|| timed_fill(matcher.as_mut(), &mut mask));
            let prefill = self.prefill(&prompt);
            (prefill, worker.join())
        });
        let cached_prompt_tokens = prefill?;
        let prefill_time = start.elapsed();
        mask_time += join_mask(first_mask)?;

        let mut out = TextOutput::new(params.stop.clone());
        let mut tokens = Vec::new();
        let (mut forced, mut passes) = (0usize, 0usize);
        let (mut sample_time, mut mask_wait) = (Duration::ZERO, Duration::ZERO);
        let mut fallback_steps = 0usize;
        let mut logits_index = self.batch.n_tokens() - 1;
        let max_tokens = params.max_tokens as usize;
        let decode_start = Instant::now();
        let stop_reason = loop {
            if tokens.len() >= max_tokens {
                break StopReason::Length;
            }
            if let Some(m) = &matcher {
                if m.must_end() {
                    break StopReason::GrammarComplete;
                }
                if params.ignore_eos {
                    clear_eos(&mut mask, &vocab);
                }
            }
            let t = Instant::now();
            let logits = self.ctx.get_logits_ith(logits_index);
            let step_mask = if matcher.is_some() { Some(&mask[..]) } else { free_mask.as_deref() };
            let token = match sampler.sample(logits, step_mask, &history) {
                // Bias or penalties removed every token the grammar allows: the grammar
                // wins, and the step takes the most likely allowed token.
                Err(SamplingError::NoCandidates) if step_mask.is_some() => {
                    fallback_steps += 1;
                    masked_argmax(logits, step_mask.unwrap_or(&[])).ok_or(SamplingError::NoCandidates)?
                }
                other => other?,
            };
            sample_time += t.elapsed();
            if vocab.is_eos(token) {
                break StopReason::Eos;
            }
            let mut step = vec![token];
            if let Some(m) = matcher.as_mut() {
                m.accept_token(token)?;
                if request.fast_forward {
                    let room = max_tokens - tokens.len() - 1;
                    let more = m.forced_tokens(room);
                    m.accept_tokens(&more).map_err(|(_, e)| e)?;
                    forced += more.len();
                    step.extend(more);
                }
            }
            let mut stopped = None;
            for &tok in &step {
                history.push(tok);
                tokens.push(tok);
                if vocab.is_text(tok) {
                    if let Some(stop) = out.push(vocab.token_bytes(tok), &mut on_text) {
                        stopped = Some(stop);
                        break;
                    }
                }
            }
            if let Some(stop) = stopped {
                break StopReason::Stop(stop);
            }
            if tokens.len() >= max_tokens {
                break StopReason::Length;
            }
            if self.cached.len() + step.len() > self.ctx.n_ctx() as usize {
                break StopReason::ContextFull;
            }
            // The forward pass for this step's tokens, with the next mask alongside.
            let (decoded, next_mask) = std::thread::scope(|s| {
                let worker = s.spawn(|| timed_fill(matcher.as_mut(), &mut mask));
                let decoded = self.decode_tokens(&step);
                let waited = Instant::now();
                let r = worker.join();
                (decoded, (r, waited.elapsed()))
            });
            decoded?;
            passes += 1;
            mask_time += join_mask(next_mask.0)?;
            mask_wait += next_mask.1;
            logits_index = self.batch.n_tokens() - 1;
        };
        let text = out.finish(&mut on_text, &stop_reason);
        let decode_time = decode_start.elapsed();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let per_second = |n: usize, d: Duration| if d.is_zero() { 0.0 } else { n as f64 / d.as_secs_f64() };
        let evaluated = prompt.len() - cached_prompt_tokens;
        let record = GenerationRecord {
            started_at,
            model: self.model.info().clone(),
            preset: request.preset.clone(),
            params: params.clone(),
            seed: sampler.seed(),
            constraint: request.constraint_label.clone(),
            stop_reason: stop_reason.clone(),
            prompt_tokens: prompt.len(),
            cached_prompt_tokens,
            generated_tokens: tokens.len(),
            forced_tokens: forced,
            forward_passes: passes,
            fallback_steps,
            timings: Timings {
                prefill_ms: ms(prefill_time),
                decode_ms: ms(decode_time),
                total_ms: ms(start.elapsed()),
                mask_ms: ms(mask_time),
                mask_ms_per_token: if tokens.is_empty() { 0.0 } else { ms(mask_time) / tokens.len() as f64 },
                mask_wait_ms: ms(mask_wait),
                sample_ms: ms(sample_time),
                tokens_per_second: per_second(tokens.len(), decode_time),
                prefill_tokens_per_second: per_second(evaluated, prefill_time),
            },
        };
        Ok(Generation { text, tokens, stop_reason, record })
    }

    /// Renders and tokenizes the prompt, checking that it and `max_tokens` fit.
    pub(crate) fn prompt_tokens(&self, prompt: &Prompt, max_tokens: usize) -> Result<Vec<u32>> {
        let text = self.model.render_prompt(prompt)?;
        let tokens = self.model.tokenize(&text);
        if tokens.is_empty() {
            return Err(RuntimeError::EmptyPrompt);
        }
        let n_ctx = self.ctx.n_ctx();
        if tokens.len() >= n_ctx as usize {
            return Err(RuntimeError::ContextOverflow { prompt: tokens.len(), max_tokens, n_ctx });
        }
        Ok(tokens)
    }

    /// Puts `prompt` in sequence 0 of the KV cache, reusing the longest prefix already
    /// there; the batch then holds the last prompt token with its logits requested.
    /// Returns how many prompt tokens were reused.
    pub(crate) fn prefill(&mut self, prompt: &[u32]) -> Result<usize> {
        let mut keep = self.cached.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        // The last prompt token is always evaluated again, for its logits.
        keep = keep.min(prompt.len() - 1);
        let trimmed = self.ctx.clear_kv_cache_seq(None, Some(keep as u32), None).unwrap_or(false);
        if !trimmed {
            self.ctx.clear_kv_cache();
            keep = 0;
        }
        self.cached.truncate(keep);
        let chunk = self.options.n_batch.max(1) as usize;
        for piece in prompt[keep..].chunks(chunk) {
            self.decode_tokens(piece)?;
        }
        Ok(keep)
    }

    /// One forward pass over `tokens` (sequence 0), logits for the last one.
    pub(crate) fn decode_tokens(&mut self, tokens: &[u32]) -> Result<()> {
        self.batch.clear();
        let start = self.cached.len();
        for (i, &tok) in tokens.iter().enumerate() {
            self.batch
                .add(LlamaToken(tok as i32), (start + i) as i32, &[0], i + 1 == tokens.len())
                .map_err(|e| RuntimeError::Decode(e.to_string()))?;
        }
        self.ctx.decode(&mut self.batch).map_err(|e| RuntimeError::Decode(e.to_string()))?;
        self.cached.extend_from_slice(tokens);
        Ok(())
    }

    /// Records that sequence 0 of the KV cache holds exactly `tokens`.
    pub(crate) fn set_cached(&mut self, tokens: Vec<u32>) {
        self.cached = tokens;
    }

    /// Forgets the KV cache (the next generation evaluates its whole prompt).
    pub fn reset(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.clear();
    }
}

/// The grammar must have been compiled for this model's vocabulary.
pub(crate) fn check_grammar_vocab(grammar: &CompiledGrammar, vocab: &Vocabulary) -> Result<()> {
    let ours = grammar.vocab();
    if ours.mask_width() != vocab.mask_width() || ours.len() != vocab.len() {
        return Err(RuntimeError::GrammarVocabulary { grammar: ours.mask_width(), model: vocab.mask_width() });
    }
    Ok(())
}

/// Fills the next mask if there is a matcher, timing it.
fn timed_fill(matcher: Option<&mut Matcher>, mask: &mut [u32]) -> Result<Duration> {
    let start = Instant::now();
    if let Some(m) = matcher {
        m.fill_mask(mask)?;
    }
    Ok(start.elapsed())
}

fn join_mask(joined: std::thread::Result<Result<Duration>>) -> Result<Duration> {
    joined.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
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

/// The text bytes of `tokens` (control tokens have none).
pub(crate) fn text_bytes(vocab: &Vocabulary, tokens: &[u32]) -> Vec<u8> {
    tokens.iter().filter(|&&t| vocab.is_text(t)).flat_map(|&t| vocab.token_bytes(t).iter().copied()).collect()
}

/// Token bytes → valid UTF-8 → stop strings → the caller, keeping the final text.
pub(crate) struct TextOutput {
    utf8: Utf8Stream,
    stops: StopStrings,
    stop_strings: Vec<String>,
    text: String,
}

impl TextOutput {
    pub(crate) fn new(stop: Vec<String>) -> Self {
        TextOutput {
            utf8: Utf8Stream::new(),
            stops: StopStrings::new(stop.clone()),
            stop_strings: stop,
            text: String::new(),
        }
    }

    /// Feeds a token's bytes; returns the stop string when one matched.
    pub(crate) fn push(&mut self, bytes: &[u8], on_text: &mut impl FnMut(&str)) -> Option<String> {
        let piece = self.utf8.push(bytes);
        if piece.is_empty() {
            return None;
        }
        let out = self.stops.push(&piece);
        self.emit(&out.emit, on_text);
        out.stopped.map(|i| self.stop_strings[i].clone())
    }

    /// Flushes what was held back (unless a stop string matched) and returns the text.
    pub(crate) fn finish(self, on_text: &mut impl FnMut(&str), reason: &StopReason) -> String {
        let TextOutput { utf8, mut stops, mut text, .. } = self;
        if !matches!(reason, StopReason::Stop(_)) {
            let out = stops.push(&utf8.finish());
            emit(&mut text, &out.emit, on_text);
            if out.stopped.is_none() {
                emit(&mut text, &stops.finish_output().emit, on_text);
            }
        }
        text
    }

    fn emit(&mut self, piece: &str, on_text: &mut impl FnMut(&str)) {
        emit(&mut self.text, piece, on_text);
    }
}

fn emit(text: &mut String, piece: &str, on_text: &mut impl FnMut(&str)) {
    if !piece.is_empty() {
        on_text(piece);
        text.push_str(piece);
    }
}
