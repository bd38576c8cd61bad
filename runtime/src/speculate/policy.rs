//! How much of a prompt-lookup draft to verify: the prefix with the largest expected time
//! saved, from how drafts found the same way fared before and what a forward pass costs.
//!
//! - **Cost.** A forward pass of `r` rows takes about `a + b·r`: a fixed part (reading the
//!   weights, building the graph, the threads' rendezvous) and a part per row. On a CPU
//!   `b` is a sizeable part of `a` (llama.cpp's flash attention evaluates each row apart;
//!   with ggml's portable AVX2 kernels SmolLM2-135M on one thread had `a` ≈ 10 ms,
//!   `b` ≈ 6.5 ms), so a rejected row is expensive; less so without flash attention
//!   ([`FlashAttention::Off`]), where more drafts pay. [`PassCost`] fits `a` and `b` to the
//!   session's own passes.
//! - **Gain.** An accepted drafted token saves the pass that would have sampled it, `a`
//!   (its rows are evaluated either way); a rejected one wastes its rows, `b` each. In a
//!   batch of `n` sequences the fixed part is shared: a sequence's share is `a / n`.
//! - **Acceptance.** The first `i` drafted tokens are all accepted with probability
//!   `p·αⁱ⁻¹`: `p`, the first token's chance, depends on how the draft was found (the
//!   length of the matched suffix, and whether it copies the prompt or the output); `α` is the chance that a drafted token is accepted after an accepted one.
//!   Both are counted over the session's drafts ([`LookupStats`]), starting from a prior,
//!   and over the sequence's own: a sequence's counts weigh beside the session's rate as if
//!   that were [`SESSION_WEIGHT`] trials, so that a request that copies less (or more) than
//!   the ones before soon drafts accordingly.
//!
//! The draft keeps the prefix (ending before a drafted token) whose summed gains
//! `Pᵢ·a/n − (1 − Pᵢ)·b·rᵢ` are largest (`rᵢ`: the rows of drafted token `i` and of the
//! forced tokens after it); the empty prefix, gain 0, means no draft. The cut changes only
//! the speed: verification is exact whatever is drafted.

use super::{Draft, LookupOrigin};
#[cfg(doc)]
use crate::FlashAttention;

/// Matched lengths counted apart (longer ones count as this one).
const MAX_MATCHED: usize = 8;

/// Acceptance counts of a session's prompt-lookup drafts: per [`LookupOrigin`], the first
/// drafted token's; overall, a drafted token's after an accepted one.
#[derive(Clone, Debug)]
pub(crate) struct LookupStats {
    /// `(accepted, tried)` of first tokens, by origin (see `slot`).
    first: Vec<(f64, f64)>,
    /// `(accepted, tried)` of tokens after an accepted one.
    then: (f64, f64),
}

/// The prior of every count: as if one first token had been accepted and one rejected, and
/// two later tokens accepted and one rejected.
const FIRST_PRIOR: (f64, f64) = (1.0, 2.0);
const THEN_PRIOR: (f64, f64) = (2.0, 3.0);

/// Counts are halved past this many trials, so that the statistics follow a session
/// whose requests change.
const MAX_TRIALS: f64 = 400.0;

impl Default for LookupStats {
    fn default() -> Self {
        LookupStats { first: vec![FIRST_PRIOR; 2 * MAX_MATCHED], then: THEN_PRIOR }
    }
}

/// How many trials the session's rates count for beside a sequence's own counts.
const SESSION_WEIGHT: f64 = 4.0;

impl LookupStats {
    fn slot(origin: LookupOrigin) -> usize {
        (origin.matched.clamp(1, MAX_MATCHED) - 1) * 2 + usize::from(origin.in_prompt)
    }

    /// The chance that a draft found as `origin` has its first token accepted.
    pub(crate) fn first(&self, origin: LookupOrigin) -> f64 {
        let (accepted, tried) = self.first[Self::slot(origin)];
        accepted / tried
    }

    /// The chance that a drafted token is accepted after an accepted one.
    pub(crate) fn then(&self) -> f64 {
        self.then.0 / self.then.1
    }

    /// No counts and no prior: one sequence's own drafts.
    pub(crate) fn empty() -> Self {
        LookupStats { first: vec![(0.0, 0.0); 2 * MAX_MATCHED], then: (0.0, 0.0) }
    }

