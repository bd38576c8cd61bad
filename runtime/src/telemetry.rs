//! The record every generation returns: what ran, with which settings, why it stopped,
//! and how long each part took. Serializable as JSON (one line per generation in a JSONL
//! log).

use serde::Serialize;
use stencil_sampling::SamplingParams;

use crate::model::ModelInfo;

/// Why generation stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason", content = "detail")]
pub enum StopReason {
    /// The model chose an end-of-generation token (never emitted as text).
    Eos,
    /// The text reached a stop string (the string and what follows are not in the output).
    Stop(String),
    /// `max_tokens` tokens were generated.
    Length,
    /// The grammar's text is complete and nothing else may follow: the end-of-generation
    /// token is the only choice, so it is taken without running the model.
    GrammarComplete,
    /// The context window is full.
    ContextFull,
    /// The caller stopped it ([`crate::decode::Decoder::cancel`]: a vote already decided, a
    /// client gone).
    Cancelled,
}

impl StopReason {
    /// The output ended where the model or the grammar ended it (not cut by a limit, a
    /// stop string or the caller): a constrained output is then complete.
    ///
    /// ```
    /// use stencil_runtime::StopReason;
    /// assert!(StopReason::GrammarComplete.is_natural() && !StopReason::Length.is_natural());
    /// ```
    pub fn is_natural(&self) -> bool {
        matches!(self, StopReason::Eos | StopReason::GrammarComplete)
    }

    /// Cut short by a limit (`max_tokens`, the context) or the caller: the text may be
    /// incomplete.
    ///
    /// ```
    /// use stencil_runtime::StopReason;
    /// assert!(StopReason::Cancelled.is_cut() && !StopReason::Stop("\n".into()).is_cut());
    /// ```
    pub fn is_cut(&self) -> bool {
        matches!(self, StopReason::Length | StopReason::ContextFull | StopReason::Cancelled)
    }
}

/// Times of one generation, in milliseconds (wall clock).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timings {
    /// Evaluating the prompt (tokens not already in the KV cache).
    pub prefill_ms: f64,
    /// From the first sampled token to the end.
    pub decode_ms: f64,
    pub total_ms: f64,
    /// Computing token masks, summed over steps; most of it runs while llama.cpp computes
    /// the forward pass, on another thread.
    pub mask_ms: f64,
    /// Mask time per generated token.
    pub mask_ms_per_token: f64,
    /// Time the decode loop waited for a mask after the forward pass was done: the
    /// grammar's visible cost.
    pub mask_wait_ms: f64,
    /// The sampling pipeline (penalties, mask, truncation, draw), summed over steps.
    pub sample_ms: f64,
    /// Generated tokens per second of decode time.
    pub tokens_per_second: f64,
    /// Prompt tokens per second of prefill time.
    pub prefill_tokens_per_second: f64,
}

/// Everything about one generation, for logs and benchmarks.
#[derive(Clone, Debug, Serialize)]
pub struct GenerationRecord {
    /// Seconds since the Unix epoch when generation started.
    pub started_at: f64,
    pub model: ModelInfo,
    /// The preset the parameters came from, if any.
    pub preset: Option<String>,
    /// Every sampling parameter, as used.
    pub params: SamplingParams,
    /// The seed actually used (drawn at random when the parameters named none).
    pub seed: u64,
    /// What constrained the output: `"none"`, or a description such as `"json-schema"`.
    pub constraint: String,
    pub stop_reason: StopReason,
    pub prompt_tokens: usize,
    /// Prompt tokens reused from the KV cache of the previous generation.
    pub cached_prompt_tokens: usize,
    pub generated_tokens: usize,
    /// Generated tokens the grammar forced, appended without sampling.
    pub forced_tokens: usize,
    /// llama.cpp forward passes after the prompt.
    pub forward_passes: usize,
    /// Steps where logit bias or penalties had removed every token the grammar allows, so
    /// the most likely allowed token was taken instead (the grammar always wins).
    pub fallback_steps: usize,
    /// Sampled steps where the grammar allowed a single token: no decoding-time policy can
    /// act there, and a watermark carries no signal. With `forced_tokens` (also single
    /// choices, appended without a step), the tokens a watermark detector counts for nothing.
    pub single_choice_steps: usize,
    /// Mean log-probability of the tokens sampled with a choice, among the allowed tokens
    /// after bias, penalties and temperature ([`stencil_sampling::Sampler::logprob`]): what
    /// best-of-N ranks by. Forced tokens and single-choice steps (log-probability 0, no
    /// choice made) are left out, as the watermark detector leaves them out. `None` when no
    /// token was sampled with a choice.
    pub mean_logprob: Option<f64>,
    /// Prompt-lookup speculation: drafted and accepted tokens, acceptance rate, mean
    /// accepted length (`None` when the request did not speculate). Tokens per target
    /// forward pass: `generated_tokens / forward_passes`.
    pub speculation: Option<crate::speculate::SpeculationStats>,
    /// Contrastive search: its α and k, candidate steps and rows (the model's extra work),
    /// scoring time (`None` when the request did not use it).
    pub contrastive: Option<crate::contrastive::ContrastiveStats>,
    pub timings: Timings,
}

impl GenerationRecord {
    /// One line of JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
