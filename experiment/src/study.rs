//! The study: which models, tasks, prompts and decoding settings an experiment runs, read
//! from its TOML file (`fixtures/experiments/decoding.toml` is the shipped one).
//!
//! A study sweeps decoding parameters **one at a time**: each [`Sweep`] starts from a base
//! setting and moves one parameter through its values. Points of different sweeps that
//! decode alike are one [`Setting`] (decoded once): greedy decoding is the temperature
//! sweep's 0, the repetition-penalty sweep's 1.0 at temperature 0, contrastive search at
//! α 0, and so on ([`Setting::canonical`]).
//!
//! ```
//! use stencil_experiment::study::Study;
//! let study = Study::from_toml(r#"
//!     title = "t"
//!     seeds = 8
//!     models = [{ file = "a.gguf", name = "A" }]
//!     [[sweep]]
//!     name = "temperature"
//!     parameter = "temperature"
//!     values = [0.0, 1.0]
//!     [[sweep]]
//!     name = "contrastive α"
//!     parameter = "penalty_alpha"
//!     base = { temperature = 0.0, top_k = 4 }
//!     values = [0.0, 0.6]
//!     [[task]]
//!     name = "story"
//!     max_tokens = 32
//!     prompts = [{ id = "s1", text = "Once upon a time" }]
//! "#)?;
//! let labels: Vec<String> = study.settings().iter().map(|s| s.label()).collect();
//! assert_eq!(labels, ["T 0", "T 1", "α 0.6 k 4"]); // α 0 is greedy, decoded once
//! assert_eq!(study.seeds_for(&study.settings()[1]), 8);
//! assert_eq!(study.seeds_for(&study.settings()[2]), 1); // deterministic
//! # Ok::<(), stencil_experiment::study::StudyError>(())
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

/// A study file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// Not TOML, or not a study (an unknown key, a missing field, a wrong type).
    #[error("{0}")]
    Toml(String),
    /// A sweep or task that makes no sense (located by its name).
    #[error("{what} `{name}`: {reason}")]
    Invalid {
        /// `sweep` or `task`.
        what: &'static str,
        /// Its name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// The study file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Study {
    /// The report's title.
    pub title: String,
    /// The report's first paragraph.
    #[serde(default)]
    pub intro: String,
    /// The models, in report order. Each output is read by the next model in this list (the
    /// last by the first): the *other* model of a pair gives its perplexity and embeds it
    /// for coherence.
    pub models: Vec<ModelSpec>,
    /// Seeds per prompt for sampled settings (deterministic settings run once per prompt).
    #[serde(default = "default_seeds")]
    pub seeds: usize,
    /// The first seed; sample `i` of a prompt is seeded `seed + i`.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// The sweeps, in report order.
    #[serde(rename = "sweep")]
    pub sweeps: Vec<Sweep>,
    /// The tasks, in report order.
    #[serde(rename = "task")]
    pub tasks: Vec<Task>,
    /// What `--quick` keeps.
    #[serde(default)]
    pub quick: Quick,
}

fn default_seeds() -> usize {
    8
}

fn default_seed() -> u64 {
    1
}

/// A model: its GGUF file (a bare name is in the model cache) and the name reports use.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// The GGUF file.
    pub file: String,
    /// The name in the report.
    pub name: String,
}

/// One parameter moved through its values from a base setting.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// The sweep's name in the report (unique).
    pub name: String,
    /// The parameter moved: a [`Parameter`] name as in `SamplingParams`.
    pub parameter: Parameter,
    /// The other parameters (default: the sampling defaults — temperature 1, everything
    /// else off).
    #[serde(default)]
    pub base: Setting,
    /// The values, in order.
    pub values: Vec<f64>,
    /// The tasks it runs on (default: all).
    #[serde(default)]
    pub tasks: Option<Vec<String>>,
}

/// A decoding parameter a sweep can move (`SamplingParams`' field names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Parameter {
    /// `temperature`.
    Temperature,
    /// `top_p`.
    TopP,
    /// `top_k` (0: off).
    TopK,
    /// `min_p`.
    MinP,
    /// `repetition_penalty`.
    RepetitionPenalty,
    /// `no_repeat_ngram_size` (0: off).
    NoRepeatNgramSize,
    /// `penalty_alpha` (contrastive search's α).
    PenaltyAlpha,
}

