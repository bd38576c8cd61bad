//! Vocabularies: token id → bytes, for any tokenizer.
//!
//! ```
//! use stencil_mask::{TokenKind, Vocabulary};
//! let vocab = Vocabulary::new(
//!     vec![(b"<eos>".to_vec(), TokenKind::Control), (b"a".to_vec(), TokenKind::Normal)],
//!     vec![0],
//! ).unwrap();
//! assert_eq!(vocab.token_bytes(1), b"a");
//! assert!(vocab.is_text(1) && !vocab.is_text(0));
//! ```

use thiserror::Error;

pub mod gguf;
pub mod hf;
pub mod tokenizer;
pub(crate) mod trie;

pub use gguf::GgufError;
pub use hf::HfError;
pub use tokenizer::{Tokenizer, TokenizerError};

/// What a token is, for masking: only text tokens ever match grammar text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// Ordinary text.
    Normal,
    /// A byte-fallback token (`<0xHH>`); its bytes are the one byte.
    Byte,
    /// Text the tokenizer treats as one unit (llama.cpp "user defined"); matches as text.
    UserDefined,
    /// Control/special tokens (`<eos>`, `<|im_start|>`): never grammar text.
    Control,
    /// Unused or padding slots.
    Unused,
}

/// Errors building a vocabulary.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum VocabError {
    /// No tokens at all.
    #[error("the vocabulary has no tokens")]
    Empty,
    /// An end-of-sequence id past the last token.
    #[error("EOS token id {id} is outside the vocabulary of {len} tokens")]
    EosOutOfRange {
        /// The id.
        id: u32,
        /// The vocabulary's size.
        len: usize,
    },
    /// No end-of-sequence token.
    #[error("the vocabulary names no EOS token")]
    NoEos,
    /// A mask width (the model's logit count) below the number of tokens.
    #[error("mask width {width} is smaller than the vocabulary's {len} tokens")]
    MaskTooNarrow {
        /// The width asked for.
        width: usize,
        /// The vocabulary's size.
        len: usize,
    },
}

/// Token id → bytes and kind, the EOS ids, and the width of the logits the masks cover.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    kinds: Vec<TokenKind>,
    eos: Vec<u32>,
    mask_width: usize,
    /// Index of the text tokens, built on first use and shared by every grammar: the
    /// vocabulary owns it ([`trie`]).
    text: std::sync::OnceLock<std::sync::Arc<trie::TextTokens>>,
}

/// Equal when every token's bytes and kind, the EOS ids and the mask width are.
impl PartialEq for Vocabulary {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
            && self.offsets == other.offsets
            && self.kinds == other.kinds
            && self.eos == other.eos
            && self.mask_width == other.mask_width
    }
}

impl Eq for Vocabulary {}

impl Vocabulary {
    /// Builds the vocabulary's token index now (it is otherwise built by the first
    /// [`crate::CompiledGrammar`] that uses this vocabulary), so that grammar compile
    /// times do not include it.
    pub fn prepare(&self) {
        self.text_tokens();
    }

    /// The index of text tokens (built once, on first use).
    pub(crate) fn text_tokens(&self) -> std::sync::Arc<trie::TextTokens> {
        self.text
            .get_or_init(|| {
                let text: Vec<(&[u8], u32)> = (0..self.len() as u32)
                    .filter(|&id| self.is_text(id))
                    .map(|id| (self.token_bytes(id), id))
                    .collect();
                std::sync::Arc::new(trie::TextTokens::new(&text, self.mask_width))
            })
            .clone()
    }

    /// A vocabulary from `(bytes, kind)` per token id and the EOS ids (at least one).
    pub fn new(tokens: Vec<(Vec<u8>, TokenKind)>, eos: Vec<u32>) -> Result<Self, VocabError> {
        if tokens.is_empty() {
            return Err(VocabError::Empty);
        }
        if eos.is_empty() {
            return Err(VocabError::NoEos);
        }
        if let Some(&id) = eos.iter().find(|&&id| id as usize >= tokens.len()) {
            return Err(VocabError::EosOutOfRange { id, len: tokens.len() });
        }
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(tokens.len() + 1);
        let mut kinds = Vec::with_capacity(tokens.len());
        offsets.push(0);
        for (b, k) in tokens {
            bytes.extend_from_slice(&b);
            offsets.push(bytes.len() as u32);
            kinds.push(k);
        }
        let mut eos = eos;
        eos.sort_unstable();
        eos.dedup();
        let mask_width = kinds.len();
        Ok(Vocabulary { bytes, offsets, kinds, eos, mask_width, text: Default::default() })
    }

    /// Widens the masks to the model's logits count (padding slots are never allowed).
    pub fn with_mask_width(mut self, width: usize) -> Result<Self, VocabError> {
        if width < self.len() {
            return Err(VocabError::MaskTooNarrow { width, len: self.len() });
        }
        self.mask_width = width;
        Ok(self)
    }

    /// Number of tokens with bytes.
    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether it has no tokens (never, once built: see [`VocabError::Empty`]).
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// Number of bits in a mask (≥ [`Vocabulary::len`]).
    pub fn mask_width(&self) -> usize {
        self.mask_width
    }

    /// The bytes of a token.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// What a token is, for masking.
    pub fn kind(&self, id: u32) -> TokenKind {
        self.kinds[id as usize]
    }

    /// True for tokens that can match grammar text (normal, byte and user-defined tokens
    /// with at least one byte).
    pub fn is_text(&self, id: u32) -> bool {
        matches!(self.kind(id), TokenKind::Normal | TokenKind::Byte | TokenKind::UserDefined)
            && !self.token_bytes(id).is_empty()
    }

    /// The end-of-sequence ids, sorted.
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    /// Whether `id` is an end-of-sequence token.
    pub fn is_eos(&self, id: u32) -> bool {
        self.eos.binary_search(&id).is_ok()
    }

    /// The id of the token whose bytes are exactly `text`, preferring control tokens
    /// (for GBNF's `<text>` references).
    pub fn find_token(&self, text: &[u8]) -> Option<u32> {
        let matches = (0..self.len() as u32).filter(|&id| self.token_bytes(id) == text);
        let mut first = None;
        for id in matches {
            if self.kind(id) == TokenKind::Control {
                return Some(id);
            }
            first.get_or_insert(id);
        }
        first
    }
}
