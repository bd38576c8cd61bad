//! Speculative decoding with a draft model: a second GGUF with the target's vocabulary, in
//! its own llama.cpp context, drafts tokens under the grammar; the decode loop verifies them
//! in the target's forward pass with the exact rule of [`stencil_sampling::speculative`].
//!
//! - **Same vocabulary**: [`Session::attach_draft`] refuses a draft model whose tokens differ
//!   from the target's (bytes, kind, or count; the error names the first differing token).
//! - **KV per sequence**: the draft context holds, for each KV sequence id, the tokens its
//!   cells hold. Before drafting, a sequence's cells are brought to the target's history
//!   (the longest common prefix kept, or copied from another sequence that shares it, such
//!   as the prompt of N samples; the rest evaluated), so rejected drafts roll back by
//!   themselves at the next draft.
//! - **Drafting** ([`draft`]): up to `limit` tokens, each drawn from `q`, the draft model's
//!   distribution after the whole sampling pipeline (the request's parameters, the history
//!   with the tokens drafted so far, and the mask of a matcher forked and advanced through
//!   them), with the draft's own seeded generator. The grammar's forced tokens after a
//!   drafted token go in as forced (not verified). A draft ends at a completed grammar or
//!   when nothing can follow — decided before a draw. **A drawn token is never dropped**:
//!   whether a position is verified must not depend on the value drawn there, or the
//!   tokens that reach verification are no longer distributed as `q` (dropping a drawn EOS
//!   made a target's own-draft P(EOS) p(EOS)²). A drawn EOS ends the draft as its last
//!   token, and so does a token whose forced tokens do not fit the draft (without them;
//!   once verified, the loop fast-forwards after it as after any sampled token).
//! - **Verification** (in `decode/speculation.rs`): at each drafted token the target's `p` is computed
//!   under the mask of the matcher advanced through the accepted tokens; the token is
//!   accepted with probability `min(1, p/q)`, else replaced by a draw from
//!   `norm(max(0, p − q))`; after a wholly accepted draft the bonus token is drawn from `p`.
//!   Greedy decoding keeps a draft token iff it is the target's argmax, so the output is the
//!   output without speculation (as far as llama.cpp's batched logits equal its one-token
//!   logits).

use stencil_mask::{bitmask, Matcher, Vocabulary};
use stencil_sampling::{speculative, Sampler, TokenHistory};

use crate::decode::forward::{clear_seq, LlamaForward};
use crate::decode::{Forward, Row};
use crate::error::{Result, RuntimeError};
use crate::model::{Model, SessionOptions};
use crate::session::Session;
use crate::speculate::Draft;

/// Extra KV cells of the draft context per sequence: its drafts beyond the accepted tokens.
const DRAFT_CELLS_PER_SEQUENCE: u32 = 80;

/// The draft model's context and what each of its KV sequences holds.
pub(crate) struct DraftContext<'m> {
    forward: Box<dyn Forward + 'm>,
    n_batch: usize,
    /// The row of the last pass with the last token's logits.
    last_row: usize,
    /// Per KV sequence id: the tokens its cells hold, in order.
    held: Vec<Vec<u32>>,
    /// Forward passes run for drafting (prefills included), since the last `take_passes`.
    passes: usize,
}

impl<'m> Session<'m> {
    /// Runs `draft` next to this session's model for [`Speculation::DraftModel`] requests.
    /// The draft context gets this session's options (its KV cache a little larger: the
    /// drafts beyond the accepted tokens).
    ///
    /// # Errors
    ///
    /// [`RuntimeError::DraftVocabulary`] when the two vocabularies differ (naming the first
    /// token that differs), [`RuntimeError::Context`] when llama.cpp cannot make the context.
    ///
    /// [`Speculation::DraftModel`]: crate::Speculation::DraftModel
    pub fn attach_draft(&mut self, draft: &'m Model) -> Result<()> {
        same_vocabulary(&self.vocab, draft.vocab())?;
        let options = SessionOptions {
            n_ctx: self.options.n_ctx + DRAFT_CELLS_PER_SEQUENCE * self.options.n_seq_max.max(1),
            embeddings: false,
            ..self.options.clone()
        };
        let forward = LlamaForward::new(draft.context(&options)?, options.n_batch as usize, options.n_seq_max as usize);
        self.attach_draft_forward(Box::new(forward), draft.vocab())
    }

