//! llama.cpp's own GBNF grammar sampler: the baseline the decode benchmark compares
//! Stencil's masks with. Greedy only.
//!
//! It is the one loop outside [`crate::decode`], on purpose: llama.cpp's sampler chain reads
//! the logits from its own context and keeps its grammar state itself, so it runs on a
//! llama.cpp context of its own (the session's model and options), one token per pass, as
//! llama.cpp's examples do — the baseline must measure llama.cpp's path, not ours.

use std::time::{Duration, Instant};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use crate::error::{Result, RuntimeError};
use crate::model::Prompt;
use crate::session::{text_bytes, Session};

/// What a baseline run produced.
#[derive(Clone, Debug)]
pub struct BaselineRun {
    pub text: String,
    pub tokens: Vec<u32>,
    /// From the first sampled token to the end (forward passes and sampling).
    pub decode_time: Duration,
    /// Time inside llama.cpp's sampler chain (grammar and greedy), summed.
    pub sample_time: Duration,
}

impl Session<'_> {
    /// Greedy decoding with `chain(grammar(gbnf), greedy)` from llama.cpp, up to
    /// `max_tokens` tokens or an end-of-generation token. With `gbnf = None`, plain greedy
    /// through llama.cpp's sampler.
    pub fn generate_llama_grammar(
        &mut self,
        prompt: &Prompt,
        gbnf: Option<&str>,
        max_tokens: usize,
    ) -> Result<BaselineRun> {
        let prompt = self.prompt_tokens(prompt, max_tokens)?;
        let model = self.model.ok_or(RuntimeError::NoTokenizer)?;
        let mut samplers = Vec::new();
        if let Some(g) = gbnf {
            samplers.push(
                LlamaSampler::grammar(model.llama(), g, "root")
                    .map_err(|e| RuntimeError::LlamaGrammar(e.to_string()))?,
            );
        }
        samplers.push(LlamaSampler::greedy());
        let mut chain = LlamaSampler::chain_simple(samplers);
        let mut ctx = model.context(&self.options)?;
        let mut batch = LlamaBatch::new(self.options.n_batch.max(1) as usize, 1);
        let chunk = self.options.n_batch.max(1) as usize;
        let mut row = 0;
        for (i, piece) in prompt.chunks(chunk).enumerate() {
            row = decode(&mut ctx, &mut batch, piece, i * chunk)?;
        }
        let vocab = self.vocab.clone();
        let mut tokens = Vec::new();
        let mut sample_time = Duration::ZERO;
        let start = Instant::now();
        while tokens.len() < max_tokens {
            let t = Instant::now();
            let token = chain.sample(&ctx, row);
            sample_time += t.elapsed();
            let id = token.0 as u32;
            if vocab.is_eos(id) {
                break;
            }
            tokens.push(id);
            row = decode(&mut ctx, &mut batch, &[id], prompt.len() + tokens.len() - 1)?;
        }
        Ok(BaselineRun {
            text: String::from_utf8_lossy(&text_bytes(&vocab, &tokens)).into_owned(),
            tokens,
            decode_time: start.elapsed(),
            sample_time,
        })
    }
}

/// One pass over `tokens` at positions `start..`, logits for the last; returns its row.
fn decode(ctx: &mut LlamaContext<'_>, batch: &mut LlamaBatch<'_>, tokens: &[u32], start: usize) -> Result<i32> {
    batch.clear();
    for (i, &t) in tokens.iter().enumerate() {
        batch
            .add(LlamaToken(t as i32), (start + i) as i32, &[0], i + 1 == tokens.len())
            .map_err(|e| RuntimeError::Decode(e.to_string()))?;
    }
    ctx.decode(batch).map_err(|e| RuntimeError::Decode(e.to_string()))?;
    Ok(batch.n_tokens() - 1)
}
