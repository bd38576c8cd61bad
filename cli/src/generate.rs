//! `stencil generate`: text from a local GGUF model, constrained by a JSON Schema, a GBNF
//! grammar or a regular expression, then validated against the schema when there is one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;
use stencil_grammar::{Expr, Grammar};
use stencil_mask::CompiledGrammar;
use stencil_runtime::beam::BeamParams;
use stencil_runtime::sampling::{Presets, SamplingParams};
use stencil_runtime::{ChatMessage, GenerateRequest, Model, ModelOptions, Prompt, Session, SessionOptions, StopReason};

use crate::error::CliError;
use crate::source::{describe_issue, GrammarSource, LoadedSchema};

/// What `generate` was asked, after clap.
pub struct Options {
    pub source: Option<GrammarSource>,
    pub regex: Option<String>,
    pub prompt: String,
    pub system: Option<String>,
    /// Give the prompt to the model as is, not through its chat template.
    pub raw: bool,
    pub model: Option<PathBuf>,
    pub preset: Option<String>,
    pub presets_file: Option<PathBuf>,
    /// Explicit flags, applied over the preset.
    pub overrides: Overrides,
    pub stream: bool,
    pub beams: Option<usize>,
    /// Self-consistency or best-of-N over several samples.
    pub selection: Option<crate::scaling::Selection>,
    pub threads: Option<u32>,
    pub flash_attention: stencil_runtime::FlashAttention,
    pub n_ctx: u32,
    pub log: Option<PathBuf>,
    pub no_fast_forward: bool,
    /// Speculative decoding (prompt lookup, or the draft model below).
    pub speculation: Option<stencil_runtime::Speculation>,
    /// The draft model of draft-model speculation.
    pub draft_model: Option<PathBuf>,
    pub quiet: bool,
}

/// Sampling flags given on the command line (`None`: keep the preset's value).
#[derive(Default)]
pub struct Overrides {
    pub temperature: Option<f32>,
    pub top_k: Option<u32>,
    /// Contrastive search's α.
    pub penalty_alpha: Option<f32>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repetition_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub no_repeat_ngram_size: Option<u32>,
    pub logit_bias: Vec<(u32, f32)>,
    pub seed: Option<u64>,
    pub max_tokens: Option<u32>,
    pub stop: Vec<String>,
    pub ignore_eos: bool,
    /// `--watermark-*`, over the preset's watermark.
    pub watermark: crate::watermark::GenerateFlags,
}

/// The preset used when none is named: greedy, for reproducible extraction.
pub const DEFAULT_PRESET: &str = "extractor-greedy";

impl Overrides {
    fn apply(&self, p: &mut SamplingParams) {
        macro_rules! set {
            ($($field:ident),*) => { $( if let Some(v) = self.$field { p.$field = v; } )* };
        }
        set!(temperature, top_k, top_p, min_p, repetition_penalty, frequency_penalty, presence_penalty, penalty_alpha);
        set!(no_repeat_ngram_size, max_tokens);
        if self.seed.is_some() {
            p.seed = self.seed;
        }
        p.logit_bias.extend(self.logit_bias.iter().copied());
        p.stop.extend(self.stop.iter().cloned());
        p.ignore_eos |= self.ignore_eos;
    }
}