    /// [`attach_draft`](Self::attach_draft) for a draft model behind any [`Forward`] whose
    /// logits are `vocab`'s tokens (see [`Session::over`]).
    ///
    /// # Errors
    ///
    /// [`RuntimeError::DraftVocabulary`] when `vocab` is not the session's.
    pub fn attach_draft_forward(&mut self, forward: Box<dyn Forward + 'm>, vocab: &Vocabulary) -> Result<()> {
        same_vocabulary(&self.vocab, vocab)?;
        let n_seq = self.options.n_seq_max.max(1) as usize;
        self.draft = Some(DraftContext {
            forward,
            n_batch: self.options.n_batch.max(1) as usize,
            last_row: 0,
            held: vec![Vec::new(); n_seq],
            passes: 0,
        });
        Ok(())
    }

    /// Whether a draft model is attached ([`attach_draft`](Self::attach_draft)).
    pub fn has_draft(&self) -> bool {
        self.draft.is_some()
    }
}

/// The draft's vocabulary must be the target's, token for token.
fn same_vocabulary(target: &Vocabulary, draft: &Vocabulary) -> Result<()> {
    let differs = |id: u32| target.token_bytes(id) != draft.token_bytes(id) || target.kind(id) != draft.kind(id);
    let shared = target.len().min(draft.len()) as u32;
    let first = (0..shared).find(|&id| differs(id)).or((target.len() != draft.len()).then_some(shared));
    match first {
        None => Ok(()),
        Some(id) => {
            let show = |v: &Vocabulary| {
                if (id as usize) < v.len() {
                    format!("{:?}", String::from_utf8_lossy(v.token_bytes(id)))
                } else {
                    "none".to_string()
                }
            };
            Err(RuntimeError::DraftVocabulary {
                token: id,
                target: show(target),
                draft: show(draft),
                target_len: target.len(),
                draft_len: draft.len(),
            })
        }
    }
}

impl DraftContext<'_> {
    /// Brings KV sequence `seq` to hold exactly `tokens`, the logits of the last one in
    /// the batch's last row.
    fn sync(&mut self, seq: i32, tokens: &[u32]) -> Result<()> {
        let s = seq as usize;
        let common = |held: &[u32]| held.iter().zip(tokens).take_while(|(a, b)| a == b).count();
        // The last token is evaluated again, for its logits.
        let limit = tokens.len() - 1;
        let mut keep = common(&self.held[s]).min(limit);
        let donor = (0..self.held.len())
            .filter(|&o| o != s)
            .map(|o| (common(&self.held[o]).min(limit), o))
            .max()
            .filter(|&(k, _)| k > keep);
        if let Some((k, other)) = donor {
            clear_seq(&mut *self.forward, seq);
            self.forward.copy(other as i32, seq, 0, Some(k))?;
            keep = k;
        } else if !self.forward.remove(seq, keep, None) {
            clear_seq(&mut *self.forward, seq);
            keep = 0;
        }
        self.held[s].clear();
        self.held[s].extend_from_slice(&tokens[..keep]);
        let rest = tokens[keep..].to_vec();
        for piece in rest.chunks(self.n_batch) {
            self.extend(seq, piece)?;
        }
        Ok(())
    }

    /// Evaluates `tokens` after what `seq` holds; logits for the last one.
    fn extend(&mut self, seq: i32, tokens: &[u32]) -> Result<()> {
        let start = self.held[seq as usize].len();
        let rows: Vec<Row> = tokens
            .iter()
            .enumerate()
            .map(|(i, &token)| Row { token, pos: start + i, seq, logits: i + 1 == tokens.len() })
            .collect();
        self.forward.decode(&rows).map_err(|e| RuntimeError::Decode(format!("draft model: {e}")))?;
        self.last_row = rows.len() - 1;
        self.held[seq as usize].extend_from_slice(tokens);
        self.passes += 1;
        Ok(())
    }

    fn logits(&self) -> &[f32] {
        self.forward.logits(self.last_row)
    }

    /// Forgets every sequence.
    pub(crate) fn clear(&mut self) {
        self.forward.clear();
        self.held.iter_mut().for_each(Vec::clear);
    }

    /// Forgets what `seq` holds (its cells freed).
    pub(crate) fn forget(&mut self, seq: i32) {
        clear_seq(&mut *self.forward, seq);
        self.held[seq as usize].clear();
    }

    /// The draft forward passes since the last call.
    pub(crate) fn take_passes(&mut self) -> usize {
        std::mem::take(&mut self.passes)
    }
}

