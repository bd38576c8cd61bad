//! `stencil experiment`: the same prompts through several decoding presets, on one or more
//! models, measured and charted.
//!
//! The experiment file (TOML) names the models, the presets (built-in names or `[preset.NAME]`
//! tables in the presets format), the prompts (free text, or with a JSON Schema, optionally
//! also run without it), the seed and the samples per prompt and preset. Every output goes to
//! `samples.jsonl` with its generation record; `stencil_experiment::report` writes the metrics
//! table, the charts and `report.md`. `fixtures/experiments/decoding.toml` is the example.
//!
//! ```toml
//! title = "Why decoding parameters matter"
//! models = [                                     # a bare file name: the model cache
//!     { file = "smollm2-135m-instruct.q4_1.gguf", name = "SmolLM2-135M" },
//!     "gemma-3-270m-q4_k_m.gguf",                 # named by its GGUF's general.name
//! ]
//! presets = ["greedy", "nucleus", "contrastive"] # run in this order
//! samples = 4                                     # seeds SEED .. SEED + 3
//! seed = 1
//! max_tokens = 80
//!
//! [preset.greedy]
//! temperature = 0.0
//! [preset.nucleus]
//! temperature = 0.9
//! top_p = 0.92
//!
//! [[prompt]]
//! id = "bullets"
//! text = "Write three bullet points about decoding:"
//! [[prompt]]
//! id = "risk-json"
//! text = "Return a JSON object with keys risk and mitigation."
//! schema = "risk.schema.json"                     # relative to this file
//! free = true                                     # also decode it without the schema
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use stencil_experiment::Sample;
use stencil_mask::CompiledGrammar;
use stencil_runtime::sampling::{Presets, SamplingParams};
use stencil_runtime::{GenerateRequest, Model, Prompt, Session, SessionOptions};
use stencil_schema::SchemaOptions;

use crate::error::CliError;
use crate::generate::{load_model, runtime, session_options};
use crate::source::{GrammarSource, LoadedSchema, SchemaFile};

/// `stencil experiment`'s arguments.
#[derive(clap::Args, Debug)]
pub struct ExperimentArgs {
    /// The experiment file (TOML; see fixtures/experiments/decoding.toml).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The output folder: samples.jsonl, metrics.csv, metrics.md, the charts and report.md.
    #[arg(long, short = 'o', value_name = "DIR")]
    out: PathBuf,
    /// Run these models instead of the file's (repeatable).
    #[arg(long, short = 'm', value_name = "FILE")]
    model: Vec<PathBuf>,
    /// Samples per prompt and preset, instead of the file's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=16))]
    samples: Option<u64>,
    /// CPU threads for llama.cpp (default: all cores).
    #[arg(long, value_name = "N")]
    threads: Option<u32>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Decode nothing: rewrite the metrics, charts and report from --out's samples.jsonl
    /// (after a change to the report, or to share one run's report).
    #[arg(long)]
    report_only: bool,
}

/// The experiment file.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    title: String,
    #[serde(default)]
    intro: String,
    models: Vec<ModelSpec>,
    presets: Vec<String>,
    #[serde(default = "default_samples")]
    samples: usize,
    #[serde(default = "default_seed")]
    seed: u64,
    max_tokens: Option<u32>,
    /// Preset definitions, in the presets file's format.
    #[serde(default)]
    preset: toml::Table,
    #[serde(rename = "prompt")]
    prompts: Vec<PromptSpec>,
}

fn default_samples() -> usize {
    4
}

fn default_seed() -> u64 {
    1
}

/// A model: its file, and optionally the name the report shows (default: the GGUF's
/// `general.name`).
#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum ModelSpec {
    File(String),
    Named { file: String, name: String },
}

impl ModelSpec {
    fn file(&self) -> &str {
        match self {
            ModelSpec::File(file) | ModelSpec::Named { file, .. } => file,
        }
    }

    fn name(&self) -> Option<&str> {
        match self {
            ModelSpec::File(_) => None,
            ModelSpec::Named { name, .. } => Some(name),
        }
    }
}

