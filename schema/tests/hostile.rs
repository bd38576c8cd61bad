//! Issue #44: every class of [`stencil_test_support::hostile`] — long and branching `$ref`
//! chains, reference cycles through `allOf`/`anyOf`/`items`, deep `$defs`, `allOf` chains,
//! `$dynamicRef` loops, huge enums of objects, GBNF rule chains and nesting — built at the
//! size that first crashed or slowed Stencil before the fix, and at 10× and 100× it.
//!
//! Each runs on a thread with a 2 MiB stack (a tokio worker's: the server compiles there)
//! through every stage that takes a schema or grammar from a stranger: parsing, the schema
//! compiler (strict and lenient), the engine, a first mask, and post-hoc validation (the
//! `jsonschema` crate). Each stage must give a clean result or a typed error that names its
//! limit and where it was hit, within a time bound; the test binary's peak memory is
//! bounded too. Before the fix, the first size of most classes aborted the process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use stencil_mask::{bitmask, CompileError, CompiledGrammar, Matcher, Vocabulary};
use stencil_schema::{compile_schema, Registry, SchemaError, SchemaOptions, Validator};
use stencil_test_support::hostile::{Class, GRAMMARS, SCHEMAS};
use stencil_test_support::toy;

/// A tokio worker's stack, and a Rust test thread's by default.
const SMALL_STACK: usize = 2 << 20;
/// Per input, all stages together: generous for a busy 2-core CI machine (the slowest
/// input takes about 2 s here).
const TIME_BOUND: Duration = Duration::from_secs(60);
/// The peak resident memory of this test binary.
const MEMORY_BOUND_MB: u64 = 2_048;

/// Runs `f` on a thread with `SMALL_STACK`: a stack overflow there aborts the test binary.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(SMALL_STACK).spawn(f).unwrap().join().unwrap()
}

/// The sizes each class is built at.
fn sizes(c: &Class) -> [usize; 3] {
    [c.first_bad, c.first_bad * 10, c.first_bad * 100]
}

/// The engine on a grammar: compiles and gives a first mask, or fails with its limit.
fn engine(what: &str, g: &stencil_grammar::Grammar, vocab: &Arc<Vocabulary>) -> String {
    match CompiledGrammar::new(g, vocab.clone()) {
        Ok(c) => {
            let mut m = Matcher::new(c);
            let mut mask = bitmask::new_mask(vocab.mask_width());
            match m.fill_mask(&mut mask) {
                Ok(()) => format!("mask of {}", bitmask::allowed(&mask).count()),
                Err(e) => {
                    assert!(matches!(e, stencil_mask::MatchError::LimitExceeded { .. }), "{what}: {e}");
                    format!("mask: {e}")
                }
            }
        }
        Err(e) => {
            assert!(matches!(e, CompileError::LimitExceeded { .. }), "{what}: engine: {e}");
            format!("engine: {e}")
        }
    }
}

/// A schema error must be a limit's, naming it and the subschema.
fn assert_located_limit(what: &str, e: &SchemaError) {
    match e {
        SchemaError::TooLarge { limit, reason, pointer, .. } => {
            assert!(reason.ends_with(&format!("(limit {limit})")), "{what}: {e}");
            assert!(pointer.starts_with("/$defs/") || pointer.is_empty(), "{what}: {e}");
        }
        // A `$dynamicRef` is resolved statically, which strict mode refuses at once.
        SchemaError::UnsupportedKeyword { keyword, .. } if keyword == "$dynamicRef" => {}
        // regex-syntax's nesting limit, at the pattern's subschema.
        SchemaError::BadPattern { reason, .. } if reason.contains("maximum number of nested parentheses") => {}
        other => panic!("{what}: not a limit: {other}"),
    }
}

