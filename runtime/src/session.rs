//! A decoding session: one llama.cpp context, what its KV cache holds, and the request and
//! result types of a generation.
//!
//! The decode loop itself is [`crate::decode::Decoder`]'s: each step, the logits of each
//! sequence's last position go through the sampling pipeline (with the grammar's mask), the
//! token is accepted by the matcher, tokens the grammar forces are appended without
//! sampling, and every sequence's tokens go through llama.cpp in one forward pass — while
//! another thread computes the next masks, which depend only on the tokens.

use std::sync::Arc;

use llama_cpp_2::context::LlamaContext;
use stencil_mask::{CompileError, CompiledGrammar, Vocabulary};
use stencil_sampling::{SamplingParams, StopStrings, Utf8Stream};
use stencil_structural::CompiledTag;

use crate::decode::forward::{clear_seq, LlamaForward};
use crate::decode::{Forward, Row};
use crate::error::{Result, RuntimeError};
use crate::model::{Model, ModelInfo, Prompt, SessionOptions};
use crate::telemetry::{GenerationRecord, StopReason};

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
    /// Speculative decoding (prompt lookup); `None` (default) decodes one sampled token per
    /// forward pass. Outputs are the same either way (see [`crate::Speculation`]).
    pub speculation: Option<crate::Speculation>,
    /// Alternatives to report per sampled token ([`Generation::top_logprobs`]): the `n` most
    /// likely allowed tokens. Default 0 (none); contrastive search reports none.
    pub top_logprobs: usize,
    /// The structural tag `grammar` was compiled from, when it has reasoning budgets
    /// (`any_text`'s `max_tokens`): the loop counts them and forces the close of a spent
    /// one ([`with_structural_tag`](Self::with_structural_tag)). Beam search ignores them.
    /// With a tag, the output text holds the control tokens the grammar took (a `token`
    /// marker such as `<think>` or `<|python_tag|>`), end-of-generation tokens aside, so that
    /// the reply reads back by the tag's captures, whole or streamed.
    pub structural_tag: Option<Arc<CompiledTag>>,
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
            speculation: None,
            top_logprobs: 0,
            structural_tag: None,
        }
    }

    /// Constrains the output by a structural tag: its grammar compiled for `vocab` (the
    /// model's), its reasoning budgets counted.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stencil_runtime::{GenerateRequest, Prompt};
    /// let tag = serde_json::json!({"format": {"type": "sequence", "elements": [
    ///     {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "max_tokens": 64}, "end": "</think>"},
    ///     {"type": "const_string", "value": "Yes."}]}});
    /// let tag = Arc::new(stencil_structural::compile_json(&tag, &Default::default()).unwrap());
    /// use stencil_mask::{TokenKind, Vocabulary};
    /// let mut tokens = vec![(b"<eos>".to_vec(), TokenKind::Control)];
    /// tokens.extend((0..=255u8).map(|b| (vec![b], TokenKind::Byte)));
    /// let vocab = Arc::new(Vocabulary::new(tokens, vec![0]).unwrap());
    /// let request = GenerateRequest::new(Prompt::Tokens(vec![1])).with_structural_tag(tag, &vocab).unwrap();
    /// assert_eq!(request.constraint_label, "structural-tag");
    /// ```
    ///
    /// # Errors
    ///
    /// The engine's [`CompileError`] for a grammar it cannot compile.
    pub fn with_structural_tag(
        mut self,
        tag: Arc<CompiledTag>,
        vocab: &Arc<Vocabulary>,
    ) -> std::result::Result<Self, CompileError> {
        self.grammar = Some(CompiledGrammar::new(&tag.grammar, vocab.clone())?);
        self.constraint_label = "structural-tag".into();
        self.structural_tag = Some(tag);
        Ok(self)
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
    /// Per token of `tokens`: its log-probability among the allowed tokens (after bias,
    /// penalties and temperature; [`stencil_sampling::Sampler::logprob`]) when it was
    /// sampled, `None` when the grammar forced it.
    pub logprobs: Vec<Option<f32>>,
    /// With [`GenerateRequest::top_logprobs`] = n > 0, per token of `tokens`: the n most
    /// likely allowed tokens at its position and their log-probabilities (as `logprobs`),
    /// best first; empty for a forced token. Empty when n = 0.
    pub top_logprobs: Vec<Vec<(u32, f32)>>,
    pub stop_reason: StopReason,
    pub record: GenerationRecord,
}

