//! llama.cpp's own GBNF grammar sampler, driven through the same session: the baseline the
//! decode benchmark compares Stencil's masks with. Greedy only.

use std::time::{Duration, Instant};

use llama_cpp_2::sampling::LlamaSampler;

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
        let mut samplers = Vec::new();
        if let Some(g) = gbnf {
            samplers.push(
                LlamaSampler::grammar(self.model.llama(), g, "root")
                    .map_err(|e| RuntimeError::LlamaGrammar(e.to_string()))?,
            );
        }
        samplers.push(LlamaSampler::greedy());
        let mut chain = LlamaSampler::chain_simple(samplers);
        self.prefill(&prompt)?;
        let vocab = self.model.vocab().clone();
        let mut tokens = Vec::new();
        let mut sample_time = Duration::ZERO;
        let start = Instant::now();
        while tokens.len() < max_tokens {
            let t = Instant::now();
            let token = chain.sample(&self.ctx, self.batch.n_tokens() - 1);
            sample_time += t.elapsed();
            let id = token.0 as u32;
            if vocab.is_eos(id) {
                break;
            }
            tokens.push(id);
            self.decode_tokens(&[id])?;
        }
        Ok(BaselineRun {
            text: String::from_utf8_lossy(&text_bytes(&vocab, &tokens)).into_owned(),
            tokens,
            decode_time: start.elapsed(),
            sample_time,
        })
    }
}
