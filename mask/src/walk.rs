//! Model-free random walks through a grammar's token masks: the sampler behind
//! `stencil sample --random` and the tests' random texts.
//!
//! Each walk has two phases. First it wanders: at each step it picks EOS (when allowed)
//! with a probability that rises with the steps taken, else the token the grammar forces
//! (when there is one) half of the time, else a random allowed single-byte token (70%)
//! or a random allowed token of any length (30%). After a random number of steps (up to
//! half the budget) it heads for the end: a breadth-first search over single-byte tokens
//! (and the grammar's special tokens) finds a shortest way to a state where the grammar
//! can end, which the walk follows before it picks EOS. The matcher does not expose its
//! state, so the search tells states apart by their next-token mask and depth, keeping two
//! states per such key (equal masks can hide different stacks of open rules: `(a` and
//! `((a`), and it tries every allowed punctuation, space or control byte but only a few
//! letters, digits and non-ASCII bytes (shuffled) at each state, which keeps it small.
//! When it gives up (a budget of token evaluations), the walk wanders one more step and
//! searches again.
//!
//! Every state the walk or the search reaches is a real matcher state reached through
//! allowed tokens, so a state with no allowed token where the grammar cannot end is an
//! engine bug, reported as [`Failure::DeadEnd`].
//!
//! ```
//! use std::sync::Arc;
//! use stencil_mask::walk::{Rng, Walk, Walker};
//! use stencil_mask::{CompiledGrammar, TokenKind, Vocabulary};
//! let tokens = ["<eos>", "a", "b", "ab"].iter().enumerate()
//!     .map(|(i, t)| (t.as_bytes().to_vec(), if i == 0 { TokenKind::Control } else { TokenKind::Normal }))
//!     .collect();
//! let vocab = Arc::new(Vocabulary::new(tokens, vec![0])?);
//! let g = CompiledGrammar::new(&stencil_grammar::parse_gbnf(r#"root ::= "a" "b"+"#)?, vocab.clone())?;
//! let mut walker = Walker::new(vocab);
//! match walker.walk(&g, 32, &mut Rng::new(7)) {
//!     Ok(Walk::Complete(text)) => assert!(text.starts_with(b"ab")),
//!     _ => panic!("walk failed"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::{bitmask, CompiledGrammar, MatchError, Matcher, TokenKind, Vocabulary};

/// Token evaluations (accept + mask) one search may spend before it gives up.
const SEARCH_BUDGET: usize = 6_000;
/// States a search keeps per (mask, depth): more than one, since
/// equal masks do not make equal states (the stack of open rules can differ).
const COPIES_PER_KEY: usize = 2;

/// How a walk ended.
#[derive(Debug)]
pub enum Walk {
    /// The text of the tokens accepted when the walk chose to end (EOS not included).
    Complete(Vec<u8>),
    /// The token budget ran out where the grammar cannot end.
    Incomplete,
}

/// A walk that found an engine bug (or a matcher error).
#[derive(Debug)]
pub enum Failure {
    /// No token allowed and the grammar cannot end.
    DeadEnd {
        /// The tokens accepted.
        tokens: Vec<u32>,
        /// Their text.
        text: Vec<u8>,
    },
    /// A token of the mask that the matcher refused.
    Disagree {
        /// The refused token.
        token: u32,
        /// The tokens accepted before it.
        tokens: Vec<u32>,
        /// Their text.
        text: Vec<u8>,
    },
    /// The matcher failed (a limit).
    Match(MatchError),
}

/// Walks grammars over one vocabulary.
pub struct Walker {
    /// The vocabulary walked.
    pub vocab: Arc<Vocabulary>,
    /// Tokens the end search also tries where they are allowed (none by default): long
    /// closing markers (`</think>`) that a search over single bytes seldom spells out
    /// inside free text, where every state has the same mask.
    pub extra: Vec<u32>,
    /// Per byte value, a text token that is exactly that byte (a normal one preferred).
    byte_token: Vec<Option<u32>>,
    /// Tokens that are not text (control tokens, EOS included, that a grammar can name).
    special: Vec<u32>,
    mask: Vec<u32>,
}

impl Walker {
    /// A walker over `vocab`.
    pub fn new(vocab: Arc<Vocabulary>) -> Self {
        let mut byte_token: Vec<Option<u32>> = vec![None; 256];
        let mut special = Vec::new();
        for id in 0..vocab.len() as u32 {
            if vocab.is_text(id) {
                if let [b] = vocab.token_bytes(id) {
                    let slot = &mut byte_token[*b as usize];
                    let better = match *slot {
                        None => true,
                        Some(old) => vocab.kind(old) != TokenKind::Normal && vocab.kind(id) == TokenKind::Normal,
                    };
                    if better {
                        *slot = Some(id);
                    }
                }
            } else if vocab.kind(id) != TokenKind::Unused {
                special.push(id);
            }
        }
        let mask = bitmask::new_mask(vocab.mask_width());
        Walker { vocab, byte_token, special, mask, extra: Vec::new() }
    }

