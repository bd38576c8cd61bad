//! Where a grammar comes from (a GBNF file or a JSON Schema), and turning it into the IR
//! and a compiled grammar.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use stencil_grammar::Grammar;
use stencil_mask::{CompiledGrammar, Vocabulary};
use stencil_schema::{Mode, SchemaOptions, Unenforced};

use crate::error::CliError;

/// A grammar source given on the command line.
#[derive(Clone, Debug)]
pub enum GrammarSource {
    /// A GBNF file.
    Gbnf(PathBuf),
    /// A JSON Schema file, compiled with these options.
    Schema(SchemaFile),
    /// A structural tag (XGrammar's and vLLM's JSON), its `json_schema` contents compiled
    /// with the default schema options.
    StructuralTag(PathBuf),
}

/// A JSON Schema file and how to compile it.
#[derive(Clone, Debug)]
pub struct SchemaFile {
    pub path: PathBuf,
    pub options: SchemaOptions,
}

/// A grammar read into the IR, and how long that took.
pub struct LoadedGrammar {
    pub grammar: Grammar,
    /// Parsing the GBNF, or reading and compiling the schema into the IR.
    pub parse_time: Duration,
    /// For a schema source: the schema and what the grammar leaves to validation.
    pub schema: Option<LoadedSchema>,
}

/// A schema compiled into the IR.
pub struct LoadedSchema {
    pub document: Value,
    /// Keywords the grammar does not enforce (lenient mode only; empty in strict mode).
    pub warnings: Vec<Unenforced>,
    pub options: SchemaOptions,
}

impl LoadedSchema {
    /// Validates `instance` against the schema (post hoc, with the `jsonschema` crate).
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<stencil_schema::ValidationIssue>> {
        stencil_schema::validate(&self.document, instance, &self.options.registry)
    }

    /// True when every valid output of the grammar must validate: strict mode, or lenient
    /// mode with nothing left unenforced. A validation failure is then an engine bug.
    pub fn is_exact(&self) -> bool {
        self.options.mode == Mode::Strict || self.warnings.is_empty()
    }
}

impl GrammarSource {
    /// The file the grammar is read from, for messages.
    pub fn path(&self) -> &Path {
        match self {
            GrammarSource::Gbnf(p) => p,
            GrammarSource::Schema(s) => &s.path,
            GrammarSource::StructuralTag(p) => p,
        }
    }

    /// "grammar" or "schema", for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            GrammarSource::Gbnf(_) => "grammar",
            GrammarSource::Schema(_) => "schema",
            GrammarSource::StructuralTag(_) => "structural tag",
        }
    }

    /// Reads and parses the grammar (or reads the schema and compiles it into the IR).
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
                Ok(LoadedGrammar { grammar, parse_time: start.elapsed(), schema: None })
            }
            GrammarSource::Schema(s) => {
                let document = read_schema(&s.path)?;
                let start = Instant::now();
                let compiled = stencil_schema::compile_schema(&document, &s.options).map_err(|source| {
                    CliError::Schema { path: s.path.clone(), mode: s.options.mode, source: Box::new(source) }
                })?;
                let parse_time = start.elapsed();
                Ok(LoadedGrammar {
                    grammar: compiled.grammar,
                    parse_time,
                    schema: Some(LoadedSchema { document, warnings: compiled.warnings, options: s.options.clone() }),
                })
            }
            GrammarSource::StructuralTag(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| CliError::Read {
                    what: "structural tag",
                    path: path.clone(),
                    source,
                })?;
                let start = Instant::now();
                let compiled = stencil_structural::compile_str(&text, &Default::default())
                    .map_err(|source| CliError::StructuralTag { path: path.clone(), source: Box::new(source) })?;
                for (pointer, w) in &compiled.warnings {
                    eprintln!("warning: {pointer}: {w}");
                }
                Ok(LoadedGrammar { grammar: compiled.grammar, parse_time: start.elapsed(), schema: None })
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
            what: self.kind(),
            path: self.path().to_path_buf(),
            vocab: vocab_path.map(Path::to_path_buf),
            source: Box::new(source),
        })?;
        Ok((compiled, start.elapsed()))
    }
}

/// Reads a JSON Schema document (any JSON value; `true` and `false` are schemas too).
pub fn read_schema(path: &Path) -> Result<Value, CliError> {
    let bytes =
        std::fs::read(path).map_err(|source| CliError::Read { what: "schema", path: path.to_path_buf(), source })?;
    serde_json::from_slice(&bytes).map_err(|source| CliError::SchemaJson { path: path.to_path_buf(), source })
}

/// One validation issue on one line: `at /a/0: `keyword`: message`.
pub fn describe_issue(issue: &stencil_schema::ValidationIssue) -> String {
    format!("at {}: `{}`: {}", show_pointer(&issue.instance_pointer), issue.keyword, issue.message)
}

/// An instance JSON pointer for people: the root is `(root)`.
pub fn show_pointer(p: &str) -> String {
    if p.is_empty() {
        "(root)".to_string()
    } else {
        p.to_string()
    }
}
