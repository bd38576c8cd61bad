//! Prints a structural tag's grammar as GBNF (regexes lowered): `cargo run -p
//! stencil-structural --example dump TAG.json`.
fn main() {
    let text = std::fs::read_to_string(std::env::args().nth(1).expect("a tag file")).expect("readable");
    let tag = stencil_structural::compile_str(&text, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let g = stencil_grammar::lower_regexes(&tag.grammar).expect("lowered");
    println!("{}", stencil_grammar::to_gbnf(&g).expect("printable"));
    if let Some(walks) = std::env::args().nth(2) {
        let mut tokens: Vec<(Vec<u8>, stencil_mask::TokenKind)> =
            ["<eos>", "<think>", "</think>", "<|tool|>", "<|end|>", "<|x|>"]
                .iter()
                .map(|t| (t.as_bytes().to_vec(), stencil_mask::TokenKind::Control))
                .collect();
        let skip = std::env::var("SKIP").is_ok();
        if skip {
            tokens.truncate(1);
        }
        tokens.extend((0x20u8..0x7f).chain([b'\t', b'\n']).map(|b| (vec![b], stencil_mask::TokenKind::Normal)));
        for piece in ["{\"", "\":", "é", "ab"] {
            tokens.push((piece.as_bytes().to_vec(), stencil_mask::TokenKind::Normal));
        }
        let vocab = std::sync::Arc::new(stencil_mask::Vocabulary::new(tokens, vec![0]).unwrap());
        let compiled = stencil_mask::CompiledGrammar::new(&tag.grammar, vocab.clone()).expect("compiles");
        let mut w = stencil_mask::walk::Walker::new(vocab);
        let options = stencil_mask::walk::WalkOptions { max_tokens: 300, style: stencil_mask::walk::Style::Explore };
        for seed in 0..walks.parse::<u64>().expect("a count") {
            let t = std::time::Instant::now();
            let r = w.walk(&compiled, &mut stencil_grammar::random::Xoshiro256::new(seed * 7919 + 1), &options);
            eprintln!("{seed}: {:?} {r:?}", t.elapsed());
        }
    }
}