/// One model context — llama.cpp's, or any [`Forward`] — and what its KV cache holds.
pub struct Session<'m> {
    /// The model, for prompts given as text or chat messages (`None` over a custom
    /// [`Forward`], which takes token prompts).
    pub(crate) model: Option<&'m Model>,
    pub(crate) info: ModelInfo,
    pub(crate) vocab: Arc<Vocabulary>,
    pub(crate) forward: Box<dyn Forward + 'm>,
    pub(crate) options: SessionOptions,
    /// The tokens in sequence 0 of the KV cache, in order.
    pub(crate) cached: Vec<u32>,
    /// The draft model's context, once attached ([`Session::attach_draft`]).
    pub(crate) draft: Option<crate::speculate::DraftContext<'m>>,
    /// How prompt-lookup drafts fared, and what a forward pass costs: where drafts are cut.
    pub(crate) lookup_stats: crate::speculate::LookupStats,
    pub(crate) pass_cost: crate::speculate::PassCost,
}

impl<'m> Session<'m> {
    pub(crate) fn new(model: &'m Model, ctx: LlamaContext<'m>, options: SessionOptions) -> Self {
        let forward = LlamaForward::new(ctx, options.n_batch as usize, options.n_seq_max as usize);
        let mut session = Self::over(Box::new(forward), model.vocab().clone(), options);
        session.model = Some(model);
        session.info = model.info().clone();
        session
    }

    /// A session over any model that implements [`Forward`] (a test double, another
    /// inference library), whose logits are `vocab`'s tokens. Its prompts are token ids
    /// ([`Prompt::Tokens`]); `options` give the batch size and the sequences (the context
    /// size is the model's, [`Forward::n_ctx`]).
    pub fn over(forward: Box<dyn Forward + 'm>, vocab: Arc<Vocabulary>, options: SessionOptions) -> Self {
        let info = ModelInfo {
            name: "custom".into(),
            path: Default::default(),
            n_vocab: vocab.mask_width(),
            n_ctx_train: forward.n_ctx() as u32,
            n_params: 0,
            size_bytes: 0,
            has_chat_template: false,
        };
        Session {
            model: None,
            info,
            vocab,
            forward,
            options,
            cached: Vec::new(),
            draft: None,
            lookup_stats: Default::default(),
            pass_cost: Default::default(),
        }
    }