    /// The first token's chance and the continuation rate for a draft found as `origin` by
    /// a sequence whose own drafts counted `own`: its counts beside the session's rates.
    pub(crate) fn chances(&self, own: &LookupStats, origin: LookupOrigin) -> (f64, f64) {
        let blend = |(accepted, tried): (f64, f64), session: f64| {
            (accepted + SESSION_WEIGHT * session) / (tried + SESSION_WEIGHT)
        };
        (blend(own.first[Self::slot(origin)], self.first(origin)), blend(own.then, self.then()))
    }

    /// Counts a verified draft: `accepted` of its `sampled` drafted tokens (a prefix).
    pub(crate) fn record(&mut self, origin: LookupOrigin, sampled: usize, accepted: usize) {
        if sampled == 0 {
            return;
        }
        let first = &mut self.first[Self::slot(origin)];
        bump(first, 1.0, f64::from(u8::from(accepted > 0)));
        // Tokens 2..=sampled were tried when the one before was accepted.
        let tried = accepted.min(sampled - 1);
        bump(&mut self.then, tried as f64, accepted.saturating_sub(1) as f64);
    }
}

fn bump(count: &mut (f64, f64), tried: f64, accepted: f64) {
    count.0 += accepted;
    count.1 += tried;
    if count.1 > MAX_TRIALS {
        count.0 /= 2.0;
        count.1 /= 2.0;
    }
}

/// The fit `seconds ≈ a + b·rows` of a session's forward passes: weighted least squares,
/// each pass weighing a little less than the next.
#[derive(Clone, Debug, Default)]
pub(crate) struct PassCost {
    /// Weighted sums: 1, rows, seconds, rows², rows·seconds.
    w: f64,
    r: f64,
    t: f64,
    rr: f64,
    rt: f64,
}

/// Each new pass multiplies the weight of the earlier ones by this.
const FORGET: f64 = 0.98;

/// Before the passes tell: `b = a / 2`.
const PRIOR_RATIO: f64 = 0.5;

impl PassCost {
    /// Adds a forward pass of `rows` rows that took `seconds`.
    pub(crate) fn observe(&mut self, rows: usize, seconds: f64) {
        let r = rows as f64;
        for sum in [&mut self.w, &mut self.r, &mut self.t, &mut self.rr, &mut self.rt] {
            *sum *= FORGET;
        }
        self.w += 1.0;
        self.r += r;
        self.t += seconds;
        self.rr += r * r;
        self.rt += r * seconds;
    }

    /// `(a, b)` in seconds: the fixed cost of a pass and its cost per row (both positive).
    /// Before passes of different sizes were seen, `b` is taken as `a / 2`.
    pub(crate) fn estimate(&self) -> (f64, f64) {
        if self.w == 0.0 {
            return (1.0, PRIOR_RATIO);
        }
        let (mean_r, mean_t) = (self.r / self.w, self.t / self.w);
        let var = self.rr / self.w - mean_r * mean_r;
        let prior = || {
            let a = (mean_t / (1.0 + PRIOR_RATIO * mean_r)).max(1e-9);
            (a, PRIOR_RATIO * a)
        };
        if var < 0.25 {
            return prior();
        }
        let b = (self.rt / self.w - mean_r * mean_t) / var;
        let a = mean_t - b * mean_r;
        // Noise can make either part look negative: keep both a fraction of a pass.
        let floor = 0.05 * mean_t.max(1e-9);
        (a.max(floor), b.max(floor / mean_r.max(1.0)))
    }
}

