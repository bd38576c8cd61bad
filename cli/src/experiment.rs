//! `stencil experiment`: a study of decoding parameters, one at a time, on one or more
//! models — decoded, scored by a second model, measured, charted and reported.
//!
//! The study file (TOML, read by `stencil_experiment::study::Study`) names the models, the
//! sweeps (a parameter moved through its values from a base setting), the tasks and their
//! prompts; `fixtures/experiments/decoding.toml` is the shipped study. This module decodes
//! every distinct setting once per prompt — sampled settings with the study's seeds, all
//! seeds of a prompt batched in one `generate_n` — judges schema outputs, then has the
//! *other* model read each output (its perplexity, and its embeddings of prompt and output
//! for coherence), and writes `samples.jsonl.gz`, `run.json` and the report
//! (`stencil_experiment::report`). Each model decodes and scores on a thread of its own.
//!
//! ```toml
//! title = "Decoding, one parameter at a time"
//! models = [
//!     { file = "smollm2-135m-instruct.q4_1.gguf", name = "SmolLM2-135M-Instruct" },  # a bare name: the model cache
//!     { file = "gemma-3-270m-q4_k_m.gguf", name = "Gemma 3 270M" },
//! ]
//! seeds = 8                                         # per prompt, for sampled settings
//!
//! [[sweep]]
//! name = "temperature"
//! parameter = "temperature"
//! base = { top_p = 1.0, top_k = 0 }
//! values = [0.0, 0.5, 1.0, 1.5]
//!
//! [[task]]
//! name = "extract"
//! max_tokens = 64
//! schema = "person.schema.json"                     # relative to this file
//! free = true                                       # also decode without the schema
//! prompts = [{ id = "x1", text = "…", expected = { name = "Ana" } }]
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use stencil_experiment::report::{self, variants, Run};
use stencil_experiment::study::{Setting, Study, Task};
use stencil_experiment::{files, judge_json, matches_expected, Sample};
use stencil_mask::CompiledGrammar;
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::{GenerateRequest, Model, Prompt, Session, SessionOptions};
use stencil_schema::SchemaOptions;

use crate::error::CliError;
use crate::generate::{load_model, runtime, session_options};
use crate::source::{GrammarSource, LoadedSchema, SchemaFile};

/// `stencil experiment`'s arguments.
#[derive(clap::Args, Debug)]
pub struct ExperimentArgs {
    /// The study file (TOML; see fixtures/experiments/decoding.toml).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The output folder: samples.jsonl.gz, run.json, metrics.csv, the charts and report.md.
    #[arg(long, short = 'o', value_name = "DIR")]
    out: PathBuf,
    /// The study's smoke-test variant: its `[quick]` table keeps a prompt per task, two
    /// seeds, each sweep's first and last value and a few tokens.
    #[arg(long)]
    quick: bool,
    /// CPU threads for each model's llama.cpp (default 1: the models decode side by side,
    /// one thread each; llama.cpp's threads spin-wait for each other, which collapses on a
    /// busy machine).
    #[arg(long, value_name = "N")]
    threads: Option<u32>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Decode nothing: rewrite the metrics, charts and report from --out's
    /// samples.jsonl.gz and run.json (after a change to the report).
    #[arg(long)]
    report_only: bool,
}

/// A schema task's schema, read once.
struct SchemaTask {
    source: GrammarSource,
    grammar: stencil_grammar::Grammar,
    schema: LoadedSchema,
}