impl Parameter {
    /// The name axes show.
    pub fn axis(self) -> &'static str {
        match self {
            Parameter::Temperature => "temperature",
            Parameter::TopP => "top-p",
            Parameter::TopK => "top-k (0: off)",
            Parameter::MinP => "min-p",
            Parameter::RepetitionPenalty => "repetition penalty",
            Parameter::NoRepeatNgramSize => "no-repeat n-gram size (0: off)",
            Parameter::PenaltyAlpha => "contrastive α",
        }
    }
}

/// A task: its prompts, its output budget and, for structured output, its schema.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The task's name (unique).
    pub name: String,
    /// What the task is, for the report.
    #[serde(default)]
    pub description: String,
    /// The most tokens an output may have (a longer one is cut, and counted as cut).
    pub max_tokens: u32,
    /// A JSON Schema file (relative to the study file): outputs are judged against it.
    #[serde(default)]
    pub schema: Option<String>,
    /// With a schema: also decode the prompts without it (free vs constrained).
    #[serde(default)]
    pub free: bool,
    /// The prompts.
    pub prompts: Vec<PromptSpec>,
}

/// One prompt of a task.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    /// Unique within the study.
    pub id: String,
    /// The text (a user message for a model with a chat template, else given as is).
    pub text: String,
    /// For a schema task: the fields a correct output holds (an extraction's answer).
    #[serde(default)]
    pub expected: Option<serde_json::Value>,
}

/// What `--quick` keeps of a study: the first `prompts` prompts of each task, `seeds`
/// seeds, each sweep's first and last value, at most `max_tokens` tokens.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quick {
    /// Prompts per task.
    pub prompts: usize,
    /// Seeds per prompt for sampled settings.
    pub seeds: usize,
    /// Token budget.
    pub max_tokens: u32,
}

impl Default for Quick {
    fn default() -> Self {
        Quick { prompts: 1, seeds: 2, max_tokens: 8 }
    }
}

/// The decoding parameters a study varies; every other one is at its default.
///
/// Serialized as a table of `SamplingParams` fields; a missing field has the sampling
/// default (temperature 1, top-p 1, top-k 0, min-p 0, repetition penalty 1, no-repeat
/// n-gram 0, α 0).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Setting {
    /// Temperature (0: greedy).
    pub temperature: f64,
    /// Nucleus mass (1: off).
    pub top_p: f64,
    /// Top-k (0: off); contrastive search's k.
    pub top_k: u32,
    /// Min-p (0: off).
    pub min_p: f64,
    /// Repetition penalty (1: off).
    pub repetition_penalty: f64,
    /// No-repeat n-gram size (0: off).
    pub no_repeat_ngram_size: u32,
    /// Contrastive search's α (0: off).
    pub penalty_alpha: f64,
}

impl Default for Setting {
    fn default() -> Self {
        Setting {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            no_repeat_ngram_size: 0,
            penalty_alpha: 0.0,
        }
    }
}

impl Setting {
    /// `self` with `parameter` set to `value` (a count is rounded to the nearest integer).
    pub fn with(mut self, parameter: Parameter, value: f64) -> Setting {
        let count = value.round().clamp(0.0, f64::from(u32::MAX)) as u32;
        match parameter {
            Parameter::Temperature => self.temperature = value,
            Parameter::TopP => self.top_p = value,
            Parameter::TopK => self.top_k = count,
            Parameter::MinP => self.min_p = value,
            Parameter::RepetitionPenalty => self.repetition_penalty = value,
            Parameter::NoRepeatNgramSize => self.no_repeat_ngram_size = count,
            Parameter::PenaltyAlpha => self.penalty_alpha = value,
        }
        self
    }

    /// Contrastive search: α > 0 and k > 1 (the runtime then ignores temperature, top-p
    /// and min-p).
    pub fn is_contrastive(&self) -> bool {
        self.penalty_alpha > 0.0 && self.top_k > 1
    }

