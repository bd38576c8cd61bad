//! Reading a given text with the model instead of generating one: the log-probability of
//! each token of a continuation after a context (teacher forcing: perplexity, a second
//! model's view of an output), and a text's mean-pooled last hidden state (an embedding).
//!
//! Both run on sequence 0 of the session's KV cache and reuse the prefix it already holds,
//! so scoring many continuations of one context evaluates the context once.
//!
//! ```no_run
//! use stencil_runtime::{Model, ModelOptions, SessionOptions};
//! let model = Model::load("model.gguf", &ModelOptions::default())?;
//! let mut session = model.session(&SessionOptions::default())?;
//! let (context, text) = (model.tokenize("The capital of France is"), model.tokenize_continuation(" Paris."));
//! let logprobs = session.continuation_logprobs(&context, &text)?;
//! let perplexity = (-logprobs.iter().sum::<f64>() / logprobs.len() as f64).exp();
//! # let _ = perplexity;
//! # Ok::<(), stencil_runtime::RuntimeError>(())
//! ```

use crate::decode::forward::clear_seq;
use crate::decode::Row;
use crate::error::{Result, RuntimeError};
use crate::model::Model;
use crate::session::{common_prefix, Session};

impl Model {
    /// Tokenizes `text` as it would follow other text: no BOS, special-token texts left as
    /// text (a model's output is scored as the characters it wrote).
    pub fn tokenize_continuation(&self, text: &str) -> Vec<u32> {
        self.llama().vocab().tokenize(text.as_bytes(), false, false).into_iter().map(|t| t.0 as u32).collect()
    }
}

impl Session<'_> {
    /// The natural log-probability of each token of `continuation`, each given `context`
    /// and the continuation's tokens before it: the log-softmax of the model's raw logits
    /// over the whole vocabulary (no temperature, penalty, bias or grammar). A free
    /// generation at temperature 1 reports the same values for the tokens it sampled
    /// ([`crate::Generation::logprobs`]), up to the rounding of a batched evaluation.
    ///
    /// The context stays in sequence 0 of the KV cache: the next call with the same context
    /// evaluates only its continuation (the context's last token again, for its logits).
    ///
    /// # Errors
    ///
    /// [`RuntimeError::EmptyPrompt`] for an empty context, [`RuntimeError::PromptToken`]
    /// for a token outside the vocabulary, [`RuntimeError::ContextOverflow`] when both do
    /// not fit the context window, or the forward pass's error.
    pub fn continuation_logprobs(&mut self, context: &[u32], continuation: &[u32]) -> Result<Vec<f64>> {
        Ok(self.read(context, continuation, false)?.logprobs)
    }

    /// [`continuation_logprobs`](Self::continuation_logprobs) and, from the same forward
    /// pass, the mean of the last hidden state over the continuation's tokens (each seeing
    /// the context and the tokens before it): what a reader makes of a continuation, its
    /// perplexity and an embedding of it, for the price of one read. Needs a session with
    /// [`crate::SessionOptions::embeddings`]; `mean_hidden` is empty for an empty
    /// continuation.
    ///
    /// # Errors
    ///
    /// As [`continuation_logprobs`](Self::continuation_logprobs), and
    /// [`RuntimeError::Decode`] on a session without hidden states.
    pub fn read_continuation(&mut self, context: &[u32], continuation: &[u32]) -> Result<Reading> {
        self.read(context, continuation, true)
    }

    fn read(&mut self, context: &[u32], continuation: &[u32], hidden: bool) -> Result<Reading> {
        let tokens = self.checked(context, continuation)?;
        let first = context.len() - 1; // the row that predicts continuation[0]
        let mut reading = Reading { logprobs: Vec::with_capacity(continuation.len()), mean_hidden: Vec::new() };
        let mut sum: Vec<f64> = Vec::new();
        self.evaluate(
            &tokens,
            first,
            |pos| pos >= first && (hidden || pos + 1 < tokens.len()),
            |session, pos, row| {
                if pos + 1 < tokens.len() {
                    reading.logprobs.push(log_softmax_at(session.forward.logits(row), tokens[pos + 1] as usize));
                }
                if hidden && pos > first {
                    add(&mut sum, session.forward.hidden(row)?);
                }
                Ok(())
            },
        )?;
        reading.mean_hidden = mean(&sum, continuation.len());
        Ok(reading)
    }

    /// The mean over `tokens` of the model's last hidden state (after its final norm, as
    /// llama.cpp's embeddings give it), each token seeing those before it: an embedding of
    /// the text. Needs a session with [`crate::SessionOptions::embeddings`].
    ///
    /// # Errors
    ///
    /// As [`continuation_logprobs`](Self::continuation_logprobs) (`tokens` is the context),
    /// and [`RuntimeError::Decode`] on a session without hidden states.
    pub fn mean_hidden(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let tokens = self.checked(tokens, &[])?;
        let mut sum: Vec<f64> = Vec::new();
        self.evaluate(
            &tokens,
            0,
            |_| true,
            |session, _, row| {
                add(&mut sum, session.forward.hidden(row)?);
                Ok(())
            },
        )?;
        Ok(mean(&sum, tokens.len()))
    }

    /// `context` then `continuation`, checked against the vocabulary and the context size.
    fn checked(&self, context: &[u32], continuation: &[u32]) -> Result<Vec<u32>> {
        if context.is_empty() {
            return Err(RuntimeError::EmptyPrompt);
        }
        let tokens = [context, continuation].concat();
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.vocab.len()) {
            return Err(RuntimeError::PromptToken { token: bad, n_vocab: self.vocab.len() });
        }
        let n_ctx = self.forward.n_ctx();
        if tokens.len() > n_ctx {
            return Err(RuntimeError::ContextOverflow {
                prompt: context.len(),
                max_tokens: continuation.len(),
                n_ctx: n_ctx as u32,
            });
        }
        Ok(tokens)
    }

    /// Puts `tokens` in sequence 0, reusing at most `reuse` tokens of what it holds, and
    /// calls `read(session, position, row)` for each evaluated position where `wanted`,
    /// right after the pass that evaluated it.
    fn evaluate(
        &mut self,
        tokens: &[u32],
        reuse: usize,
        wanted: impl Fn(usize) -> bool,
        mut read: impl FnMut(&mut Self, usize, usize) -> Result<()>,
    ) -> Result<()> {
        let mut keep = common_prefix(&self.cached, tokens).min(reuse);
        if !self.forward.remove(0, keep, None) {
            clear_seq(&mut *self.forward, 0);
            keep = 0;
        }
        self.cached.truncate(keep);
        let chunk = self.options.n_batch.max(1) as usize;
        for start in (keep..tokens.len()).step_by(chunk) {
            let piece = &tokens[start..(start + chunk).min(tokens.len())];
            let rows: Vec<Row> = piece
                .iter()
                .enumerate()
                .map(|(j, &token)| Row { token, pos: start + j, seq: 0, logits: wanted(start + j) })
                .collect();
            if let Err(e) = self.forward.decode(&rows) {
                self.reset();
                return Err(e);
            }
            self.cached.extend_from_slice(piece);
            for (j, row) in rows.iter().enumerate().filter(|(_, r)| r.logits) {
                read(self, row.pos, j)?;
            }
        }
        Ok(())
    }
}