/// Every stage on one schema text; what happened, for the log.
fn schema_stages(name: &'static str, n: usize, text: String) -> String {
    let what = format!("{name} × {n}");
    let schema: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        // Deeper than serde_json's 128 levels: a located parse error is the clean result.
        Err(e) => {
            assert!(e.to_string().contains("recursion limit exceeded at line 1 column"), "{what}: {e}");
            return format!("JSON: {e}");
        }
    };
    let vocab = toy::json_bytes();
    let mut out = Vec::new();
    for options in [SchemaOptions::default(), SchemaOptions::default().lenient()] {
        match compile_schema(&schema, &options) {
            Ok(c) => out.push(format!("{} rules, {}", c.grammar.rules.len(), engine(&what, &c.grammar, &vocab))),
            Err(e) => {
                assert_located_limit(&what, &e);
                out.push(e.to_string());
            }
        }
    }
    match Validator::new(&schema, &Registry::new()) {
        Ok(v) => {
            let _ = v.validate(&serde_json::json!({"x": ["a", 1]}));
            out.push("validator".into());
        }
        Err(e) => {
            if e.message.ends_with("is not a \"regex\"") {
                // The crate's regex parser refuses the nesting, like regex-syntax.
                assert_eq!(name, "deep-pattern", "{what}: validator: {e}");
            } else {
                let limit =
                    e.message.ends_with("(limit max_depth)") || e.message.ends_with("(with limit max_branches)");
                assert!(limit && e.message.contains("#/$defs/"), "{what}: validator: {e}");
            }
            out.push(e.message);
        }
    }
    out.join("; ")
}

fn grammar_stages(name: &'static str, n: usize, text: String) -> String {
    let what = format!("{name} × {n}");
    let g = match stencil_grammar::parse_gbnf(&text) {
        Ok(g) => g,
        // Over `max_source_bytes` (4 MiB): refused before parsing.
        Err(e) => {
            assert!(e.to_string().contains("more than the limit of 4194304"), "{what}: {e}");
            return format!("GBNF: {e}");
        }
    };
    engine(&what, &g, &toy::json_bytes())
}

fn run(classes: &'static [Class], stages: fn(&'static str, usize, String) -> String) {
    for c in classes {
        for n in sizes(c) {
            let text = (c.build)(n);
            let start = Instant::now();
            let outcome = on_small_stack(move || stages(c.name, n, text));
            let took = start.elapsed();
            eprintln!("{} × {n}: {took:.2?}: {}", c.name, &outcome[..outcome.len().min(300)]);
            assert!(took < TIME_BOUND, "{} × {n} took {took:?}", c.name);
        }
    }
    let peak = peak_memory_mb();
    assert!(peak < MEMORY_BOUND_MB, "peak memory {peak} MB");
}

/// The peak resident memory of this process (Linux; 0 elsewhere).
fn peak_memory_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok());
    kb.unwrap_or(0) / 1024
}

#[test]
fn hostile_schemas_compile_or_fail_at_a_located_limit_on_a_small_stack() {
    run(SCHEMAS, schema_stages);
}

#[test]
fn hostile_grammars_compile_or_fail_at_a_limit_on_a_small_stack() {
    run(GRAMMARS, grammar_stages);
}

/// LIMITS.md's claims: a chain of 2,000 `$ref`s compiles (fast), and `max_depth` bounds the
/// chain, at the subschema where it is exceeded.
#[test]
fn max_depth_bounds_ref_chains_and_a_chain_of_2000_compiles() {
    let chain = |n: usize| -> Value {
        let text = SCHEMAS.iter().find(|c| c.name == "ref-chain").map(|c| (c.build)(n)).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let schema = chain(2_000);
    let start = Instant::now();
    let compiled = on_small_stack(move || compile_schema(&schema, &SchemaOptions::default()));
    let took = start.elapsed();
    assert!(compiled.is_ok(), "{compiled:?}");
    assert!(took < Duration::from_secs(2), "a chain of 2,000 took {took:?}");
    let schema = chain(5_000);
    match on_small_stack(move || compile_schema(&schema, &SchemaOptions::default())) {
        Err(SchemaError::TooLarge { pointer, reason, .. }) => {
            // The root is level 1, `$defs/d0` level 2, …, `d4095` level 4,097.
            assert_eq!(pointer, "/$defs/d4095");
            assert_eq!(
                reason,
                "subschemas and the references between them nest deeper than 4096 levels (limit max_depth)"
            );
        }
        other => panic!("{other:?}"),
    }
}
