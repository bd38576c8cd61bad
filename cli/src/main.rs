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
mod rng;
mod sample;
mod source;
mod text;
mod validate;
mod vocab;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use stencil_schema::{Mode, SchemaOptions, Whitespace};

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
    /// Validate JSON documents against a JSON Schema (post hoc, with the `jsonschema` crate).
    ///
    /// A file whose name ends in .jsonl holds one JSON record per line (blank lines are
    /// skipped); any other file is one JSON document. Each failing record is reported as
    /// FILE[:LINE]: at POINTER: `KEYWORD`: MESSAGE, with POINTER the JSON pointer into the
    /// record, and a summary line ends the report. Exits 0 when every record validates, 1
    /// when some record does not, 2 when a file cannot be read or a record is not JSON
    /// (reported on stderr with its file and line; the other records are still checked).
    #[command(
        after_help = "Example:\n  stencil validate --schema fixtures/schemas/person.json fixtures/schemas/person.valid.jsonl"
    )]
    Validate(ValidateArgs),
}

/// Where the grammar comes from (exactly one of --grammar and --schema).
#[derive(Args, Debug)]
#[group(skip)]
#[command(group(ArgGroup::new("source").required(true).multiple(false).args(["grammar", "schema"])))]
pub struct GrammarArgs {
    /// The grammar file, in GBNF (llama.cpp's grammar format); its start rule is `root`.
    #[arg(long, short = 'g', value_name = "FILE")]
    grammar: Option<PathBuf>,
    /// A JSON Schema file instead of a grammar: the grammar is the JSON text (in the style
    /// the shape flags set) of the instances valid against the schema.
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    #[command(flatten)]
    shape: SchemaShapeArgs,
}

impl GrammarArgs {
    fn source(&self) -> Result<GrammarSource, CliError> {
        match (&self.grammar, &self.schema) {
            // clap counts `requires = "schema"` as met when --schema conflicts with a given
            // --grammar, so the shape flags are checked here.
            (Some(_), _) if self.shape.any_given() => Err(CliError::Usage(
                "--lenient, --whitespace, --max-whitespace and --indent apply to --schema only".into(),
            )),
            (Some(path), _) => Ok(GrammarSource::Gbnf(path.clone())),
            (None, Some(path)) => {
                Ok(GrammarSource::Schema(SchemaFile { path: path.clone(), options: self.shape.options()? }))
            }
            // clap's group makes one of the sources required.
            (None, None) => unreachable!("clap requires a grammar source"),
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
    /// Whitespace between JSON tokens: none at all (compact: {"a":1,"b":[1,2]}), or optional
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
        self.lenient || self.whitespace.is_some() || self.max_whitespace.is_some() || self.indent.is_some()
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
    /// JSON documents, or JSONL files (.jsonl: one record per line).
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
        Command::Validate(a) => validate::run(&a.schema, &a.files),
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
    match writeln!(out, "{line}") {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CliError::BrokenPipe),
        other => other.map_err(CliError::Stdout),
    }
}
