//! `stencil check`: parse and compile a grammar (or a schema), print a summary.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::CliError;
use crate::print_line;
use stencil_schema::{Mode, Whitespace};

use crate::source::{GrammarSource, LoadedSchema};
use crate::vocab::{self, LoadedVocab};

pub fn run(source: &GrammarSource, vocab_path: Option<&Path>) -> Result<ExitCode, CliError> {
    let loaded = source.load()?;
    let (vocab, vocab_time) = match vocab_path {
        Some(path) => {
            let start = Instant::now();
            let v = LoadedVocab::load(path)?;
            (v.vocab, Some(start.elapsed()))
        }
        None => (Arc::new(vocab::builtin(&loaded.grammar)), None),
    };
    let (compiled, compile_time) = source.compile(&loaded.grammar, vocab.clone(), vocab_path)?;
    let stats = compiled.stats();
    print_line(&format!("{} {}: ok", source.kind(), source.path().display()))?;
    let made = if loaded.schema.is_some() { "generated" } else { "written" };
    print_line(&format!("  rules:            {} {made}, {} after compiling", loaded.grammar.rules.len(), stats.rules))?;
    print_line(&format!("  automaton states: {}", stats.states))?;
    print_line(&format!("  byte classes:     {}", stats.byte_classes))?;
    if stats.token_terminals > 0 {
        print_line(&format!("  token terminals:  {}", stats.token_terminals))?;
    }
    let parse = if loaded.schema.is_some() { "schema compile:" } else { "parse time:    " };
    print_line(&format!("  {parse}   {}", ms(loaded.parse_time)))?;
    print_line(&format!("  compile time:     {}", ms(compile_time)))?;
    match (vocab_path, vocab_time) {
        (Some(path), Some(t)) => {
            print_line(&format!(
                "  vocabulary:       {} ({} tokens, {} EOS, mask width {}; loaded in {})",
                path.display(),
                vocab.len(),
                vocab.eos_ids().len(),
                vocab.mask_width(),
                ms(t)
            ))?;
        }
        _ => print_line(
            "  vocabulary:       built-in (256 single bytes + EOS); pass --vocab to check against a real one",
        )?,
    }
    if let Some(schema) = &loaded.schema {
        print_schema(schema)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The schema's mode and output shape, and the keywords left to post-hoc validation.
fn print_schema(schema: &LoadedSchema) -> Result<(), CliError> {
    let o = &schema.options;
    let mode = match o.mode {
        Mode::Strict => "strict (every keyword is enforced by the grammar)",
        Mode::Lenient => "lenient",
    };
    print_line(&format!("  mode:             {mode}"))?;
    let shape = match (o.indent, &o.whitespace) {
        (Some(n), _) => format!("indented, {n} spaces per level"),
        (None, Whitespace::Compact) => "compact (no whitespace)".to_string(),
        (None, Whitespace::Flexible { max_run: 0 }) => "flexible, no whitespace allowed".to_string(),
        (None, Whitespace::Flexible { max_run }) => format!("flexible whitespace (runs of at most {max_run})"),
    };
    print_line(&format!("  output shape:     {shape}"))?;
    if o.mode == Mode::Lenient {
        match schema.warnings.len() {
            0 => print_line("  post-hoc only:    none (the grammar enforces every keyword)")?,
            n => {
                print_line(&format!(
                    "  post-hoc only:    {n} keyword{} the grammar does not enforce (outputs must be validated):",
                    if n == 1 { "" } else { "s" }
                ))?;
                for w in &schema.warnings {
                    print_line(&format!("    {w}"))?;
                }
            }
        }
    }
    Ok(())
}

/// A duration in milliseconds, with enough digits to see small ones.
pub fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.0} ms")
    }
}
