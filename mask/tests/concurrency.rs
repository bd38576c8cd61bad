//! One compiled grammar shared by many matchers on many threads gives the same masks as
//! sequential use: plain threads walking documents in different orders (with forks and
//! rollbacks), and batches through `fill_masks_parallel`, all starting from a cold mask
//! cache so that threads race to fill the same entries.

use std::sync::Arc;

use stencil_grammar::parse_gbnf;
use stencil_mask::vocab::Tokenizer;
use stencil_mask::{bitmask, fill_masks_parallel, CompiledGrammar, Matcher, Vocabulary};
use stencil_test_support::fixtures;

const DOCS: &[&str] = &[
    r#"{"name": "Ada Lovelace", "age": 36, "tags": ["math", "poetry"]}"#,
    r#"{"list": [1, 2.5, -3e5, true, false, null, "x\n\"y\""]}"#,
    r#"{"a": {"b": {"c": [[], {}, [{}]]}}, "d": "é😀"}"#,
    r#"{"id": 123456789, "ok": true, "items": [{"k": "v"}, {"k": "w"}]}"#,
    r#"{"s": "just a string with \\ escapes \u00e9"}"#,
    r#"{"nested": [1, [2, [3, [4, [5]]]]], "empty": {}}"#,
];

fn grammar(vocab: &Arc<Vocabulary>) -> Arc<CompiledGrammar> {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/gbnf/json.gbnf")).unwrap();
    CompiledGrammar::new(&parse_gbnf(&src).unwrap(), vocab.clone()).unwrap()
}

fn tokenize(tokenizer: &Tokenizer) -> Vec<Vec<u32>> {
    DOCS.iter().map(|d| tokenizer.encode(d).unwrap()).collect()
}

fn mask(m: &mut Matcher) -> Vec<u32> {
    let mut mask = bitmask::new_mask(m.grammar().vocab().mask_width());
    m.fill_mask(&mut mask).unwrap();
    mask
}

/// The masks before each token of each document, and at the end, with a grammar of its own.
fn sequential(vocab: &Arc<Vocabulary>, docs: &[Vec<u32>]) -> Vec<Vec<Vec<u32>>> {
    let g = grammar(vocab);
    docs.iter()
        .enumerate()
        .map(|(d, tokens)| {
            let mut m = Matcher::new(g.clone());
            let mut out = Vec::new();
            for (i, &t) in tokens.iter().enumerate() {
                out.push(mask(&mut m));
                m.accept_token(t).unwrap_or_else(|e| panic!("doc {d}, token {i}: {e}"));
            }
            out.push(mask(&mut m));
            assert!(m.can_end());
            out
        })
        .collect()
}

#[test]
fn shared_grammar_on_many_threads_gives_sequential_masks() {
    let (vocab, tokenizer) = fixtures::smollm2();
    let docs = tokenize(&tokenizer);
    let expected = sequential(&vocab, &docs);
    // Several times, each with a fresh grammar whose cold cache the threads race to fill.
    for _ in 0..4 {
        threads_agree(&grammar(&vocab), &docs, &expected);
    }
}

fn threads_agree(shared: &Arc<CompiledGrammar>, docs: &[Vec<u32>], expected: &[Vec<Vec<u32>>]) {
    let threads = 8;
    std::thread::scope(|s| {
        for k in 0..threads {
            let shared = shared.clone();
            s.spawn(move || {
                for round in 0..docs.len() {
                    let d = (k + round) % docs.len();
                    let tokens = &docs[d];
                    let mut m = Matcher::new(shared.clone());
                    let mut i = 0;
                    let mut x = (k * 31 + round * 7) as u64 | 1;
                    while i < tokens.len() {
                        assert_eq!(mask(&mut m), expected[d][i], "thread {k}, doc {d}, token {i}");
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        match x >> 61 {
                            // A fork goes ahead one token and is checked, then dropped.
                            0 => {
                                let mut f = m.fork();
                                f.accept_token(tokens[i]).unwrap();
                                assert_eq!(mask(&mut f), expected[d][i + 1], "fork: thread {k}, doc {d}, token {i}");
                            }
                            // Roll back one token and redo it.
                            1 if i > 0 => {
                                m.rollback(1).unwrap();
                                i -= 1;
                                assert_eq!(mask(&mut m), expected[d][i], "rollback: thread {k}, doc {d}, token {i}");
                            }
                            _ => {}
                        }
                        m.accept_token(tokens[i]).unwrap();
                        i += 1;
                    }
                    assert_eq!(mask(&mut m), expected[d][i], "thread {k}, doc {d}, end");
                }
            });
        }
    });
}

#[test]
fn batched_masks_equal_sequential_masks() {
    let (vocab, tokenizer) = fixtures::smollm2();
    let docs = tokenize(&tokenizer);
    let expected = sequential(&vocab, &docs);
    let shared = grammar(&vocab);
    // Four matchers per document, all stepping together; each step's masks in one batch.
    let copies = 4;
    let mut matchers: Vec<(usize, Matcher)> =
        (0..docs.len() * copies).map(|i| (i % docs.len(), Matcher::new(shared.clone()))).collect();
    let longest = docs.iter().map(Vec::len).max().unwrap();
    for step in 0..=longest {
        let (ids, mut live): (Vec<usize>, Vec<Matcher>) =
            matchers.iter().filter(|(d, _)| step <= docs[*d].len()).map(|(d, m)| (*d, m.fork())).unzip();
        let mut masks = vec![bitmask::new_mask(vocab.mask_width()); live.len()];
        for r in fill_masks_parallel(&mut live, &mut masks) {
            r.unwrap();
        }
        for (d, mask) in ids.iter().zip(&masks) {
            assert_eq!(mask, &expected[*d][step], "doc {d}, step {step}");
        }
        for (d, m) in matchers.iter_mut() {
            if step < docs[*d].len() {
                m.accept_token(docs[*d][step]).unwrap();
            }
        }
    }
}

#[test]
fn warm_up_on_all_cores_gives_the_same_masks() {
    let (vocab, tokenizer) = fixtures::smollm2();
    let docs = tokenize(&tokenizer);
    let expected = sequential(&vocab, &docs);
    let g = grammar(&vocab);
    std::thread::scope(|s| {
        s.spawn(|| g.warm_up());
        // Matchers run while the cache is being filled in parallel.
        for (d, tokens) in docs.iter().enumerate() {
            let mut m = Matcher::new(g.clone());
            for (i, &t) in tokens.iter().enumerate() {
                assert_eq!(mask(&mut m), expected[d][i], "doc {d}, token {i}");
                m.accept_token(t).unwrap();
            }
        }
    });
}