/// What a draft starts from: the sequence's state after its pending tokens.
pub(crate) struct DraftStart<'a> {
    pub seq: i32,
    /// Prompt and output so far, the pending tokens included.
    pub history: &'a TokenHistory,
    pub matcher: Option<&'a Matcher>,
    /// The mask of free text with `ignore_eos` (every token but EOS).
    pub free_mask: Option<&'a [u32]>,
    pub ignore_eos: bool,
    pub fast_forward: bool,
    pub vocab: &'a Vocabulary,
    /// Draft tokens at most, forced ones included.
    pub limit: usize,
}

/// Drafts up to `start.limit` tokens with the draft model (see the module docs);
/// `forced_room(k)` bounds the forced tokens after a drafted token with `k` before it.
pub(crate) fn draft(
    dc: &mut DraftContext<'_>,
    sampler: &mut Sampler,
    start: &DraftStart<'_>,
    forced_room: impl Fn(usize) -> usize,
) -> Result<Draft> {
    let mut draft = Draft::default();
    if start.limit == 0 {
        return Ok(draft);
    }
    let _span = tracing::debug_span!("draft", seq = start.seq, limit = start.limit).entered();
    dc.sync(start.seq, start.history.tokens())?;
    let mut history = start.history.clone();
    let mut fork = start.matcher.map(Matcher::fork);
    let mut mask = bitmask::new_mask(start.vocab.mask_width());
    while draft.len() < start.limit {
        let step_mask = match fork.as_mut() {
            Some(m) => {
                if m.must_end() {
                    break;
                }
                m.fill_mask(&mut mask)?;
                if start.ignore_eos {
                    for &id in start.vocab.eos_ids() {
                        bitmask::clear(&mut mask, id);
                    }
                }
                Some(&mask[..])
            }
            None => start.free_mask,
        };
        let q = sampler.distribution(dc.logits(), step_mask, &history);
        let Some(token) = speculative::draw(&q, sampler.uniform()) else { break };
        // Whatever was drawn is verified (see the module docs): EOS ends the draft with it.
        if start.vocab.is_eos(token) {
            draft.push_drafted(token, q);
            draft.bonus = false;
            break;
        }
        let mut step = vec![token];
        if let Some(m) = fork.as_mut() {
            m.accept_token(token)?;
            if start.fast_forward {
                let forced = m.forced_tokens(forced_room(draft.len()));
                m.accept_tokens(&forced).map_err(|(_, e)| e)?;
                step.extend(forced);
            }
        }
        draft.push_drafted(token, q);
        if draft.len() + step.len() - 1 > start.limit {
            // Its forced tokens do not fit: it ends the draft without them.
            draft.bonus = false;
            break;
        }
        step[1..].iter().for_each(|&f| draft.push_forced(f));
        step.iter().for_each(|&t| history.push(t));
        if draft.len() < start.limit {
            dc.extend(start.seq, &step)?;
        }
    }
    Ok(draft)
}