/// One `[[prompt]]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct PromptSpec {
    id: String,
    text: String,
    /// A JSON Schema the output is decoded under (relative to the experiment file).
    schema: Option<PathBuf>,
    /// With a schema: also decode the prompt without it.
    #[serde(default)]
    free: bool,
    /// Overrides the file's `max_tokens` for this prompt.
    max_tokens: Option<u32>,
}

/// A prompt's schema, read once.
struct SchemaPrompt {
    source: GrammarSource,
    grammar: stencil_grammar::Grammar,
    schema: LoadedSchema,
}

pub fn run(args: &ExperimentArgs) -> Result<ExitCode, CliError> {
    let text = std::fs::read_to_string(&args.file).map_err(|source| CliError::Read {
        what: "experiment file",
        path: args.file.clone(),
        source,
    })?;
    let file: ExperimentFile = toml::from_str(&text)
        .map_err(|e| CliError::Usage(format!("{}: {}", args.file.display(), e.to_string().trim_end())))?;
    let base = args.file.parent().unwrap_or(Path::new("."));
    if args.report_only {
        let samples = read_samples(&args.out)?;
        return write_report(args, &file, &samples);
    }
    let presets = load_presets(&file, &args.file)?;
    let schemas = file
        .prompts
        .iter()
        .map(|p| p.schema.as_ref().map(|path| load_schema(&base.join(path))).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    let models: Vec<(PathBuf, Option<&str>)> = if args.model.is_empty() {
        file.models.iter().map(|m| (model_path(m.file(), base), m.name())).collect()
    } else {
        args.model.iter().map(|path| (path.clone(), None)).collect()
    };
    let samples = args.samples.map_or(file.samples, |n| n as usize).max(1);
    let runs_per_model: usize =
        file.prompts.iter().map(|p| if p.schema.is_some() && p.free { 2 } else { 1 }).sum::<usize>() * presets.len();
    let bar = progress(args.quiet, (runs_per_model * models.len()) as u64);
    let threads = args.threads.unwrap_or_else(|| SessionOptions::default().n_threads);

    let mut all = Vec::new();
    for (path, display_name) in &models {
        let model = load_model(path, args.quiet)?;
        let name = display_name.map_or_else(|| model.info().name.clone(), str::to_string);
        let grammars = schemas
            .iter()
            .map(|s| s.as_ref().map(|s| compile(s, &model, path)).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        let mut sessions = Sessions::default();
        for (prompt, (schema, grammar)) in file.prompts.iter().zip(schemas.iter().zip(&grammars)) {
            let variants: &[bool] = match (grammar, prompt.free) {
                (Some(_), true) => &[true, false],
                (Some(_), false) => &[true],
                (None, _) => &[false],
            };
            for (preset, params) in &presets {
                for &constrained in variants {
                    bar.set_message(format!(
                        "{name}: {} / {preset}{}",
                        prompt.id,
                        if constrained { "" } else { " (free)" }
                    ));
                    let mut params = params.clone();
                    params.seed = Some(file.seed);
                    if let Some(n) = prompt.max_tokens.or(file.max_tokens) {
                        params.max_tokens = n;
                    }
                    let mut request = GenerateRequest::new(Prompt::user_or_text(&model, prompt.text.clone()));
                    request.params = params;
                    request.preset = Some(preset.clone());
                    if let (true, Some(g)) = (constrained, grammar) {
                        request = request.with_grammar(g.clone(), "json-schema");
                    }
                    let session = sessions.get(&model, &request, threads, samples)?;
                    let generations = session.generate_n(&request, samples, |_, _| {}).map_err(runtime)?;
                    for g in generations {
                        let (parses, valid) = judge(&g.text, schema.as_ref());
                        all.push(Sample {
                            model: name.clone(),
                            prompt: prompt.id.clone(),
                            preset: preset.clone(),
                            constrained,
                            seed: g.record.seed,
                            tokens: g.tokens.len(),
                            text: g.text,
                            parses,
                            valid,
                            record: serde_json::to_value(&g.record).unwrap_or_default(),
                        });
                    }
                    bar.inc(1);
                }
            }
        }
    }
    bar.finish_and_clear();
    write_samples(&args.out, &all)?;
    write_report(args, &file, &all)
}

/// The metrics, charts and report of `samples` into `--out`.
fn write_report(args: &ExperimentArgs, file: &ExperimentFile, samples: &[Sample]) -> Result<ExitCode, CliError> {
    let report = stencil_experiment::report::write(&args.out, &file.title, &file.intro, samples)
        .map_err(|source| CliError::Read { what: "report folder", path: args.out.clone(), source })?;
    if !args.quiet {
        eprintln!("{} outputs; report: {} ({} charts)", samples.len(), report.markdown.display(), report.charts.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// The samples of an earlier run (`DIR/samples.jsonl`).
fn read_samples(dir: &Path) -> Result<Vec<Sample>, CliError> {
    let path = dir.join("samples.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|source| CliError::Read {
        what: "samples file",
        path: path.clone(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| CliError::Usage(format!("{}:{}: {e}", path.display(), i + 1)))
        })
        .collect()
}

/// The file's presets, by name, in the order of `presets`.
fn load_presets(file: &ExperimentFile, path: &Path) -> Result<Vec<(String, SamplingParams)>, CliError> {
    let table = toml::Table::from_iter([("preset".to_string(), toml::Value::Table(file.preset.clone()))]);
    let text = toml::to_string(&table).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    let presets = Presets::from_toml_str(&text).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    file.presets
        .iter()
        .map(|name| {
            let params = presets.get(name).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
            Ok((name.clone(), params.clone()))
        })
        .collect()
}

/// A bare file name is a model in the model cache; anything else a path from the file.
fn model_path(name: &str, base: &Path) -> PathBuf {
    let path = Path::new(name);
    if path.components().count() == 1 {
        crate::models::models_dir().join(path)
    } else {
        base.join(path)
    }
}

fn load_schema(path: &Path) -> Result<SchemaPrompt, CliError> {
    let source = GrammarSource::Schema(SchemaFile { path: path.to_path_buf(), options: SchemaOptions::default() });
    let loaded = source.load()?;
    let schema = loaded.schema.ok_or_else(|| CliError::Usage(format!("{}: not a schema", path.display())))?;
    Ok(SchemaPrompt { source, grammar: loaded.grammar, schema })
}

fn compile(schema: &SchemaPrompt, model: &Model, path: &Path) -> Result<Arc<CompiledGrammar>, CliError> {
    Ok(schema.source.compile(&schema.grammar, model.vocab().clone(), Some(path))?.0)
}

/// Whether `text` (trimmed) parses as JSON, and whether it then validates: `None` for a
/// free-text prompt.
fn judge(text: &str, schema: Option<&SchemaPrompt>) -> (Option<bool>, Option<bool>) {
    let Some(schema) = schema else { return (None, None) };
    match serde_json::from_str::<serde_json::Value>(text.trim()) {
        Ok(value) => (Some(true), Some(schema.schema.validate(&value).is_ok())),
        Err(_) => (Some(false), Some(false)),
    }
}

/// One session for plain decoding and, once a preset asks for contrastive search, one with
/// hidden states (which makes every evaluated token output its logits).
#[derive(Default)]
struct Sessions<'m> {
    plain: Option<Session<'m>>,
    hidden: Option<Session<'m>>,
}

impl<'m> Sessions<'m> {
    fn get(
        &mut self,
        model: &'m Model,
        request: &GenerateRequest,
        threads: u32,
        samples: usize,
    ) -> Result<&mut Session<'m>, CliError> {
        let base = SessionOptions { n_ctx: 4096, n_threads: threads, ..Default::default() };
        let options = session_options(request, base, 0, samples);
        let slot = if options.embeddings { &mut self.hidden } else { &mut self.plain };
        if slot.as_ref().is_some_and(|s| s.options().n_seq_max < options.n_seq_max) {
            *slot = None;
        }
        if slot.is_none() {
            *slot = Some(model.session(&options).map_err(runtime)?);
        }
        Ok(slot.as_mut().expect("opened above"))
    }
}

fn write_samples(dir: &Path, samples: &[Sample]) -> Result<(), CliError> {
    let err = |source| CliError::Read { what: "output folder", path: dir.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(err)?;
    let lines: String = samples.iter().map(|s| serde_json::to_string(s).unwrap_or_default() + "\n").collect();
    std::fs::write(dir.join("samples.jsonl"), lines).map_err(err)
}

fn progress(quiet: bool, total: u64) -> ProgressBar {
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(total) };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}
