//! Text → token ids with a model's own tokenizer, as llama.cpp tokenizes (for GGUF) or
//! as Hugging Face `tokenizers` does (for tokenizer.json), never adding BOS/EOS and never
//! parsing special-token text.
//!
//! ```no_run
//! use stencil_mask::vocab::Tokenizer;
//! let tok = Tokenizer::from_gguf("gemma-3-270m-q4_k_m.gguf").unwrap();
//! assert_eq!(tok.encode("Hello world").unwrap().len(), 2);
//! ```

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::path::Path;

use thiserror::Error;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::SplitDelimiterBehavior;

use super::gguf::{self, token_type, GgufError, GgufMetadata, GgufModel, RawVocab};

/// Errors loading a tokenizer or encoding text.
#[derive(Debug, Error)]
pub enum TokenizerError {
    /// The GGUF metadata could not be read.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// The `tokenizers` crate refused the model.
    #[error("tokenizers: {0}")]
    Hf(String),
    /// A BPE pre-tokenizer name this crate does not know.
    #[error("unsupported BPE pre-tokenizer {0:?}")]
    UnsupportedPre(String),
    /// A token's text is not UTF-8 (by id).
    #[error("token {0} is not UTF-8, which a byte-level BPE vocabulary needs")]
    TokenNotUtf8(u32),
    /// A BPE merge is not two tokens (by index).
    #[error("merge {0} is malformed")]
    BadMerge(usize),
    /// A byte no token spells (byte fallback needs all 256).
    #[error("the vocabulary has no token for byte 0x{0:02X}")]
    NoByteToken(u8),
    /// Text that no sequence of tokens spells exactly.
    #[error("no tokens spell {0:?} exactly in this vocabulary")]
    NotRepresentable(String),
    /// The tokenizer.json could not be read.
    #[error(transparent)]
    Json(#[from] super::HfError),
}

impl From<tokenizers::Error> for TokenizerError {
    fn from(e: tokenizers::Error) -> Self {
        TokenizerError::Hf(e.to_string())
    }
}

/// A model's tokenizer: see [`Tokenizer::from_gguf`] and [`Tokenizer::from_tokenizer_json`].
pub struct Tokenizer {
    inner: Inner,
    /// Each token's bytes, to check that encodings spell their text.
    bytes: Vec<u8>,
    offsets: Vec<usize>,
    /// User-defined tokens split out before the model runs (GGUF only), longest first.
    user_defined: Vec<(String, u32)>,
}

enum Inner {
    /// Byte-level BPE (built from GGUF tokens and merges, or read from tokenizer.json).
    Hf(Box<tokenizers::Tokenizer>),
    /// llama.cpp's SentencePiece BPE.
    Spm(Spm),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.inner {
            Inner::Hf(_) => "bpe",
            Inner::Spm(_) => "spm",
        };
        f.debug_struct("Tokenizer").field("kind", &kind).finish_non_exhaustive()
    }
}

/// The GPT-2 pre-tokenizer pattern (what llama.cpp applies for `gpt2`-style `pre`s).
const GPT2_PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
const LLAMA3_PATTERN: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_PATTERN: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The regexes llama.cpp applies, in turn, for a `tokenizer.ggml.pre` of a BPE model.
fn pre_patterns(pre: &str) -> Option<Vec<&'static str>> {
    Some(match pre {
        "gpt-2" | "gpt2" | "mpt" | "olmo" | "jais" => vec![GPT2_PATTERN],
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => {
            vec![r"\p{N}", GPT2_PATTERN]
        }
        "llama3" | "llama-v3" | "llama-bpe" | "dbrx" | "smaug-bpe" => vec![LLAMA3_PATTERN],
        "qwen2" | "stablelm2" => vec![QWEN2_PATTERN],
        "default" => vec![
            r"[\p{P}\$\+<=>\^~\|]+",
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
            r"\p{N}+",
            r"[0-9][0-9][0-9]",
        ],
        _ => return None,
    })
}

