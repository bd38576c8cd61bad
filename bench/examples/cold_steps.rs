//! The slow cold masks of one schema's instance, step by step.
//!
//! `cargo run --release -p stencil-bench --example cold_steps -- SCHEMA.json INSTANCE.json [gemma3|smollm2] [MIN_US]`
//!
//! Compiles the schema as the bench's JSON Schema part does (compact, lenient), replays the
//! instance's tokens on the fresh grammar and prints every step whose mask took at least
//! `MIN_US` (default 1000) µs, with the text before it, then the cold p50 / max.
use std::time::Instant;

use stencil_mask::{bitmask, CompiledGrammar, Matcher};
use stencil_schema::{compile_schema, SchemaOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&args[1]).unwrap()).unwrap();
    let instance: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    let (vocab, tok) = match args.get(3).map(String::as_str) {
        Some("smollm2") => stencil_test_support::fixtures::smollm2(),
        _ => stencil_test_support::fixtures::gemma3(),
    };
    let min_us: f64 = args.get(4).map_or(1000.0, |s| s.parse().unwrap());
    let text = serde_json::to_string(&instance).unwrap();
    let tokens = tok.encode(&text).unwrap();
    // The vocabulary's token index, built by a first compile (the bench's worker setup).
    let g0 = stencil_grammar::parse_gbnf("root ::= \"x\"").unwrap();
    CompiledGrammar::new(&g0, vocab.clone()).unwrap();
    let t = Instant::now();
    let compiled = compile_schema(&schema, &SchemaOptions::compact().lenient()).unwrap();
    let g = CompiledGrammar::new(&compiled.grammar, vocab.clone()).unwrap();
    println!("compile {:.2} ms, {:?}", t.elapsed().as_secs_f64() * 1e3, g.stats());
    let mut mask = bitmask::new_mask(vocab.mask_width());
    let mut m = Matcher::new(g);
    let mut times = Vec::new();
    let mut before: Vec<u8> = Vec::new();
    for (step, &token) in tokens.iter().enumerate() {
        let t = Instant::now();
        m.fill_mask(&mut mask).unwrap();
        let us = t.elapsed().as_secs_f64() * 1e6;
        if us >= min_us {
            let from = before.len().saturating_sub(40);
            println!(
                "step {step}: {us:.0} µs, {} allowed, after {:?}",
                bitmask::allowed(&mask).count(),
                String::from_utf8_lossy(&before[from..])
            );
        }
        times.push(us);
        before.extend_from_slice(vocab.token_bytes(token));
        m.accept_token(token).unwrap();
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!("{} steps: cold p50 {:.1} µs, max {:.0} µs", times.len(), times[times.len() / 2], times[times.len() - 1]);
}
