//! `stencil`: check grammars (GBNF or JSON Schema), test texts against them, sample from
//! them without a model, convert schemas to GBNF and validate JSON documents.
//!
//! Exit status: 0 success; 1 the text was rejected (`accepts`) or a document does not
//! validate (`validate`); 2 bad input (a grammar or schema that does not parse or compile,
//! a missing or unreadable file, a bad vocabulary, wrong arguments); 3 an engine failure (a
//! random walk reached a state where no token is allowed, the matcher failed, or the
//! grammar of a schema produced or accepted an instance that does not validate).

mod accepts;
mod check;
mod convert;
mod error;
mod experiment;
mod generate;
mod models;
mod sample;
mod scaling;
mod serve;
mod source;
mod speculate;
mod text;
mod tools;
mod validate;
mod vocab;
mod watermark;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use stencil_runtime::select::Extractor;
use stencil_schema::{Mode, PropertyOrder, SchemaOptions, Whitespace};

use crate::error::CliError;
use crate::source::{GrammarSource, SchemaFile};

const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  success
  1  the text was rejected or is incomplete (accepts); a document does not validate
     (validate)
  2  bad input: a grammar or schema that does not parse or compile, a missing or
     unreadable file, a vocabulary that cannot be read, wrong arguments
  3  engine failure: a walk reached a state where no token is allowed, the matcher
     failed, or a schema's grammar produced or accepted an instance that does not
     validate against the schema";

