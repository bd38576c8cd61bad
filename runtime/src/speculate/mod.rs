//! Speculative decoding: drafts verified in the same forward pass as the step's own tokens.
//! Two drafters: prompt lookup (below: copies from earlier in the prompt and the output) and
//! a draft model (`draft.rs`: any GGUF with the target's vocabulary, verified by the
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
//! **Flash attention** ([`SessionOptions::flash_attention`](crate::SessionOptions::flash_attention)):
//! llama.cpp's CPU kernel evaluates the query rows of a pass one by one, so a verified row
//! costs a whole attention pass, and only likely drafts pay; without it attention is
//! matrix products over all rows, verifying is much cheaper (SmolLM2 on copy-heavy
//! extractions: 1.27× → 1.75× over plain decoding, BENCHMARKS.md), but a row verified in a
//! batch no longer rounds like a one-token step, the models' int8-quantized activations
//! magnify that to margins that move by up to about 0.6 nats, and greedy output may part
//! from the output without speculation at a near-tie (`runtime/tests/batch.rs` bounds the
//! parting margins, 0.05–0.07 nats, by rounding noise measured on other tasks; turning
//! flash attention off moves margins as much and parts the output sooner).
//!
//! **Draft length**: at most `max_draft` tokens. A prompt-lookup draft is then cut where
//! its expected gain is largest ([`policy`]: the acceptance of earlier drafts found the same
//! way, against the measured cost of a forward pass's rows; a draft may be dropped whole).
//! A draft model's drafts adapt to acceptance: after a step whose draft was wholly rejected
//! the next draft is at most half as long (never below 1), after a fully accepted one it
//! may grow back by one, up to `max_draft`. `PromptLookup::cut = false` verifies every
//! draft whole: what is drafted then depends on the text alone, not on timings (tests; a
//! GPU, where extra rows are nearly free). Drafts are made at the start of a step, for
//! every live sequence, and go into the same forward pass as the step's own tokens.

mod draft;
mod lookup;
mod policy;

use serde::Serialize;

pub(crate) use draft::{draft, DraftContext, DraftStart};
pub(crate) use lookup::grammar_draft;
pub use lookup::{lookup, Lookup, LookupOrigin};
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
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Draft {
    pub tokens: Vec<u32>,
    /// Per token: the grammar forces it (no sampling, no check).
    pub forced: Vec<bool>,
    /// Per token: the distribution it was drawn from (a draft model's); `None` for a copy
    /// (prompt lookup: a one-hot proposal) or a forced token.
    pub proposals: Vec<Option<Vec<(u32, f64)>>>,
    /// How a prompt-lookup draft was found.
    pub origin: Option<LookupOrigin>,
    /// Whether the position after the last token is checked too (the bonus draw after a
    /// wholly accepted draft). Not after a drafted EOS, nor after a token whose forced
    /// tokens did not fit (the loop fast-forwards after it instead).
    pub bonus: bool,
}

impl Default for Draft {
    fn default() -> Self {
        Draft { tokens: Vec::new(), forced: Vec::new(), proposals: Vec::new(), origin: None, bonus: true }
    }
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

    pub(crate) fn push(&mut self, token: u32, forced: bool) {
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
    /// position before it), then its end (the bonus draw after a wholly accepted draft)
    /// unless [`bonus`](Self::bonus) is off.
    pub fn checkpoints(&self) -> Vec<usize> {
        let end = self.bonus.then_some(self.len());
        (0..self.len()).filter(|&j| !self.forced[j]).chain(end).collect()
    }

    /// Whether token `j`, the last, was drafted without the forced tokens that follow it
    /// (they did not fit): once accepted, the loop fast-forwards after it.
    pub fn open_tail(&self, j: usize) -> bool {
        !self.bonus && j + 1 == self.len()
    }
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