impl Tokenizer {
    /// The tokenizer of a GGUF model file (plain or gzip-compressed).
    ///
    /// `gpt2` models: byte-level BPE from `tokenizer.ggml.tokens`/`merges`, pre-tokenized
    /// with llama.cpp's regexes for `tokenizer.ggml.pre` (gpt2, smollm/starcoder, llama3,
    /// qwen2 and default families). `llama` models: llama.cpp's SentencePiece algorithm
    /// (highest-score merges, `<0xHH>` byte fallback, `tokenizer.ggml.add_space_prefix`).
    /// In both, user-defined tokens are split out of the text first, as llama.cpp does.
    pub fn from_gguf(path: impl AsRef<Path>) -> Result<Self, TokenizerError> {
        Self::from_gguf_metadata(&gguf::read_metadata_file(path)?)
    }

    /// [`Tokenizer::from_gguf`] from the bytes of a file.
    pub fn from_gguf_bytes(bytes: &[u8]) -> Result<Self, TokenizerError> {
        Self::from_gguf_metadata(&gguf::read_metadata(bytes)?)
    }

    /// [`Tokenizer::from_gguf`] from metadata already read.
    pub fn from_gguf_metadata(meta: &GgufMetadata) -> Result<Self, TokenizerError> {
        let raw = RawVocab::new(meta)?;
        let eog = raw.eog_ids(meta);
        // llama.cpp splits user-defined tokens out of the text (an EOG token typed
        // user-defined, like Gemma's `</s>`, has become control and is not split).
        let mut user_defined: Vec<(String, u32)> = raw
            .texts
            .iter()
            .zip(&raw.types)
            .enumerate()
            .filter(|&(id, (text, &ty))| {
                ty == token_type::USER_DEFINED && !text.is_empty() && eog.binary_search(&(id as u32)).is_err()
            })
            .filter_map(|(id, (text, _))| Some((String::from_utf8(text.to_vec()).ok()?, id as u32)))
            .collect();
        user_defined.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        let inner = match raw.model {
            GgufModel::Gpt2 => Inner::Hf(Box::new(bpe_from_gguf(meta, &raw)?)),
            GgufModel::Llama => Inner::Spm(Spm::new(meta, &raw)),
        };
        Ok(Tokenizer::with_tokens(inner, user_defined, raw.tokens(&eog)?))
    }

    /// A Hugging Face tokenizer.json, run by the `tokenizers` crate, with special-token
    /// text encoded as plain text.
    ///
    /// ```
    /// use stencil_mask::vocab::Tokenizer;
    /// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/vocab/tiny-bytelevel.tokenizer.json");
    /// let tok = Tokenizer::from_tokenizer_json(path).unwrap();
    /// assert_eq!(tok.encode(" the cat").unwrap(), vec![260, 264]);
    /// ```
    pub fn from_tokenizer_json(path: impl AsRef<Path>) -> Result<Self, TokenizerError> {
        let json = std::fs::read_to_string(path).map_err(super::HfError::from)?;
        let tokens = super::hf::HfTokens::new(&json)?.tokens;
        let mut tok: tokenizers::Tokenizer = json.parse()?;
        tok.set_encode_special_tokens(true);
        Ok(Tokenizer::with_tokens(Inner::Hf(Box::new(tok)), Vec::new(), tokens))
    }

    fn with_tokens(inner: Inner, user_defined: Vec<(String, u32)>, tokens: Vec<(Vec<u8>, super::TokenKind)>) -> Self {
        let mut bytes = Vec::new();
        let mut offsets = vec![0];
        for (b, _) in tokens {
            bytes.extend_from_slice(&b);
            offsets.push(bytes.len());
        }
        Tokenizer { inner, bytes, offsets, user_defined }
    }

