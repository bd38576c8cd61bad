//! Vocabularies and tokenizers of real models (from the committed fixtures and, for the
//! full-file checks, from the models that `scripts/fetch-models.sh` fetches), of
//! tokenizer.json files, and the GGUF reader's behaviour on bad input.

use std::collections::BTreeMap;
use std::path::PathBuf;

use proptest::prelude::*;
use stencil_mask::vocab::gguf::{self, GgufError, GgufType, GgufValue};
use stencil_mask::vocab::{Tokenizer, TokenizerError};
use stencil_mask::{TokenKind, Vocabulary};
use stencil_test_support::fixtures;

fn kind_counts(vocab: &Vocabulary) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for id in 0..vocab.len() as u32 {
        *counts.entry(format!("{:?}", vocab.kind(id))).or_default() += 1;
    }
    counts
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|&(k, n)| (k.to_string(), n)).collect()
}

/// The id of the token whose raw GGUF text is `text`.
fn raw_id(path: &str, text: &str) -> u32 {
    let meta = gguf::read_metadata_file(path).unwrap();
    let tokens = meta.get("tokenizer.ggml.tokens").unwrap().as_array().unwrap();
    tokens.iter().position(|t| t.as_bytes() == Some(text.as_bytes())).unwrap() as u32
}

fn decode(vocab: &Vocabulary, ids: &[u32]) -> Vec<u8> {
    ids.iter().flat_map(|&id| vocab.token_bytes(id).to_vec()).collect()
}

const SAMPLES: &[&str] = &[
    "",
    "a",
    "Hello world",
    "Hello, world!",
    " leading space",
    "  two leading spaces",
    "trailing space ",
    "\n",
    "\n\nparagraphs\n\n\nand more\n",
    "\ttabs\t\tand\r\nCRLF",
    "{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"x\", \"y\"], \"ok\": true, \"n\": null}",
    "[1, 2.5, -3e10, 0.000001]",
    "12345678901234567890",
    "Ünïcödé façade — naïve café, 東京, Москва, العربية, हिन्दी",
    "emoji 😀👍🏽 👨‍👩‍👧 🇫🇷",
    "<|im_end|> <eos> </s> <end_of_turn> <start_of_image> [multimodal]",
    "<table><tr><td>cell</td></tr></table>",
    "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
    "def f(x):\n\treturn x ** 2  # comment\n",
    "SELECT * FROM t WHERE a = 'it''s';",
    "don't won't it's I'm we'll they've she'd",
    "\u{0}\u{1}\u{7f}",
    "     many spaces     ",
    "Ġ literal G-dot",
    "<0x0A> literal byte-token text",
];

#[test]
fn smollm2_fixture_vocabulary() {
    let (vocab, _) = fixtures::smollm2();
    assert_eq!(vocab.len(), 49_152);
    assert_eq!(vocab.mask_width(), 49_152);
    assert_eq!(kind_counts(&vocab), counts(&[("Control", 17), ("Normal", 49_135)]));
    // EOG: <|endoftext|> (EOT), <|im_end|> (EOS), <reponame> (FIM repo).
    assert_eq!(vocab.eos_ids(), &[0, 2, 4]);
    assert_eq!(vocab.token_bytes(2), b"<|im_end|>");
    assert_eq!(vocab.kind(1), TokenKind::Control);
    let the = raw_id(fixtures::SMOLLM2_PATH, "Ġthe");
    assert_eq!(vocab.token_bytes(the), b" the");
    assert_eq!(vocab.kind(the), TokenKind::Normal);
    let nl = raw_id(fixtures::SMOLLM2_PATH, "Ċ");
    assert_eq!(vocab.token_bytes(nl), b"\n");
    // Byte-level BPE, but 21 bytes have no token: control bytes, bytes never in UTF-8,
    // and the UTF-8 lead bytes of U+40000..U+BFFFF.
    let missing: Vec<u8> = (0..=255u8).filter(|&b| vocab.find_token(&[b]).is_none()).collect();
    let mut expected = vec![4, 6, 19, 20, 22, 29, 192, 193, 241, 242];
    expected.extend(245..=255);
    assert_eq!(missing, expected);
}