    /// The same outputs for every seed: greedy (temperature 0) or contrastive search.
    pub fn is_deterministic(&self) -> bool {
        self.is_contrastive() || self.temperature == 0.0
    }

    /// The setting with every parameter that changes nothing at its default, so that
    /// settings that decode alike compare equal: contrastive search keeps α, k and the
    /// penalties (temperature shown as 0); greedy decoding keeps the penalties; sampling
    /// drops α.
    ///
    /// ```
    /// use stencil_experiment::study::Setting;
    /// let greedy = Setting { temperature: 0.0, ..Setting::default() };
    /// let alpha_zero = Setting { top_k: 4, ..greedy };
    /// assert_eq!(alpha_zero.canonical(), greedy.canonical());
    /// ```
    pub fn canonical(&self) -> Setting {
        let off = Setting::default();
        let penalties = Setting {
            repetition_penalty: self.repetition_penalty,
            no_repeat_ngram_size: self.no_repeat_ngram_size,
            ..off
        };
        if self.is_contrastive() {
            Setting { temperature: 0.0, top_k: self.top_k, penalty_alpha: self.penalty_alpha, ..penalties }
        } else if self.temperature == 0.0 {
            Setting { temperature: 0.0, ..penalties }
        } else {
            Setting { penalty_alpha: 0.0, ..*self }
        }
    }

    /// The setting's name in reports: what is on, e.g. `T 0.8 rep 1.2`, `α 0.6 k 4`.
    pub fn label(&self) -> String {
        let c = self.canonical();
        let mut parts = Vec::new();
        if c.is_contrastive() {
            parts.push(format!("α {} k {}", num(c.penalty_alpha), c.top_k));
        } else {
            parts.push(format!("T {}", num(c.temperature)));
            if c.top_p < 1.0 {
                parts.push(format!("top-p {}", num(c.top_p)));
            }
            if c.top_k > 0 {
                parts.push(format!("top-k {}", c.top_k));
            }
            if c.min_p > 0.0 {
                parts.push(format!("min-p {}", num(c.min_p)));
            }
        }
        if c.repetition_penalty != 1.0 {
            parts.push(format!("rep {}", num(c.repetition_penalty)));
        }
        if c.no_repeat_ngram_size > 0 {
            parts.push(format!("no-repeat {}", c.no_repeat_ngram_size));
        }
        parts.join(" ")
    }

