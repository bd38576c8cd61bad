//! One forward pass over the pending rows of a group of sequences, with their next masks
//! computed on a second thread meanwhile.

use std::time::Instant;

use super::sequence::{join, timed_fill};
use super::{Decoder, Row};
use crate::contrastive::Search;
use crate::error::Result;

impl Decoder<'_, '_> {
    /// The forward pass over the pending tokens of the sequences in `range`, their next
    /// masks computed on another thread meanwhile.
    pub(super) fn forward(&mut self, range: std::ops::Range<usize>) -> Result<()> {
        let session = &mut *self.session;
        let mut rows: Vec<Row> = Vec::new();
        for s in &mut self.live[range.clone()] {
            if let Some(search) = s.contrastive.as_mut() {
                if search.has_candidates() {
                    search.add_rows(&mut *session.forward, &mut rows, s.seq, s.n_past)?;
                    continue;
                }
                search.chain_row = rows.len();
            }
            // Logits for the last token, or, with a draft, at each of its checkpoints.
            let step_len = s.pending.len() - s.draft.len();
            let checkpoints = if s.draft.is_empty() { Vec::new() } else { s.draft.checkpoints() };
            let mut rows_wanted = checkpoints.iter().map(|&j| step_len + j - 1).peekable();
            s.check_rows.clear();
            for (i, &token) in s.pending.iter().enumerate() {
                let wanted =
                    if checkpoints.is_empty() { i + 1 == s.pending.len() } else { rows_wanted.peek() == Some(&i) };
                if wanted && !checkpoints.is_empty() {
                    rows_wanted.next();
                    s.check_rows.push(rows.len());
                }
                rows.push(Row { token, pos: s.n_past + i, seq: s.seq, logits: wanted });
            }
            s.logits_row = rows.len() - 1;
        }
        let group = &mut self.live[range];
        let _span = tracing::debug_span!("forward", rows = rows.len(), sequences = group.len()).entered();
        let (decoded, waited) = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                // (A candidate step's mask depends on the winner: it is filled after.)
                for s in group.iter_mut().filter(|s| !s.contrastive.as_ref().is_some_and(Search::has_candidates)) {
                    let filled = timed_fill(s.matcher.as_mut(), &mut s.mask);
                    match filled.and_then(|t| Ok(t + s.fill_draft_masks()?)) {
                        Ok(t) => s.stats.mask += t,
                        Err(e) => s.error = Some(e),
                    }
                }
            });
            let start = Instant::now();
            let decoded = session.forward.decode(&rows);
            session.pass_cost.observe(rows.len(), start.elapsed().as_secs_f64());
            let wait = Instant::now();
            join(worker.join());
            (decoded, wait.elapsed())
        });
        decoded?;
        for s in group.iter_mut() {
            if let Some(search) = s.contrastive.as_mut().filter(|c| !c.has_candidates()) {
                let start = search.chain_row;
                search.extend_context(&*session.forward, start..start + s.pending.len())?;
            }
            if s.seq == 0 {
                session.cached.extend_from_slice(&s.pending);
            }
            s.n_past += s.pending.len();
            s.pending.clear();
            s.stats.passes += 1;
            s.stats.mask_wait += waited;
        }
        Ok(())
    }
}