/// Grammar-constrained generation tools: GBNF grammars and JSON Schemas compiled to
/// per-token masks.
#[derive(Parser, Debug)]
#[command(name = "stencil", version, after_help = EXIT_STATUS_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and compile a grammar and print a summary, or the located error.
    ///
    /// Without --vocab the grammar is compiled against a tiny built-in vocabulary (the 256
    /// single bytes plus an end-of-sequence token), which still finds the errors that only
    /// show when compiling (limits, a grammar that matches nothing).
    #[command(
        after_help = "Example:\n  stencil check -g fixtures/gbnf/c.gbnf --vocab fixtures/vocab/gemma3-270m.tok.gguf.gz"
    )]
    Check(CheckArgs),
    /// Tell whether a grammar accepts a text, tokenized by the vocabulary's own tokenizer.
    ///
    /// The tokens are fed to the matcher one by one. Prints "accepted (N tokens)" and exits
    /// 0 when every token is allowed and the grammar can end after the last one; otherwise
    /// names the refused token and where it is in the text, and exits 1.
    #[command(
        after_help = "Example:\n  stencil accepts -g fixtures/gbnf/json.gbnf -v fixtures/vocab/smollm2-135m.tok.gguf.gz --text '{\"a\": 1}'"
    )]
    Accepts(AcceptsArgs),
    /// Generate strings of a grammar by a model-free random walk through its token masks.
    ///
    /// At each step the walk picks an allowed token at random (preferring short tokens and
    /// the tokens the grammar forces, and EOS more and more often as it goes on); after a
    /// random number of steps, at most half of --max-tokens, it searches for a short way
    /// to a place where the grammar can end and follows it, so that nearly every sample
    /// finishes within the budget.
    ///
    /// Each complete sample is printed on its own line as a JSON string (text that is not
    /// valid UTF-8, which a grammar naming arbitrary tokens can produce, is printed lossily
    /// and counted). Samples that do not finish within --max-tokens are reported on stderr
    /// and not printed; a summary line goes to stderr at the end.
    ///
    /// The walk is a soundness probe of the masks: a state where no token is allowed
    /// although the grammar cannot end, or a token of the mask that the matcher refuses,
    /// is reported loudly and exits 3.
    #[command(
        after_help = "Example:\n  stencil sample -g fixtures/gbnf/json.gbnf -v fixtures/vocab/smollm2-135m.tok.gguf.gz --random -n 5 -s 7"
    )]
    Sample(SampleArgs),
    /// Convert a JSON Schema to an equivalent GBNF grammar (llama.cpp's format) on stdout.
    ///
    /// The schema is compiled as for --schema elsewhere (same flags), regular expressions
    /// (from `pattern` and `format`) are rewritten as GBNF, and the grammar is printed with
    /// its start rule named `root`. In lenient mode the keywords the grammar does not
    /// enforce are listed in `#` comments at the top and on stderr.
    #[command(after_help = "Example:\n  stencil convert --schema fixtures/schemas/person.json > person.gbnf")]
    Convert(ConvertArgs),
    /// Validate JSON documents, JSONL files and directories of them against a JSON Schema
    /// (post hoc, with the `jsonschema` crate): the CI validator for extraction outputs.
    ///
    /// A file named .jsonl or .ndjson (and `-`, standard input) holds one JSON record per
    /// line (blank lines are skipped); any other file named on the command line is one
    /// JSON document. A directory stands for the .json, .jsonl and .ndjson files below it,
    /// in sorted order. The schema is compiled once; JSONL files are streamed.
    ///
    /// With --format text, each failing record is reported on stdout as
    /// `FILE[:LINE]: at POINTER: KEYWORD: MESSAGE` (POINTER is the JSON pointer into the
    /// record; JSON documents have no LINE), records and files that cannot be read on
    /// stderr, and a summary line ends the report. --format json and --format junit write
    /// one JSON object or JUnit XML on stdout instead (see validate/README.md), and the
    /// summary line on stderr. A progress bar shows on stderr when it is a terminal.
    ///
    /// Exits 0 when every record validates, 1 when some record does not, 2 when something
    /// cannot be read: a missing file, a record that is not JSON or not UTF-8, a truncated
    /// last line, a record over --max-record-bytes, an empty file, a directory without
    /// JSON files, or a schema that is not JSON or that the validator rejects. The other
    /// records are still checked.
    #[command(after_help = "Examples:\n  \
        stencil validate --schema fixtures/schemas/person.json fixtures/schemas/person.valid.jsonl\n  \
        stencil validate --schema fixtures/schemas/person.json --format junit out/ > report.xml")]
    Validate(ValidateArgs),
    /// Generate text with a local GGUF model, constrained by a JSON Schema, a GBNF grammar or
    /// a regular expression (or free), and validate it against the schema.
    ///
    /// The output is printed on stdout (with --stream, piece by piece as it is generated); a
    /// summary (tokens, speed, why it stopped) goes to stderr, and with a schema, whether the
    /// output validates. The prompt goes through the model's chat template when it has one
    /// (--raw to give it as is). Sampling starts from a preset (default extractor-greedy:
    /// greedy decoding) and the flags override it. Without --model the default model,
    /// SmolLM2-135M-Instruct, is used, fetched once with pip into the model cache
    /// ($STENCIL_MODELS_DIR or ~/.cache/stencil/models).
    ///
    /// Exits 0 when generation finished (and, with a schema, the output validates); 1 when
    /// the output does not validate against a keyword left to post-hoc validation or was cut
    /// by --max-tokens; 2 for bad input; 3 for an engine failure.
    #[command(
        after_help = "Example:\n  stencil generate --schema fixtures/schemas/person.json --prompt-file fixtures/prompts/person.txt"
    )]
    Generate(Box<GenerateArgs>),
    /// Serve the OpenAI chat and completions API over HTTP, with response_format (json_object,
    /// json_schema), GBNF grammars and regular expressions enforced by Stencil's masks.
    ///
    /// Routes: POST /v1/chat/completions, POST /v1/completions (JSON or server-sent events),
    /// GET /v1/models, GET /health (503 while the model loads), GET /metrics (Prometheus).
    /// Up to --parallel requests decode together, one llama.cpp batch per step; more wait in
    /// a queue of --queue-size (then 429). Listens on 127.0.0.1 unless --host says otherwise;
    /// SIGINT or SIGTERM stops it, letting requests in flight finish for --shutdown-timeout.
    #[command(after_help = "Example:\n  stencil serve --port 8080 --parallel 4")]
    Serve(Box<serve::ServeArgs>),
    /// Watermark detection: `stencil watermark detect --key K FILE` tests texts for the
    /// greenlist watermark of `generate --watermark-key K`.
    Watermark(watermark::WatermarkArgs),
    /// Run a decoding experiment: the prompts of FILE through its presets on its models,
    /// several seeds each; writes every output with its generation record (samples.jsonl),
    /// the metrics (repetition, diversity, distinct-n, self-BLEU, length, parse and valid
    /// rates) per model, prompt and preset, SVG charts and report.md into --out.
    #[command(
        after_help = "Example:\n  stencil experiment fixtures/experiments/decoding.toml --out examples/experiment"
    )]
    Experiment(experiment::ExperimentArgs),
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("source").multiple(false).args(["grammar", "schema", "regex", "structural_tag"])))]
#[command(group(ArgGroup::new("prompt_source").required(true).args(["prompt", "prompt_file"])))]
struct GenerateArgs {
    /// Constrain the output by this GBNF grammar.
    #[arg(long, short = 'g', value_name = "FILE")]
    grammar: Option<PathBuf>,
    /// Constrain the output to JSON valid against this JSON Schema (then validated).
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    /// Constrain the output to the whole match of this regular expression.
    #[arg(long, value_name = "REGEX")]
    regex: Option<String>,
    /// Constrain the output by this structural tag (XGrammar's and vLLM's
    /// `{"type": "structural_tag", "format": ...}` JSON; see STRUCTURAL_TAGS.md).
    #[arg(long, value_name = "FILE")]
    structural_tag: Option<PathBuf>,
    #[command(flatten)]
    shape: SchemaShapeArgs,
    /// The prompt (a user message when the model has a chat template).
    #[arg(long, short = 'p', value_name = "TEXT", allow_hyphen_values = true)]
    prompt: Option<String>,
    /// Read the prompt from a file.
    #[arg(long, value_name = "FILE")]
    prompt_file: Option<PathBuf>,
    /// A system message before the prompt.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// Give the prompt to the model as is, without its chat template.
    #[arg(long)]
    raw: bool,
    /// The GGUF model (default: $STENCIL_MODEL, else SmolLM2-135M-Instruct from the cache).
    #[arg(long, short = 'm', value_name = "FILE")]
    model: Option<PathBuf>,
    /// A decoding preset: extractor-greedy (default), chat-nucleus, creative, contrastive,
    /// or one from --presets.
    #[arg(long, value_name = "NAME")]
    preset: Option<String>,
    /// A TOML file of presets ([preset.NAME] tables of sampling parameters).
    #[arg(long, value_name = "FILE")]
    presets: Option<PathBuf>,
    /// Softmax temperature; 0 is greedy.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    temperature: Option<f32>,
    /// Keep the K most likely tokens (0: off); with --penalty-alpha, contrastive search's
    /// candidates per step.
    #[arg(long, value_name = "K")]
    top_k: Option<u32>,
    /// Contrastive search (Su et al. 2022): among the --top-k most likely allowed tokens,
    /// pick the one maximizing (1 - A) * p - A * (its hidden state's largest cosine
    /// similarity with those of the text so far). Deterministic; A = 0 or --top-k 1 is
    /// greedy. The `contrastive` preset is A = 0.6, K = 4.
    #[arg(long, visible_alias = "contrastive", value_name = "A", conflicts_with_all = ["beams", "speculate", "draft_model"])]
    penalty_alpha: Option<f32>,
    /// Keep the smallest set of tokens whose probability reaches P (1: off).
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    top_p: Option<f32>,
    /// Drop tokens less likely than P times the most likely one (0: off).
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    min_p: Option<f32>,
    /// Multiplicative penalty on tokens already seen (1: off).
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    repetition_penalty: Option<f32>,
    /// Subtracted from a logit once per earlier occurrence in the output.
    #[arg(long, value_name = "F", allow_hyphen_values = true)]
    frequency_penalty: Option<f32>,
    /// Subtracted from a logit once if the token occurred in the output.
    #[arg(long, value_name = "F", allow_hyphen_values = true)]
    presence_penalty: Option<f32>,
    /// Forbid repeating any n-gram of this size (0: off).
    #[arg(long, value_name = "N")]
    no_repeat_ngram_size: Option<u32>,
    /// Add BIAS to token ID's logit (repeatable).
    #[arg(long, value_name = "ID=BIAS", value_parser = parse_bias, allow_hyphen_values = true)]
    logit_bias: Vec<(u32, f32)>,
    /// Seed of the random draws (default: drawn at random and logged).
    #[arg(long, short = 's', value_name = "SEED")]
    seed: Option<u64>,
    /// The most tokens to generate.
    #[arg(long, value_name = "N")]
    max_tokens: Option<u32>,
    /// Stop before this text (repeatable); it is not printed.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    stop: Vec<String>,
    /// Keep going past end-of-generation tokens (until --max-tokens or the grammar ends).
    #[arg(long)]
    ignore_eos: bool,
    /// Print the output as it is generated.
    #[arg(long)]
    stream: bool,
    /// Beam search with N beams instead of sampling; prints the best beam.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=16),
          conflicts_with_all = ["speculate", "draft_model"])]
    beams: Option<u64>,
    /// Self-consistency: decode N samples together (one batch per step) and print the one
    /// whose answer most samples agree on; needs --vote, --vote-regex or --vote-last-line,
    /// and sampling (--temperature > 0). Sample i is seeded with SEED + i.
    #[arg(long = "n", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64),
          conflicts_with_all = ["beams", "best_of", "stream", "tools"])]
    samples: Option<u64>,
    /// With --n: vote on the value at this JSON pointer of each (schema-constrained) output,
    /// e.g. /answer.
    #[arg(long, value_name = "POINTER", requires = "samples", conflicts_with_all = ["vote_regex", "vote_last_line"])]
    vote: Option<String>,
    /// With --n: vote on the first match of this regex in each output (its first group, if
    /// it has one).
    #[arg(long, value_name = "REGEX", requires = "samples", conflicts_with = "vote_last_line")]
    vote_regex: Option<String>,
    /// With --n: vote on each output's last non-empty line.
    #[arg(long, requires = "samples")]
    vote_last_line: bool,
    /// With --n: answers that differ only in case are the same answer.
    #[arg(long, requires = "samples")]
    vote_ignore_case: bool,
    /// With --n: decode every sample, even once the vote cannot change.
    #[arg(long, requires = "samples")]
    no_early_stop: bool,
    /// Best-of-N: decode N samples together and print the best: valid under the schema,
    /// then the highest --scorer score, then the highest mean token log-probability.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64),
          conflicts_with_all = ["beams", "stream", "tools"])]
    best_of: Option<u64>,
    /// With --best-of: a shell command that gets a candidate on stdin and prints its score
    /// (higher is better); a non-zero exit rejects the candidate.
    #[arg(long, value_name = "CMD", requires = "best_of")]
    scorer: Option<String>,
    /// CPU threads for llama.cpp (default: all cores).
    #[arg(long, value_name = "N")]
    threads: Option<u32>,
    /// Tool calling: the tools the model may call, as OpenAI JSON (an array of
    /// {"type": "function", "function": {"name", "description", "parameters"}}). Prints each
    /// call as one JSON object per line, {"name": ..., "arguments": {...}}, or a plain-text
    /// reply as {"content": ...}; exits 1 if the reply is not a valid call.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["grammar", "schema", "regex", "beams", "stream"])]
    tools: Option<PathBuf>,
    /// With --tools: auto (default: a call or plain text), required, none, or a tool name.
    #[arg(long, value_name = "CHOICE", requires = "tools")]
    tool_choice: Option<String>,
    /// With --tools: up to N calls in one reply (default 1).
    #[arg(long, value_name = "N", requires = "tools")]
    max_calls: Option<u32>,
    /// With --tools: multi-stage (default: the name, then the arguments), single-grammar,
    /// unconstrained, or structural (the envelope's structural tag). With a format other than
    /// the envelope, every strategy but unconstrained decodes under the format's one grammar.
    #[arg(long, value_name = "STRATEGY", requires = "tools")]
    tool_strategy: Option<String>,
    /// With --tools: the tool-call format (default: recognized from the chat template, else
    /// the envelope): hermes, qwen3-coder, llama3, llama3-python-tag, mistral, mistral-args,
    /// harmony, deepseek-v3.1 or envelope.
    #[arg(long, value_name = "NAME", requires = "tools")]
    tool_format: Option<String>,
    /// Context length in tokens.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    ctx_size: u32,
    /// Append the generation record (model, parameters, seed, stop reason, timings) to
    /// this JSONL file.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Sample every token, even those the grammar forces.
    #[arg(long)]
    no_fast_forward: bool,
    #[command(flatten)]
    watermark: watermark::GenerateFlags,
    #[command(flatten)]
    speculation: speculate::SpeculationFlags,
    /// No progress bar and no summary on stderr.
    #[arg(long, short = 'q')]
    quiet: bool,
}