pub fn run(args: &ExperimentArgs) -> Result<ExitCode, CliError> {
    let text = std::fs::read_to_string(&args.file).map_err(|source| CliError::Read {
        what: "study file",
        path: args.file.clone(),
        source,
    })?;
    let study = Study::from_toml(&text).map_err(|e| CliError::Usage(format!("{}: {e}", args.file.display())))?;
    let study = if args.quick { study.quick() } else { study };
    let files_error = |e: files::FilesError| CliError::Usage(e.to_string());
    if args.report_only {
        let samples = files::read_samples(&args.out).map_err(files_error)?;
        let run = files::read_run(&args.out).map_err(files_error)?;
        return write_report(args, &study, &run, &samples);
    }
    let base = args.file.parent().unwrap_or(Path::new("."));
    let threads = args.threads.unwrap_or(1).max(1);
    let started = Instant::now();
    let mut samples = decode(&study, base, threads, args.quiet)?;
    let decode_seconds = started.elapsed().as_secs_f64();
    if !args.quiet {
        eprintln!("decoded {} outputs in {decode_seconds:.0} s", samples.len());
    }
    score(&study, base, &mut samples, threads, args.quiet)?;
    let seconds = started.elapsed().as_secs_f64();
    if !args.quiet {
        eprintln!("scored them in {:.0} s", seconds - decode_seconds);
    }
    let run = Run {
        commit: commit(base),
        dirty: dirty(base),
        seconds,
        decode_seconds,
        cpu_seconds: cpu_seconds(),
        threads,
        quick: args.quick,
    };
    files::write_samples(&args.out, &samples).map_err(files_error)?;
    files::write_run(&args.out, &run).map_err(files_error)?;
    // The report from the samples as written, so that re-rendering gives the same bytes.
    let samples = files::read_samples(&args.out).map_err(files_error)?;
    write_report(args, &study, &run, &samples)
}

/// Runs `work(i)` for every model `i`, each on a thread of its own (a model's llama.cpp
/// runs on `--threads` threads, one by default: the models run side by side on two cores),
/// and returns the results in model order.
fn per_model<T: Send>(study: &Study, work: impl Fn(usize) -> Result<T, CliError> + Sync) -> Result<Vec<T>, CliError> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..study.models.len())
            .map(|i| {
                scope.spawn({
                    let work = &work;
                    move || work(i)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(CliError::Usage("a model's worker thread panicked".into()))))
            .collect()
    })
}

/// Every output of the study: each model on its own thread, every distinct setting once
/// per prompt (and constraint), the seeds of a sampled setting decoded together.
fn decode(study: &Study, base: &Path, threads: u32, quiet: bool) -> Result<Vec<Sample>, CliError> {
    let runs: usize = study
        .tasks
        .iter()
        .map(|t| study.settings_of(&t.name).len() * variants(t).len() * t.prompts.len())
        .sum::<usize>()
        * study.models.len();
    let bar = progress(quiet, runs as u64, "decoding");
    let per = per_model(study, |i| decode_model(study, i, base, threads, &bar))?;
    bar.finish_and_clear();
    Ok(per.into_iter().flatten().collect())
}

fn decode_model(
    study: &Study,
    i: usize,
    base: &Path,
    threads: u32,
    bar: &ProgressBar,
) -> Result<Vec<Sample>, CliError> {
    let spec = &study.models[i];
    let model = load_model(&model_path(&spec.file, base), true)?;
    let mut sessions = Sessions::default();
    let mut samples = Vec::new();
    for task in &study.tasks {
        let schema = task.schema.as_ref().map(|path| load_schema(&base.join(path))).transpose()?;
        let grammar = schema
            .as_ref()
            .map(|s| compile(s, &model, &base.join(task.schema.as_deref().unwrap_or(""))))
            .transpose()?;
        for prompt in &task.prompts {
            for constrained in variants(task) {
                for setting in study.settings_of(&task.name) {
                    bar.set_message(format!("{}: {} / {}", spec.name, prompt.id, setting.label()));
                    let mut request = GenerateRequest::new(Prompt::user_or_text(&model, prompt.text.clone()))
                        .with_params(params(&setting, study.seed, task.max_tokens));
                    if let (true, Some(g)) = (constrained, &grammar) {
                        request = request.with_grammar(g.clone(), "json-schema");
                    }
                    let n = study.seeds_for(&setting);
                    let session = sessions.get(&model, &request, threads, n)?;
                    let gens = session.generate_n(&request, n, |_, _| {}).map_err(runtime)?;
                    for g in gens {
                        let mut sample = Sample::text(
                            &spec.name,
                            &task.name,
                            &prompt.id,
                            &setting.label(),
                            g.record.seed,
                            &g.text,
                            &g.tokens,
                        );
                        sample.constrained = constrained;
                        sample.stop = stop_name(&g.stop_reason);
                        judge(&mut sample, schema.as_ref(), prompt.expected.as_ref());
                        samples.push(sample);
                    }
                    bar.inc(1);
                }
            }
        }
    }
    Ok(samples)
}

