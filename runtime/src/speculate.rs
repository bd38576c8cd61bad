//! Speculative decoding: drafts verified in the same forward pass as the step's own tokens.
//! Two drafters: prompt lookup (below: copies from earlier in the prompt and the output) and
//! a draft model ([`crate::draft`]: any GGUF with the target's vocabulary, verified by the
//! exact rule of [`stencil_sampling::speculative`]). Beam search does not speculate
//! ([`RuntimeError::SpeculationUnsupported`](crate::RuntimeError::SpeculationUnsupported)).
//!
//! **Drafting** (no model): the longest suffix of the tokens so far, `max_match` tokens at
//! most and `min_match` at least, that also occurs earlier (the latest occurrence wins)
//! proposes the tokens that followed it, up to `max_draft`. Under a grammar the draft is
//! walked through a forked matcher: it ends at the first token the grammar refuses, and the
//! tokens the grammar forces after a drafted token are put in as forced (where the copied
//! text goes the same way they are skipped in it; where it does not, the draft ends).
//!
//! **Verification** is exact: a prompt-lookup draft is a one-hot proposal `q`, so accepting
//! draft token `d` with probability `min(1, p(d)/q(d)) = p(d)` and, on rejection, drawing
//! from `norm(max(0, p − q))` (which is `p` without `d`) is the same as drawing from `p` and
//! keeping `d` when the draw is `d`. The decode loop does exactly that, with the whole
//! sampling pipeline and the mask of the matcher advanced through the accepted drafts, so
//! each sampled position takes the same draw as without speculation: seeded and greedy runs
//! give the output they give without it, token for token (as long as llama.cpp's logits
//! for a position verified in a batch equal those of one-token decoding).
//!
//! **Draft length**: at most `max_draft` tokens. A prompt-lookup draft is then cut where
//! its expected gain is largest ([`policy`]: the acceptance of earlier drafts found the same
//! way, against the measured cost of a forward pass's rows; a draft may be dropped whole).
//! A draft model's drafts adapt to acceptance: after a step whose draft was wholly rejected
//! the next draft is at most half as long (never below 1), after a fully accepted one it
//! may grow back by one, up to `max_draft`.

mod policy;

use serde::Serialize;
use stencil_mask::{Matcher, Vocabulary};

pub(crate) use policy::{cut, LookupStats, PassCost};

/// Speculation settings of a request.
///
/// ```
/// let s = stencil_runtime::Speculation::prompt_lookup();
/// let stencil_runtime::Speculation::PromptLookup(p) = s else { unreachable!() };
/// assert_eq!((p.max_draft, p.min_match, p.max_match), (8, 1, 4));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Speculation {
    /// Drafts copied from the prompt and the output (see the module docs).
    PromptLookup(PromptLookup),
    /// Drafts from the draft model attached to the session
    /// ([`Session::attach_draft`](crate::Session::attach_draft)).
    DraftModel(DraftModel),
}

impl Speculation {
    /// Prompt lookup with the default settings.
    pub fn prompt_lookup() -> Self {
        Speculation::PromptLookup(PromptLookup::default())
    }

    /// Draft-model speculation with the default settings.
    pub fn draft_model() -> Self {
        Speculation::DraftModel(DraftModel::default())
    }

    /// Draft tokens per step at most.
    pub fn max_draft(&self) -> usize {
        match self {
            Speculation::PromptLookup(p) => p.max_draft,
            Speculation::DraftModel(d) => d.max_draft,
        }
    }
}

/// Draft-model settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DraftModel {
    /// Draft tokens per step at most (default 4; it adapts as prompt lookup's does).
    pub max_draft: usize,
}

impl Default for DraftModel {
    fn default() -> Self {
        DraftModel { max_draft: 4 }
    }
}

/// Prompt-lookup settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PromptLookup {
    /// Draft tokens per step at most (default 8).
    pub max_draft: usize,
    /// The shortest suffix that may match (default 1).
    pub min_match: usize,
    /// The longest suffix tried (default 4).
    pub max_match: usize,
    /// Verify only the part of a draft with the largest expected time saved (default
    /// `true`; see `speculate/policy.rs`), from the session's acceptance counts and its
    /// measured pass times. `false`: every draft is verified whole, so that what is
    /// drafted does not depend on timings (tests; hardware where a pass's extra rows are
    /// nearly free, such as a GPU).
    pub cut: bool,
}

impl Default for PromptLookup {
    fn default() -> Self {
        PromptLookup { max_draft: 8, min_match: 1, max_match: 4, cut: true }
    }
}

/// A proposed continuation: tokens, each either to be verified by sampling or forced.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Draft {
    pub tokens: Vec<u32>,
    /// Per token: the grammar forces it (no sampling, no check).
    pub forced: Vec<bool>,
    /// Per token: the distribution it was drawn from (a draft model's); `None` for a copy
    /// (prompt lookup: a one-hot proposal) or a forced token.
    pub proposals: Vec<Option<Vec<(u32, f64)>>>,
    /// How a prompt-lookup draft was found.
    pub origin: Option<LookupOrigin>,
}