    /// The ids of `text`, without BOS/EOS; special-token text is encoded as text.
    ///
    /// The bytes of the ids (as the vocabulary gives them) always spell `text`; when no
    /// tokens can (SmolLM2 has no token for byte 0x04; SentencePiece reads a literal `▁`
    /// as a space), this is [`TokenizerError::NotRepresentable`].
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let ids = self.encode_unchecked(text)?;
        let mut at = 0;
        for &id in &ids {
            let piece = match self.offsets.get(id as usize..id as usize + 2) {
                Some(&[start, end]) => &self.bytes[start..end],
                _ => return Err(TokenizerError::NotRepresentable(text.into())),
            };
            if !text.as_bytes()[at..].starts_with(piece) {
                return Err(TokenizerError::NotRepresentable(text.into()));
            }
            at += piece.len();
        }
        if at != text.len() {
            return Err(TokenizerError::NotRepresentable(text.into()));
        }
        Ok(ids)
    }

    /// The ids of `text` as the tokenizer gives them.
    fn encode_unchecked(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let mut out = Vec::new();
        let mut prev_special = true;
        for piece in split_user_defined(text, &self.user_defined) {
            match piece {
                Piece::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Piece::Text(t) => {
                    match &self.inner {
                        Inner::Hf(tok) => {
                            out.extend_from_slice(tok.encode(t, false)?.get_ids());
                        }
                        Inner::Spm(spm) => spm.encode(t, prev_special, &mut out)?,
                    }
                    prev_special = false;
                }
            }
        }
        Ok(out)
    }
}

enum Piece<'a> {
    Text(&'a str),
    Token(u32),
}

/// Splits `text` at the occurrences of `tokens` (longest first), as llama.cpp's
/// `tokenizer_st_partition`: each token in turn splits the text pieces left so far.
fn split_user_defined<'a>(text: &'a str, tokens: &[(String, u32)]) -> Vec<Piece<'a>> {
    let mut pieces = vec![Piece::Text(text)];
    for (tok, id) in tokens {
        if !text.contains(tok.as_str()) {
            continue;
        }
        let mut next = Vec::with_capacity(pieces.len());
        for piece in pieces {
            match piece {
                Piece::Text(mut t) => {
                    while let Some(i) = t.find(tok.as_str()) {
                        if i > 0 {
                            next.push(Piece::Text(&t[..i]));
                        }
                        next.push(Piece::Token(*id));
                        t = &t[i + tok.len()..];
                    }
                    if !t.is_empty() {
                        next.push(Piece::Text(t));
                    }
                }
                token => next.push(token),
            }
        }
        pieces = next;
    }
    pieces
}

/// A `tokenizers` byte-level BPE from the GGUF tokens and merges.
fn bpe_from_gguf(meta: &GgufMetadata, raw: &RawVocab<'_>) -> Result<tokenizers::Tokenizer, TokenizerError> {
    let pre = meta.get_str("tokenizer.ggml.pre").unwrap_or("default");
    let patterns = pre_patterns(pre).ok_or_else(|| TokenizerError::UnsupportedPre(pre.into()))?;
    let mut vocab = Vocab::default();
    for (id, text) in raw.texts.iter().enumerate() {
        let text = std::str::from_utf8(text).map_err(|_| TokenizerError::TokenNotUtf8(id as u32))?;
        vocab.insert(text.to_string(), id as u32);
    }
    const MERGES: &str = "tokenizer.ggml.merges";
    let mut merges = Vec::new();
    if let Some(m) = meta.get(MERGES) {
        let m = m.as_array().ok_or(GgufError::WrongType { key: MERGES })?;
        merges.reserve(m.len());
        for (i, merge) in m.iter().enumerate() {
            let merge = merge.as_str().ok_or(TokenizerError::BadMerge(i))?;
            // llama.cpp splits at the first space after the first byte.
            let at = merge.bytes().skip(1).position(|b| b == b' ').ok_or(TokenizerError::BadMerge(i))?;
            merges.push((merge[..at + 1].to_string(), merge[at + 2..].to_string()));
        }
    }
    let bpe = BPE::builder().vocab_and_merges(vocab, merges).build()?;
    let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
    for p in patterns {
        let split = Split::new(SplitPattern::Regex(p.into()), SplitDelimiterBehavior::Isolated, false)?;
        steps.push(split.into());
    }
    steps.push(ByteLevel::new(false, false, false).into());
    let mut tok = tokenizers::Tokenizer::new(bpe);
    tok.with_pre_tokenizer(Some(Sequence::new(steps)));
    Ok(tok)
}