/// The sampling parameters of a setting.
fn params(s: &Setting, seed: u64, max_tokens: u32) -> SamplingParams {
    SamplingParams {
        temperature: s.temperature as f32,
        top_p: s.top_p as f32,
        top_k: s.top_k,
        min_p: s.min_p as f32,
        repetition_penalty: s.repetition_penalty as f32,
        no_repeat_ngram_size: s.no_repeat_ngram_size,
        penalty_alpha: s.penalty_alpha as f32,
        seed: Some(seed),
        max_tokens,
        ..SamplingParams::default()
    }
}

/// The stop reason's name in the record (`length`, `eos`, ...).
fn stop_name(reason: &stencil_runtime::StopReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// Parse, validity and correctness of a schema task's output.
fn judge(sample: &mut Sample, schema: Option<&SchemaTask>, expected: Option<&serde_json::Value>) {
    let Some(schema) = schema else { return };
    let value = judge_json(&sample.text);
    sample.parses = Some(value.is_some());
    sample.valid = Some(value.as_ref().is_some_and(|v| schema.schema.validate(v).is_ok()));
    sample.correct = expected.map(|e| value.as_ref().is_some_and(|v| matches_expected(v, e)));
}

/// Perplexity and coherence of every sample by the other model: each model, on its own
/// thread, reads the outputs it scores.
fn score(study: &Study, base: &Path, samples: &mut [Sample], threads: u32, quiet: bool) -> Result<(), CliError> {
    let names: Vec<&str> = study.models.iter().map(|m| m.name.as_str()).collect();
    let scorer_of = |s: &Sample| names.iter().position(|&n| n == s.model).map(|i| study.scorer_of(i));
    let bar = progress(quiet, samples.len() as u64, "scoring");
    let shared: &[Sample] = samples;
    let per = per_model(study, |j| {
        let model = load_model(&model_path(&study.models[j].file, base), true)?;
        let mine: Vec<usize> = (0..shared.len()).filter(|&k| scorer_of(&shared[k]) == Some(j)).collect();
        Ok((j, read(study, &model, shared, &mine, threads, &bar)?))
    })?;
    bar.finish_and_clear();
    for (j, readings) in per {
        for r in readings {
            samples[r.sample].scorer = Some(names[j].to_string());
            samples[r.sample].nll = r.nll;
            samples[r.sample].coherence = r.coherence;
        }
    }
    Ok(())
}

/// What the reader makes of one output (sample `sample`): its mean NLL per token and its
/// coherence.
struct Reading {
    sample: usize,
    nll: Option<f64>,
    coherence: Option<f64>,
}

/// The text of every prompt, by id.
fn prompt_texts(study: &Study) -> HashMap<&str, &str> {
    study.tasks.iter().flat_map(|t: &Task| t.prompts.iter().map(|p| (p.id.as_str(), p.text.as_str()))).collect()
}

/// `reader`'s view of each output `which`, read after its prompt as `reader` would be
/// given it: the mean NLL per token, and the coherence — the cosine of the prompt's
/// embedding (the mean last hidden state over its tokens) and the output's (the same mean
/// over the output's tokens, from the pass that scores them). The outputs of one prompt
/// come in a row, so that the prompt is evaluated once. `None` for an empty output.
fn read(
    study: &Study,
    reader: &Model,
    samples: &[Sample],
    which: &[usize],
    threads: u32,
    bar: &ProgressBar,
) -> Result<Vec<Reading>, CliError> {
    let prompts = prompt_texts(study);
    let options = SessionOptions { n_ctx: 4096, n_threads: threads, embeddings: true, ..Default::default() };
    let mut session = reader.session(&options).map_err(runtime)?;
    let mut context: (&str, Vec<u32>, Vec<f32>) = ("", Vec::new(), Vec::new());
    let mut out = Vec::with_capacity(which.len());
    for &k in which {
        let s = &samples[k];
        if context.0 != s.prompt || context.1.is_empty() {
            let text = prompts.get(s.prompt.as_str()).copied().unwrap_or_default();
            let tokens = reader.encode_prompt(&Prompt::user_or_text(reader, text)).map_err(runtime)?;
            let embedding = session.mean_hidden(&tokens).map_err(runtime)?;
            context = (&s.prompt, tokens, embedding);
        }
        let continuation = reader.tokenize_continuation(&s.text);
        if continuation.is_empty() {
            out.push(Reading { sample: k, nll: None, coherence: None });
        } else {
            let read = session.read_continuation(&context.1, &continuation).map_err(runtime)?;
            let nll = -read.logprobs.iter().sum::<f64>() / read.logprobs.len() as f64;
            let coherence = cosine(&context.2, &read.mean_hidden).map(round);
            out.push(Reading { sample: k, nll: Some(round(nll)), coherence });
        }
        bar.inc(1);
    }
    Ok(out)
}

/// The cosine of two vectors; `None` when either is zero.
fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
    let norm = |v: &[f32]| v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    let (na, nb) = (norm(a), norm(b));
    (na > 0.0 && nb > 0.0).then(|| dot / (na * nb))
}