/// A continuation as a reader sees it ([`Session::read_continuation`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    /// The natural log-probability of each token, given those before it.
    pub logprobs: Vec<f64>,
    /// The mean last hidden state over the continuation's tokens (empty for none).
    pub mean_hidden: Vec<f32>,
}

/// Adds a hidden state to a running sum.
fn add(sum: &mut Vec<f64>, hidden: &[f32]) {
    sum.resize(hidden.len(), 0.0);
    sum.iter_mut().zip(hidden).for_each(|(s, &x)| *s += f64::from(x));
}

/// `sum / n`, as f32.
fn mean(sum: &[f64], n: usize) -> Vec<f32> {
    sum.iter().map(|s| (s / n as f64) as f32).collect()
}

/// `ln softmax(logits)[target]`, in f64 (−∞ for a target outside `logits`).
fn log_softmax_at(logits: &[f32], target: usize) -> f64 {
    let max = f64::from(logits.iter().copied().fold(f32::NEG_INFINITY, f32::max));
    let total: f64 = logits.iter().map(|&l| (f64::from(l) - max).exp()).sum();
    logits.get(target).map_or(f64::NEG_INFINITY, |&l| f64::from(l) - max - total.ln())
}

#[cfg(test)]
mod tests {
    use super::log_softmax_at;

    #[test]
    fn log_softmax_sums_to_one_and_survives_large_logits() {
        let logits = [1000.0f32, 999.0, 0.0];
        let total: f64 = (0..3).map(|t| log_softmax_at(&logits, t).exp()).sum();
        assert!((total - 1.0).abs() < 1e-12, "{total}");
        assert!((log_softmax_at(&logits, 0) - (-(1.0 + (-1.0f64).exp()).ln())).abs() < 1e-9);
        assert_eq!(log_softmax_at(&logits, 7), f64::NEG_INFINITY);
    }
}
