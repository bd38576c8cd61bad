//! Compile time and first masks of a `triggered_tags` over N tools (Hermes / Qwen
//! `<tool_call>` tags, each with a real function schema), on a vocabulary fixture.
//!
//! ```sh
//! cargo run --release -p stencil-structural --example tools_bench -- ../shared/corpus/jsonschemabench smollm2 25,100,400 [OUT_DIR]
//! ```
//!
//! Tools: every schema of the dev split's `MCPspec` subset, then `Glaiveai2K`'s, each in
//! file-name order, keeping those that compile on their own in strict mode; a tool is
//! named after its file (`[A-Za-z0-9_]`). With OUT_DIR, each N's structural tag is written
//! there as `tools-N.json` (for the XGrammar and llguidance side of the benchmark).
//! Times are this process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`), best of 3.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use stencil_mask::{bitmask, CompiledGrammar, Matcher, Vocabulary};
use stencil_structural::{compile_json, CompileOptions};

fn cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

fn best<T>(mut f: impl FnMut() -> T) -> (T, f64) {
    let mut out = None;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t0 = cpu_ms();
        let r = f();
        best = best.min(cpu_ms() - t0);
        out = Some(r);
    }
    (out.expect("ran"), best)
}

fn tools(corpus: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for subset in ["MCPspec", "Glaiveai2K"] {
        let mut files: Vec<_> =
            std::fs::read_dir(corpus.join(subset)).expect("the corpus").flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let doc: Value = serde_json::from_str(&std::fs::read_to_string(&f).expect("readable")).expect("JSON");
            let schema = doc.get("schema").cloned().unwrap_or(doc);
            if stencil_schema::compile_schema(&schema, &Default::default()).is_err() {
                continue;
            }
            let stem = f.file_stem().expect("a name").to_string_lossy();
            let name: String = stem.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
            out.push((name, schema));
        }
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let corpus = Path::new(&args[1]);
    let (vocab, tokenizer) = match args[2].as_str() {
        "smollm2" => stencil_test_support::fixtures::smollm2(),
        "gemma" => stencil_test_support::fixtures::gemma3(),
        other => panic!("unknown vocabulary {other}"),
    };
    let vocab: Arc<Vocabulary> = vocab;
    vocab.prepare();
    if let Some(dir) = args.get(4) {
        // The vocabulary as hex strings, for the anchors' side.
        let hex: Vec<String> = (0..vocab.len() as u32)
            .map(|t| vocab.token_bytes(t).iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        let v = json!({"tokens": hex, "eos": vocab.eos_ids()});
        std::fs::write(Path::new(dir).join(format!("vocab-{}.json", args[2])), v.to_string()).expect("writable");
    }
    let counts: Vec<usize> = args[3].split(',').map(|n| n.parse().expect("a count")).collect();
    let all = tools(corpus);
    println!("{} tools compile on their own", all.len());
    println!("| tools | vocab | schemas alone | tag → IR | engine compile | total | first mask (text) | first mask (in a tag) | warm mask p99 |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &counts {
        let chosen = &all[..n.min(all.len())];
        let tags: Vec<Value> = chosen
            .iter()
            .map(|(name, schema)| {
                json!({"type": "tag", "begin": format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": "),
                       "content": {"type": "json_schema", "json_schema": schema}, "end": "}\n</tool_call>"})
            })
            .collect();
        let tag = json!({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags}});
        if let Some(dir) = args.get(4) {
            std::fs::write(Path::new(dir).join(format!("tools-{n}.json")), tag.to_string()).expect("writable");
        }
        let (_, alone) = best(|| {
            for (_, s) in chosen {
                stencil_schema::compile_schema(s, &Default::default()).expect("compiles");
            }
        });
        let options = CompileOptions { vocab: Some(vocab.clone()), ..Default::default() };
        let (compiled, to_ir) = best(|| compile_json(&tag, &options).expect("compiles"));
        let (engine, eng) = best(|| CompiledGrammar::new(&compiled.grammar, vocab.clone()).expect("compiles"));
        let mut mask = bitmask::new_mask(vocab.mask_width());
        let (first_text, first_tag) = {
            let g = CompiledGrammar::new(&compiled.grammar, vocab.clone()).expect("compiles");
            let mut m = Matcher::new(g);
            let t0 = cpu_ms();
            m.fill_mask(&mut mask).expect("a mask");
            let a = cpu_ms() - t0;
            let prefix = format!(
                "Let me check. <tool_call>\n{{\"name\": \"{}\", \"arguments\": {{",
                chosen[n.min(chosen.len()) - 1].0
            );
            let ids = tokenizer.encode(&prefix).expect("encodes");
            for id in ids {
                m.accept_token(id).expect("the prefix is allowed");
            }
            let t0 = cpu_ms();
            m.fill_mask(&mut mask).expect("a mask");
            (a, cpu_ms() - t0)
        };
        // Warm masks along a walk of the grammar.
        let mut walker = stencil_mask::walk::Walker::new(vocab.clone());
        let mut times = Vec::new();
        for seed in 0..4 {
            let options =
                stencil_mask::walk::WalkOptions { max_tokens: 200, style: stencil_mask::walk::Style::Explore };
            let walked = walker.walk(&engine, &mut stencil_grammar::random::Xoshiro256::new(seed), &options);
            if let Some(text) = walked.ok().filter(|w| w.complete).map(|w| w.text(&vocab)) {
                let mut m = Matcher::new(engine.clone());
                for &b in &text {
                    let Some(id) = vocab.find_token(&[b]) else { break };
                    m.fill_mask(&mut mask).expect("a mask");
                    let t0 = std::time::Instant::now();
                    m.fill_mask(&mut mask).expect("a mask");
                    times.push(t0.elapsed().as_secs_f64() * 1e6);
                    if m.accept_token(id).is_err() {
                        break;
                    }
                }
            }
        }
        times.sort_by(|a, b| a.partial_cmp(b).expect("numbers"));
        let p99 = times.get(times.len() * 99 / 100).copied().unwrap_or(f64::NAN);
        println!(
            "| {} | {} | {alone:.1} ms | {to_ir:.1} ms | {eng:.1} ms | {:.1} ms | {first_text:.2} ms | {first_tag:.2} ms | {p99:.1} µs |",
            chosen.len(),
            args[2],
            to_ir + eng
        );
    }
}