/// llama.cpp's SentencePiece tokenizer (`llm_tokenizer_spm`).
struct Spm {
    /// Token text → id; a duplicated text keeps its last id, as in llama.cpp.
    ids: HashMap<Vec<u8>, u32>,
    scores: Vec<f32>,
    add_space_prefix: bool,
}

/// A candidate merge of two adjacent symbols.
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl Ord for Bigram {
    /// Highest score first, then leftmost.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

/// A symbol of the text being merged: a byte range and its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

impl Spm {
    fn new(meta: &GgufMetadata, raw: &RawVocab<'_>) -> Self {
        let ids = raw.texts.iter().enumerate().map(|(id, t)| (t.to_vec(), id as u32)).collect();
        let add_space_prefix = meta.get("tokenizer.ggml.add_space_prefix").and_then(|v| v.as_bool()).unwrap_or(true);
        Spm { ids, scores: raw.scores.clone(), add_space_prefix }
    }

    fn byte_token(&self, b: u8) -> Result<u32, TokenizerError> {
        let hex = format!("<0x{b:02X}>");
        self.ids.get(hex.as_bytes()).or_else(|| self.ids.get(&[b][..])).copied().ok_or(TokenizerError::NoByteToken(b))
    }

    fn encode(&self, text: &str, prev_special: bool, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        let mut s = String::with_capacity(text.len() + 3);
        if self.add_space_prefix && prev_special {
            s.push(' ');
        }
        s.push_str(text);
        let s = s.replace(' ', "\u{2581}");
        let s = s.as_bytes();
        let mut symbols: Vec<Symbol> = Vec::new();
        let mut start = 0;
        for c in std::str::from_utf8(s).expect("from a str").chars() {
            let i = symbols.len();
            symbols.push(Symbol { start, len: c.len_utf8(), prev: i.checked_sub(1), next: Some(i + 1) });
            start += c.len_utf8();
        }
        if let Some(last) = symbols.last_mut() {
            last.next = None;
        } else {
            return Ok(());
        }
        let mut queue = BinaryHeap::new();
        let try_add =
            |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: Option<usize>, right: Option<usize>| {
                let (Some(left), Some(right)) = (left, right) else {
                    return;
                };
                let (l, r) = (symbols[left], symbols[right]);
                let text = &s[l.start..l.start + l.len + r.len];
                if let Some(&id) = self.ids.get(text) {
                    queue.push(Bigram { score: self.scores[id as usize], left, right, size: text.len() });
                }
            };
        for i in 1..symbols.len() {
            try_add(&mut queue, &symbols, Some(i - 1), Some(i));
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            // Skip bigrams whose symbols have changed since they were queued.
            if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
                continue;
            }
            symbols[b.left].len += r.len;
            symbols[b.right].len = 0;
            symbols[b.left].next = r.next;
            if let Some(n) = r.next {
                symbols[n].prev = Some(b.left);
            }
            try_add(&mut queue, &symbols, l.prev, Some(b.left));
            try_add(&mut queue, &symbols, Some(b.left), r.next);
        }
        let mut i = Some(0);
        while let Some(k) = i {
            let sym = symbols[k];
            let text = &s[sym.start..sym.start + sym.len];
            match self.ids.get(text) {
                Some(&id) => out.push(id),
                None => {
                    for &b in text {
                        out.push(self.byte_token(b)?);
                    }
                }
            }
            i = sym.next;
        }
        Ok(())
    }
}