#[test]
fn gemma3_fixture_vocabulary() {
    let (vocab, _) = fixtures::gemma3();
    assert_eq!(vocab.len(), 262_144);
    assert_eq!(
        kind_counts(&vocab),
        counts(&[("Byte", 256), ("Control", 6250), ("Normal", 255_474), ("UserDefined", 164)])
    );
    // EOG: <eos>, <end_of_turn>, and </s> (typed user-defined, made control as llama.cpp).
    assert_eq!(vocab.eos_ids(), &[1, 106, 212]);
    assert_eq!(vocab.token_bytes(212), b"</s>");
    assert_eq!(vocab.kind(212), TokenKind::Control);
    assert_eq!(vocab.kind(105), TokenKind::Control); // <start_of_turn>
    let nl = raw_id(fixtures::GEMMA3_PATH, "<0x0A>");
    assert_eq!((vocab.token_bytes(nl), vocab.kind(nl)), (&b"\n"[..], TokenKind::Byte));
    let ff = raw_id(fixtures::GEMMA3_PATH, "<0xFF>");
    assert_eq!(vocab.token_bytes(ff), b"\xff");
    let the = raw_id(fixtures::GEMMA3_PATH, "▁the");
    assert_eq!((vocab.token_bytes(the), vocab.kind(the)), (&b" the"[..], TokenKind::Normal));
    // User-defined: newline, space and tab runs and HTML-like tags, verbatim.
    assert_eq!((vocab.token_bytes(108), vocab.kind(108)), (&b"\n\n"[..], TokenKind::UserDefined));
    assert_eq!(vocab.token_bytes(139), b"   ");
    assert_eq!(vocab.token_bytes(168), b"<table>");
    assert!(vocab.is_text(168));
}

#[test]
fn fixtures_are_shared() {
    let (a, _) = fixtures::gemma3();
    let (b, _) = fixtures::gemma3();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
}

fn check_round_trips(vocab: &Vocabulary, tok: &Tokenizer) {
    for text in SAMPLES {
        let ids = tok.encode(text).unwrap();
        assert_eq!(String::from_utf8_lossy(&decode(vocab, &ids)), *text, "ids {ids:?} of {text:?}");
        assert!(ids.iter().all(|&id| vocab.is_text(id)), "{text:?} gave a non-text token: {ids:?}");
    }
}

#[test]
fn smollm2_tokenizer_round_trips() {
    let (vocab, tok) = fixtures::smollm2();
    check_round_trips(&vocab, &tok);
}

#[test]
fn gemma3_tokenizer_round_trips() {
    let (vocab, tok) = fixtures::gemma3();
    check_round_trips(&vocab, &tok);
}

fn pieces(vocab: &Vocabulary, tok: &Tokenizer, text: &str) -> Vec<String> {
    let ids = tok.encode(text).unwrap();
    ids.iter().map(|&id| String::from_utf8_lossy(vocab.token_bytes(id)).into_owned()).collect()
}

#[test]
fn smollm2_known_tokenizations() {
    let (vocab, tok) = fixtures::smollm2();
    assert_eq!(pieces(&vocab, &tok, "Hello world"), ["Hello", " world"]);
    assert_eq!(tok.encode("Hello world").unwrap(), [19556, 905]);
    // The smollm pre-tokenizer splits digits one by one.
    assert_eq!(pieces(&vocab, &tok, "2024"), ["2", "0", "2", "4"]);
    assert_eq!(pieces(&vocab, &tok, " the cat"), [" the", " cat"]);
    // Control-token text is plain text.
    assert!(tok.encode("<|im_end|>").unwrap().len() > 1);
    assert_eq!(decode(&vocab, &tok.encode("a▁b").unwrap()), "a▁b".as_bytes());
    // Text that no tokens spell is an error, not a silent drop.
    for text in ["\u{4}", "a\u{4}b", "\u{50000}"] {
        assert!(matches!(tok.encode(text), Err(TokenizerError::NotRepresentable(_))), "{text:?}");
    }
}

