//! The small hand-made vocabularies of the engine, schema and fuzz suites, by name. Token 0
//! is EOS in each (a control token), and every one is built the same way each run: the
//! random ones from their seed.

use std::sync::Arc;

use stencil_mask::{TokenKind, Vocabulary};

use crate::rng::xorshift;

/// A vocabulary of `tokens` in that order: the first is EOS (a control token), the others
/// normal text.
pub fn from_tokens(tokens: Vec<Vec<u8>>) -> Arc<Vocabulary> {
    let v = tokens
        .into_iter()
        .enumerate()
        .map(|(i, b)| (b, if i == 0 { TokenKind::Control } else { TokenKind::Normal }))
        .collect();
    Arc::new(Vocabulary::new(v, vec![0]).expect("a valid vocabulary"))
}

/// `<eos>` (token 0), then `words` as tokens 1, 2, ...
pub fn words(words: &[&str]) -> Arc<Vocabulary> {
    let mut tokens = vec![b"<eos>".to_vec()];
    tokens.extend(words.iter().map(|w| w.as_bytes().to_vec()));
    from_tokens(tokens)
}

/// `<eos>`, a control token `<think>`, every printable ASCII byte, `ab` and `é`: the byte
/// `b` (0x20–0x7e) is token `b - 0x20 + 2`.
pub fn printable() -> Arc<Vocabulary> {
    let mut tokens = vec![(b"<eos>".to_vec(), TokenKind::Control), (b"<think>".to_vec(), TokenKind::Control)];
    tokens.extend((0x20u8..0x7f).map(|b| (vec![b], TokenKind::Normal)));
    tokens.push((b"ab".to_vec(), TokenKind::Normal));
    tokens.push(("é".as_bytes().to_vec(), TokenKind::Normal));
    Arc::new(Vocabulary::new(tokens, vec![0]).unwrap())
}

fn json_byte_tokens() -> Vec<Vec<u8>> {
    let mut tokens: Vec<Vec<u8>> = vec![b"<eos>".to_vec()];
    tokens.extend((0x20u8..0x7f).chain([b'\t', b'\n']).map(|b| vec![b]));
    tokens
}

/// `<eos>`, every printable ASCII byte, tab and newline: JSON text one byte at a time.
pub fn json_bytes() -> Arc<Vocabulary> {
    from_tokens(json_byte_tokens())
}

/// [`json_bytes`], then a few JSON pieces and multi-byte characters (`{"`, `":`, `true`,
/// `12`, `é`, `😀`, `\u00`, ...).
pub fn json_text() -> Arc<Vocabulary> {
    let mut tokens = json_byte_tokens();
    for piece in ["{\"", "\":", "\",", "\"}", "true", "null", "false", "  ", "12", "é", "😀", "\\u00", "[]", "{}"] {
        tokens.push(piece.as_bytes().to_vec());
    }
    from_tokens(tokens)
}

/// `specials` control tokens `<t0>` … (token 0 the EOS), then the 256 byte tokens: byte `b`
/// is token `specials + b`.
pub fn bytes(specials: u32) -> Arc<Vocabulary> {
    let mut tokens: Vec<(Vec<u8>, TokenKind)> =
        (0..specials).map(|i| (format!("<t{i}>").into_bytes(), TokenKind::Control)).collect();
    tokens.extend((0..=255u8).map(|b| (vec![b], TokenKind::Byte)));
    Arc::new(Vocabulary::new(tokens, vec![0]).unwrap())
}

/// EOS, every single byte of `alphabet`, then up to `count` more distinct tokens, each made
/// by `token` from a xorshift generator seeded with `seed | 1`.
fn random_tokens(
    alphabet: &[u8],
    seed: u64,
    count: usize,
    token: impl Fn(&mut dyn FnMut() -> u64) -> Vec<u8>,
) -> Vec<Vec<u8>> {
    let mut tokens: Vec<Vec<u8>> = vec![b"<eos>".to_vec()];
    tokens.extend(alphabet.iter().map(|&b| vec![b]));
    let mut next = xorshift(seed | 1);
    for _ in 0..count {
        let t = token(&mut next);
        if !tokens.contains(&t) {
            tokens.push(t);
        }
    }
    tokens
}

/// EOS, every byte of `alphabet`, up to `count` 2–4-byte strings over it drawn from `seed`,
/// then multi-byte UTF-8 pieces: `é`, `wide`, `😀` and `aé` whole, a lead byte and a tail
/// alone, and a bad byte.
fn random_short(alphabet: &[u8], seed: u64, count: usize, wide: &str) -> Arc<Vocabulary> {
    let mut tokens = random_tokens(alphabet, seed, count, |next| {
        let len = 2 + (next() % 3) as usize;
        (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect()
    });
    for piece in ["é", wide, "😀", "aé"] {
        tokens.push(piece.as_bytes().to_vec());
    }
    tokens.push("é".as_bytes()[..1].to_vec());
    tokens.push("😀".as_bytes()[1..].to_vec());
    tokens.push(vec![0xff]);
    from_tokens(tokens)
}

/// The engine oracle's small vocabulary over `alphabet`: EOS, every single byte, up to 40
/// pairs and triples drawn from `seed`, and multi-byte UTF-8 pieces (whole and split
/// characters, `→` among them).
pub fn random(alphabet: &[u8], seed: u64) -> Arc<Vocabulary> {
    random_short(alphabet, seed, 40, "→")
}

/// The fuzz targets' small vocabulary: as [`random`] with up to 24 drawn tokens and `ω` for
/// `→` (the committed fuzz regressions name their vocabulary by this seed).
pub fn fuzz_random(alphabet: &[u8], seed: u64) -> Arc<Vocabulary> {
    random_short(alphabet, seed, 24, "ω")
}

/// Like [`random`], with longer tokens (up to 9 bytes): long runs of string characters are
/// what the mask cache takes whole subtrees of the trie at once for.
pub fn random_long(alphabet: &[u8], seed: u64) -> Arc<Vocabulary> {
    from_tokens(random_long_tokens(alphabet, seed))
}

/// The tokens of [`random_long`], to add to before building the vocabulary.
pub fn random_long_tokens(alphabet: &[u8], seed: u64) -> Vec<Vec<u8>> {
    let mut tokens = random_tokens(alphabet, seed, 150, |next| {
        let len = 2 + (next() % 8) as usize;
        // Mostly letters, with some structure bytes.
        (0..len)
            .map(|_| {
                if next() % 4 == 0 {
                    alphabet[(next() % alphabet.len() as u64) as usize]
                } else {
                    b"abc"[(next() % 3) as usize]
                }
            })
            .collect()
    });
    for piece in ["é", "aé", r"ab\u00e9", r"\\", r"\n", "→", "a😀b", "ab\"é"] {
        tokens.push(piece.as_bytes().to_vec());
    }
    // Pieces of characters: a lead byte alone, a tail alone, a bad byte.
    tokens.extend([b"a\xc3".to_vec(), "😀".as_bytes()[1..].to_vec(), b"b\xff".to_vec()]);
    tokens
}