impl GenerateArgs {
    /// --n with its vote, or --best-of with its scorer.
    fn selection(&self) -> Result<Option<scaling::Selection>, CliError> {
        if let Some(n) = self.samples {
            let extractor = match (&self.vote, &self.vote_regex, self.vote_last_line) {
                (Some(pointer), _, _) => Extractor::json_pointer(pointer),
                (None, Some(regex), _) => Extractor::regex(regex),
                (None, None, true) => Ok(Extractor::LastLine),
                (None, None, false) => return Err(CliError::Usage(
                    "--n needs what to vote on: --vote POINTER (e.g. /answer), --vote-regex REGEX or --vote-last-line"
                        .into(),
                )),
            }
            .map_err(|e| CliError::Usage(e.to_string()))?;
            let early_stop = !self.no_early_stop;
            return Ok(Some(scaling::Selection::Vote {
                n: n as usize,
                extractor,
                case_fold: self.vote_ignore_case,
                early_stop,
            }));
        }
        Ok(self.best_of.map(|n| scaling::Selection::BestOf { n: n as usize, scorer: self.scorer.clone() }))
    }
}

fn parse_bias(s: &str) -> Result<(u32, f32), String> {
    let (id, bias) = s.split_once('=').ok_or("expected ID=BIAS, e.g. 42=-100")?;
    let id = id.trim().parse().map_err(|e| format!("token id {id:?}: {e}"))?;
    let bias = bias.trim().parse().map_err(|e| format!("bias {bias:?}: {e}"))?;
    Ok((id, bias))
}

