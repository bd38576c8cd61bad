//! The matcher's contract on the real vocabularies: special tokens, EOS, mask width,
//! forced tokens, batches.

use std::sync::Arc;
use stencil_grammar::parse_gbnf;
use stencil_mask::{bitmask, fill_masks_parallel, CompiledGrammar, MatchError, Matcher, TokenKind, Vocabulary};
use stencil_test_support::fixtures;

fn compile(src: &str, vocab: &Arc<Vocabulary>) -> Arc<CompiledGrammar> {
    CompiledGrammar::new(&parse_gbnf(src).unwrap(), vocab.clone()).unwrap()
}

fn mask_of(m: &mut Matcher) -> Vec<u32> {
    let mut mask = bitmask::new_mask(m.grammar().vocab().mask_width());
    m.fill_mask(&mut mask).unwrap();
    mask
}

#[test]
fn control_tokens_never_match_text_and_eos_only_at_the_end() {
    for (vocab, _) in [fixtures::smollm2(), fixtures::gemma3()] {
        // Any text at all, at least one character.
        let mut m = Matcher::new(compile("root ::= .+", &vocab));
        let mask = mask_of(&mut m);
        for id in 0..vocab.len() as u32 {
            let kind = vocab.kind(id);
            if matches!(kind, TokenKind::Control | TokenKind::Unused) {
                assert!(!bitmask::get(&mask, id), "control/unused token {id} allowed as text");
            }
        }
        assert!(vocab.eos_ids().iter().all(|&e| !bitmask::get(&mask, e)), "EOS allowed before any text");
        let a = (0..vocab.len() as u32).find(|&t| vocab.token_bytes(t) == b"a").unwrap();
        m.accept_token(a).unwrap();
        let mask = mask_of(&mut m);
        assert!(vocab.eos_ids().len() >= 2);
        assert!(vocab.eos_ids().iter().all(|&e| bitmask::get(&mask, e)), "every EOS id allowed at the end");
        let eos = vocab.eos_ids()[1];
        m.accept_token(eos).unwrap();
        assert!(m.is_ended());
        assert_eq!(m.accept_token(a), Err(MatchError::AlreadyEnded));
        m.rollback(1).unwrap();
        assert!(!m.is_ended() && m.can_end());
    }
}

#[test]
fn mask_width_padding_is_never_allowed() {
    let (vocab, _) = fixtures::smollm2();
    let wide = Arc::new(Vocabulary::clone(&vocab).with_mask_width(vocab.len() + 100).unwrap());
    let mut m = Matcher::new(compile("root ::= [^\\x00]*", &wide));
    let mask = mask_of(&mut m);
    assert_eq!(mask.len(), bitmask::words(vocab.len() + 100));
    assert!((vocab.len() as u32..vocab.len() as u32 + 100).all(|t| !bitmask::get(&mask, t)));
    assert!(matches!(m.accept_token(vocab.len() as u32 + 5), Err(MatchError::TokenOutOfRange { .. })));
    assert!(Vocabulary::clone(&vocab).with_mask_width(10).is_err());
}

#[test]
fn token_references_by_text_and_id() {
    let (vocab, _) = fixtures::smollm2();
    let start = (0..vocab.len() as u32).find(|&t| vocab.token_bytes(t) == b"<|im_start|>").unwrap();
    let src = format!("root ::= <|im_start|> [a-z]+ <[{start}]>");
    let mut m = Matcher::new(compile(&src, &vocab));
    let mask = mask_of(&mut m);
    assert_eq!(bitmask::allowed(&mask).collect::<Vec<_>>(), vec![start]);
    m.accept_token(start).unwrap();
    let hello = (0..vocab.len() as u32).find(|&t| vocab.token_bytes(t) == b"hello").unwrap();
    m.accept_token(hello).unwrap();
    assert!(bitmask::get(&mask_of(&mut m), start));
    m.accept_token(start).unwrap();
    assert!(m.must_end());
    // A token text that is not one token is a compile error.
    let bad = parse_gbnf("root ::= <not-a-single-token-anywhere>").unwrap();
    assert!(CompiledGrammar::new(&bad, vocab.clone()).is_err());
}

#[test]
fn forced_tokens_spell_the_forced_bytes_and_stay_canonical() {
    let (vocab, tok) = fixtures::gemma3();
    let src = r#"root ::= "{\"name\": \"" [a-z]+ "\", \"identifier\": " [0-9]+ "}""#;
    let mut m = Matcher::new(compile(src, &vocab));
    let bytes = m.forced_bytes(100);
    assert_eq!(bytes, b"{\"name\": \"");
    let tokens = m.forced_tokens(100);
    let spelled: Vec<u8> = tokens.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
    assert!(bytes.starts_with(&spelled), "forced tokens spell a prefix of the forced bytes");
    assert!(spelled.len() < bytes.len(), "the last token before free text is held back");
    for &t in &tokens {
        m.accept_token(t).unwrap();
    }
    // The rest of the way with the real tokenizer.
    let rest = tok.encode(&String::from_utf8_lossy(&bytes[spelled.len()..])).unwrap();
    m.accept_tokens(&rest).unwrap();
    m.accept_tokens(&tok.encode("ada").unwrap()).unwrap();
    assert!(m.forced_bytes(100).is_empty(), "a letter or the quote may come next");
    m.accept_tokens(&tok.encode("\"").unwrap()).unwrap();
    assert_eq!(m.forced_bytes(100), b", \"identifier\": ");
}

#[test]
fn batch_masks_equal_sequential_masks() {
    let (vocab, tok) = fixtures::gemma3();
    let g = compile(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/gbnf/json.gbnf")).unwrap(),
        &vocab,
    );
    let doc = r#"{"a": [1, 2.5, {"b": null}], "c": "text with spaces", "d": true}"#;
    let ids = tok.encode(doc).unwrap();
    let mut matchers: Vec<Matcher> = (0..ids.len())
        .map(|k| {
            let mut m = Matcher::new(g.clone());
            m.accept_tokens(&ids[..k]).unwrap();
            m
        })
        .collect();
    let mut sequential: Vec<Vec<u32>> = matchers.iter_mut().map(mask_of).collect();
    let mut batch: Vec<Vec<u32>> = vec![bitmask::new_mask(vocab.mask_width()); matchers.len()];
    // Fresh compiled grammar, so that threads race to fill the shared cache.
    let g2 = compile(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/gbnf/json.gbnf")).unwrap(),
        &vocab,
    );
    let mut fresh: Vec<Matcher> = (0..ids.len())
        .map(|k| {
            let mut m = Matcher::new(g2.clone());
            m.accept_tokens(&ids[..k]).unwrap();
            m
        })
        .collect();
    for r in fill_masks_parallel(&mut fresh, &mut batch) {
        r.unwrap();
    }
    assert_eq!(batch, sequential);
    for (k, mask) in sequential.iter_mut().enumerate() {
        assert!(bitmask::get(mask, ids[k]), "token {k} of the document is allowed");
    }
}

#[test]
fn negated_token_terminals_never_stand_for_eos() {
    let (vocab, _) = fixtures::smollm2();
    let mut m = Matcher::new(compile("root ::= !<[5]> !<[5]>", &vocab));
    let mask = mask_of(&mut m);
    assert!(!bitmask::get(&mask, 5));
    for &e in vocab.eos_ids() {
        assert!(!bitmask::get(&mask, e), "EOS {e} in the mask");
        assert!(m.fork().accept_token(e).is_err(), "EOS {e} accepted as a token");
    }
    assert!(bitmask::get(&mask, 6) && m.accept_token(6).is_ok());
}
