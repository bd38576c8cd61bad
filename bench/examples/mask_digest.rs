//! One digest of the masks over JSONSchemaBench's dev split, to check that a change to the
//! engine leaves every mask as it was.
//!
//! `cargo run --release -p stencil-bench --example mask_digest -- [CORPUS] [gemma3|smollm2] [PER_SUBSET] [SHOWN]`
//!
//! For each schema (the first `PER_SUBSET` files per subset, default all) with a valid test
//! instance: a compact, lenient compile, then the instance's tokens replayed twice on the
//! fresh grammar (cold, then warm), hashing every mask. Prints the schemas compiled and
//! replayed, and the digest; run it before and after a change. Also prints the slowest
//! cold masks (thread CPU time, as the bench measures) and how many schemas have one over 1 ms and 5 ms,
//! and the same for compiles (schema compiler plus engine, of every schema) over 20 ms and
//! 50 ms; `SHOWN`
//! (default 5) of the slowest of each are listed.
use std::hash::{Hash, Hasher};

use stencil_mask::{bitmask, CompiledGrammar, Matcher};
use stencil_schema::{compile_schema, SchemaOptions};
use timer::thread_cpu_ns;

/// The bench's own timer (thread CPU time: robust to other work on the machine).
#[path = "../src/timer.rs"]
#[allow(dead_code)]
mod timer;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let corpus = std::path::PathBuf::from(args.get(1).map_or("../shared/corpus/jsonschemabench", String::as_str));
    let (vocab, tok) = match args.get(2).map(String::as_str) {
        Some("smollm2") => stencil_test_support::fixtures::smollm2(),
        _ => stencil_test_support::fixtures::gemma3(),
    };
    // The token index is per vocabulary, built once: not part of any schema's compile.
    vocab.prepare();
    let per_subset: usize = args.get(3).map_or(usize::MAX, |s| s.parse().unwrap());
    // How many of the slowest masks and compiles to list.
    let shown: usize = args.get(4).map_or(5, |s| s.parse().unwrap());
    let mut subsets: Vec<_> =
        std::fs::read_dir(&corpus).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    subsets.sort();
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    let (mut compiled, mut replayed, mut steps) = (0, 0, 0);
    let mut mask = bitmask::new_mask(vocab.mask_width());
    // Per schema: its slowest cold mask (µs), its name and the step.
    let mut slowest: Vec<(f64, String, usize)> = Vec::new();
    // Per schema: its compile (ms, of which the schema compiler's) and its name.
    let mut compiles: Vec<(f64, f64, String)> = Vec::new();
    for subset in subsets {
        let mut files: Vec<_> = std::fs::read_dir(&subset).unwrap().flatten().map(|e| e.path()).collect();
        files.sort();
        for file in files.into_iter().take(per_subset) {
            let doc: serde_json::Value =
                match std::fs::read_to_string(&file).ok().and_then(|t| serde_json::from_str(&t).ok()) {
                    Some(d) => d,
                    None => continue,
                };
            let valid = doc["tests"].as_array().and_then(|t| t.iter().find(|t| t["valid"] == true));
            let Some(schema) = doc.get("schema") else { continue };
            let name = format!(
                "{}/{}",
                subset.file_name().unwrap().to_string_lossy(),
                file.file_name().unwrap().to_string_lossy()
            );
            let clock = thread_cpu_ns();
            let Ok(c) = compile_schema(schema, &SchemaOptions::compact().lenient()) else { continue };
            let schema_ms = (thread_cpu_ns() - clock) as f64 / 1e6;
            let Ok(g) = CompiledGrammar::new(&c.grammar, vocab.clone()) else { continue };
            let engine_ms = (thread_cpu_ns() - clock) as f64 / 1e6 - schema_ms;
            // Every schema's compile is timed; those with a valid instance are replayed.
            compiles.push((schema_ms + engine_ms, schema_ms, name.clone()));
            let Some(instance) = valid.map(|t| &t["data"]) else { continue };
            compiled += 1;
            file.file_name().hash(&mut digest);
            let Ok(tokens) = tok.encode(&serde_json::to_string(instance).unwrap()) else { continue };
            replayed += 1;
            let mut worst = (0.0, name, 0);
            for pass in 0..2 {
                let mut m = Matcher::new(g.clone());
                for (step, &t) in tokens.iter().enumerate() {
                    let clock = thread_cpu_ns();
                    if m.fill_mask(&mut mask).is_err() {
                        break;
                    }
                    let us = (thread_cpu_ns() - clock) as f64 / 1e3;
                    if pass == 0 && us > worst.0 {
                        (worst.0, worst.2) = (us, step);
                    }
                    mask.hash(&mut digest);
                    steps += 1;
                    if m.accept_token(t).is_err() {
                        break;
                    }
                }
            }
            slowest.push(worst);
        }
    }
    slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
    let over = |us: f64| slowest.iter().filter(|w| w.0 > us).count();
    println!("schemas with a cold mask over 1 ms: {}, over 5 ms: {}; slowest:", over(1000.0), over(5000.0));
    for (us, name, step) in slowest.iter().take(shown) {
        println!("  {us:.0} µs  {name}, step {step}");
    }
    compiles.sort_by(|a, b| b.0.total_cmp(&a.0));
    let over = |ms: f64| compiles.iter().filter(|c| c.0 > ms).count();
    println!("schemas compiling over 20 ms: {}, over 50 ms: {}; slowest (schema + engine):", over(20.0), over(50.0));
    for (ms, schema_ms, name) in compiles.iter().take(shown.max(8)) {
        println!("  {ms:.1} ms ({schema_ms:.1} + {:.1})  {name}", ms - schema_ms);
    }
    println!("{compiled} compiled, {replayed} replayed, {steps} masks: digest {:016x}", digest.finish());
}
