//! A finished sequence's [`Generation`]: its text flushed, its record filled.

use std::time::{Duration, Instant};

use super::sequence::Sequence;
use super::SequenceHandle;
use crate::error::Result;
use crate::session::{Generation, Session, TextOutput};
use crate::telemetry::{GenerationRecord, StopReason, Timings};

impl Sequence {
    /// The sequence's generation (or its error), its text flushed.
    pub(super) fn finish(
        mut self,
        session: &Session<'_>,
        on_text: &mut impl FnMut(SequenceHandle, &str),
    ) -> Result<Generation> {
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
            model: session.info.clone(),
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