pub fn run(opts: &Options) -> Result<ExitCode, CliError> {
    let params = sampling_params(opts)?;
    let loaded = match &opts.source {
        Some(source) => Some((source, source.load()?)),
        None => None,
    };
    if let Some((_, l)) = &loaded {
        if let Some(schema) = &l.schema {
            for w in &schema.warnings {
                eprintln!("warning: {w} (left to post-hoc validation)");
            }
        }
    }
    let model_path = crate::models::resolve(opts.model.as_ref())?;
    let model = load_model(&model_path, opts.quiet)?;

    let (grammar, label) = match (&loaded, &opts.regex) {
        (Some((source, l)), _) => {
            let (g, _) = source.compile(&l.grammar, model.vocab().clone(), Some(&model_path))?;
            let label = match source {
                _ if l.schema.is_some() => "json-schema",
                crate::source::GrammarSource::StructuralTag(_) => "structural-tag",
                _ => "gbnf",
            };
            (Some(g), label)
        }
        (None, Some(pattern)) => (Some(compile_regex(pattern, &model)?), "regex"),
        (None, None) => (None, "none"),
    };
    let prompt = if opts.raw || model.chat_template().is_none() {
        let mut text = opts.system.clone().map(|s| s + "\n\n").unwrap_or_default();
        text.push_str(&opts.prompt);
        Prompt::Text(text)
    } else {
        let mut messages: Vec<ChatMessage> = opts.system.iter().map(ChatMessage::system).collect();
        messages.push(ChatMessage::user(opts.prompt.clone()));
        Prompt::Chat(messages)
    };
    let mut request = GenerateRequest::new(prompt).with_params(params);
    request.preset = Some(opts.preset.clone().unwrap_or_else(|| DEFAULT_PRESET.to_string()));
    request.fast_forward = !opts.no_fast_forward;
    request.speculation = opts.speculation.clone();
    if let Some(g) = grammar {
        request = request.with_grammar(g, label);
    }

    let beams = opts.beams.unwrap_or(0);
    let samples = opts.selection.as_ref().map_or(1, crate::scaling::Selection::n);
    let session_options = session_options(&request, flag_session_options(opts), beams, samples);
    if beams > 0 && request.params.contrastive().is_some() {
        return Err(CliError::Usage(
            "contrastive search (--penalty-alpha) and --beams are two different searches".into(),
        ));
    }
    let draft = load_draft(opts)?;
    let mut session = open_session(&model, draft.as_ref(), &session_options)?;

    let schema = loaded.as_ref().and_then(|(_, l)| l.schema.as_ref());
    if beams > 0 {
        let results =
            session.beam_search(&request, &BeamParams { n_beams: beams, ..Default::default() }).map_err(runtime)?;
        for (i, b) in results.iter().enumerate() {
            eprintln!(
                "beam {i}: score {:.4} (log-probability {:.3}, {} tokens{})",
                b.score,
                b.logprob,
                b.tokens.len(),
                if b.finished { "" } else { ", cut by --max-tokens" }
            );
        }
        let best = results.first().ok_or_else(|| CliError::Usage("beam search returned nothing".into()))?;
        print_text(&best.text, true)?;
        return Ok(check_output(&best.text, best.finished, schema));
    }

    if let Some(selection) = &opts.selection {
        let log = opts.log.as_deref();
        let Some(chosen) = crate::scaling::run(selection, &mut session, &request, schema, log, opts.quiet)? else {
            return Ok(crate::scaling::nothing_selected());
        };
        print_text(&chosen.text, true)?;
        return Ok(check_output(&chosen.text, !chosen.stop_reason.is_cut(), schema));
    }

    let mut stdout = std::io::stdout().lock();
    let mut write_error = None;
    let generation = session
        .generate(&request, |piece| {
            if opts.stream && write_error.is_none() {
                if let Err(e) = stdout.write_all(piece.as_bytes()).and_then(|()| stdout.flush()) {
                    write_error = Some(e);
                }
            }
        })
        .map_err(runtime)?;
    drop(stdout);
    if let Some(e) = write_error {
        return Err(CliError::from_stdout(e));
    }
    print_text(&generation.text, !opts.stream)?;
    let record = &generation.record;
    if !opts.quiet {
        eprintln!(
            "{} tokens ({} forced) in {:.0} ms, {:.1} tokens/s; prompt {} tokens in {:.0} ms; mask {:.3} ms/token; stop: {}",
            record.generated_tokens,
            record.forced_tokens,
            record.timings.decode_ms,
            record.timings.tokens_per_second,
            record.prompt_tokens,
            record.timings.prefill_ms,
            record.timings.mask_ms_per_token,
            describe_stop(&record.stop_reason),
        );
    }
    if let (Some(c), false) = (&record.contrastive, opts.quiet) {
        eprintln!(
            "contrastive search (alpha {}, k {}): {} candidate steps, {} candidate rows, scoring {:.1} ms",
            c.penalty_alpha, c.top_k, c.candidate_steps, c.candidate_rows, c.scoring_ms
        );
    }
    if let (Some(spec), false) = (&record.speculation, opts.quiet) {
        eprintln!(
            "{}: {} of {} drafted tokens accepted ({:.0} %), {:.2} tokens per forward pass",
            if opts.draft_model.is_some() { "draft model" } else { "prompt lookup" },
            spec.accepted,
            spec.drafted,
            100.0 * spec.acceptance_rate,
            record.generated_tokens as f64 / record.forward_passes.max(1) as f64
        );
    }
    if let Some(log) = &opts.log {
        append_line(log, &record.to_json_line())?;
    }
    Ok(check_output(&generation.text, !generation.stop_reason.is_cut(), schema))
}

/// `base` made ready for `request`: sequences for `samples` (each with its contrastive
/// candidates) or `beams` (two each), and hidden states when the request uses contrastive
/// search.
pub(crate) fn session_options(
    request: &GenerateRequest,
    base: SessionOptions,
    beams: usize,
    samples: usize,
) -> SessionOptions {
    let contrastive = request.params.contrastive();
    // Contrastive search: a KV sequence per candidate and one for the losers' cells.
    let per_sample = 1 + contrastive.map_or(0, |(_, k)| k + 1);
    SessionOptions {
        n_seq_max: (2 * beams).max(samples * per_sample).max(1) as u32,
        embeddings: contrastive.is_some(),
        ..base
    }
}