#[test]
fn gemma3_known_tokenizations() {
    let (vocab, tok) = fixtures::gemma3();
    assert_eq!(pieces(&vocab, &tok, "Hello world"), ["Hello", " world"]);
    assert_eq!(tok.encode("Hello world").unwrap(), [9259, 1902]);
    // User-defined tokens are split out first (no space prefix: add_space_prefix=false).
    assert_eq!(tok.encode("\n\n").unwrap(), [108]);
    assert_eq!(tok.encode("   ").unwrap(), [139]);
    assert_eq!(pieces(&vocab, &tok, "<td>x</td>"), ["<td>", "x", "</td>"]);
    // `</s>` is control (EOG) in llama.cpp, so not split out: it is plain text.
    assert!(!tok.encode("</s>").unwrap().contains(&212));
    // Characters outside the vocabulary fall back to byte tokens.
    let ids = tok.encode("\u{10FFFD}").unwrap();
    assert_eq!(ids.len(), 4);
    assert!(ids.iter().all(|&id| vocab.kind(id) == TokenKind::Byte));
    // SentencePiece reads a literal `▁` as a space (so does llama.cpp): not representable.
    assert!(matches!(tok.encode("a▁b"), Err(TokenizerError::NotRepresentable(_))));
}

/// The full model files give exactly the fixtures' vocabularies and tokenizations.
/// Needs `scripts/fetch-models.sh` (fails, saying so, when the models are missing).
#[test]
fn full_models_match_fixtures() {
    for (file, (vocab, tok)) in
        [(fixtures::SMOLLM2_MODEL_FILE, fixtures::smollm2()), (fixtures::GEMMA3_MODEL_FILE, fixtures::gemma3())]
    {
        let path = fixtures::model_path(file);
        let full = Vocabulary::from_gguf(&path).unwrap();
        assert!(full == *vocab, "{file}: the vocabulary differs from the fixture's");
        let full_tok = Tokenizer::from_gguf(&path).unwrap();
        for text in SAMPLES {
            assert_eq!(full_tok.encode(text).unwrap(), tok.encode(text).unwrap(), "{file}: {text:?}");
        }
    }
}

fn tiny(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/vocab").join(name)
}

#[test]
fn tokenizer_json_byte_level() {
    let path = tiny("tiny-bytelevel.tokenizer.json");
    let vocab = Vocabulary::from_tokenizer_json(&path).unwrap();
    assert_eq!(vocab.len(), 268);
    assert_eq!(vocab.eos_ids(), &[0, 266]); // <|endoftext|>, <|im_end|>
    assert_eq!((vocab.token_bytes(260), vocab.kind(260)), (&b" the"[..], TokenKind::Normal));
    assert_eq!(vocab.token_bytes(265), b"\n\n");
    assert_eq!((vocab.token_bytes(266), vocab.kind(266)), (&b"<|im_end|>"[..], TokenKind::Control));
    assert_eq!((vocab.token_bytes(267), vocab.kind(267)), (&b"<think>"[..], TokenKind::UserDefined));
    let tok = Tokenizer::from_tokenizer_json(&path).unwrap();
    assert_eq!(tok.encode(" the cat").unwrap(), [260, 264]);
    assert_eq!(tok.encode("a<think>b").unwrap()[1], 267);
    for text in ["the cat\n\nsat", "naïve 😀", "<|im_end|>", "x<think>y"] {
        let ids = tok.encode(text).unwrap();
        assert_eq!(decode(&vocab, &ids), text.as_bytes(), "{ids:?}");
    }
    let custom = Vocabulary::from_tokenizer_json_with_eos(&path, &[266]).unwrap();
    assert_eq!(custom.eos_ids(), &[266]);
    assert_eq!(custom.kind(0), TokenKind::Control);
}