impl GenerateArgs {
    fn options(&self) -> Result<generate::Options, CliError> {
        let source = match (&self.grammar, &self.schema) {
            (Some(_), _) if self.shape.any_given() => {
                return Err(CliError::Usage(
                    "--lenient, --whitespace, --max-whitespace, --indent and --any-order apply to --schema only".into(),
                ))
            }
            (Some(path), _) => Some(GrammarSource::Gbnf(path.clone())),
            (None, Some(path)) => {
                Some(GrammarSource::Schema(SchemaFile { path: path.clone(), options: self.shape.options()? }))
            }
            (None, None) => self.structural_tag.clone().map(GrammarSource::StructuralTag),
        };
        let prompt = match (&self.prompt, &self.prompt_file) {
            (Some(p), _) => p.clone(),
            (None, Some(path)) => std::fs::read_to_string(path).map_err(|source| CliError::Read {
                what: "prompt file",
                path: path.clone(),
                source,
            })?,
            (None, None) => unreachable!("clap requires a prompt"),
        };
        Ok(generate::Options {
            source,
            regex: self.regex.clone(),
            prompt,
            system: self.system.clone(),
            raw: self.raw,
            model: self.model.clone(),
            preset: self.preset.clone(),
            presets_file: self.presets.clone(),
            overrides: generate::Overrides {
                temperature: self.temperature,
                top_k: self.top_k,
                penalty_alpha: self.penalty_alpha,
                top_p: self.top_p,
                min_p: self.min_p,
                repetition_penalty: self.repetition_penalty,
                frequency_penalty: self.frequency_penalty,
                presence_penalty: self.presence_penalty,
                no_repeat_ngram_size: self.no_repeat_ngram_size,
                logit_bias: self.logit_bias.clone(),
                seed: self.seed,
                max_tokens: self.max_tokens,
                stop: self.stop.clone(),
                ignore_eos: self.ignore_eos,
                watermark: self.watermark.clone(),
            },
            stream: self.stream,
            beams: self.beams.map(|b| b as usize),
            selection: self.selection()?,
            threads: self.threads,
            flash_attention: self.speculation.flash_attention()?,
            n_ctx: self.ctx_size,
            log: self.log.clone(),
            no_fast_forward: self.no_fast_forward,
            speculation: self.speculation.speculation()?,
            draft_model: self.speculation.draft_model.clone(),
            quiet: self.quiet,
        })
    }
}

