//! Vocabularies from Hugging Face `tokenizer.json` files.
//!
//! ```
//! use stencil_mask::{TokenKind, Vocabulary};
//! let json = r#"{
//!   "added_tokens": [{"id": 0, "content": "<|endoftext|>", "special": true}],
//!   "pre_tokenizer": {"type": "ByteLevel"},
//!   "model": {"type": "BPE", "vocab": {"<|endoftext|>": 0, "Ġthe": 1}, "merges": []}
//! }"#;
//! let vocab = Vocabulary::from_tokenizer_json_str(json, None).unwrap();
//! assert_eq!(vocab.token_bytes(1), b" the");
//! assert_eq!(vocab.kind(0), TokenKind::Control);
//! assert_eq!(vocab.eos_ids(), &[0]);
//! ```

use std::path::Path;

use serde_json::Value;
use thiserror::Error;

use super::gguf::{gpt2_char_to_byte, gpt2_decode, parse_byte_token, unescape_spm, EOG_TEXTS};
use super::{TokenKind, VocabError, Vocabulary};

/// Errors reading a tokenizer.json.
#[derive(Debug, Error)]
pub enum HfError {
    /// The file could not be read.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The file is not JSON.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but not a tokenizer.json this reader knows.
    #[error("unsupported tokenizer.json: {0}")]
    Format(String),
    /// The tokens make no valid vocabulary.
    #[error(transparent)]
    Vocab(#[from] VocabError),
}

/// The largest token id accepted (a hostile file could name any u32).
const MAX_ID: u64 = 1 << 24;

impl Vocabulary {
    /// The vocabulary of a Hugging Face tokenizer.json, with the EOS ids found by name
    /// (the end-of-generation texts llama.cpp knows, [`super::gguf::EOG_TEXTS`]).
    ///
    /// Byte-level tokenizers (a `ByteLevel` pre-tokenizer or decoder) have their token
    /// texts mapped back to bytes (`Ġ` → space); SentencePiece-style ones (`Metaspace`, or
    /// a `▁` replacement) have `▁` → space, and with `byte_fallback` their `<0xHH>` tokens
    /// are [`TokenKind::Byte`]. Added tokens are [`TokenKind::Control`] when `special`,
    /// [`TokenKind::UserDefined`] otherwise, with their content as bytes. Ids no token
    /// names are [`TokenKind::Unused`] with no bytes.
    pub fn from_tokenizer_json(path: impl AsRef<Path>) -> Result<Self, HfError> {
        Self::from_tokenizer_json_str(&std::fs::read_to_string(path)?, None)
    }

    /// [`Vocabulary::from_tokenizer_json`] with the caller's EOS ids (for instance from
    /// generation_config.json's `eos_token_id`).
    pub fn from_tokenizer_json_with_eos(path: impl AsRef<Path>, eos: &[u32]) -> Result<Self, HfError> {
        Self::from_tokenizer_json_str(&std::fs::read_to_string(path)?, Some(eos))
    }