#[test]
fn tokenizer_json_sentencepiece_with_byte_fallback() {
    let path = tiny("tiny-spm.tokenizer.json");
    let vocab = Vocabulary::from_tokenizer_json(&path).unwrap();
    assert_eq!(vocab.len(), 277);
    assert_eq!(vocab.eos_ids(), &[1, 275]); // <eos>, <end_of_turn>
    assert_eq!((vocab.token_bytes(4 + 0x21), vocab.kind(4 + 0x21)), (&b"!"[..], TokenKind::Byte));
    assert_eq!((vocab.token_bytes(271), vocab.kind(271)), (&b" the"[..], TokenKind::Normal));
    assert_eq!((vocab.token_bytes(276), vocab.kind(276)), (&b"\n\n"[..], TokenKind::UserDefined));
    let tok = Tokenizer::from_tokenizer_json(&path).unwrap();
    assert_eq!(tok.encode("the cat!").unwrap(), [268, 274, 4 + 0x21]);
    for text in ["the cat", " the\n\ncat", "é😀!", "<eos>"] {
        let ids = tok.encode(text).unwrap();
        assert_eq!(decode(&vocab, &ids), text.as_bytes(), "{ids:?}");
    }
}

#[test]
fn tokenizer_json_errors() {
    assert!(Vocabulary::from_tokenizer_json_str("{", None).is_err());
    assert!(Vocabulary::from_tokenizer_json_str("{}", None).is_err());
    let no_eos = r#"{"model": {"type": "WordLevel", "vocab": {"a": 0}}}"#;
    assert!(Vocabulary::from_tokenizer_json_str(no_eos, None).is_err());
    assert!(Vocabulary::from_tokenizer_json_str(no_eos, Some(&[0])).is_ok());
    assert!(Vocabulary::from_tokenizer_json_str(no_eos, Some(&[1])).is_err());
    let huge = r#"{"model": {"type": "WordLevel", "vocab": {"a": 4294967295}}}"#;
    assert!(Vocabulary::from_tokenizer_json_str(huge, Some(&[0])).is_err());
}

/// A small valid GGUF: a 6-token SentencePiece vocabulary.
fn small_gguf() -> Vec<u8> {
    let strings = |v: &[&str]| {
        GgufValue::Array(GgufType::String, v.iter().map(|s| GgufValue::String(s.as_bytes().to_vec())).collect())
    };
    let kvs = vec![
        ("general.name".to_string(), GgufValue::String(b"tiny".to_vec())),
        ("tokenizer.ggml.model".to_string(), GgufValue::String(b"llama".to_vec())),
        ("tokenizer.ggml.tokens".to_string(), strings(&["<eos>", "<0x0A>", "▁", "a", "▁a", "<b>"])),
        (
            "tokenizer.ggml.scores".to_string(),
            GgufValue::Array(GgufType::F32, [0.0, 0.0, -1.0, -2.0, -0.5, 0.0].map(GgufValue::F32).to_vec()),
        ),
        (
            "tokenizer.ggml.token_type".to_string(),
            GgufValue::Array(GgufType::I32, [3, 6, 1, 1, 1, 4].map(GgufValue::I32).to_vec()),
        ),
        ("tokenizer.ggml.eos_token_id".to_string(), GgufValue::U32(0)),
        ("tokenizer.ggml.add_space_prefix".to_string(), GgufValue::Bool(false)),
    ];
    let mut out = Vec::new();
    gguf::write_metadata(&mut out, &kvs).unwrap();
    out
}

#[test]
fn small_gguf_reads_plain_and_gzip() {
    let bytes = small_gguf();
    let vocab = Vocabulary::from_gguf_bytes(&bytes).unwrap();
    let kinds: Vec<_> = (0..6).map(|id| vocab.kind(id)).collect();
    use TokenKind::*;
    assert_eq!(kinds, [Control, Byte, Normal, Normal, Normal, UserDefined]);
    assert_eq!(vocab.token_bytes(4), b" a");
    assert_eq!(vocab.eos_ids(), &[0]);
    let tok = Tokenizer::from_gguf_bytes(&bytes).unwrap();
    assert_eq!(tok.encode("a a\n<b>").unwrap(), [3, 4, 1, 5]);
    assert!(matches!(tok.encode("z"), Err(TokenizerError::NoByteToken(b'z'))));

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &bytes).unwrap();
    let gz = gz.finish().unwrap();
    assert_eq!(Vocabulary::from_gguf_bytes(&gz).unwrap(), vocab);
    assert!(Vocabulary::from_gguf_bytes(&gz[..gz.len() / 2]).is_err());
}