/// Where the grammar comes from (exactly one of --grammar and --schema).
#[derive(Args, Debug)]
#[group(skip)]
#[command(group(ArgGroup::new("source").required(true).multiple(false).args(["grammar", "schema", "structural_tag"])))]
pub struct GrammarArgs {
    /// The grammar file, in GBNF (llama.cpp's grammar format); its start rule is `root`.
    #[arg(long, short = 'g', value_name = "FILE")]
    grammar: Option<PathBuf>,
    /// A JSON Schema file instead of a grammar: the grammar is the JSON text (in the style
    /// the shape flags set) of the instances valid against the schema.
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    /// A structural tag file instead (XGrammar's and vLLM's `{"type": "structural_tag",
    /// "format": ...}` JSON; see STRUCTURAL_TAGS.md); its `json_schema` contents compile
    /// with the default schema options.
    #[arg(long, value_name = "FILE")]
    structural_tag: Option<PathBuf>,
    #[command(flatten)]
    shape: SchemaShapeArgs,
}

impl GrammarArgs {
    fn source(&self) -> Result<GrammarSource, CliError> {
        match (&self.grammar, &self.schema) {
            // clap counts `requires = "schema"` as met when --schema conflicts with a given
            // --grammar, so the shape flags are checked here.
            (Some(_), _) if self.shape.any_given() => Err(CliError::Usage(
                "--lenient, --whitespace, --max-whitespace, --indent and --any-order apply to --schema only".into(),
            )),
            (Some(path), _) => Ok(GrammarSource::Gbnf(path.clone())),
            (None, Some(path)) => {
                Ok(GrammarSource::Schema(SchemaFile { path: path.clone(), options: self.shape.options()? }))
            }
            (None, None) => match &self.structural_tag {
                Some(path) => Ok(GrammarSource::StructuralTag(path.clone())),
                // clap's group makes one of the sources required.
                None => unreachable!("clap requires a grammar source"),
            },
        }
    }
}

