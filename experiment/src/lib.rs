//! Decoding experiments: what a set of generated outputs says about the decoding settings
//! that produced them.
//!
//! A [`study`] sweeps decoding parameters one at a time over several models, tasks and
//! prompts (the CLI's `stencil experiment` decodes, and scores each output with a second
//! model), and gathers every output as a [`Sample`]. This crate turns the samples into
//! numbers and pictures: [`metrics`] (repetition and diversity after Su et al.,
//! seq-rep-n, distinct-n, self-BLEU, on tokens and on words), [`stats`] (bootstrap
//! intervals), [`points`] (every metric of every setting with its interval), [`chart`]
//! (dependency-free SVG) and [`report`] (the Markdown report, its tables, charts and
//! conclusions). It knows nothing of models or llama.cpp.
//!
//! ```
//! use stencil_experiment::Sample;
//! let s = Sample::text("m", "story", "p1", "T 1", 1, "Once upon a time", &[1, 2, 3, 4]);
//! assert!(!s.is_cut() && s.outcome().is_none()); // free text: no schema outcome
//! ```

#![warn(missing_docs)]

pub mod chart;
pub mod files;
pub mod findings;
pub mod metrics;
pub mod points;
pub mod report;
pub mod stats;
pub mod study;

use serde::{Deserialize, Serialize};

/// One generated output of a study, with what is needed to measure it (one line of
/// `samples.jsonl`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    /// The model's name (as the report shows it).
    pub model: String,
    /// The task's name.
    pub task: String,
    /// The prompt's id.
    pub prompt: String,
    /// The decoding setting's label ([`study::Setting::label`]).
    pub setting: String,
    /// Decoded under the task's schema (false: free, also for a schema task's free run).
    pub constrained: bool,
    /// The sample's seed.
    pub seed: u64,
    /// The output text.
    pub text: String,
    /// The output's tokens (the model's ids; forced ones included, EOS excluded).
    pub tokens: Vec<u32>,
    /// Why decoding stopped: `eos`, `grammar_complete`, `stop`, `length` (the token cap),
    /// `context_full` or `cancelled` (the runtime's `StopReason`).
    pub stop: String,
    /// For a schema task: whether the text parses as JSON ([`judge_json`]).
    pub parses: Option<bool>,
    /// For a schema task: whether it parses and validates against the schema.
    pub valid: Option<bool>,
    /// For a prompt with expected values: whether the output's JSON holds every expected
    /// field with its expected value ([`matches_expected`]).
    pub correct: Option<bool>,
    /// The model that read the output for its perplexity.
    pub scorer: Option<String>,
    /// The scorer's mean negative log-likelihood of the output per token of its own
    /// tokenizer (nats; perplexity is its exp), after the prompt as the scorer would be
    /// given it. `None` for an empty output. Stored to six decimals (which JSON writes and
    /// reads back exactly).
    pub nll: Option<f64>,
    /// Cosine similarity of the prompt's and the output's embeddings by the scorer (its
    /// last hidden state, mean-pooled over the prompt's tokens and over the output's, in
    /// one causal read of the prompt then the output). `None` for an empty output.
    /// Six decimals.
    pub coherence: Option<f64>,
}

/// Why a schema task's output is not valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Failure {
    /// Cut by the token cap (or the context) before it was complete.
    Cut,
    /// Complete, but not JSON.
    BadJson,
    /// JSON that the schema rejects.
    SchemaViolation,
}

impl Failure {
    /// How the report names it.
    pub fn name(self) -> &'static str {
        match self {
            Failure::Cut => "cut by the token cap",
            Failure::BadJson => "bad JSON",
            Failure::SchemaViolation => "schema violation",
        }
    }
}

impl Sample {
    /// A free-text sample that stopped at EOS, neither judged nor scored.
    pub fn text(model: &str, task: &str, prompt: &str, setting: &str, seed: u64, text: &str, tokens: &[u32]) -> Sample {
        Sample {
            model: model.into(),
            task: task.into(),
            prompt: prompt.into(),
            setting: setting.into(),
            constrained: false,
            seed,
            text: text.into(),
            tokens: tokens.to_vec(),
            stop: "eos".into(),
            parses: None,
            valid: None,
            correct: None,
            scorer: None,
            nll: None,
            coherence: None,
        }
    }

    /// Cut short by a limit: the token cap, the context or the caller.
    pub fn is_cut(&self) -> bool {
        matches!(self.stop.as_str(), "length" | "context_full" | "cancelled")
    }

    /// For a schema task: `Some(Ok(()))` when valid, else why not — cut (whatever it
    /// parses as), bad JSON, or a schema violation. `None` for free text.
    ///
    /// ```
    /// use stencil_experiment::{Failure, Sample};
    /// let mut s = Sample::text("m", "t", "p", "T 0", 1, "{\"a\": 1", &[1]);
    /// s.parses = Some(false);
    /// s.valid = Some(false);
    /// assert_eq!(s.outcome(), Some(Err(Failure::BadJson)));
    /// s.stop = "length".into();
    /// assert_eq!(s.outcome(), Some(Err(Failure::Cut)));
    /// ```
    pub fn outcome(&self) -> Option<Result<(), Failure>> {
        let valid = self.valid?;
        Some(match (valid, self.is_cut(), self.parses == Some(true)) {
            (true, _, _) => Ok(()),
            (false, true, _) => Err(Failure::Cut),
            (false, false, false) => Err(Failure::BadJson),
            (false, false, true) => Err(Failure::SchemaViolation),
        })
    }
}

/// The JSON value an output holds: the whole text (surrounding whitespace trimmed), or
/// else the body of a Markdown code fence that makes up the whole text (```` ```json ````
/// … ```` ``` ````, as chat models wrap JSON). `None` when neither parses.
///
/// ```
/// use stencil_experiment::judge_json;
/// assert!(judge_json(" {\"a\": 1} ").is_some());
/// assert!(judge_json("```json\n{\"a\": 1}\n```").is_some());
/// assert!(judge_json("Here it is: {\"a\": 1}").is_none());
/// ```
pub fn judge_json(text: &str) -> Option<serde_json::Value> {
    let text = text.trim();
    if let Ok(v) = serde_json::from_str(text) {
        return Some(v);
    }
    let body = text.strip_prefix("```")?.strip_suffix("```")?;
    let body = body.strip_prefix("json").unwrap_or(body);
    serde_json::from_str(body.trim()).ok()
}

/// Whether `value` holds every field of `expected` (an object) with an equal value; numbers
/// compare as numbers (`34` and `34.0` are equal).
///
/// ```
/// use serde_json::json;
/// use stencil_experiment::matches_expected;
/// let expected = json!({"name": "Ana", "age": 34});
/// assert!(matches_expected(&json!({"age": 34.0, "name": "Ana", "city": "Porto"}), &expected));
/// assert!(!matches_expected(&json!({"name": "ana", "age": 34}), &expected));
/// ```
pub fn matches_expected(value: &serde_json::Value, expected: &serde_json::Value) -> bool {
    let (Some(value), Some(expected)) = (value.as_object(), expected.as_object()) else {
        return false;
    };
    expected.iter().all(|(k, want)| match (value.get(k), want) {
        (Some(got), want) if got.is_number() && want.is_number() => got.as_f64() == want.as_f64(),
        (Some(got), want) => got == want,
        (None, _) => false,
    })
}