impl Draft {
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Drafted tokens that will be checked by sampling.
    pub fn sampled(&self) -> usize {
        self.forced.iter().filter(|&&f| !f).count()
    }

    fn push(&mut self, token: u32, forced: bool) {
        self.tokens.push(token);
        self.forced.push(forced);
        self.proposals.push(None);
    }

    /// Keeps the first `len` tokens.
    pub fn truncate(&mut self, len: usize) {
        self.tokens.truncate(len);
        self.forced.truncate(len);
        self.proposals.truncate(len);
    }

    /// A token drawn from `q`.
    pub fn push_drafted(&mut self, token: u32, q: Vec<(u32, f64)>) {
        self.push(token, false);
        *self.proposals.last_mut().expect("just pushed") = Some(q);
    }

    /// A token the grammar forces.
    pub fn push_forced(&mut self, token: u32) {
        self.push(token, true);
    }

    /// The distribution token `j` was drawn from, if a draft model drew it.
    pub fn proposal(&self, j: usize) -> Option<&[(u32, f64)]> {
        self.proposals.get(j).and_then(|q| q.as_deref())
    }

    /// Where the draft is checked: the indices of its sampled tokens (each drawn at the
    /// position before it), then its end (the bonus draw after a wholly accepted draft).
    pub fn checkpoints(&self) -> Vec<usize> {
        (0..self.len()).filter(|&j| !self.forced[j]).chain(std::iter::once(self.len())).collect()
    }
}

/// A prompt-lookup proposal: the tokens that followed the match, and how it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    pub tokens: Vec<u32>,
    pub origin: LookupOrigin,
}

/// How a prompt-lookup draft was found (its first token's acceptance is counted apart for
/// each: see [`Speculation`]'s module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LookupOrigin {
    /// Tokens of the matched suffix.
    pub matched: usize,
    /// The proposal is copied from the prompt (its first `prompt_len` tokens), not from
    /// the output.
    pub in_prompt: bool,
}

/// The tokens that followed the latest earlier occurrence of the longest suffix of
/// `tokens` (between `min_match` and `max_match` long), at most `limit` of them; `None`
/// when no suffix occurs earlier. `tokens` starts with the prompt's `prompt_len` tokens.
///
/// ```
/// # use stencil_runtime::{lookup, LookupOrigin, PromptLookup};
/// let p = PromptLookup { max_draft: 3, min_match: 2, max_match: 3, cut: true };
/// //           a  b  c  d  x  a  b
/// let tokens = [1, 2, 3, 4, 9, 1, 2];
/// let found = lookup(&tokens, 5, &p, 3).unwrap();
/// assert_eq!(found.tokens, vec![3, 4, 9]);
/// assert_eq!(found.origin, LookupOrigin { matched: 2, in_prompt: true });
/// assert!(lookup(&[1, 2, 3], 3, &p, 3).is_none());
/// ```
pub fn lookup(tokens: &[u32], prompt_len: usize, params: &PromptLookup, limit: usize) -> Option<Lookup> {
    let n = tokens.len();
    let limit = limit.min(params.max_draft);
    if limit == 0 {
        return None;
    }
    (params.min_match.max(1)..=params.max_match).rev().filter(|&len| len < n).find_map(|len| {
        let suffix = &tokens[n - len..];
        // The latest earlier occurrence whose continuation is not the suffix itself.
        let start = (0..n - len).rev().find(|&s| &tokens[s..s + len] == suffix)?;
        let from = start + len;
        Some(Lookup {
            tokens: tokens[from..(from + limit).min(n)].to_vec(),
            origin: LookupOrigin { matched: len, in_prompt: from < prompt_len },
        })
    })
}

/// `proposal` as a draft the grammar allows (see the module docs): cut at the first
/// refused token or EOS, forced tokens inserted, at most `limit` tokens in all.
/// `forced_room(k)` is how many forced tokens may follow a sampled token with `k` draft
/// tokens before it (what the decode loop would allow there without speculation: a draft
/// whose forced run would be cut ends before that token instead). `matcher` is the state
/// after the step's own tokens; it is forked, not changed.
pub(crate) fn grammar_draft(
    proposal: &[u32],
    matcher: Option<&Matcher>,
    vocab: &Vocabulary,
    fast_forward: bool,
    limit: usize,
    forced_room: impl Fn(usize) -> usize,
) -> Draft {
    let mut draft = Draft::default();
    let mut fork = matcher.map(Matcher::fork);
    let mut i = 0;
    while i < proposal.len() && draft.len() < limit {
        let token = proposal[i];
        if vocab.is_eos(token) {
            break;
        }
        let Some(m) = fork.as_mut() else {
            draft.push(token, false);
            i += 1;
            continue;
        };
        if m.must_end() || m.accept_token(token).is_err() {
            break;
        }
        let forced = if fast_forward { m.forced_tokens(forced_room(draft.len())) } else { Vec::new() };
        if draft.len() + 1 + forced.len() > limit || m.accept_tokens(&forced).is_err() {
            break;
        }
        draft.push(token, false);
        i += 1;
        forced.iter().for_each(|&f| draft.push(f, true));
        if !forced.is_empty() {
            // Copying goes on only where the copied text goes the grammar's way.
            if proposal.get(i..i + forced.len()) != Some(&forced[..]) {
                break;
            }
            i += forced.len();
        }
    }
    draft
}