/// How a schema compiles: the mode and the shape of the JSON text.
#[derive(Args, Debug)]
#[group(skip)]
pub struct SchemaShapeArgs {
    /// Compile keywords the grammar cannot enforce anyway, listing them (they are then
    /// left to post-hoc validation); without it such a keyword is an error.
    #[arg(long, requires = "schema")]
    lenient: bool,
    /// Whitespace between JSON tokens: none at all (compact: `{"a":1,"b":[1,2]}`), or optional
    /// runs of spaces, tabs and newlines around every structural character (flexible, the
    /// default).
    #[arg(long, value_enum, value_name = "STYLE", requires = "schema")]
    whitespace: Option<WhitespaceArg>,
    /// The longest run of whitespace allowed anywhere with flexible whitespace (default 2);
    /// small caps stop runaway whitespace.
    #[arg(long, value_name = "N", requires = "schema")]
    max_whitespace: Option<usize>,
    /// Pretty-print instead, one member per line, N spaces per level (with N = 2, exactly
    /// serde_json's to_string_pretty); not with --whitespace.
    #[arg(long, value_name = "N", requires = "schema", conflicts_with_all = ["whitespace", "max_whitespace"])]
    indent: Option<usize>,
    /// Declared properties in any order (each at most once, required ones present) instead
    /// of schema order; objects with more than 8 declared properties are an error (with
    /// --lenient: widened, with a warning: up to 8 required names tracked, the other names
    /// free to repeat, left to post-hoc validation).
    #[arg(long, requires = "schema")]
    any_order: bool,
}

