//! `stencil`: check grammars, test texts against them, and sample from them without a
//! model.
//!
//! Exit status: 0 success; 1 the text was rejected (`accepts`); 2 bad input (a grammar
//! that does not parse or compile, a missing or unreadable file, a bad vocabulary,
//! wrong arguments); 3 an engine failure (a random walk reached a state where no token is
//! allowed, or the matcher failed).

mod accepts;
mod check;
mod error;
mod rng;
mod sample;
mod source;
mod text;
mod vocab;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::error::CliError;
use crate::source::GrammarSource;

const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  success
  1  the text was rejected or is incomplete (accepts)
  2  bad input: a grammar that does not parse or compile, a missing or unreadable file,
     a vocabulary that cannot be read, wrong arguments
  3  engine failure: a walk reached a state where no token is allowed, or the matcher
     failed";

/// Grammar-constrained generation tools: GBNF grammars compiled to per-token masks.
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
}

/// Where the grammar comes from (exactly one).
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
pub struct GrammarArgs {
    /// The grammar file, in GBNF (llama.cpp's grammar format); its start rule is `root`.
    #[arg(long, short = 'g', value_name = "FILE")]
    grammar: Option<PathBuf>,
}

impl GrammarArgs {
    fn source(&self) -> GrammarSource {
        match &self.grammar {
            Some(path) => GrammarSource::Gbnf(path.clone()),
            // clap's group makes one of the sources required.
            None => unreachable!("clap requires a grammar source"),
        }
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Check(a) => check::run(&a.grammar.source(), a.vocab.as_deref()),
        Command::Accepts(a) => {
            let input = match (&a.text, &a.file) {
                (Some(t), _) => accepts::Input::Text(t.clone()),
                (None, Some(f)) => accepts::Input::File(f.clone()),
                (None, None) => unreachable!("clap requires --text or --file"),
            };
            accepts::run(&a.grammar.source(), &a.vocab, &input)
        }
        Command::Sample(a) => sample::run(
            &a.grammar.source(),
            &a.vocab,
            &sample::Options { count: a.count, seed: a.seed, max_tokens: a.max_tokens },
        ),
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
