//! Where a grammar comes from, and turning it into the IR and a compiled grammar.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stencil_grammar::Grammar;
use stencil_mask::{CompiledGrammar, Vocabulary};

use crate::error::CliError;

/// A grammar source given on the command line. (JSON Schema will be another variant.)
#[derive(Clone, Debug)]
pub enum GrammarSource {
    /// A GBNF file.
    Gbnf(PathBuf),
}

/// A grammar read into the IR, and how long that took.
pub struct LoadedGrammar {
    pub grammar: Grammar,
    pub parse_time: Duration,
}

impl GrammarSource {
    /// The file the grammar is read from, for messages.
    pub fn path(&self) -> &Path {
        match self {
            GrammarSource::Gbnf(p) => p,
        }
    }

    /// Reads and parses the grammar.
    pub fn load(&self) -> Result<LoadedGrammar, CliError> {
        match self {
            GrammarSource::Gbnf(path) => {
                let bytes = std::fs::read(path).map_err(|source| CliError::Read {
                    what: "grammar",
                    path: path.clone(),
                    source,
                })?;
                let start = Instant::now();
                let grammar = stencil_grammar::parse_gbnf_bytes(&bytes)
                    .map_err(|source| CliError::Grammar { path: path.clone(), source: Box::new(source) })?;
                Ok(LoadedGrammar { grammar, parse_time: start.elapsed() })
            }
        }
    }

    /// Compiles a loaded grammar against `vocab` (`vocab_path` is only for messages).
    pub fn compile(
        &self,
        grammar: &Grammar,
        vocab: Arc<Vocabulary>,
        vocab_path: Option<&Path>,
    ) -> Result<(Arc<CompiledGrammar>, Duration), CliError> {
        let start = Instant::now();
        let compiled = CompiledGrammar::new(grammar, vocab).map_err(|source| CliError::Compile {
            path: self.path().to_path_buf(),
            vocab: vocab_path.map(Path::to_path_buf),
            source: Box::new(source),
        })?;
        Ok((compiled, start.elapsed()))
    }
}
