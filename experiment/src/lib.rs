//! Decoding experiments: what a set of generated outputs says about the decoding policy
//! that produced them.
//!
//! An experiment runs the same prompts through several decoding presets (the CLI's
//! `stencil experiment` does the decoding) and gathers every output as a [`Sample`]. This
//! crate turns the samples into numbers and pictures: [`metrics`] (repetition and
//! diversity after Su et al., seq-rep-n, distinct-n, self-BLEU, length, parse rate),
//! [`chart`] (dependency-free SVG charts) and [`report`] (a metrics table per group and a
//! Markdown report that embeds the charts). It knows nothing of models or llama.cpp.
//!
//! ```
//! use stencil_experiment::{metrics::Metrics, Sample};
//! let sample = |text: &str| Sample::free_text("m", "p", "greedy", 1, text, 4);
//! let samples = [sample("a b a b"), sample("a b a b")];
//! let m = Metrics::of(&samples.iter().collect::<Vec<_>>());
//! assert_eq!(m.distinct_outputs, 1);
//! assert_eq!(m.self_bleu, Some(1.0));
//! ```

#![warn(missing_docs)]

pub mod chart;
pub mod metrics;
pub mod report;

use serde::{Deserialize, Serialize};

/// One generated output of an experiment, with what is needed to measure it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The model's name (as the report shows it).
    pub model: String,
    /// The prompt's id in the experiment file.
    pub prompt: String,
    /// The decoding preset's name.
    pub preset: String,
    /// Decoded under the prompt's schema (false: free text, also for a schema prompt's
    /// unconstrained run).
    pub constrained: bool,
    /// The sample's seed.
    pub seed: u64,
    /// The output text.
    pub text: String,
    /// Generated tokens (the model's tokens, forced ones included).
    pub tokens: usize,
    /// For a prompt with a schema: whether the whole text (surrounding whitespace trimmed)
    /// parses as JSON. `None` for a free-text prompt.
    pub parses: Option<bool>,
    /// For a prompt with a schema: whether it parses and validates against the schema.
    pub valid: Option<bool>,
    /// The generation record (the runtime's `GenerationRecord` as JSON), kept for the
    /// output file; metrics do not read it.
    #[serde(default)]
    pub record: serde_json::Value,
}

impl Sample {
    /// A free-text sample without a record (tests and examples).
    pub fn free_text(model: &str, prompt: &str, preset: &str, seed: u64, text: &str, tokens: usize) -> Sample {
        Sample {
            model: model.into(),
            prompt: prompt.into(),
            preset: preset.into(),
            constrained: false,
            seed,
            text: text.into(),
            tokens,
            parses: None,
            valid: None,
            record: serde_json::Value::Null,
        }
    }
}

/// What a row of the metrics table is about: the samples of one model, prompt, preset and
/// constraint.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Group {
    /// The model's name.
    pub model: String,
    /// The prompt's id.
    pub prompt: String,
    /// The preset's name.
    pub preset: String,
    /// Decoded under the prompt's schema.
    pub constrained: bool,
}

impl Group {
    /// The group a sample belongs to.
    pub fn of(sample: &Sample) -> Group {
        Group {
            model: sample.model.clone(),
            prompt: sample.prompt.clone(),
            preset: sample.preset.clone(),
            constrained: sample.constrained,
        }
    }
}