/// What the flags set of a session: its context (--ctx-size), threads (--threads, default
/// all cores) and flash attention (--flash-attn).
pub(crate) fn flag_session_options(opts: &Options) -> SessionOptions {
    let defaults = SessionOptions::default();
    SessionOptions {
        n_ctx: opts.n_ctx,
        n_threads: opts.threads.unwrap_or(defaults.n_threads),
        flash_attention: opts.flash_attention,
        ..defaults
    }
}

/// A session of `model` with `options`, and `draft` (the --draft-model) attached.
pub(crate) fn open_session<'m>(
    model: &'m Model,
    draft: Option<&'m Model>,
    options: &SessionOptions,
) -> Result<Session<'m>, CliError> {
    let mut session = model.session(options).map_err(runtime)?;
    if let Some(draft) = draft {
        session.attach_draft(draft).map_err(runtime)?;
    }
    Ok(session)
}

/// The preset (default [`DEFAULT_PRESET`]) with the flags applied over it.
pub(crate) fn sampling_params(opts: &Options) -> Result<SamplingParams, CliError> {
    let presets = match &opts.presets_file {
        Some(path) => Presets::from_toml_file(path).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?,
        None => Presets::builtin(),
    };
    let name = opts.preset.as_deref().unwrap_or(DEFAULT_PRESET);
    let mut params = presets.get(name).map_err(|e| CliError::Usage(e.to_string()))?.clone();
    opts.overrides.apply(&mut params);
    opts.overrides.watermark.apply(&mut params)?;
    params.validate().map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(params)
}

/// The `--draft-model`, loaded, if one was given.
pub(crate) fn load_draft(opts: &Options) -> Result<Option<Model>, CliError> {
    opts.draft_model.as_deref().map(|path| load_model(path, opts.quiet)).transpose()
}

/// Loads the model, with a progress bar on a terminal.
pub(crate) fn load_model(path: &Path, quiet: bool) -> Result<Model, CliError> {
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(100) };
    bar.set_style(
        ProgressStyle::with_template("loading {msg} {bar:30} {percent:>3}%")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default());
    bar.enable_steady_tick(Duration::from_millis(100));
    let tick = bar.clone();
    let model = Model::load_with_progress(path, &ModelOptions::default(), move |fraction| {
        tick.set_position((fraction * 100.0) as u64);
        true
    });
    bar.finish_and_clear();
    model.map_err(runtime)
}

/// A grammar whose text is the whole match of `pattern` (regex-syntax dialect).
fn compile_regex(pattern: &str, model: &Model) -> Result<Arc<CompiledGrammar>, CliError> {
    let mut grammar = Grammar::new();
    grammar.add_rule("root", Expr::Regex(pattern.into()));
    CompiledGrammar::new(&grammar, model.vocab().clone())
        .map_err(|e| CliError::Usage(format!("--regex {pattern:?} cannot be compiled: {e}")))
}

/// Exit status from the output: with a schema, the output must validate.
fn check_output(text: &str, complete: bool, schema: Option<&LoadedSchema>) -> ExitCode {
    let Some(schema) = schema else {
        return ExitCode::SUCCESS;
    };
    if !complete {
        eprintln!("error: the output is incomplete (--max-tokens or the context ran out), so it is not valid JSON");
        return ExitCode::from(1);
    }
    let instance: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: the output is not JSON ({e}); this is an engine bug");
            return ExitCode::from(3);
        }
    };
    match schema.validate(&instance) {
        Ok(()) => {
            eprintln!("valid: the output validates against the schema");
            ExitCode::SUCCESS
        }
        Err(issues) => {
            for issue in &issues {
                eprintln!("invalid: {}", describe_issue(issue));
            }
            // Only keywords listed as unenforced may fail; anything else is a bug.
            ExitCode::from(if schema.is_exact() { 3 } else { 1 })
        }
    }
}

fn describe_stop(reason: &StopReason) -> String {
    match reason {
        StopReason::Eos => "end of generation token".into(),
        StopReason::Stop(s) => format!("stop string {s:?}"),
        StopReason::Length => "--max-tokens reached".into(),
        StopReason::GrammarComplete => "grammar complete".into(),
        StopReason::ContextFull => "context full".into(),
        StopReason::Cancelled => "cancelled".into(),
    }
}

/// Prints the output (when not already streamed) and ends the line.
fn print_text(text: &str, print: bool) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    let r = if print { writeln!(out, "{text}") } else { writeln!(out) };
    r.and_then(|()| out.flush()).map_err(CliError::from_stdout)
}

pub(crate) fn append_line(path: &Path, line: &str) -> Result<(), CliError> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| CliError::Read { what: "log file", path: path.to_path_buf(), source })?;
    writeln!(file, "{line}").map_err(|source| CliError::Read { what: "log file", path: path.to_path_buf(), source })
}

pub(crate) fn runtime(e: stencil_runtime::RuntimeError) -> CliError {
    CliError::Runtime(Box::new(e))
}