#[test]
fn bad_gguf_gives_typed_errors() {
    let good = small_gguf();
    // Every truncation.
    for n in 0..good.len() {
        let err = gguf::read_metadata(&good[..n]).unwrap_err();
        assert!(matches!(err, GgufError::Truncated | GgufError::LengthTooLarge { .. }), "{n}: {err}");
    }
    let mut bad = good.clone();
    bad[0] = b'X';
    assert!(matches!(gguf::read_metadata(&bad), Err(GgufError::BadMagic(_))));
    let mut bad = good.clone();
    bad[4] = 1;
    assert!(matches!(gguf::read_metadata(&bad), Err(GgufError::UnsupportedVersion(1))));

    // A header claiming 2^60 key/values, then an array claiming 2^62 strings.
    let header = |kv_count: u64| {
        let mut v = b"GGUF".to_vec();
        v.extend(3u32.to_le_bytes());
        v.extend(0u64.to_le_bytes());
        v.extend(kv_count.to_le_bytes());
        v
    };
    let err = gguf::read_metadata(&header(1 << 60)).unwrap_err();
    assert!(matches!(err, GgufError::LengthTooLarge { .. }), "{err}");
    let mut v = header(1);
    v.extend(1u64.to_le_bytes());
    v.push(b'k');
    v.extend(9u32.to_le_bytes()); // array
    v.extend(8u32.to_le_bytes()); // of strings
    v.extend((1u64 << 62).to_le_bytes());
    v.extend([0u8; 64]);
    let err = gguf::read_metadata(&v).unwrap_err();
    assert!(matches!(err, GgufError::LengthTooLarge { .. }), "{err}");
    // A string claiming u64::MAX bytes.
    let mut v = header(1);
    v.extend(u64::MAX.to_le_bytes());
    assert!(matches!(gguf::read_metadata(&v), Err(GgufError::LengthTooLarge { .. })));
    // Arrays nested deeper than allowed.
    let mut v = header(1);
    v.extend(1u64.to_le_bytes());
    v.push(b'k');
    v.extend(9u32.to_le_bytes());
    for _ in 0..10 {
        v.extend(9u32.to_le_bytes());
        v.extend(1u64.to_le_bytes());
    }
    v.extend([0u8; 64]);
    assert!(matches!(gguf::read_metadata(&v), Err(GgufError::TooDeep)));
    // An unknown value type.
    let mut v = header(1);
    v.extend(1u64.to_le_bytes());
    v.push(b'k');
    v.extend(13u32.to_le_bytes());
    assert!(matches!(gguf::read_metadata(&v), Err(GgufError::BadType(13))));
    // Valid GGUF, but no vocabulary.
    let v = header(0);
    assert!(matches!(Vocabulary::from_gguf_bytes(&v), Err(GgufError::MissingKey(_))));
    assert!(Vocabulary::from_gguf("/nonexistent/model.gguf").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random mutations of a valid file never panic (errors or a vocabulary, both fine).
    #[test]
    fn mutated_gguf_never_panics(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = small_gguf();
        for (at, byte, op) in edits {
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => { bytes.remove(i); }
            }
        }
        if cut.index(4) == 0 {
            let n = cut.index(bytes.len());
            bytes.truncate(n);
        }
        let _ = gguf::read_metadata(&bytes);
        let _ = Vocabulary::from_gguf_bytes(&bytes);
        if let Ok(tok) = Tokenizer::from_gguf_bytes(&bytes) {
            let _ = tok.encode("a a\n<b> z");
        }
    }
}