/// Speculation counts for the record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SpeculationStats {
    /// Draft tokens proposed for checking by sampling (forced ones not counted).
    pub drafted: usize,
    /// Of those, accepted.
    pub accepted: usize,
    /// `accepted / drafted` (0 when nothing was drafted).
    pub acceptance_rate: f64,
    /// Accepted draft tokens per step that had a draft.
    pub mean_accepted_length: f64,
    /// Steps that had a draft.
    pub draft_steps: usize,
    /// Draft-model forward passes (its prefills included; 0 for prompt lookup).
    pub draft_passes: usize,
}

impl SpeculationStats {
    pub(crate) fn finish(mut self) -> Self {
        self.acceptance_rate = if self.drafted == 0 { 0.0 } else { self.accepted as f64 / self.drafted as f64 };
        self.mean_accepted_length =
            if self.draft_steps == 0 { 0.0 } else { self.accepted as f64 / self.draft_steps as f64 };
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_takes_the_longest_suffix_and_its_latest_occurrence() {
        let p = PromptLookup { max_draft: 4, min_match: 1, max_match: 3, cut: true };
        let tokens = |found: Option<Lookup>| found.map(|f| f.tokens).unwrap_or_default();
        // "7 8" occurs twice; the latest occurrence (at 4) is followed by 5.
        let found = lookup(&[7, 8, 1, 2, 7, 8, 5, 6, 7, 8], 2, &p, 4).unwrap();
        assert_eq!(found.tokens, vec![5, 6, 7, 8]);
        assert_eq!(found.origin, LookupOrigin { matched: 2, in_prompt: false });
        // The 3-token suffix "1 7 8" beats the 2-token one; it lies in the prompt.
        let found = lookup(&[1, 7, 8, 9, 3, 7, 8, 4, 1, 7, 8], 8, &p, 2).unwrap();
        assert_eq!(found.tokens, vec![9, 3]);
        assert_eq!(found.origin, LookupOrigin { matched: 3, in_prompt: true });
        // Too short a match: nothing.
        let strict = PromptLookup { min_match: 3, ..p };
        assert!(lookup(&[5, 6, 1, 5, 6], 0, &strict, 4).is_none());
        assert!(tokens(lookup(&[], 0, &p, 4)).is_empty());
        assert!(lookup(&[1, 2, 1, 2], 0, &p, 0).is_none());
    }

    #[test]
    fn grammar_drafts_stop_at_refused_tokens_and_take_forced_ones() {
        let (vocab, tok) = stencil_test_support::fixtures::smollm2();
        let g = stencil_grammar::parse_gbnf(r#"root ::= "{\"name\": \"" [a-z]+ "\", \"age\": " [0-9]+ "}""#).unwrap();
        let g = stencil_mask::CompiledGrammar::new(&g, vocab.clone()).unwrap();
        let mut m = Matcher::new(g);
        m.accept_tokens(&tok.encode("{\"name\": \"").unwrap()).unwrap();
        // Copying `ada", "age": 3` (as the text would tokenize) is drafted up to the quote,
        // then the forced `", "age": ` goes in as forced.
        let proposal = tok.encode("ada\", \"age\": 36}").unwrap();
        let draft = grammar_draft(&proposal, Some(&m), &vocab, true, 32, |_| 64);
        let text: Vec<u8> = draft.tokens.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
        assert!(String::from_utf8_lossy(&text).starts_with("ada\""), "{:?}", String::from_utf8_lossy(&text));
        assert!(draft.forced.iter().any(|&f| f), "the grammar forces text after the name");
        // A proposal the grammar refuses at once gives nothing.
        let refused = tok.encode("42").unwrap();
        assert!(grammar_draft(&refused, Some(&m), &vocab, true, 8, |_| 64).is_empty());
        // EOS ends a draft; the limit holds.
        assert!(grammar_draft(&proposal, Some(&m), &vocab, true, 2, |_| 64).len() <= 2);
        assert_eq!(grammar_draft(&[vocab.eos_ids()[0]], None, &vocab, true, 8, |_| 64), Draft::default());
        assert_eq!(grammar_draft(&[5, 6], None, &vocab, true, 8, |_| 64).checkpoints(), vec![0, 1, 2]);
    }
}
