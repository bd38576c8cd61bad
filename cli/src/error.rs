//! Every way a command can fail, with the exit status it gives.

use std::path::PathBuf;

use stencil_grammar::{GbnfError, LowerError, PrintError};
use stencil_mask::vocab::{GgufError, HfError, TokenizerError};
use stencil_mask::{CompileError, MatchError};
use stencil_schema::{Mode, SchemaError};
use thiserror::Error;

/// A failure that stops a command. `Display` is the message shown after `error: `.
#[derive(Debug, Error)]
pub enum CliError {
    #[error("cannot read {what} {}: {source}", .path.display())]
    Read { what: &'static str, path: PathBuf, source: std::io::Error },

    #[error("invalid grammar {}: {source}", .path.display())]
    Grammar { path: PathBuf, source: Box<GbnfError> },

    #[error("{what} {} cannot be compiled{}: {source}", .path.display(), vocab_note(.vocab))]
    Compile { what: &'static str, path: PathBuf, vocab: Option<PathBuf>, source: Box<CompileError> },

    #[error("invalid schema {}: not JSON: {source}", .path.display())]
    SchemaJson { path: PathBuf, source: serde_json::Error },

    #[error("schema {}: {source}{}", .path.display(), lenient_hint(.source, *.mode))]
    Schema { path: PathBuf, mode: Mode, source: Box<SchemaError> },

    #[error("structural tag {}: {source}", .path.display())]
    StructuralTag { path: PathBuf, source: Box<stencil_structural::StructuralError> },

    #[error("schema {}: its grammar cannot be written as GBNF: {source}", .path.display())]
    Lower { path: PathBuf, source: LowerError },

    #[error("schema {}: its grammar cannot be written as GBNF: {source}", .path.display())]
    Print { path: PathBuf, source: PrintError },

    #[error("{0}")]
    /// Arguments that clap cannot check on its own.
    Usage(String),

    #[error("cannot read vocabulary {}: {source}", .path.display())]
    Gguf { path: PathBuf, source: GgufError },

    #[error("cannot read vocabulary {}: {source}", .path.display())]
    TokenizerJson { path: PathBuf, source: HfError },

    #[error(
        "{}: not a vocabulary file Stencil knows (expected a GGUF file, .gguf or .gguf.gz, \
         or a Hugging Face tokenizer.json)",
        .path.display()
    )]
    UnknownVocabFormat { path: PathBuf },

    #[error("cannot load the tokenizer of {}: {source}", .path.display())]
    Tokenizer { path: PathBuf, source: TokenizerError },

    #[error("cannot tokenize the text: {0}")]
    Tokenize(TokenizerError),

    #[error("{}: the text is not valid UTF-8 (invalid byte at offset {offset})", .path.display())]
    TextNotUtf8 { path: PathBuf, offset: usize },

    #[error("the matcher failed: {0}")]
    Match(MatchError),

    #[error("{0}")]
    /// A sampling walk found the masks wrong (a dead end, or a token the matcher refuses).
    EngineBug(String),

    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),

    #[error("{0}")]
    Runtime(Box<stencil_runtime::RuntimeError>),

    /// Stdout was closed by its reader: stop quietly.
    #[error("stdout was closed")]
    BrokenPipe,
}

fn vocab_note(vocab: &Option<PathBuf>) -> String {
    match vocab {
        Some(v) => format!(" against vocabulary {}", v.display()),
        None => String::new(),
    }
}

/// In strict mode, how to get past a keyword the grammar cannot enforce.
fn lenient_hint(e: &SchemaError, mode: Mode) -> &'static str {
    match (e, mode) {
        (SchemaError::UnsupportedKeyword { .. }, Mode::Strict) => {
            "\n  (with --lenient the schema compiles anyway: the keyword is listed and left to post-hoc validation)"
        }
        // A count above max_repetition is the one limit lenient mode gets past.
        (SchemaError::TooLarge { limit: stencil_schema::SchemaLimit::Repetition, .. }, Mode::Strict) => {
            "\n  (with --lenient the schema compiles anyway: the count is listed and left to post-hoc validation)"
        }
        _ => "",
    }
}

impl CliError {
    /// A failed write to stdout: a closed pipe (`stencil sample ... | head`) ends quietly.
    pub(crate) fn from_stdout(e: std::io::Error) -> CliError {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CliError::BrokenPipe
        } else {
            CliError::Stdout(e)
        }
    }

    /// The process exit status for this error (see the crate docs).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Match(_) | CliError::EngineBug(_) => 3,
            CliError::Runtime(e) if matches!(**e, stencil_runtime::RuntimeError::Matcher(_)) => 3,
            CliError::BrokenPipe => 0,
            _ => 2,
        }
    }
}
