//! llguidance set up on Stencil's own vocabulary.

use std::sync::Arc;

use anyhow::Result;
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use stencil_mask::{TokenKind, Vocabulary};
use toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};

/// A `TokEnv` over exactly Stencil's token bytes and EOS ids.
///
/// * Text tokens (normal, byte-fallback, user-defined) keep their bytes; byte-fallback
///   tokens are their one byte, as toktrie's own HF import makes them.
/// * Control and unused tokens get toktrie's special-token marker (a 0xFF prefix byte)
///   before their name, so that no grammar text matches them, as in toktrie's HF import.
/// * EOS: all of Stencil's EOS ids (`with_eos_tokens`).
///
/// `ApproximateTokEnv` says its tokenizer is not canonical, which turns off llguidance's
/// fast-forward: `compute_mask` then always computes the full mask (with a canonical
/// tokenizer it returns a one-token mask whenever the grammar forces bytes).
pub fn tok_env(vocab: &Vocabulary) -> TokEnv {
    let n = vocab.len();
    let words: Vec<Vec<u8>> = (0..n as u32)
        .map(|id| {
            let b = vocab.token_bytes(id);
            match vocab.kind(id) {
                TokenKind::Normal | TokenKind::Byte | TokenKind::UserDefined => b.to_vec(),
                TokenKind::Control | TokenKind::Unused => {
                    let mut w = Vec::with_capacity(b.len() + 1);
                    w.push(TokTrie::SPECIAL_TOKEN_MARKER);
                    w.extend_from_slice(b);
                    w
                }
            }
        })
        .collect();
    let eos = vocab.eos_ids();
    let info = TokRxInfo::new(n as u32, eos[0]);
    let trie = TokTrie::from(&info, &words).with_eos_tokens(eos);
    Arc::new(ApproximateTokEnv::new(trie))
}

/// The per-vocabulary parser factory: default slices and default `ParserLimits`, logging off.
pub fn factory(env: &TokEnv) -> Result<ParserFactory> {
    let mut f = ParserFactory::new_simple(env)?;
    f.quiet();
    Ok(f)
}

/// Lark text → a ready matcher (the per-grammar work llguidance does).
pub fn compile(factory: &ParserFactory, lark: &str) -> Result<Matcher> {
    let parser = factory.create_parser(TopLevelGrammar::from_lark(lark.to_string()))?;
    let m = Matcher::new(Ok(parser));
    if let Some(e) = m.get_error() {
        anyhow::bail!("{e}");
    }
    Ok(m)
}