/// The default of --max-whitespace.
const DEFAULT_MAX_WHITESPACE: usize = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum WhitespaceArg {
    Compact,
    Flexible,
}

impl SchemaShapeArgs {
    fn any_given(&self) -> bool {
        self.lenient
            || self.whitespace.is_some()
            || self.max_whitespace.is_some()
            || self.indent.is_some()
            || self.any_order
    }

    fn options(&self) -> Result<SchemaOptions, CliError> {
        let whitespace = self.whitespace.unwrap_or(WhitespaceArg::Flexible);
        let mut opts = match (self.indent, whitespace) {
            (Some(n), _) => SchemaOptions { indent: Some(n), ..SchemaOptions::default() },
            (None, WhitespaceArg::Compact) => SchemaOptions::compact(),
            (None, WhitespaceArg::Flexible) => {
                let max_run = self.max_whitespace.unwrap_or(DEFAULT_MAX_WHITESPACE);
                SchemaOptions { whitespace: Whitespace::Flexible { max_run }, ..Default::default() }
            }
        };
        if whitespace == WhitespaceArg::Compact && self.max_whitespace.is_some() {
            return Err(CliError::Usage("--max-whitespace applies to --whitespace flexible only".into()));
        }
        if self.lenient {
            opts.mode = Mode::Lenient;
        }
        if self.any_order {
            opts.property_order = PropertyOrder::Any;
        }
        Ok(opts)
    }
}

#[derive(Args, Debug)]
struct CheckArgs {
    #[command(flatten)]
    grammar: GrammarArgs,
    /// Also compile against this vocabulary: a GGUF file (model or vocabulary only, plain
    /// or gzip-compressed, .gguf / .gguf.gz) or a Hugging Face tokenizer.json.
    #[arg(long, short = 'v', value_name = "FILE")]
    vocab: Option<PathBuf>,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["text", "file"])))]
