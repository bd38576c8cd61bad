//! Exact acceptance of drafted tokens: speculative sampling (Leviathan et al. 2023, "Fast
//! Inference from Transformers via Speculative Decoding"; Chen et al. 2023, "Accelerating
//! Large Language Model Decoding with Speculative Sampling").
//!
//! A drafter proposes token `d` drawn from its distribution `q`; the target's distribution at
//! the same position is `p`, both *after the whole pipeline* ([`Sampler::distribution`]:
//! bias, penalties with the history including the drafts accepted before `d`, the grammar
//! mask, the watermark, temperature, top-k/p, min-p). [`verify`] accepts `d` with probability
//! `min(1, p(d) / q(d))`; on rejection it draws the replacement from the residual
//! `norm(max(0, p − q))`. Whatever `q` is, the token that comes out is distributed as `p`:
//!
//! ```text
//! P(out = x) = q(x)·min(1, p(x)/q(x)) + (1 − Σ_y min(q(y), p(y)))·max(0, p(x) − q(x)) / Z
//!            = min(q(x), p(x)) + max(0, p(x) − q(x)) = p(x),     Z = Σ_y max(0, p(y) − q(y))
//! ```
//!
//! (`Z` equals the rejection probability `1 − Σ min(p, q)`.) A one-hot `q` (prompt lookup:
//! the draft is a copy, not a draw) accepts `d` with probability `p(d)` and otherwise draws
//! from `p` without `d`. Greedy decoding has a one-hot `p`: `d` is accepted iff it is the
//! argmax, and the replacement is the argmax.
//!
//! [`Sampler::distribution`]: crate::Sampler::distribution

/// What [`verify`] made of a drafted token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The draft token stands.
    Accepted,
    /// The draft token is rejected; this token, drawn from the residual, takes its place.
    Replaced(u32),
}

/// The probability of `token` in a sparse distribution (`(token, probability)` pairs).
fn prob(dist: &[(u32, f64)], token: u32) -> f64 {
    dist.iter().find(|&&(t, _)| t == token).map_or(0.0, |&(_, p)| p)
}

/// Verifies draft token `draft`, proposed with distribution `q` (`None`: one-hot at `draft`),
/// against the target's distribution `p`. `accept_u` and `residual_u` are independent
/// uniform draws in `[0, 1)` (the target sampler's: [`Sampler::uniform`]); `residual_u` is
/// used only on rejection. `None` when `p` is empty (nothing can follow).
///
/// `p` and `q` are sparse distributions summing to 1, as [`Sampler::distribution`] gives
/// them; the residual is walked in `p`'s order.
///
/// # Example
///
/// ```
/// use stencil_sampling::speculative::{verify, Verdict};
///
/// let p = [(0, 0.5), (1, 0.5)];
/// let q = [(0, 1.0)];
/// // p(0)/q(0) = 0.5: accepted below 0.5, else replaced by the residual max(0, p − q) = {1}.
/// assert_eq!(verify(&p, Some(&q), 0, 0.3, 0.9), Some(Verdict::Accepted));
/// assert_eq!(verify(&p, Some(&q), 0, 0.7, 0.9), Some(Verdict::Replaced(1)));
/// // Greedy: a one-hot p accepts only its argmax.
/// assert_eq!(verify(&[(1, 1.0)], None, 0, 0.0, 0.0), Some(Verdict::Replaced(1)));
/// ```
///
/// [`Sampler::uniform`]: crate::Sampler::uniform
/// [`Sampler::distribution`]: crate::Sampler::distribution
pub fn verify(
    p: &[(u32, f64)],
    q: Option<&[(u32, f64)]>,
    draft: u32,
    accept_u: f64,
    residual_u: f64,
) -> Option<Verdict> {
    if p.is_empty() {
        return None;
    }
    // A draft that `q` gave no weight (it cannot have drawn it) counts as one-hot.
    let q = q.filter(|q| prob(q, draft) > 0.0);
    let q_of = |t: u32| match q {
        Some(q) => prob(q, t),
        None => f64::from(u8::from(t == draft)),
    };
    if accept_u < prob(p, draft) / q_of(draft) {
        return Some(Verdict::Accepted);
    }
    let residual = |&(t, pt): &(u32, f64)| (pt - q_of(t)).max(0.0);
    let total: f64 = p.iter().map(residual).sum();
    if total <= 0.0 {
        // Only rounding can bring this (p = q rejects with probability 0): p's best token.
        return Some(Verdict::Replaced(p[0].0));
    }
    let mut target = residual_u * total;
    for entry in p {
        let w = residual(entry);
        if target < w {
            return Some(Verdict::Replaced(entry.0));
        }
        target -= w;
    }
    // Rounding left `target` at the very end: the last token with residual weight.
    p.iter().rev().find(|e| residual(e) > 0.0).map(|e| Verdict::Replaced(e.0))
}

/// A draw from a sparse distribution (summing to 1) with the uniform `u` in `[0, 1)`:
/// the first token whose cumulative probability passes `u`. `None` when `dist` is empty.
///
/// ```
/// use stencil_sampling::speculative::draw;
///
/// let q = [(4, 0.75), (2, 0.25)];
/// assert_eq!(draw(&q, 0.5), Some(4));
/// assert_eq!(draw(&q, 0.8), Some(2));
/// assert_eq!(draw(&[], 0.5), None);
/// ```
pub fn draw(dist: &[(u32, f64)], u: f64) -> Option<u32> {
    let mut target = u;
    for &(token, p) in dist {
        if target < p {
            return Some(token);
        }
        target -= p;
    }
    // Rounding left `target` at the very end: the last token.
    dist.last().map(|&(token, _)| token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_residual_excludes_what_q_covers() {
        let p = [(0, 0.4), (1, 0.4), (2, 0.2)];
        let q = [(0, 0.8), (2, 0.2)];
        // Accept 0 with 0.5; the residual is max(0, p − q) = {1: 0.4}.
        assert_eq!(verify(&p, Some(&q), 0, 0.49, 0.0), Some(Verdict::Accepted));
        assert_eq!(verify(&p, Some(&q), 0, 0.51, 0.99), Some(Verdict::Replaced(1)));
        // Token 2: p = q, always accepted.
        assert_eq!(verify(&p, Some(&q), 2, 0.999, 0.0), Some(Verdict::Accepted));
        assert_eq!(verify(&[], Some(&q), 2, 0.0, 0.0), None);
    }

    #[test]
    fn a_one_hot_draft_is_a_draw_from_p_without_it() {
        let p = [(3, 0.5), (1, 0.3), (2, 0.2)];
        assert_eq!(verify(&p, None, 1, 0.29, 0.0), Some(Verdict::Accepted));
        assert_eq!(verify(&p, None, 1, 0.31, 0.0), Some(Verdict::Replaced(3)));
        // Residual {3: 0.5, 2: 0.2}: 0.8 · 0.7 = 0.56 falls on 2.
        assert_eq!(verify(&p, None, 1, 0.31, 0.8), Some(Verdict::Replaced(2)));
        // A token p does not allow is never accepted.
        assert_eq!(verify(&p, None, 7, 0.0, 0.0), Some(Verdict::Replaced(3)));
    }
}
