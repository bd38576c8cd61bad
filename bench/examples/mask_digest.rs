//! One digest of the masks over JSONSchemaBench's dev split, to check that a change to the
//! engine leaves every mask as it was.
//!
//! `cargo run --release -p stencil-bench --example mask_digest -- [CORPUS] [gemma3|smollm2] [PER_SUBSET]`
//!
//! For each schema (the first `PER_SUBSET` files per subset, default all) with a valid test
//! instance: a compact, lenient compile, then the instance's tokens replayed twice on the
//! fresh grammar (cold, then warm), hashing every mask. Prints the schemas compiled and
//! replayed, and the digest; run it before and after a change. Also prints the slowest
//! cold masks (wall clock, one thread) and how many schemas have one over 1 ms and 5 ms.
use std::hash::{Hash, Hasher};

use stencil_mask::{bitmask, CompiledGrammar, Matcher};
use stencil_schema::{compile_schema, SchemaOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let corpus = std::path::PathBuf::from(args.get(1).map_or("../shared/corpus/jsonschemabench", String::as_str));
    let (vocab, tok) = match args.get(2).map(String::as_str) {
        Some("smollm2") => stencil_test_support::fixtures::smollm2(),
        _ => stencil_test_support::fixtures::gemma3(),
    };
    let per_subset: usize = args.get(3).map_or(usize::MAX, |s| s.parse().unwrap());
    let mut subsets: Vec<_> =
        std::fs::read_dir(&corpus).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    subsets.sort();
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    let (mut compiled, mut replayed, mut steps) = (0, 0, 0);
    let mut mask = bitmask::new_mask(vocab.mask_width());
    // Per schema: its slowest cold mask (µs), its name and the step.
    let mut slowest: Vec<(f64, String, usize)> = Vec::new();
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
            let (Some(schema), Some(instance)) = (doc.get("schema"), valid.map(|t| &t["data"])) else { continue };
            let Ok(c) = compile_schema(schema, &SchemaOptions::compact().lenient()) else { continue };
            let Ok(g) = CompiledGrammar::new(&c.grammar, vocab.clone()) else { continue };
            compiled += 1;
            file.file_name().hash(&mut digest);
            let Ok(tokens) = tok.encode(&serde_json::to_string(instance).unwrap()) else { continue };
            replayed += 1;
            let name = format!(
                "{}/{}",
                subset.file_name().unwrap().to_string_lossy(),
                file.file_name().unwrap().to_string_lossy()
            );
            let mut worst = (0.0, name, 0);
            for pass in 0..2 {
                let mut m = Matcher::new(g.clone());
                for (step, &t) in tokens.iter().enumerate() {
                    let clock = std::time::Instant::now();
                    if m.fill_mask(&mut mask).is_err() {
                        break;
                    }
                    let us = clock.elapsed().as_secs_f64() * 1e6;
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
    for (us, name, step) in slowest.iter().take(5) {
        println!("  {us:.0} µs  {name}, step {step}");
    }
    println!("{compiled} compiled, {replayed} replayed, {steps} masks: digest {:016x}", digest.finish());
}