/// Six decimals: what samples.jsonl.gz keeps of a score.
fn round(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// The CPU time this process used, all threads (Linux: `/proc/self/stat`'s utime and
/// stime, in the kernel's fixed 100 ticks per second); `None` elsewhere.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces: count fields after its closing ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// The commit of the code in `dir`'s repository, or `unknown`.
fn commit(dir: &Path) -> String {
    git(dir, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
}

/// Whether tracked files differ from the commit.
fn dirty(dir: &Path) -> bool {
    git(dir, &["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty())
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The metrics, charts and report of `samples` into `--out`.
fn write_report(args: &ExperimentArgs, study: &Study, run: &Run, samples: &[Sample]) -> Result<ExitCode, CliError> {
    let report = report::write(&args.out, study, run, samples).map_err(|source| CliError::Read {
        what: "report folder",
        path: args.out.clone(),
        source,
    })?;
    if !args.quiet {
        eprintln!("{} outputs; report: {} ({} charts)", samples.len(), report.markdown.display(), report.charts.len());
    }
    Ok(ExitCode::SUCCESS)
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

fn load_schema(path: &Path) -> Result<SchemaTask, CliError> {
    let source = GrammarSource::Schema(SchemaFile { path: path.to_path_buf(), options: SchemaOptions::default() });
    let loaded = source.load()?;
    let schema = loaded.schema.ok_or_else(|| CliError::Usage(format!("{}: not a schema", path.display())))?;
    Ok(SchemaTask { source, grammar: loaded.grammar, schema })
}

fn compile(schema: &SchemaTask, model: &Model, path: &Path) -> Result<Arc<CompiledGrammar>, CliError> {
    Ok(schema.source.compile(&schema.grammar, model.vocab().clone(), Some(path))?.0)
}

/// One session for plain decoding and, once a setting asks for contrastive search, one with
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

fn progress(quiet: bool, total: u64, what: &str) -> ProgressBar {
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(total) };
    let template = format!("{what} {{bar:30}} {{pos}}/{{len}} {{elapsed_precise}} (eta {{eta}}) {{msg}}");
    bar.set_style(ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()));
    bar
}