    /// The value of `parameter`.
    pub fn get(&self, parameter: Parameter) -> f64 {
        match parameter {
            Parameter::Temperature => self.temperature,
            Parameter::TopP => self.top_p,
            Parameter::TopK => f64::from(self.top_k),
            Parameter::MinP => self.min_p,
            Parameter::RepetitionPenalty => self.repetition_penalty,
            Parameter::NoRepeatNgramSize => f64::from(self.no_repeat_ngram_size),
            Parameter::PenaltyAlpha => self.penalty_alpha,
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// A number as labels write it: shortest form, no trailing zeros.
fn num(v: f64) -> String {
    format!("{v}")
}

impl Study {
    /// Reads a study from TOML and checks it.
    ///
    /// # Errors
    ///
    /// [`StudyError::Toml`] (with the line) for what is not a study,
    /// [`StudyError::Invalid`] for a sweep without values or with a value out of its
    /// parameter's range, a sweep naming an unknown task, a task without prompts, or a
    /// duplicate name.
    pub fn from_toml(text: &str) -> Result<Study, StudyError> {
        let study: Study = toml::from_str(text).map_err(|e| StudyError::Toml(e.to_string().trim_end().into()))?;
        study.check()?;
        Ok(study)
    }

    fn check(&self) -> Result<(), StudyError> {
        let invalid = |what, name: &str, reason: String| StudyError::Invalid { what, name: name.into(), reason };
        let mut seen = std::collections::HashSet::new();
        for sweep in &self.sweeps {
            if !seen.insert(("sweep", sweep.name.as_str())) {
                return Err(invalid("sweep", &sweep.name, "the name is used twice".into()));
            }
            if sweep.values.is_empty() {
                return Err(invalid("sweep", &sweep.name, "no values".into()));
            }
            for &v in &sweep.values {
                if let Err(reason) = check_value(sweep.parameter, v) {
                    return Err(invalid("sweep", &sweep.name, reason));
                }
            }
            for task in sweep.tasks.iter().flatten() {
                if !self.tasks.iter().any(|t| &t.name == task) {
                    return Err(invalid("sweep", &sweep.name, format!("no task `{task}`")));
                }
            }
        }
        for task in &self.tasks {
            if !seen.insert(("task", task.name.as_str())) {
                return Err(invalid("task", &task.name, "the name is used twice".into()));
            }
            if task.prompts.is_empty() {
                return Err(invalid("task", &task.name, "no prompts".into()));
            }
            for p in &task.prompts {
                if !seen.insert(("prompt", p.id.as_str())) {
                    return Err(invalid("task", &task.name, format!("prompt id `{}` is used twice", p.id)));
                }
            }
        }
        Ok(())
    }

    /// The study `--quick` runs (see [`Quick`]).
    pub fn quick(&self) -> Study {
        let q = &self.quick;
        let mut study = self.clone();
        study.seeds = q.seeds.min(self.seeds).max(1);
        for sweep in &mut study.sweeps {
            let (first, last) = (sweep.values[0], sweep.values[sweep.values.len() - 1]);
            sweep.values = if first == last { vec![first] } else { vec![first, last] };
        }
        for task in &mut study.tasks {
            task.prompts.truncate(q.prompts.max(1));
            task.max_tokens = task.max_tokens.min(q.max_tokens.max(1));
        }
        study
    }

    /// The sweeps that run on `task`.
    pub fn sweeps_of<'a>(&'a self, task: &'a str) -> impl Iterator<Item = &'a Sweep> + 'a {
        self.sweeps.iter().filter(move |s| s.tasks.as_ref().map_or(true, |t| t.iter().any(|t| t == task)))
    }

    /// The distinct canonical settings of every sweep, in the order they first appear.
    pub fn settings(&self) -> Vec<Setting> {
        let mut out: Vec<Setting> = Vec::new();
        for setting in self.sweeps.iter().flat_map(Sweep::points).map(|(_, s)| s) {
            if !out.contains(&setting) {
                out.push(setting);
            }
        }
        out
    }

    /// The distinct canonical settings that run on `task`, in order.
    pub fn settings_of(&self, task: &str) -> Vec<Setting> {
        let mut out: Vec<Setting> = Vec::new();
        for setting in self.sweeps_of(task).flat_map(Sweep::points).map(|(_, s)| s) {
            if !out.contains(&setting) {
                out.push(setting);
            }
        }
        out
    }

    /// Seeds per prompt under `setting`: one when it is deterministic.
    pub fn seeds_for(&self, setting: &Setting) -> usize {
        if setting.is_deterministic() {
            1
        } else {
            self.seeds.max(1)
        }
    }

    /// The model that reads the outputs of model `index` (the next one; itself when alone).
    pub fn scorer_of(&self, index: usize) -> usize {
        (index + 1) % self.models.len().max(1)
    }

    /// The task a prompt id belongs to.
    pub fn task_of(&self, prompt: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.prompts.iter().any(|p| p.id == prompt))
    }
}

impl Sweep {
    /// Its points: each value and the canonical setting it decodes with.
    pub fn points(&self) -> impl Iterator<Item = (f64, Setting)> + '_ {
        self.values.iter().map(|&v| (v, self.base.with(self.parameter, v).canonical()))
    }
}

fn check_value(p: Parameter, v: f64) -> Result<(), String> {
    let ok = v.is_finite()
        && match p {
            Parameter::Temperature => v >= 0.0,
            Parameter::TopP => v > 0.0 && v <= 1.0,
            Parameter::MinP | Parameter::PenaltyAlpha => (0.0..=1.0).contains(&v),
            Parameter::RepetitionPenalty => v > 0.0,
            Parameter::TopK | Parameter::NoRepeatNgramSize => v >= 0.0 && v.fract() == 0.0 && v <= 1e6,
        };
    if ok {
        Ok(())
    } else {
        Err(format!("{} = {v} is out of range", p.axis()))
    }
}