    /// The text of the tokens accepted (a control token the grammar names gives its text;
    /// the final EOS is never among them).
    /// The text of tokens.
    pub fn text(&self, tokens: &[u32]) -> Vec<u8> {
        tokens.iter().flat_map(|&t| self.vocab.token_bytes(t).iter().copied()).collect()
    }

    /// Fills `self.mask` for the matcher's state; a dead end is a failure.
    fn fill(&mut self, m: &mut Matcher, tokens: &[u32]) -> Result<usize, Failure> {
        m.fill_mask(&mut self.mask).map_err(Failure::Match)?;
        let n = bitmask::count(&self.mask);
        if n == 0 && !m.can_end() {
            return Err(Failure::DeadEnd { tokens: tokens.to_vec(), text: self.text(tokens) });
        }
        Ok(n)
    }

    fn accept(&self, m: &mut Matcher, token: u32, tokens: &[u32]) -> Result<(), Failure> {
        m.accept_token(token).map_err(|e| match e {
            MatchError::TokenRejected { .. } => {
                Failure::Disagree { token, tokens: tokens.to_vec(), text: self.text(tokens) }
            }
            e => Failure::Match(e),
        })
    }

    /// One walk of at most `max_tokens` tokens.
    ///
    /// # Errors
    ///
    /// [`Failure`]: an engine bug found (a dead end, a mask the matcher disagrees with) or a
    /// matcher error.
    pub fn walk(&mut self, g: &Arc<CompiledGrammar>, max_tokens: usize, rng: &mut Rng) -> Result<Walk, Failure> {
        let mut m = Matcher::new(g.clone());
        let mut tokens: Vec<u32> = Vec::new();
        let wander_for = max_tokens / 16 + rng.below(max_tokens / 2 - max_tokens / 16 + 1);
        let mut plan: VecDeque<u32> = VecDeque::new();
        while tokens.len() < max_tokens {
            if m.must_end() {
                return Ok(Walk::Complete(self.text(&tokens)));
            }
            let n = self.fill(&mut m, &tokens)?;
            let can_end = m.can_end();
            let step = tokens.len();
            let token = if step < wander_for {
                let frac = step as f64 / wander_for.max(1) as f64;
                if can_end && rng.chance(0.03 + 0.3 * frac * frac) {
                    return Ok(Walk::Complete(self.text(&tokens)));
                }
                self.wander(&mut m, n, rng)
            } else {
                if can_end {
                    return Ok(Walk::Complete(self.text(&tokens)));
                }
                if plan.is_empty() {
                    let depth = max_tokens - step;
                    match self.search(&mut m, &tokens, depth, rng)? {
                        Some(path) => plan.extend(path),
                        None => {
                            // The search used the mask buffer: refill it for this state.
                            self.fill(&mut m, &tokens)?;
                        }
                    }
                }
                match plan.pop_front() {
                    Some(t) => t,
                    None => self.wander(&mut m, n, rng),
                }
            };
            if can_end && self.vocab.is_eos(token) {
                return Ok(Walk::Complete(self.text(&tokens)));
            }
            self.accept(&mut m, token, &tokens)?;
            tokens.push(token);
        }
        if m.can_end() {
            return Ok(Walk::Complete(self.text(&tokens)));
        }
        self.fill(&mut m, &tokens)?;
        Ok(Walk::Incomplete)
    }

    /// One wandering step in a state whose mask (`n` tokens allowed) is in `self.mask`.
    fn wander(&mut self, m: &mut Matcher, n: usize, rng: &mut Rng) -> u32 {
        if rng.chance(0.5) {
            if let Some(&t) = m.forced_tokens(64).first() {
                return t;
            }
        }
        if rng.chance(0.7) {
            let bytes: Vec<u32> =
                self.byte_token.iter().flatten().copied().filter(|&t| bitmask::get(&self.mask, t)).collect();
            if !bytes.is_empty() {
                return bytes[rng.below(bytes.len())];
            }
        }
        nth_allowed(&self.mask, rng.below(n))
    }

    /// The tokens to try from a state in a search, its mask being in `self.mask`.
    fn candidates(&self, rng: &mut Rng) -> Vec<u32> {
        let mut out = Vec::new();
        let (mut alnum, mut high) = (Vec::new(), Vec::new());
        for (b, t) in self.byte_token.iter().enumerate() {
            let Some(t) = *t else { continue };
            if !bitmask::get(&self.mask, t) {
                continue;
            }
            match b as u8 {
                b if b.is_ascii_alphanumeric() => alnum.push(t),
                0x80.. => high.push(t),
                _ => out.push(t),
            }
        }
        for (pool, k) in [(alnum, 2), (high, 3)] {
            let mut pool = pool;
            for _ in 0..k.min(pool.len()) {
                out.push(pool.swap_remove(rng.below(pool.len())));
            }
        }
        out.extend(self.special.iter().copied().filter(|&t| bitmask::get(&self.mask, t)).take(8));
        out.extend(self.extra.iter().copied().filter(|&t| bitmask::get(&self.mask, t)));
        for i in (1..out.len()).rev() {
            out.swap(i, rng.below(i + 1));
        }
        if out.is_empty() {
            // No single-byte token fits: the shortest allowed tokens.
            let mut all: Vec<u32> = bitmask::allowed(&self.mask).collect();
            all.sort_by_key(|&t| (self.vocab.token_bytes(t).len(), t));
            all.truncate(8);
            out = all;
        }
        out
    }