/// The length of the prefix of `draft` to verify (see the module docs): its first token
/// is accepted with chance `first`, each later one after an accepted one with chance
/// `then`; `live` sequences share the pass; `cost` is `(a, b)`.
pub(crate) fn cut(draft: &Draft, (first, then): (f64, f64), cost: (f64, f64), live: usize) -> usize {
    let (a, b) = cost;
    let share = a / live.max(1) as f64;
    let checkpoints = draft.checkpoints();
    let mut p = first;
    let (mut gain, mut best, mut best_len) = (0.0, 0.0, 0);
    for pair in checkpoints.windows(2) {
        let rows = (pair[1] - pair[0]) as f64;
        gain += p * share - (1.0 - p) * b * rows;
        if gain > best {
            (best, best_len) = (gain, pair[1]);
        }
        p *= then;
    }
    best_len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(runs: &[usize]) -> Draft {
        let mut d = Draft::default();
        for (i, &run) in runs.iter().enumerate() {
            d.push(i as u32, false);
            (1..run).for_each(|f| d.push(100 + f as u32, true));
        }
        d
    }

    const ORIGIN: LookupOrigin = LookupOrigin { matched: 2, in_prompt: true };

    #[test]
    fn a_sure_draft_is_verified_whole_and_a_hopeless_one_not_at_all() {
        let d = draft(&[1, 1, 1, 1]);
        assert_eq!(cut(&d, (1.0, 1.0), (0.010, 0.006), 1), 4);
        assert_eq!(cut(&d, (0.0, 1.0), (0.010, 0.006), 1), 0);
    }

    #[test]
    fn the_cut_falls_where_a_tokens_gain_turns_negative() {
        // a = 10, b = 5 (ms): token i is worth drafting while P_i·10 > (1 − P_i)·5, i.e.
        // P_i > 1/3. P = 0.9, 0.9·0.6 = 0.54, 0.324: two tokens.
        let d = draft(&[1, 1, 1, 1]);
        assert_eq!(cut(&d, (0.9, 0.6), (0.010, 0.005), 1), 2);
        // Shared by 4 sequences, a's share is 2.5: P_i > 2/3, one token only.
        assert_eq!(cut(&d, (0.9, 0.6), (0.010, 0.005), 4), 1);
        // A long forced run after the second token makes it cost more: P 0.54 < 15/25.
        let long = draft(&[1, 3, 1]);
        assert_eq!(cut(&long, (0.9, 0.6), (0.010, 0.005), 1), 1);
    }

    #[test]
    fn a_later_token_may_pay_for_an_earlier_one() {
        // Token 1 and its three forced tokens alone lose (0.6·10 − 0.4·5·4 = −2), but two
        // sure followers of one row each win 4 apiece: the whole draft.
        let d = draft(&[4, 1, 1]);
        assert_eq!(cut(&d, (0.6, 1.0), (0.010, 0.005), 1), 6);
    }

    #[test]
    fn counts_follow_the_drafts() {
        let mut s = LookupStats::default();
        let other = LookupOrigin { matched: 1, in_prompt: false };
        assert_eq!(s.first(ORIGIN), 0.5);
        for _ in 0..50 {
            s.record(ORIGIN, 4, 4);
            s.record(other, 3, 0);
        }
        assert!(s.first(ORIGIN) > 0.95, "{}", s.first(ORIGIN));
        assert!(s.first(other) < 0.05, "{}", s.first(other));
        assert!(s.then() > 0.95, "{}", s.then());
        // Accepted 1 of 3: the second token was tried and rejected.
        let before = s.then;
        s.record(ORIGIN, 3, 1);
        assert_eq!((s.then.0, s.then.1), (before.0, before.1 + 1.0));
        // A sequence whose own drafts fail soon stops trusting the session's rate.
        let mut own = LookupStats::empty();
        assert_eq!(s.chances(&own, ORIGIN), (s.first(ORIGIN), s.then()));
        for _ in 0..8 {
            own.record(ORIGIN, 3, 0);
        }
        let (first, _) = s.chances(&own, ORIGIN);
        assert!(first < 0.35, "{first}");
        // Matched lengths past the last slot share it.
        let long = LookupOrigin { matched: 30, in_prompt: true };
        assert_eq!(LookupStats::slot(long), LookupStats::slot(LookupOrigin { matched: MAX_MATCHED, in_prompt: true }));
    }

    #[test]
    fn the_cost_fit_recovers_a_line() {
        let mut cost = PassCost::default();
        for rows in [1, 2, 4, 8, 1, 3] {
            cost.observe(rows, 0.010 + 0.005 * rows as f64);
        }
        let (a, b) = cost.estimate();
        assert!((a - 0.010).abs() < 1e-9 && (b - 0.005).abs() < 1e-9, "{a} {b}");
    }

    #[test]
    fn the_cost_fit_follows_recent_passes_and_stays_positive() {
        let mut cost = PassCost::default();
        assert_eq!(cost.estimate(), (1.0, PRIOR_RATIO));
        // Only one-row passes: the prior ratio, scaled to their time.
        for _ in 0..10 {
            cost.observe(1, 0.015);
        }
        let (a, b) = cost.estimate();
        assert!((a + b - 0.015).abs() < 1e-9 && (b / a - PRIOR_RATIO).abs() < 1e-9);
        // Noisy times that would fit a negative slope: b stays above zero.
        for (rows, t) in [(1, 0.03), (8, 0.01), (1, 0.03), (8, 0.01)] {
            cost.observe(rows, t);
        }
        let (a, b) = cost.estimate();
        assert!(a > 0.0 && b > 0.0);
    }
}
