//! Reasoning budgets in the loop: a structural tag's `any_text` with `max_tokens`
//! ([`stencil_structural::Budget`]) is counted here in model tokens, and once spent, the
//! text that closes it (its tag's end, or the rest of it when the model has begun writing
//! it) is forced, so a thinking model cannot spend the whole `max_tokens` thinking.
//!
//! Each sequence whose request carries a tag keeps a reader of its output
//! ([`stencil_structural::Reader`]: the same compiled definition that constrains it), fed
//! every committed token's bytes. A token counts against a budget when it puts text into
//! the budgeted text (or its tag's end, being written). Drafts inside a budgeted text are kept short enough that a
//! wholly accepted draft and its bonus token do not overspend it.

use std::sync::Arc;

use stencil_mask::{Matcher, Vocabulary};
use stencil_structural::{Close, CompiledTag, Reader};

use crate::error::{Result, RuntimeError};

/// One sequence's budgets.
pub(super) struct Budgets {
    tag: Arc<CompiledTag>,
    reader: Reader<'static>,
    /// The budgeted text the output is in (its budget's index, where it began), and the
    /// tokens spent in it.
    span: Option<(u32, usize)>,
    spent: usize,
}

impl Budgets {
    /// Budgets for a request under `tag`; `None` when the tag has none.
    pub(super) fn new(tag: &Arc<CompiledTag>) -> Result<Option<Budgets>> {
        if tag.budgets.is_empty() {
            return Ok(None);
        }
        let reader = tag.shared_reader().map_err(|e| RuntimeError::Structural(e.to_string()))?;
        Ok(Some(Budgets { tag: tag.clone(), reader, span: None, spent: 0 }))
    }

    /// Reads a committed token's bytes and counts it.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        self.reader.feed(bytes).map_err(|e| RuntimeError::Structural(e.to_string()))?;
        match self.reader.budget() {
            Some(at) if self.span == Some((at.budget, at.start)) => self.spent += 1,
            // A token that only opens the text (its tag's begin) puts nothing in it.
            Some(at) => {
                let into = self.reader.text().len() > at.start;
                (self.span, self.spent) = (Some((at.budget, at.start)), usize::from(into));
            }
            None => (self.span, self.spent) = (None, 0),
        }
        Ok(())
    }

    /// Tokens the budgeted text the output is in may still take (`None` outside one).
    pub(super) fn left(&self) -> Option<usize> {
        let (b, _) = self.span?;
        Some((self.tag.budgets[b as usize].max_tokens as usize).saturating_sub(self.spent))
    }

    /// The tokens that close the budgeted text the output is in, once its budget is
    /// spent: its close as one vocabulary token where there is one, else the longest tokens
    /// `matcher` accepts, in turn. Empty when there is nothing to close (a budgeted text in
    /// no tag) or the budget is not spent.
    pub(super) fn close(&self, matcher: &Matcher, vocab: &Vocabulary) -> Vec<u32> {
        let (Some(0), Some(at)) = (self.left(), self.reader.budget()) else { return Vec::new() };
        match &self.tag.budgets[at.budget as usize].close {
            Some(Close::Token(_, Some(id))) => vec![*id],
            _ => cover(at.close.as_bytes(), matcher, vocab),
        }
    }
}

/// Tokens spelling `text` that `matcher` accepts one after the other: at each point the
/// longest vocabulary token that is a prefix of what is left and keeps the matcher alive.
/// Stops early (a shorter cover) where none is accepted.
fn cover(text: &[u8], matcher: &Matcher, vocab: &Vocabulary) -> Vec<u32> {
    let mut fork = matcher.fork();
    let mut out = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let mut best: Option<(usize, u32)> = None;
        for id in 0..vocab.len() as u32 {
            let bytes = vocab.token_bytes(id);
            if bytes.is_empty() || bytes.len() > rest.len() || best.is_some_and(|(n, _)| n >= bytes.len()) {
                continue;
            }
            if rest.starts_with(bytes) && fork.fork().accept_token(id).is_ok() {
                best = Some((bytes.len(), id));
            }
        }
        let Some((n, id)) = best else { break };
        if fork.accept_token(id).is_err() {
            break;
        }
        out.push(id);
        at += n;
    }
    out
}