    /// A shortest (in tokens, over the candidate tokens) way from the matcher's state to
    /// one where the grammar can end, of at most `max_depth` tokens; `None` when the search
    /// runs out of budget. `tokens` are those accepted so far (for failure reports). The
    /// matcher is back in its state on return.
    fn search(
        &mut self,
        m: &mut Matcher,
        tokens: &[u32],
        max_depth: usize,
        rng: &mut Rng,
    ) -> Result<Option<Vec<u32>>, Failure> {
        let base = m.tokens_accepted();
        let mut path_buf = tokens.to_vec();
        let result = self.search_inner(m, &mut path_buf, max_depth, rng);
        let back = m.tokens_accepted() - base;
        m.rollback(back).map_err(Failure::Match)?;
        result
    }

    fn search_inner(
        &mut self,
        m: &mut Matcher,
        path_buf: &mut Vec<u32>,
        max_depth: usize,
        rng: &mut Rng,
    ) -> Result<Option<Vec<u32>>, Failure> {
        struct Node {
            parent: usize,
            token: u32,
            depth: usize,
            candidates: Vec<u32>,
        }
        let base = m.tokens_accepted();
        let prefix_len = path_buf.len();
        self.fill(m, path_buf)?;
        let mut seen: HashMap<(u64, usize), usize> = HashMap::new();
        seen.insert((hash(&self.mask), 0), 1);
        let mut nodes = vec![Node { parent: usize::MAX, token: 0, depth: 0, candidates: self.candidates(rng) }];
        let mut queue = VecDeque::from([0usize]);
        let mut evals = 0;
        let path_to = |nodes: &[Node], mut x: usize| {
            let mut p = Vec::new();
            while x != 0 {
                p.push(nodes[x].token);
                x = nodes[x].parent;
            }
            p.reverse();
            p
        };
        while let Some(x) = queue.pop_front() {
            if nodes[x].depth >= max_depth {
                continue;
            }
            let path = path_to(&nodes, x);
            m.rollback(m.tokens_accepted() - base).map_err(Failure::Match)?;
            path_buf.truncate(prefix_len);
            for &t in &path {
                self.accept(m, t, path_buf)?;
                path_buf.push(t);
            }
            let candidates = std::mem::take(&mut nodes[x].candidates);
            for t in candidates {
                evals += 1;
                if evals > SEARCH_BUDGET {
                    return Ok(None);
                }
                self.accept(m, t, path_buf)?;
                path_buf.push(t);
                if m.can_end() {
                    let mut p = path.clone();
                    p.push(t);
                    return Ok(Some(p));
                }
                let filled = self.fill(m, path_buf);
                path_buf.pop();
                filled?;
                let depth = nodes[x].depth + 1;
                let copies = seen.entry((hash(&self.mask), depth)).or_insert(0);
                if *copies < COPIES_PER_KEY {
                    *copies += 1;
                    let candidates = self.candidates(rng);
                    nodes.push(Node { parent: x, token: t, depth, candidates });
                    queue.push_back(nodes.len() - 1);
                }
                m.rollback(1).map_err(Failure::Match)?;
            }
        }
        Ok(None)
    }
}

/// The `k`-th (from 0) allowed token of a mask with more than `k` allowed.
fn nth_allowed(mask: &[u32], mut k: usize) -> u32 {
    for (i, &w) in mask.iter().enumerate() {
        let c = w.count_ones() as usize;
        if k < c {
            let mut w = w;
            for _ in 0..k {
                w &= w - 1;
            }
            return i as u32 * 32 + w.trailing_zeros();
        }
        k -= c;
    }
    unreachable!("the mask has more than k tokens")
}

/// A fast hash of a mask (to tell search states apart).
fn hash(mask: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for pair in mask.chunks(2) {
        let w = pair[0] as u64 | (pair.get(1).copied().unwrap_or(0) as u64) << 32;
        h = (h.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h
}

/// A small seeded PRNG (xoshiro256**, seeded by SplitMix64), so that a seed gives the same
/// walks on every platform and version.
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng { s: [next(), next(), next(), next()] }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_allowed_finds_bits() {
        let mut mask = bitmask::new_mask(100);
        for t in [3, 40, 41, 99] {
            bitmask::set(&mut mask, t);
        }
        let got: Vec<u32> = (0..4).map(|k| nth_allowed(&mask, k)).collect();
        assert_eq!(got, vec![3, 40, 41, 99]);
    }

    #[test]
    fn deterministic_and_in_range() {
        let a: Vec<u64> = (0..4).scan(Rng::new(7), |r, _| Some(r.next_u64())).collect();
        let b: Vec<u64> = (0..4).scan(Rng::new(7), |r, _| Some(r.next_u64())).collect();
        assert_eq!(a, b);
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| r.below(3) < 3 && r.unit() < 1.0));
    }
}
