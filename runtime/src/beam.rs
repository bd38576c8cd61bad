//! Beam search with length normalization. Each beam has its own KV-cache sequence and its
//! own forked matcher, so every beam stays inside the grammar.

use serde::Serialize;
use stencil_mask::{bitmask, Matcher};
use stencil_sampling::{Sampler, TokenHistory};

use crate::error::{Result, RuntimeError};
use crate::session::{check_grammar_vocab, text_bytes, GenerateRequest, Session};

/// Beam search settings.
///
/// ```
/// let p = stencil_runtime::BeamParams::default();
/// assert_eq!((p.n_beams, p.length_penalty), (4, 1.0));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BeamParams {
    /// Beams kept at each step (and results returned), default 4.
    pub n_beams: usize,
    /// Exponent α of the length normalization: a beam's score is
    /// `sum of token log-probabilities / (generated tokens)^α`. 0 ranks by raw
    /// log-probability (favouring short outputs), 1 (default) by the mean per token.
    pub length_penalty: f64,
}

impl Default for BeamParams {
    fn default() -> Self {
        BeamParams { n_beams: 4, length_penalty: 1.0 }
    }
}

/// One result of beam search.
#[derive(Clone, Debug, Serialize)]
pub struct Beam {
    /// The text (bytes decoded as UTF-8, invalid sequences replaced).
    pub text: String,
    pub tokens: Vec<u32>,
    /// Sum of the tokens' log-probabilities (the end-of-generation token's included when
    /// the beam ended with it).
    pub logprob: f64,
    /// `logprob / len^length_penalty`: what beams are ranked by.
    pub score: f64,
    /// False when the beam was cut by `max_tokens` (its text may be incomplete).
    pub finished: bool,
}

/// A beam still being extended.
struct LiveBeam {
    seq: i32,
    tokens: Vec<u32>,
    logprob: f64,
    matcher: Option<Matcher>,
    history: TokenHistory,
    /// Index of this beam's logits in the last batch.
    logits_index: i32,
}