    /// [`Vocabulary::from_tokenizer_json`] from the JSON text; `eos: None` finds the EOS
    /// ids by name.
    pub fn from_tokenizer_json_str(json: &str, eos: Option<&[u32]>) -> Result<Self, HfError> {
        let HfTokens { mut tokens, texts } = HfTokens::new(json)?;
        let eos = match eos {
            Some(ids) => ids.to_vec(),
            None => (0..texts.len())
                .filter(|&id| texts[id].as_deref().is_some_and(|t| EOG_TEXTS.contains(&t)))
                .map(|id| id as u32)
                .collect(),
        };
        // As llama.cpp does, an end-of-generation token is never text.
        for &id in &eos {
            if let Some(t) = tokens.get_mut(id as usize) {
                t.1 = TokenKind::Control;
            }
        }
        Ok(Vocabulary::new(tokens, eos)?)
    }
}

/// The tokens of a tokenizer.json: bytes and kind, and text, per id.
pub(crate) struct HfTokens {
    pub tokens: Vec<(Vec<u8>, TokenKind)>,
    pub texts: Vec<Option<String>>,
}

impl HfTokens {
    pub fn new(json: &str) -> Result<Self, HfError> {
        let root: Value = serde_json::from_str(json)?;
        let model = root.get("model").ok_or_else(|| format_err("no \"model\""))?;
        let mut types = Vec::new();
        for part in ["normalizer", "pre_tokenizer", "decoder"] {
            collect_types(&root[part], &mut types);
        }
        let byte_level = types.iter().any(|t| t == "ByteLevel");
        let metaspace = !byte_level
            && (types.iter().any(|t| t == "Metaspace")
                || ["normalizer", "decoder"].iter().any(|p| root[*p].to_string().contains('\u{2581}')));
        let byte_fallback =
            model["byte_fallback"].as_bool().unwrap_or(false) || types.iter().any(|t| t == "ByteFallback");

        // (id, text) of the model's own tokens.
        let mut entries: Vec<(u64, String)> = Vec::new();
        match &model["vocab"] {
            Value::Object(map) => {
                for (text, id) in map {
                    let id = id.as_u64().ok_or_else(|| format_err("a vocab id is not a number"))?;
                    entries.push((id, text.clone()));
                }
            }
            // Unigram: [[piece, score], ...] in id order.
            Value::Array(list) => {
                for (id, item) in list.iter().enumerate() {
                    let text = item[0].as_str().ok_or_else(|| format_err("bad unigram entry"))?;
                    entries.push((id as u64, text.to_string()));
                }
            }
            _ => return Err(format_err("no \"model.vocab\"")),
        }
        let mut added: Vec<(u64, String, bool)> = Vec::new();
        if let Some(list) = root["added_tokens"].as_array() {
            for t in list {
                let id = t["id"].as_u64().ok_or_else(|| format_err("added token without id"))?;
                let text = t["content"].as_str().ok_or_else(|| format_err("added token without content"))?;
                added.push((id, text.to_string(), t["special"].as_bool().unwrap_or(false)));
            }
        }
        let max_id = entries.iter().map(|e| e.0).chain(added.iter().map(|a| a.0)).max();
        let len = match max_id {
            None => return Err(VocabError::Empty.into()),
            Some(id) if id >= MAX_ID => return Err(format_err("token id too large")),
            Some(id) => id as usize + 1,
        };

        let table = gpt2_char_to_byte();
        let mut texts: Vec<Option<String>> = vec![None; len];
        let mut tokens: Vec<(Vec<u8>, TokenKind)> = vec![(Vec::new(), TokenKind::Unused); len];
        for (id, text) in entries {
            let id = id as usize;
            tokens[id] = match parse_byte_token(text.as_bytes()) {
                Some(b) if byte_fallback => (vec![b], TokenKind::Byte),
                _ if byte_level => (gpt2_decode(text.as_bytes(), &table), TokenKind::Normal),
                _ if metaspace => (unescape_spm(text.as_bytes()), TokenKind::Normal),
                _ => (text.as_bytes().to_vec(), TokenKind::Normal),
            };
            texts[id] = Some(text);
        }
        for (id, text, special) in added {
            let kind = if special { TokenKind::Control } else { TokenKind::UserDefined };
            tokens[id as usize] = (text.as_bytes().to_vec(), kind);
            texts[id as usize] = Some(text);
        }
        Ok(HfTokens { tokens, texts })
    }
}

fn format_err(msg: &str) -> HfError {
    HfError::Format(msg.to_string())
}

/// The `"type"` names of a component and of everything nested in it.
fn collect_types(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            if let Some(Value::String(t)) = map.get("type") {
                out.push(t.clone());
            }
            map.values().for_each(|v| collect_types(v, out));
        }
        Value::Array(list) => list.iter().for_each(|v| collect_types(v, out)),
        _ => {}
    }
}
