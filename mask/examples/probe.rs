//! Quick timing probe: `cargo run --release -p stencil-mask --example probe -- GRAMMAR.gbnf [gemma|smollm2] [steps]`.
use std::time::Instant;
use stencil_mask::{bitmask, CompiledGrammar, Matcher};
use stencil_test_support::fixtures;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let src = std::fs::read_to_string(&args[1]).unwrap();
    let (vocab, tok) =
        if args.get(2).map(String::as_str) == Some("smollm2") { fixtures::smollm2() } else { fixtures::gemma3() };
    let steps: usize = args.get(3).map_or(100, |s| s.parse().unwrap());
    let g0 = stencil_grammar::parse_gbnf("root ::= \"x\"").unwrap();
    CompiledGrammar::new(&g0, vocab.clone()).unwrap(); // builds the vocabulary's trie once
    let t = Instant::now();
    let g = stencil_grammar::parse_gbnf(&src).unwrap();
    let c = CompiledGrammar::new(&g, vocab.clone()).unwrap();
    println!("compile {:?} {:?}", t.elapsed(), c.stats());
    if std::env::var("PROBE_WARM").is_ok() {
        let t = Instant::now();
        c.warm_up();
        println!("warm_up of {} states: {:?}", c.stats().states, t.elapsed());
    }
    let mut mask = bitmask::new_mask(vocab.mask_width());
    for pass in 0..2 {
        let mut m = Matcher::new(c.clone());
        let mut x = 12345u64;
        let mut times = Vec::new();
        let mut text = Vec::new();
        let replay: Option<Vec<u32>> =
            std::env::var("PROBE_TEXT").ok().map(|f| tok.encode(&std::fs::read_to_string(f).unwrap()).unwrap());
        for step in 0..steps {
            if replay.as_ref().is_some_and(|r| step >= r.len()) {
                break;
            }
            if pass == 1 && std::env::var("PROBE_STEP").ok().and_then(|v| v.parse::<usize>().ok()) == Some(step) {
                let t = Instant::now();
                for _ in 0..20000 {
                    m.fill_mask(&mut mask).unwrap();
                }
                println!("repeat step {step}: {:.2}us", t.elapsed().as_secs_f64() * 1e6 / 20000.0);
            }
            let t = Instant::now();
            m.fill_mask(&mut mask).unwrap();
            times.push(t.elapsed().as_secs_f64() * 1e6);
            let allowed: Vec<u32> = bitmask::allowed(&mask).filter(|&t| !vocab.is_eos(t)).collect();
            if allowed.is_empty() {
                break;
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Prefer short tokens to finish: pick among allowed with bias.
            let tok = match &replay {
                Some(r) => r[step],
                None => allowed[(x % allowed.len() as u64) as usize],
            };
            let us = times.last().unwrap();
            if pass == 1 && *us > 30.0 {
                println!(
                    "slow step {step}: {us:.1}us allowed={} after {:?}",
                    allowed.len(),
                    String::from_utf8_lossy(&text[text.len().saturating_sub(30)..])
                );
            }
            text.extend_from_slice(vocab.token_bytes(tok));
            m.accept_token(tok).unwrap();
        }
        let mut s = times.clone();
        s.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "pass {pass}: n={} p50={:.1}us p99={:.1}us max={:.1}us total={:.1}ms",
            s.len(),
            s[s.len() / 2],
            s[s.len() * 99 / 100],
            s[s.len() - 1],
            s.iter().sum::<f64>() / 1e3
        );
        if pass == 0 {
            println!("text: {:?}", String::from_utf8_lossy(&text[..text.len().min(300)]));
        }
    }
}
