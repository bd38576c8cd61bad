//! `stencil check`: parse and compile a grammar, print a summary.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::CliError;
use crate::print_line;
use crate::source::GrammarSource;
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
    print_line(&format!("grammar {}: ok", source.path().display()))?;
    print_line(&format!(
        "  rules:            {} written, {} after compiling",
        loaded.grammar.rules.len(),
        stats.rules
    ))?;
    print_line(&format!("  automaton states: {}", stats.states))?;
    print_line(&format!("  byte classes:     {}", stats.byte_classes))?;
    if stats.token_terminals > 0 {
        print_line(&format!("  token terminals:  {}", stats.token_terminals))?;
    }
    print_line(&format!("  parse time:       {}", ms(loaded.parse_time)))?;
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
    Ok(ExitCode::SUCCESS)
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
