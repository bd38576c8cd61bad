//! `stencil sample --random`: model-free random walks through the token masks.
//!
//! Each sample is one walk of [`stencil_mask::walk`] in the [`Style::Explore`] style: it
//! wanders, then searches a shortest way to a state where the grammar can end. Every
//! state a walk reaches is a real matcher state reached through allowed tokens, so a state
//! with no allowed token where the grammar cannot end, or a token of the mask that the
//! matcher refuses, is an engine bug, reported as [`CliError::EngineBug`] (exit 3).
//!
//! For a schema, every complete sample is also validated post hoc against the schema
//! before it is printed. Where the grammar enforces every keyword (strict mode, or lenient
//! mode with nothing left over), a sample that does not validate is a soundness bug: it is
//! reported loudly on stderr, not printed, and the command exits 3 after the last sample.
//! In lenient mode with unenforced keywords, such a sample is only reported and counted.

use std::path::Path;
use std::process::ExitCode;

use stencil_grammar::random::Xoshiro256;
use stencil_mask::walk::{self, Style, WalkError, WalkOptions, Walker};

use crate::error::CliError;
use crate::print_line;
use crate::source::{describe_issue, GrammarSource, LoadedSchema};
use crate::text::escape;
use crate::vocab::LoadedVocab;

pub struct Options {
    pub count: usize,
    pub seed: u64,
    pub max_tokens: usize,
}

pub fn run(source: &GrammarSource, vocab_path: &Path, opts: &Options) -> Result<ExitCode, CliError> {
    let loaded = source.load()?;
    let vocab = LoadedVocab::load(vocab_path)?.vocab;
    let (compiled, _) = source.compile(&loaded.grammar, vocab.clone(), Some(vocab_path))?;
    let mut walker = Walker::new(compiled.vocab().clone());
    let options = WalkOptions { max_tokens: opts.max_tokens, style: Style::Explore };
    let base = Xoshiro256::new(opts.seed).next_u64();
    let (mut complete, mut not_utf8) = (0usize, 0usize);
    // Schema samples that fail post-hoc validation: explained by lenient mode, or not.
    let (mut rejected, mut unsound) = (0usize, 0usize);
    for i in 0..opts.count {
        let mut rng = Xoshiro256::new(base.wrapping_add(i as u64));
        match walker.walk(&compiled, &mut rng, &options) {
            Ok(w) if w.complete => {
                let bytes = w.text(&vocab);
                complete += 1;
                let text = match String::from_utf8(bytes) {
                    Ok(s) => s,
                    Err(e) => {
                        not_utf8 += 1;
                        eprintln!("sample {}: not valid UTF-8 (printed lossily)", i + 1);
                        String::from_utf8_lossy(e.as_bytes()).into_owned()
                    }
                };
                if let Some(schema) = &loaded.schema {
                    match post_hoc(schema, &text) {
                        Verdict::Valid => {}
                        Verdict::Invalid(issues) if !schema.is_exact() => {
                            rejected += 1;
                            eprintln!(
                                "sample {}: rejected by post-hoc validation (lenient mode, not printed): {}\n  {}",
                                i + 1,
                                serde_json::to_string(&text).expect("a string serializes"),
                                issues.join("\n  ")
                            );
                            continue;
                        }
                        Verdict::Invalid(issues) | Verdict::NotJson(issues) => {
                            unsound += 1;
                            eprintln!(
                                "SCHEMA VALIDATION FAILURE in sample {} (schema {}): the grammar produced a text \
                                 that does not validate against the schema, which the grammar is meant to enforce \
                                 (a soundness bug; not printed).\n  sample: {}\n  {}",
                                i + 1,
                                source.path().display(),
                                serde_json::to_string(&text).expect("a string serializes"),
                                issues.join("\n  ")
                            );
                            continue;
                        }
                    }
                }
                print_line(&serde_json::to_string(&text).expect("a string serializes"))?;
            }
            Ok(_) => {
                eprintln!("sample {}: incomplete after {} tokens", i + 1, opts.max_tokens);
            }
            Err(failure) => {
                return Err(match failure {
                    WalkError::DeadEnd { tokens } => CliError::EngineBug(format!(
                        "DEAD END in sample {} (grammar {}): after {} tokens no token is allowed, yet the \
                         grammar cannot end (an engine bug).\n  text so far: {}\n  token ids: {tokens:?}",
                        i + 1,
                        source.path().display(),
                        tokens.len(),
                        escape(&walk::text(&vocab, &tokens))
                    )),
                    WalkError::Disagree { token, tokens } => CliError::EngineBug(format!(
                        "MASK/MATCHER DISAGREEMENT in sample {} (grammar {}): token {token} ({}) was allowed by the \
                         mask but the matcher refused it (an engine bug).\n  text so far: {}\n  token ids: {tokens:?}",
                        i + 1,
                        source.path().display(),
                        escape(vocab.token_bytes(token)),
                        escape(&walk::text(&vocab, &tokens))
                    )),
                    WalkError::Match(e) => CliError::Match(e),
                    e => CliError::EngineBug(format!("sample {} (grammar {}): {e}", i + 1, source.path().display())),
                });
            }
        }
    }
    let pct = if opts.count == 0 { 100.0 } else { 100.0 * complete as f64 / opts.count as f64 };
    let mut summary = format!("{complete} of {} samples complete ({pct:.0}%)", opts.count);
    if not_utf8 > 0 {
        summary.push_str(&format!(", {not_utf8} not valid UTF-8"));
    }
    if loaded.schema.is_some() {
        match (rejected, unsound) {
            (0, 0) => summary.push_str("; every complete sample validates against the schema"),
            (r, 0) => summary
                .push_str(&format!("; {r} rejected by post-hoc validation (keywords the grammar does not enforce)")),
            (_, u) => summary.push_str(&format!("; {u} DO NOT VALIDATE against the schema (a soundness bug)")),
        }
    }
    eprintln!("{summary}");
    if unsound > 0 {
        return Err(CliError::EngineBug(format!(
            "{unsound} sample{} of schema {} did not validate against it, although the grammar is meant to \
             enforce it (a soundness bug)",
            if unsound == 1 { "" } else { "s" },
            source.path().display()
        )));
    }
    Ok(ExitCode::SUCCESS)
}

/// The post-hoc verdict on a schema sample.
enum Verdict {
    Valid,
    /// The validation issues, one line each.
    Invalid(Vec<String>),
    /// Not JSON at all (never explained by lenient mode).
    NotJson(Vec<String>),
}

fn post_hoc(schema: &LoadedSchema, text: &str) -> Verdict {
    let instance: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Verdict::NotJson(vec![format!("not JSON: {e}")]),
    };
    match schema.validate(&instance) {
        Ok(()) => Verdict::Valid,
        Err(issues) => Verdict::Invalid(issues.iter().map(describe_issue).collect()),
    }
}
