//! End-to-end tests of the `stencil` binary. Bad command lines, with their exact outputs,
//! are data: `fixtures/bad/cli/` (`bad_inputs.rs`).

use std::path::{Path, PathBuf};
use std::process::Output;

use stencil_grammar::reference::Recognizer;

mod common;
use common::*;

fn grammar(name: &str) -> PathBuf {
    fixtures().join("gbnf").join(name)
}

/// Every `fixtures/gbnf/*.gbnf`, sorted.
fn corpus() -> Vec<PathBuf> {
    let v = stencil_test_support::fixtures::files(&fixtures().join("gbnf"), ".gbnf");
    assert!(v.len() >= 8, "corpus grammars missing: {v:?}");
    v
}

// ---------------------------------------------------------------------------------- check

#[test]
fn check_accepts_every_corpus_grammar() {
    for g in corpus() {
        let o = run([Path::new("check"), Path::new("--grammar"), &g]);
        assert_eq!(code(&o), 0, "{}: {}{}", g.display(), stdout(&o), stderr(&o));
        let out = stdout(&o);
        for field in ["rules:", "automaton states:", "byte classes:", "parse time:", "compile time:"] {
            assert!(out.contains(field), "{}: no {field} in\n{out}", g.display());
        }
    }
}

#[test]
fn check_with_each_vocabulary_reports_its_size() {
    for (vocab, size) in [(smollm2(), "49152 tokens"), (gemma3(), "262144 tokens")] {
        let o = run([Path::new("check"), Path::new("--grammar"), &grammar("json.gbnf"), Path::new("--vocab"), &vocab]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert!(stdout(&o).contains(size), "{}", stdout(&o));
    }
}

#[test]
fn check_reads_a_tokenizer_json() {
    let vocab = fixtures().join("vocab/tiny-bytelevel.tokenizer.json");
    let o = run([Path::new("check"), Path::new("-g"), &grammar("list.gbnf"), Path::new("-v"), &vocab]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("vocabulary:"), "{}", stdout(&o));
}

#[test]
fn check_compiles_token_terminals_without_a_vocabulary() {
    let g = scratch("tokens.gbnf", b"root ::= <think> \"x\" <[300]> !<think>\n");
    let o = run([Path::new("check"), Path::new("--grammar"), &g]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

// -------------------------------------------------------------------------------- accepts

fn accepts(vocab: &Path, text: &str) -> Output {
    let g = grammar("json.gbnf");
    let args: [&std::ffi::OsStr; 7] = [
        "accepts".as_ref(),
        "--grammar".as_ref(),
        g.as_os_str(),
        "--vocab".as_ref(),
        vocab.as_os_str(),
        "--text".as_ref(),
        text.as_ref(),
    ];
    run(args)
}

#[test]
fn accepts_a_valid_json_object() {
    for vocab in [smollm2(), gemma3()] {
        let o = accepts(&vocab, r#"{"name": "Ada", "tags": [1, -2.5e3, true, null], "nested": {"k": "v\n"}}"#);
        assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).starts_with("accepted ("), "{}", stdout(&o));
        assert!(stdout(&o).contains("tokens)"), "{}", stdout(&o));
    }
}

#[test]
fn accepts_reads_the_text_from_a_file() {
    let text = scratch("list.txt", b"- first item\n- second item\n");
    let o = run([
        Path::new("accepts"),
        Path::new("-g"),
        &grammar("list.gbnf"),
        Path::new("-v"),
        &gemma3(),
        Path::new("--file"),
        &text,
    ]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
}

#[test]
fn accepts_a_text_that_starts_with_a_hyphen() {
    let (g, v) = (grammar("list.gbnf"), smollm2());
    let args: [&std::ffi::OsStr; 7] = [
        "accepts".as_ref(),
        "-g".as_ref(),
        g.as_os_str(),
        "-v".as_ref(),
        v.as_os_str(),
        "--text".as_ref(),
        "- milk\n- eggs\n".as_ref(),
    ];
    let o = run(args);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
}

// --------------------------------------------------------------------------------- sample

/// Runs `sample --random` and returns the printed samples (decoded from their JSON lines)
/// and stderr.
fn sample(g: &Path, vocab: &Path, count: usize, seed: u64, extra: &[&str]) -> (Output, Vec<String>) {
    sample_random("--grammar", g, vocab, count, seed, extra)
}

/// The soundness probe: every sample of every corpus grammar is in the grammar's language
/// by the independent reference recognizer, no walk dead-ends, and at least 90% finish.
fn probe(vocab: &Path, seed: u64) {
    const N: usize = 40;
    let mut report = Vec::new();
    for g in corpus() {
        let source = std::fs::read_to_string(&g).unwrap();
        let grammar = stencil_grammar::parse_gbnf(&source).unwrap();
        let recognizer = Recognizer::new(&grammar).unwrap();
        let (o, samples) = sample(&g, vocab, N, seed, &[]);
        let name = g.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(code(&o), 0, "{name} with {}: {}", vocab.display(), stderr(&o));
        for s in &samples {
            assert!(recognizer.matches(s.as_bytes()), "{name}: sample not in the language: {s:?}");
        }
        assert!(!stderr(&o).contains("not valid UTF-8"), "{name}: {}", stderr(&o));
        assert!(samples.len() * 10 >= N * 9, "{name}: only {} of {N} samples finished:\n{}", samples.len(), stderr(&o));
        report.push(format!("{name}: {}/{N}", samples.len()));
    }
    eprintln!("{}: {}", vocab.display(), report.join(", "));
}

#[test]
fn random_samples_are_in_the_language_smollm2() {
    probe(&smollm2(), 1);
}

#[test]
fn random_samples_are_in_the_language_gemma3() {
    probe(&gemma3(), 2);
}

#[test]
fn sampling_is_deterministic_in_the_seed() {
    let g = grammar("json.gbnf");
    let (_, a) = sample(&g, &smollm2(), 5, 42, &[]);
    let (_, b) = sample(&g, &smollm2(), 5, 42, &[]);
    let (_, c) = sample(&g, &smollm2(), 5, 43, &[]);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn unfinished_samples_go_to_stderr_only() {
    // A chess game needs more than 3 tokens.
    let (o, samples) = sample(&grammar("chess.gbnf"), &smollm2(), 3, 0, &["--max-tokens", "3"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(samples.is_empty(), "{samples:?}");
    let err = stderr(&o);
    assert!(err.contains("sample 1: incomplete after 3 tokens"), "{err}");
    assert!(err.contains("sample 3: incomplete after 3 tokens"), "{err}");
    assert!(err.contains("0 of 3 samples complete"), "{err}");
}

// ----------------------------------------------------------------------------------- help

#[test]
fn help_explains_the_commands_and_flags() {
    let o = run(["--help"]);
    assert_eq!(code(&o), 0);
    let out = stdout(&o);
    for word in ["check", "accepts", "sample", "Exit status"] {
        assert!(out.contains(word), "{out}");
    }
    let o = run(["sample", "--help"]);
    let out = stdout(&o);
    for flag in ["--grammar", "--vocab", "--random", "--count", "--seed", "--max-tokens"] {
        assert!(out.contains(flag), "{flag} missing in\n{out}");
    }
}
