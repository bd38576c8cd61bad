//! The speculative-decoding flags `generate` and `serve` share: `--speculate`,
//! `--draft-model`, `--draft-tokens`, `--draft-cut` and `--flash-attn`.

use std::path::PathBuf;

use clap::Args;
use stencil_runtime::speculate::{DraftModel, PromptLookup};
use stencil_runtime::{FlashAttention, Speculation};

use crate::error::CliError;

/// How drafts are made and verified.
#[derive(Args, Clone, Debug)]
#[group(skip)]
pub struct SpeculationFlags {
    /// Speculative decoding: prompt-lookup (drafts copied from earlier in the prompt and
    /// the output, checked in the same forward pass; the output is the same, in fewer
    /// passes when the text copies from the prompt).
    #[arg(long, value_name = "METHOD", value_parser = ["prompt-lookup"], conflicts_with = "draft_model")]
    pub speculate: Option<String>,
    /// Speculative decoding with a draft model: a GGUF with the same vocabulary as
    /// --model (a smaller sibling) drafts tokens under the grammar, the model verifies them
    /// in one forward pass; the output has the model's distribution exactly (greedy: the
    /// same output).
    #[arg(long, value_name = "DRAFT.gguf")]
    pub draft_model: Option<PathBuf>,
    /// With --speculate or --draft-model: draft tokens per step at most (default 8 for
    /// prompt lookup, 4 for a draft model).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub draft_tokens: Option<u64>,
    /// With --speculate: where a draft is cut. auto (default): where its expected gain,
    /// from this session's measured acceptance and pass times, is largest; off: every
    /// draft verified whole, so that what is drafted does not depend on timings.
    #[arg(long, value_name = "WHEN", default_value = "auto", value_parser = ["auto", "off"], requires = "speculate")]
    pub draft_cut: String,
    /// llama.cpp's fused flash-attention kernel: auto (llama.cpp decides; on for the CPU),
    /// on or off. With speculation on a CPU, off verifies drafts much faster, but greedy
    /// output may then differ from output without speculation where two tokens nearly tie.
    #[arg(long, value_name = "WHEN", default_value = "auto", value_parser = ["auto", "on", "off"])]
    pub flash_attn: String,
}

impl SpeculationFlags {
    /// --speculate or --draft-model, with --draft-tokens.
    ///
    /// # Errors
    ///
    /// A usage error for --draft-tokens without a method.
    pub fn speculation(&self) -> Result<Option<Speculation>, CliError> {
        let k = self.draft_tokens.map(|k| k as usize);
        Ok(match (&self.speculate, &self.draft_model) {
            (Some(_), _) => Some(Speculation::PromptLookup(PromptLookup {
                max_draft: k.unwrap_or(PromptLookup::default().max_draft),
                cut: self.draft_cut != "off",
                ..PromptLookup::default()
            })),
            (None, Some(_)) => {
                Some(Speculation::DraftModel(DraftModel { max_draft: k.unwrap_or(DraftModel::default().max_draft) }))
            }
            (None, None) if k.is_some() => {
                return Err(CliError::Usage("--draft-tokens needs --speculate prompt-lookup or --draft-model".into()))
            }
            (None, None) => None,
        })
    }

    /// --flash-attn.
    ///
    /// # Errors
    ///
    /// A usage error for a value clap let through but the runtime does not know.
    pub fn flash_attention(&self) -> Result<FlashAttention, CliError> {
        self.flash_attn.parse().map_err(CliError::Usage)
    }
}
