//! llama.cpp's grammar integration cases (fixtures/gbnf/integration_cases.json): every
//! accept string is accepted token by token and may end there; every reject string is
//! refused somewhere or cannot end. Token pieces (`{"token": N}`) are special tokens.

use serde_json::Value;
use std::sync::Arc;
use stencil_grammar::{parse_gbnf_with, ParseOptions};
use stencil_mask::{CompiledGrammar, Matcher, Vocabulary};
use stencil_test_support::toy;

const CASES: &str = include_str!("../../fixtures/gbnf/integration_cases.json");
/// Ids below this are special tokens `<tN>`; byte `b` is token `BYTE_BASE + b`.
const BYTE_BASE: u32 = 64;
const EOS: u32 = 0;

fn vocab() -> Arc<Vocabulary> {
    toy::bytes(BYTE_BASE)
}

fn pieces_to_tokens(input: &Value) -> Vec<u32> {
    let pieces: Vec<Value> = match input {
        Value::String(s) => vec![Value::String(s.clone())],
        Value::Object(o) => o["pieces"].as_array().unwrap().clone(),
        _ => panic!("unexpected input {input}"),
    };
    let mut out = Vec::new();
    for p in pieces {
        match p {
            Value::String(s) => out.extend(s.bytes().map(|b| BYTE_BASE + b as u32)),
            Value::Object(o) => out.push(o["token"].as_u64().unwrap() as u32),
            _ => panic!("unexpected piece {p}"),
        }
    }
    out
}

/// Accepted entirely, and EOS accepted after it.
fn accepts(m: &mut Matcher, tokens: &[u32]) -> bool {
    m.accept_tokens(tokens).is_ok() && m.can_end() && m.accept_token(EOS).is_ok()
}

#[test]
fn llama_cpp_integration_cases() {
    let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
    let vocab = vocab();
    let (mut checked, mut compiled_cases) = (0, 0);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let options = ParseOptions { root: case["root"].as_str().unwrap_or("root").to_string(), ..Default::default() };
        let parsed = parse_gbnf_with(case["grammar"].as_str().unwrap(), &options);
        let expect_error = case["expect_error"].as_bool().unwrap();
        // Deliberate deviation: llama.cpp refuses left recursion; Stencil supports it.
        let left_recursion = name.starts_with("test_failure_left_recursion");
        let grammar = match parsed {
            Ok(g) => g,
            Err(e) => {
                assert!(expect_error && !left_recursion, "{name}: unexpected error {e}");
                continue;
            }
        };
        let compiled = CompiledGrammar::new(&grammar, vocab.clone());
        if expect_error && !left_recursion {
            assert!(compiled.is_err(), "{name}: llama.cpp refuses this grammar, Stencil compiled it");
            continue;
        }
        let compiled = compiled.unwrap_or_else(|e| panic!("{name}: {e}"));
        compiled_cases += 1;
        for input in case["accept"].as_array().into_iter().flatten() {
            let mut m = Matcher::new(compiled.clone());
            assert!(accepts(&mut m, &pieces_to_tokens(input)), "{name}: should accept {input}");
            checked += 1;
        }
        for input in case["reject"].as_array().into_iter().flatten() {
            let mut m = Matcher::new(compiled.clone());
            assert!(!accepts(&mut m, &pieces_to_tokens(input)), "{name}: should reject {input}");
            checked += 1;
        }
    }
    assert!(compiled_cases >= 15, "only {compiled_cases} cases compiled");
    assert!(checked >= 80, "only {checked} strings checked");
    println!("{checked} accept/reject strings agree over {compiled_cases} grammars");
}

/// Every llama.cpp example grammar compiles against both real vocabularies.
#[test]
fn corpus_grammars_compile_with_real_vocabularies() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/gbnf");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "gbnf") {
            let g = stencil_grammar::parse_gbnf(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for (vocab, _) in [stencil_test_support::fixtures::smollm2(), stencil_test_support::fixtures::gemma3()] {
                let c = CompiledGrammar::new(&g, vocab).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let mut m = Matcher::new(c);
                let mut mask = stencil_mask::bitmask::new_mask(m.grammar().vocab().mask_width());
                m.fill_mask(&mut mask).unwrap();
                assert!(stencil_mask::bitmask::count(&mask) > 0, "{}: empty first mask", path.display());
            }
            n += 1;
        }
    }
    assert_eq!(n, 8);
}
