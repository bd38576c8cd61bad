//! Loading a vocabulary (and its tokenizer) from a GGUF file or a tokenizer.json, and the
//! tiny built-in vocabulary `check` uses without one.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stencil_grammar::{Expr, Grammar, TokenName};
use stencil_mask::vocab::gguf::{self, GgufMetadata};
use stencil_mask::vocab::Tokenizer;
use stencil_mask::{TokenKind, Vocabulary};

use crate::error::CliError;

/// The formats of vocabulary files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// GGUF, plain or gzip-compressed.
    Gguf,
    /// A Hugging Face tokenizer.json.
    TokenizerJson,
}

/// A loaded vocabulary, with what is needed to build its tokenizer on demand.
pub struct LoadedVocab {
    pub path: PathBuf,
    pub vocab: Arc<Vocabulary>,
    meta: Option<GgufMetadata>,
}

impl LoadedVocab {
    /// Reads the vocabulary of a GGUF file (.gguf, .gguf.gz) or a tokenizer.json, told
    /// apart by their first bytes (and the file name when those say nothing).
    pub fn load(path: &Path) -> Result<Self, CliError> {
        let read_err = |source| CliError::Read { what: "vocabulary", path: path.to_path_buf(), source };
        let mut head = Vec::with_capacity(64);
        std::fs::File::open(path).and_then(|f| f.take(64).read_to_end(&mut head)).map_err(read_err)?;
        let format = detect(path, &head).ok_or_else(|| CliError::UnknownVocabFormat { path: path.to_path_buf() })?;
        match format {
            Format::Gguf => {
                let gguf_err = |source| CliError::Gguf { path: path.to_path_buf(), source };
                let meta = gguf::read_metadata_file(path).map_err(gguf_err)?;
                let vocab = Vocabulary::from_gguf_metadata(&meta).map_err(gguf_err)?;
                Ok(LoadedVocab { path: path.to_path_buf(), vocab: Arc::new(vocab), meta: Some(meta) })
            }
            Format::TokenizerJson => {
                let vocab = Vocabulary::from_tokenizer_json(path)
                    .map_err(|source| CliError::TokenizerJson { path: path.to_path_buf(), source })?;
                Ok(LoadedVocab { path: path.to_path_buf(), vocab: Arc::new(vocab), meta: None })
            }
        }
    }

    /// The vocabulary's own tokenizer.
    pub fn tokenizer(&self) -> Result<Tokenizer, CliError> {
        let err = |source| CliError::Tokenizer { path: self.path.clone(), source };
        match &self.meta {
            Some(meta) => Tokenizer::from_gguf_metadata(meta).map_err(err),
            None => Tokenizer::from_tokenizer_json(&self.path).map_err(err),
        }
    }
}

/// The format of a vocabulary file from its first bytes, else its name.
fn detect(path: &Path, head: &[u8]) -> Option<Format> {
    if head.starts_with(b"GGUF") || head.starts_with(&[0x1f, 0x8b]) {
        return Some(Format::Gguf);
    }
    let text = head.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(head);
    if text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return Some(Format::TokenizerJson);
    }
    let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    if name.ends_with(".json") {
        Some(Format::TokenizerJson)
    } else if name.ends_with(".gguf") || name.ends_with(".gguf.gz") {
        Some(Format::Gguf)
    } else {
        None
    }
}

/// The largest token id `<[id]>` the built-in vocabulary is widened to cover.
const BUILTIN_MAX_ID: u32 = 1 << 20;

/// The built-in vocabulary for `check` without `--vocab`: the 256 single bytes as text
/// tokens (ids 0 to 255), an end-of-sequence control token, and, so that token
/// terminals compile, each `<text>` the grammar names as a control token and unused
/// slots up to the largest `<[id]>` it names.
pub fn builtin(grammar: &Grammar) -> Vocabulary {
    let mut tokens: Vec<(Vec<u8>, TokenKind)> = (0..=255u8).map(|b| (vec![b], TokenKind::Normal)).collect();
    tokens.push((b"</s>".to_vec(), TokenKind::Control));
    let eos = vec![256];
    let mut texts = Vec::new();
    let mut max_id = None::<u32>;
    for rule in &grammar.rules {
        collect_tokens(&rule.body, &mut texts, &mut max_id);
    }
    texts.sort();
    texts.dedup();
    for t in texts {
        if t.as_bytes() != b"</s>" {
            tokens.push((t.into_bytes(), TokenKind::Control));
        }
    }
    if let Some(id) = max_id.filter(|&id| id <= BUILTIN_MAX_ID) {
        while tokens.len() <= id as usize {
            tokens.push((Vec::new(), TokenKind::Unused));
        }
    }
    Vocabulary::new(tokens, eos).expect("the built-in vocabulary is valid")
}

fn collect_tokens(e: &Expr, texts: &mut Vec<String>, max_id: &mut Option<u32>) {
    match e {
        Expr::Token(t) => match &t.token {
            TokenName::Text(s) => texts.push(s.clone()),
            TokenName::Id(id) => *max_id = Some(max_id.map_or(*id, |m| m.max(*id))),
        },
        Expr::Seq(v) | Expr::Alt(v) => v.iter().for_each(|e| collect_tokens(e, texts, max_id)),
        Expr::Repeat { expr, .. } => collect_tokens(expr, texts, max_id),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_formats() {
        let p = Path::new("x");
        assert_eq!(detect(p, b"GGUF\x03\0\0\0"), Some(Format::Gguf));
        assert_eq!(detect(p, &[0x1f, 0x8b, 8]), Some(Format::Gguf));
        assert_eq!(detect(p, b"  \n{\"model\""), Some(Format::TokenizerJson));
        assert_eq!(detect(Path::new("a.json"), b"garbage"), Some(Format::TokenizerJson));
        assert_eq!(detect(Path::new("a.GGUF"), b"garbage"), Some(Format::Gguf));
        assert_eq!(detect(p, b"garbage"), None);
    }

    #[test]
    fn builtin_vocab_has_grammar_tokens() {
        let g = stencil_grammar::parse_gbnf("root ::= <think> \"a\" <[300]>").unwrap();
        let v = builtin(&g);
        assert!(v.len() > 300);
        assert_eq!(v.find_token(b"<think>").map(|id| v.kind(id)), Some(TokenKind::Control));
        assert!(v.is_eos(256) && v.is_text(b'a' as u32));
    }
}