    /// The model this session runs (`None` for a session [`over`](Self::over) a custom
    /// [`Forward`]).
    pub fn model(&self) -> Option<&'m Model> {
        self.model
    }

    /// The vocabulary of the session's logits (grammars are compiled against it).
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The options the session was opened with.
    pub fn options(&self) -> &SessionOptions {
        &self.options
    }

    /// Generates text for `request`, calling `on_text` with each piece of output as soon
    /// as it is final (valid UTF-8, never part of a stop string). One sequence of the
    /// decode loop ([`crate::decode::Decoder`]).
    pub fn generate(&mut self, request: &GenerateRequest, mut on_text: impl FnMut(&str)) -> Result<Generation> {
        let mut samples = self.generate_n(request, 1, |_, piece| on_text(piece))?;
        Ok(samples.pop().expect("one sample"))
    }

    /// The prompt's tokens, checking that they fit the context.
    pub(crate) fn prompt_tokens(&self, prompt: &Prompt, max_tokens: usize) -> Result<Vec<u32>> {
        let tokens = match (prompt, self.model) {
            (Prompt::Tokens(tokens), _) => {
                if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.vocab.len()) {
                    return Err(RuntimeError::PromptToken { token: bad, n_vocab: self.vocab.len() });
                }
                tokens.clone()
            }
            (_, Some(model)) => model.encode_prompt(prompt)?,
            (_, None) => return Err(RuntimeError::NoTokenizer),
        };
        if tokens.is_empty() {
            return Err(RuntimeError::EmptyPrompt);
        }
        let n_ctx = self.forward.n_ctx();
        if tokens.len() >= n_ctx {
            return Err(RuntimeError::ContextOverflow { prompt: tokens.len(), max_tokens, n_ctx: n_ctx as u32 });
        }
        Ok(tokens)
    }

    /// Puts `prompt` in KV-cache sequence `seq`, reusing the longest prefix that sequence 0
    /// holds (trimmed in place for sequence 0, copied for another) or, when longer, that
    /// `donor` holds (`(its KV sequence, the prompt tokens it holds in order from the
    /// start)`). The last prompt token is evaluated last, with its logits. With `hidden`,
    /// no prefix is reused and the hidden state of every prompt token is appended to it as
    /// a unit vector (contrastive search). Returns how many prompt tokens were reused and
    /// the row of the last pass that holds the last token's logits. Other sequences are
    /// left as they are.
    pub(crate) fn prefill_seq(
        &mut self,
        seq: i32,
        prompt: &[u32],
        donor: Option<(i32, usize)>,
        mut hidden: Option<&mut Vec<f32>>,
    ) -> Result<(usize, usize)> {
        let mut keep = common_prefix(&self.cached, prompt);
        let donor = donor.filter(|&(d, n)| d != seq && n > keep);
        if let Some((_, n)) = donor {
            keep = n;
        }
        if hidden.is_some() {
            keep = 0;
        }
        // The last prompt token is always evaluated again, for its logits.
        keep = keep.min(prompt.len() - 1);
        let forward = &mut *self.forward;
        if let (Some((d, _)), true) = (donor, keep > 0) {
            // The live sequence's cells are shared, as samples of one prompt share theirs.
            clear_seq(forward, seq);
            if forward.copy(d, seq, 0, Some(keep)).is_err() {
                keep = 0;
            }
            if seq == 0 {
                self.cached = prompt[..keep].to_vec();
            }
        } else if seq == 0 {
            if !forward.remove(0, keep, None) {
                clear_seq(forward, 0);
                keep = 0;
            }
            self.cached.truncate(keep);
        } else {
            clear_seq(forward, seq);
            if keep > 0 && forward.copy(0, seq, 0, Some(keep)).is_err() {
                keep = 0;
            }
        }
        let chunk = self.options.n_batch.max(1) as usize;
        let mut last_row = 0;
        for (i, piece) in prompt[keep..].chunks(chunk).enumerate() {
            let start = keep + i * chunk;
            let rows: Vec<Row> = piece
                .iter()
                .enumerate()
                .map(|(j, &token)| Row { token, pos: start + j, seq, logits: hidden.is_some() || j + 1 == piece.len() })
                .collect();
            self.forward.decode(&rows)?;
            last_row = rows.len() - 1;
            if seq == 0 {
                self.cached.extend_from_slice(piece);
            }
            if let Some(hidden) = hidden.as_deref_mut() {
                for row in 0..rows.len() {
                    crate::contrastive::push_unit(self.forward.hidden(row)?, hidden);
                }
            }
        }
        Ok((keep, last_row))
    }

    /// Forgets the KV cache (the next generation evaluates its whole prompt).
    pub fn reset(&mut self) {
        self.forward.clear();
        self.cached.clear();
        if let Some(draft) = self.draft.as_mut() {
            draft.clear();
        }
    }
}

/// How many tokens `a` and `b` share from the start.
pub(crate) fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The grammar must have been compiled for this model's vocabulary.
pub(crate) fn check_grammar_vocab(grammar: &CompiledGrammar, vocab: &Vocabulary) -> Result<()> {
    let ours = grammar.vocab();
    if ours.mask_width() != vocab.mask_width() || ours.len() != vocab.len() {
        return Err(RuntimeError::GrammarVocabulary { grammar: ours.mask_width(), model: vocab.mask_width() });
    }
    Ok(())
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