impl Session<'_> {
    /// Beam search for `request` (its prompt, grammar, logit bias and penalties, and
    /// `max_tokens`; temperature and truncation do not apply, and beams are scored by
    /// log-probabilities among the allowed tokens). Returns up to `n_beams` beams, best
    /// score first; finished beams rank before unfinished ones. The session needs
    /// `n_seq_max >= 2 * n_beams` ([`crate::SessionOptions::n_seq_max`]).
    pub fn beam_search(&mut self, request: &GenerateRequest, beam: &BeamParams) -> Result<Vec<Beam>> {
        if request.speculation.is_some() {
            return Err(RuntimeError::SpeculationUnsupported("beam search: drafts verify one sequence's samples"));
        }
        let n = beam.n_beams;
        if n == 0 {
            return Err(RuntimeError::Beam("n_beams must be at least 1".into()));
        }
        if (self.options.n_seq_max as usize) < 2 * n {
            return Err(RuntimeError::Beam(format!(
                "{n} beams need a session with n_seq_max >= {} (it has {})",
                2 * n,
                self.options.n_seq_max
            )));
        }
        let params = &request.params;
        let mut scorer = Sampler::new(params.clone())?;
        let vocab = self.model.vocab().clone();
        if let Some(g) = &request.grammar {
            check_grammar_vocab(g, &vocab)?;
        }
        let prompt = self.prompt_tokens(&request.prompt, params.max_tokens as usize)?;
        self.prefill(&prompt)?;
        let mut live = vec![LiveBeam {
            seq: 0,
            tokens: Vec::new(),
            logprob: 0.0,
            matcher: request.grammar.clone().map(Matcher::new),
            history: TokenHistory::with_prompt(&prompt),
            logits_index: self.batch.n_tokens() - 1,
        }];
        let mut finished: Vec<Beam> = Vec::new();
        let mut mask = bitmask::new_mask(vocab.mask_width());
        let score = |logprob: f64, len: usize| logprob / (len.max(1) as f64).powf(beam.length_penalty);
        let mut bank = 0i32; // live beams use sequences bank*n .. bank*n+n
        let result = (|| -> Result<()> {
            for step in 0..params.max_tokens as usize {
                // Every (beam, next token) pair, best cumulative log-probability first.
                let mut candidates: Vec<(usize, u32, f64)> = Vec::new();
                for (i, b) in live.iter_mut().enumerate() {
                    let step_mask = match b.matcher.as_mut() {
                        Some(m) => {
                            m.fill_mask(&mut mask)?;
                            Some(&mask[..])
                        }
                        None => None,
                    };
                    let logits = self.ctx.get_logits_ith(b.logits_index);
                    for (tok, lp) in scorer.top_logprobs(logits, step_mask, &b.history, n) {
                        candidates.push((i, tok, b.logprob + lp));
                    }
                }
                candidates.sort_by(|a, b| b.2.total_cmp(&a.2));
                let mut next: Vec<LiveBeam> = Vec::new();
                for (i, tok, logprob) in candidates {
                    if next.len() == n || finished.len() >= n {
                        break;
                    }
                    let parent = &live[i];
                    if vocab.is_eos(tok) {
                        let len = parent.tokens.len();
                        finished.push(self.finish(&parent.tokens, logprob, score(logprob, len), true));
                        continue;
                    }
                    let mut matcher = parent.matcher.as_ref().map(Matcher::fork);
                    if let Some(m) = matcher.as_mut() {
                        m.accept_token(tok)?;
                    }
                    let mut tokens = parent.tokens.clone();
                    tokens.push(tok);
                    if matcher.as_ref().is_some_and(Matcher::must_end) {
                        let s = score(logprob, tokens.len());
                        finished.push(self.finish(&tokens, logprob, s, true));
                        continue;
                    }
                    let mut history = parent.history.clone();
                    history.push(tok);
                    next.push(LiveBeam { seq: parent.seq, tokens, logprob, matcher, history, logits_index: 0 });
                }
                if finished.len() >= n || next.is_empty() || step + 1 == params.max_tokens as usize {
                    live = next;
                    break;
                }
                // Each new beam gets its parent's cache in a sequence of the other bank.
                bank = 1 - bank;
                self.batch.clear();
                let pos = (prompt.len() + step) as i32;
                for (j, b) in next.iter_mut().enumerate() {
                    let dst = bank * n as i32 + j as i32;
                    self.ctx.clear_kv_cache_seq(Some(dst as u32), None, None).map_err(beam_err)?;
                    self.ctx.copy_kv_cache_seq(b.seq, dst, None, None).map_err(beam_err)?;
                    b.seq = dst;
                    b.logits_index = j as i32;
                    let tok = *b.tokens.last().expect("a live beam has a token");
                    self.batch
                        .add(llama_cpp_2::token::LlamaToken(tok as i32), pos, &[dst], true)
                        .map_err(|e| RuntimeError::Decode(e.to_string()))?;
                }
                self.ctx.decode(&mut self.batch).map_err(|e| RuntimeError::Decode(e.to_string()))?;
                live = next;
            }
            Ok(())
        })();
        // Leave only the prompt in the cache, in sequence 0.
        for seq in 1..2 * n as u32 {
            let _ = self.ctx.clear_kv_cache_seq(Some(seq), None, None);
        }
        let _ = self.ctx.clear_kv_cache_seq(Some(0), Some(prompt.len() as u32), None);
        self.set_cached(prompt);
        result?;
        for b in live {
            let s = score(b.logprob, b.tokens.len());
            finished.push(self.finish(&b.tokens, b.logprob, s, false));
        }
        finished.sort_by(|a, b| b.finished.cmp(&a.finished).then(b.score.total_cmp(&a.score)));
        finished.truncate(n);
        Ok(finished)
    }

    fn finish(&self, tokens: &[u32], logprob: f64, score: f64, finished: bool) -> Beam {
        let bytes = text_bytes(self.model.vocab(), tokens);
        Beam { text: String::from_utf8_lossy(&bytes).into_owned(), tokens: tokens.to_vec(), logprob, score, finished }
    }
}

fn beam_err(e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Beam(format!("KV cache: {e}"))
}