struct AcceptsArgs {
    #[command(flatten)]
    grammar: GrammarArgs,
    /// The vocabulary whose tokenizer splits the text: a GGUF file (.gguf or .gguf.gz) or a
    /// Hugging Face tokenizer.json.
    #[arg(long, short = 'v', value_name = "FILE")]
    vocab: PathBuf,
    /// The text to test, given on the command line.
    #[arg(long, short = 't', value_name = "TEXT", conflicts_with = "file", allow_hyphen_values = true)]
    text: Option<String>,
    /// The text to test, read from a file (all of it, as UTF-8; no newline is stripped).
    #[arg(long, short = 'f', value_name = "FILE")]
    file: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct SampleArgs {
    #[command(flatten)]
    grammar: GrammarArgs,
    /// The vocabulary to walk over: a GGUF file (.gguf or .gguf.gz) or a Hugging Face
    /// tokenizer.json. Its EOS tokens end a sample.
    #[arg(long, short = 'v', value_name = "FILE")]
    vocab: PathBuf,
    /// Pick every token at random among the allowed ones (no model). This is the only
    /// sampling mode for now, so the flag is required.
    #[arg(long, required = true)]
    random: bool,
    /// How many samples to generate.
    #[arg(long, short = 'n', value_name = "N", default_value_t = 10)]
    count: usize,
    /// Seed of the random walk: the same seed, grammar and vocabulary give the same
    /// samples.
    #[arg(long, short = 's', value_name = "SEED", default_value_t = 0)]
    seed: u64,
    /// The most tokens a sample may take before it ends (the final EOS not counted). A
    /// sample that has not finished by then is reported on stderr and not printed.
    #[arg(long, short = 'm', value_name = "M", default_value_t = 256)]
    max_tokens: usize,
}

#[derive(Args, Debug)]
struct ConvertArgs {
    /// The JSON Schema file to convert.
    #[arg(long, value_name = "FILE")]
    schema: PathBuf,
    #[command(flatten)]
    shape: SchemaShapeArgs,
}

#[derive(Args, Debug)]
struct ValidateArgs {
    /// The JSON Schema to validate against.
    #[arg(long, value_name = "FILE")]
    schema: PathBuf,
    /// JSON documents, JSONL files (.jsonl, .ndjson: one record per line; `-`: standard
    /// input) and directories of them.
    #[arg(value_name = "PATH", required = true)]
    files: Vec<PathBuf>,
    /// The report on stdout: text (for people), json (one JSON object) or junit (JUnit
    /// XML, one test case per record, for CI test reports).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    format: validate::ReportFormat,
    /// The longest record read: a JSONL line or a whole JSON document, in bytes, or with a
    /// suffix K, M, G (KiB, MiB, GiB). A longer record is reported and skipped.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = validate::parse_size)]
    max_record_bytes: usize,
    /// Accept files with no record (empty, or only blank lines); by default an empty file
    /// is bad input, since an extraction pipeline does not normally write one.
    #[arg(long)]
    allow_empty: bool,
    /// Do not show the progress bar (shown on stderr only when it is a terminal).
    #[arg(long)]
    no_progress: bool,
}

/// `tracing` to stderr, filtered by `STENCIL_LOG` (e.g. `STENCIL_LOG=stencil_mask=debug`:
/// the engine's compile passes, each span's time when it closes), else by `default` (none:
/// no subscriber, nothing logged).
pub(crate) fn init_logging(default: Option<&str>) {
    let filter = match (tracing_subscriber::EnvFilter::try_from_env("STENCIL_LOG"), default) {
        (Ok(filter), _) => filter,
        (Err(_), Some(d)) => tracing_subscriber::EnvFilter::new(d),
        (Err(_), None) => return,
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        init_logging(None);
    }
    let result = match &cli.command {
        Command::Check(a) => a.grammar.source().and_then(|s| check::run(&s, a.vocab.as_deref())),
        Command::Accepts(a) => {
            let input = match (&a.text, &a.file) {
                (Some(t), _) => accepts::Input::Text(t.clone()),
                (None, Some(f)) => accepts::Input::File(f.clone()),
                (None, None) => unreachable!("clap requires --text or --file"),
            };
            a.grammar.source().and_then(|s| accepts::run(&s, &a.vocab, &input))
        }
        Command::Sample(a) => a.grammar.source().and_then(|s| {
            sample::run(&s, &a.vocab, &sample::Options { count: a.count, seed: a.seed, max_tokens: a.max_tokens })
        }),
        Command::Convert(a) => {
            a.shape.options().and_then(|options| convert::run(&SchemaFile { path: a.schema.clone(), options }))
        }
        Command::Generate(a) => match &a.tools {
            Some(path) => {
                let args = tools::ToolArgs {
                    tools: path.clone(),
                    choice: a.tool_choice.clone(),
                    max_calls: a.max_calls,
                    strategy: a.tool_strategy.clone(),
                    format: a.tool_format.clone(),
                };
                a.options().and_then(|o| tools::run(&o, &args))
            }
            None => a.options().and_then(|o| generate::run(&o)),
        },
        Command::Validate(a) => validate::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Watermark(a) => watermark::run(a),
        Command::Experiment(a) => experiment::run(a),
    };
    match result {
        Ok(code) => code,
        Err(CliError::BrokenPipe) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Writes a line to stdout; a closed pipe (`stencil sample ... | head`) ends quietly.
pub(crate) fn print_line(line: &str) -> Result<(), CliError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").map_err(CliError::from_stdout)
}
