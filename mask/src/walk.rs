//! Model-free random walks through a grammar's token masks: random members of its
//! language, token by token, each token taken from the mask of the state before it.
//!
//! A walk needs no model: at each step it fills the mask, picks an allowed token at
//! random and accepts it, until the grammar may end (or the budget is spent). Two styles
//! ([`Style`]): [`Style::Explore`] wanders through the grammar, then searches a shortest
//! way to an end (`stencil sample --random`); [`Style::TargetLength`] walks to a random
//! length through short tokens, then ends as soon as it may (the benchmark's token
//! sequences). Every state a walk reaches is a real matcher state reached through allowed
//! tokens, so a state with no allowed token where the grammar cannot end is an engine bug
//! ([`WalkError::DeadEnd`]), and so is a token of the mask that the matcher refuses
//! ([`WalkError::Disagree`]).
//!
//! ```
//! use std::sync::Arc;
//! use stencil_grammar::random::Xoshiro256;
//! use stencil_mask::walk::{self, Style, WalkOptions};
//! use stencil_mask::{CompiledGrammar, TokenKind, Vocabulary};
//!
//! // The single bytes, and an end-of-generation token.
//! let mut tokens: Vec<_> = (0..=255u8).map(|b| (vec![b], TokenKind::Normal)).collect();
//! tokens.push((b"<eos>".to_vec(), TokenKind::Control));
//! let vocab = Arc::new(Vocabulary::new(tokens, vec![256])?);
//! let grammar = stencil_grammar::parse_gbnf(r#"root ::= "[" [0-9]+ ("," [0-9]+)* "]""#)?;
//! let compiled = CompiledGrammar::new(&grammar, vocab.clone())?;
//!
//! let options = WalkOptions { max_tokens: 64, style: Style::Explore };
//! let w = walk::walk(&compiled, &mut Xoshiro256::new(1), &options)?;
//! assert!(w.complete);
//! let text = String::from_utf8(w.text(&vocab))?;
//! assert!(text.starts_with('[') && text.ends_with(']'), "{text}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use stencil_grammar::random::{SplitMix64, Xoshiro256};
use thiserror::Error;

use crate::bitmask;
use crate::{CompiledGrammar, MatchError, Matcher, TokenKind, Vocabulary};

/// The random draws a walk makes.
pub trait WalkRng {
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize;
    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool;
}

impl WalkRng for Xoshiro256 {
    fn below(&mut self, n: usize) -> usize {
        Xoshiro256::below(self, n)
    }

    fn chance(&mut self, p: f64) -> bool {
        Xoshiro256::chance(self, p)
    }
}

/// Draws `below(n)` as the next number modulo `n`, and chances to the percent (`p` is
/// rounded to a whole number of hundredths).
impl WalkRng for SplitMix64 {
    fn below(&mut self, n: usize) -> usize {
        SplitMix64::below(self, n.max(1) as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        SplitMix64::chance(self, (p * 100.0).round() as u64, 100)
    }
}

/// How a walk picks its tokens and heads for an end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// Wander, then search for an end: at each step end (when allowed) with a chance that
    /// rises with the steps taken, else the token the grammar forces (when there is one)
    /// half of the time, else a random allowed single-byte token (70 %) or any allowed
    /// token (30 %). After a random number of steps (up to half the budget), a
    /// breadth-first search over single-byte tokens (and the grammar's special tokens)
    /// finds a shortest way to a state where the grammar may end, which the walk follows.
    /// The matcher does not expose its state, so the search tells states apart by their
    /// mask and depth, keeping two states per such key (equal masks can hide different
    /// stacks of open rules: `(a` and `((a`); it tries every allowed punctuation, space or
    /// control byte but only a few letters, digits and non-ASCII bytes at each state. When
    /// it gives up (a budget of token evaluations), the walk wanders one more step and
    /// searches again.
    #[default]
    Explore,
    /// Walk to a random target length (8 tokens up to the budget): at each step an allowed
    /// token that is not end-of-generation, half of the time among those of at most 2
    /// bytes (which walks the grammar's structure more than long string tokens do); past
    /// the target, punctuation-only tokens 70 % of the time, and the end as soon as the
    /// grammar allows it.
    TargetLength,
}

/// A walk's budget and style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkOptions {
    /// The most tokens a walk takes (end-of-generation not counted).
    pub max_tokens: usize,
    /// How it picks them.
    pub style: Style,
}

/// A finished walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    /// The tokens accepted, in order (never the final end-of-generation).
    pub tokens: Vec<u32>,
    /// Whether the grammar may end after them (the walk chose to end); false when the
    /// budget ran out first.
    pub complete: bool,
}

impl Walk {
    /// The walk's text: the bytes of its tokens (a control token the grammar names gives
    /// its text).
    pub fn text(&self, vocab: &Vocabulary) -> Vec<u8> {
        text(vocab, &self.tokens)
    }
}

/// Why a walk stopped short: the engine contradicted itself, or a matcher error.
#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum WalkError {
    /// No token allowed, and the grammar cannot end (an engine bug).
    #[error("after {} tokens no token is allowed, yet the grammar cannot end", tokens.len())]
    DeadEnd {
        /// The tokens accepted so far.
        tokens: Vec<u32>,
    },
    /// A token of the mask that the matcher refused (an engine bug).
    #[error("token {token} was allowed by the mask but the matcher refused it")]
    Disagree {
        /// The token.
        token: u32,
        /// The tokens accepted before it.
        tokens: Vec<u32>,
    },
    /// The matcher failed (a limit).
    #[error(transparent)]
    Match(#[from] MatchError),
}

/// One random walk over `grammar` (see [`Walker::walk`]; a walker made for one walk).
///
/// # Errors
///
/// As [`Walker::walk`].
pub fn walk(grammar: &Arc<CompiledGrammar>, rng: &mut impl WalkRng, options: &WalkOptions) -> Result<Walk, WalkError> {
    Walker::new(grammar.vocab().clone()).walk(grammar, rng, options)
}

/// The bytes of `tokens`.
pub fn text(vocab: &Vocabulary, tokens: &[u32]) -> Vec<u8> {
    tokens.iter().flat_map(|&t| vocab.token_bytes(t).iter().copied()).collect()
}

/// Token evaluations (accept + mask) one search may spend before it gives up.
const SEARCH_BUDGET: usize = 6_000;
/// States a search keeps per (mask, depth): more than one, since equal masks do not make
/// equal states (the stack of open rules can differ).
const COPIES_PER_KEY: usize = 2;

/// Walks over the grammars of one vocabulary: what it knows of the vocabulary, and a
/// mask buffer.
#[derive(Clone, Debug)]
pub struct Walker {
    vocab: Arc<Vocabulary>,
    /// Per byte value, a text token that is exactly that byte (a normal one preferred).
    byte_token: Vec<Option<u32>>,
    /// Tokens that are not text (control tokens, EOS included, that a grammar can name).
    special: Vec<u32>,
    /// Tokens the end search also tries where they are allowed ([`Walker::with_extra`]).
    extra: Vec<u32>,
    mask: Vec<u32>,
}

impl Walker {
    /// A walker over grammars compiled against `vocab`.
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
        Walker { vocab, byte_token, special, extra: Vec::new(), mask }
    }

    /// Also tries `tokens` in the end search where they are allowed: long closing markers
    /// (`</think>`) that a search over single bytes seldom spells out inside free text,
    /// where every state has the same mask.
    pub fn with_extra(mut self, tokens: Vec<u32>) -> Self {
        self.extra = tokens;
        self
    }

    /// One random walk over `grammar` (compiled against this walker's vocabulary), its
    /// draws from `rng`: the tokens, and whether the grammar may end after them.
    ///
    /// # Errors
    ///
    /// [`WalkError::DeadEnd`] and [`WalkError::Disagree`] (engine bugs), and
    /// [`WalkError::Match`] when the matcher passes one of its limits.
    pub fn walk(
        &mut self,
        grammar: &Arc<CompiledGrammar>,
        rng: &mut impl WalkRng,
        options: &WalkOptions,
    ) -> Result<Walk, WalkError> {
        let mut m = Matcher::new(grammar.clone());
        match options.style {
            Style::Explore => self.explore(&mut m, options.max_tokens, rng),
            Style::TargetLength => self.walk_to_target_length(&mut m, options.max_tokens, rng),
        }
    }

    /// [`Style::Explore`].
    fn explore(&mut self, m: &mut Matcher, max_tokens: usize, rng: &mut impl WalkRng) -> Result<Walk, WalkError> {
        let mut tokens: Vec<u32> = Vec::new();
        let complete = |tokens: Vec<u32>| Ok(Walk { tokens, complete: true });
        let wander_for = max_tokens / 16 + rng.below(max_tokens / 2 - max_tokens / 16 + 1);
        let mut plan: VecDeque<u32> = VecDeque::new();
        while tokens.len() < max_tokens {
            if m.must_end() {
                return complete(tokens);
            }
            let n = self.fill(m, &tokens)?;
            let can_end = m.can_end();
            let step = tokens.len();
            let token = if step < wander_for {
                let frac = step as f64 / wander_for.max(1) as f64;
                if can_end && rng.chance(0.03 + 0.3 * frac * frac) {
                    return complete(tokens);
                }
                self.wander(m, n, rng)
            } else {
                if can_end {
                    return complete(tokens);
                }
                if plan.is_empty() {
                    let depth = max_tokens - step;
                    match self.search(m, &tokens, depth, rng)? {
                        Some(path) => plan.extend(path),
                        None => {
                            // The search used the mask buffer: refill it for this state.
                            self.fill(m, &tokens)?;
                        }
                    }
                }
                match plan.pop_front() {
                    Some(t) => t,
                    None => self.wander(m, n, rng),
                }
            };
            if can_end && self.vocab.is_eos(token) {
                return complete(tokens);
            }
            self.accept(m, token, &tokens)?;
            tokens.push(token);
        }
        if m.can_end() {
            return complete(tokens);
        }
        self.fill(m, &tokens)?;
        Ok(Walk { tokens, complete: false })
    }

    /// [`Style::TargetLength`].
    fn walk_to_target_length(
        &mut self,
        m: &mut Matcher,
        max_tokens: usize,
        rng: &mut impl WalkRng,
    ) -> Result<Walk, WalkError> {
        let target = 8 + rng.below(max_tokens.saturating_sub(8).max(1));
        let mut tokens = Vec::new();
        while tokens.len() < max_tokens {
            m.fill_mask(&mut self.mask)?;
            let vocab = &self.vocab;
            let allowed: Vec<u32> = bitmask::allowed(&self.mask).filter(|&t| !vocab.is_eos(t)).collect();
            let finishing = tokens.len() >= target;
            if m.can_end() && (allowed.is_empty() || finishing) {
                return Ok(Walk { tokens, complete: true });
            }
            if allowed.is_empty() {
                return Err(WalkError::DeadEnd { tokens });
            }
            let pool: Vec<u32> = if finishing && rng.chance(0.7) {
                allowed.iter().copied().filter(|&t| is_punctuation(vocab.token_bytes(t))).collect()
            } else if rng.chance(0.5) {
                allowed.iter().copied().filter(|&t| vocab.token_bytes(t).len() <= 2).collect()
            } else {
                Vec::new()
            };
            let pool = if pool.is_empty() { &allowed } else { &pool };
            let token = pool[rng.below(pool.len())];
            self.accept(m, token, &tokens)?;
            tokens.push(token);
        }
        Ok(Walk { tokens, complete: false })
    }

    /// Fills `self.mask` for the matcher's state; a dead end is an error.
    fn fill(&mut self, m: &mut Matcher, tokens: &[u32]) -> Result<usize, WalkError> {
        m.fill_mask(&mut self.mask)?;
        let n = bitmask::count(&self.mask);
        if n == 0 && !m.can_end() {
            return Err(WalkError::DeadEnd { tokens: tokens.to_vec() });
        }
        Ok(n)
    }

    fn accept(&self, m: &mut Matcher, token: u32, tokens: &[u32]) -> Result<(), WalkError> {
        m.accept_token(token).map_err(|e| match e {
            MatchError::TokenRejected { .. } => WalkError::Disagree { token, tokens: tokens.to_vec() },
            e => WalkError::Match(e),
        })
    }

    /// One wandering step in a state whose mask (`n` tokens allowed) is in `self.mask`.
    fn wander(&mut self, m: &mut Matcher, n: usize, rng: &mut impl WalkRng) -> u32 {
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
    fn candidates(&self, rng: &mut impl WalkRng) -> Vec<u32> {
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
    /// runs out of budget. `tokens` are those accepted so far (for errors). The matcher is
    /// back in its state on return.
    fn search(
        &mut self,
        m: &mut Matcher,
        tokens: &[u32],
        max_depth: usize,
        rng: &mut impl WalkRng,
    ) -> Result<Option<Vec<u32>>, WalkError> {
        let base = m.tokens_accepted();
        let mut path_buf = tokens.to_vec();
        let result = self.search_inner(m, &mut path_buf, max_depth, rng);
        let back = m.tokens_accepted() - base;
        m.rollback(back)?;
        result
    }

    fn search_inner(
        &mut self,
        m: &mut Matcher,
        path_buf: &mut Vec<u32>,
        max_depth: usize,
        rng: &mut impl WalkRng,
    ) -> Result<Option<Vec<u32>>, WalkError> {
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
            m.rollback(m.tokens_accepted() - base)?;
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
                m.rollback(1)?;
            }
        }
        Ok(None)
    }
}

/// Whether a token's bytes are ASCII punctuation only.
fn is_punctuation(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|c| c.is_ascii_punctuation())
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

#[cfg(test)]
mod tests {
    use super::*;
    use stencil_grammar::reference::Recognizer;

    #[test]
    fn nth_allowed_finds_bits() {
        let mut mask = bitmask::new_mask(100);
        for t in [3, 40, 41, 99] {
            bitmask::set(&mut mask, t);
        }
        let got: Vec<u32> = (0..4).map(|k| nth_allowed(&mask, k)).collect();
        assert_eq!(got, vec![3, 40, 41, 99]);
    }

    /// The single bytes, some two-byte words, and an end-of-generation token.
    fn vocab() -> Arc<Vocabulary> {
        let mut tokens: Vec<_> = (0..=255u8).map(|b| (vec![b], TokenKind::Normal)).collect();
        for w in ["ab", "[1", ", ", "12", "]]", "abc"] {
            tokens.push((w.as_bytes().to_vec(), TokenKind::Normal));
        }
        tokens.push((b"<eos>".to_vec(), TokenKind::Control));
        let eos = tokens.len() as u32 - 1;
        Arc::new(Vocabulary::new(tokens, vec![eos]).unwrap())
    }

    /// Every complete walk of either style is in the grammar's language (the reference
    /// recognizer's verdict), walks are deterministic in the seed, and most finish.
    #[test]
    fn walks_are_in_the_language() {
        let vocab = vocab();
        for gbnf in [
            r#"root ::= "[" item ("," " "? item)* "]"
item ::= [0-9]+ | "[" item "]" | "ab" "c"?"#,
            r#"root ::= ("a" | "b")* "c" | "x"{3,9}"#,
        ] {
            let grammar = stencil_grammar::parse_gbnf(gbnf).unwrap();
            let recognizer = Recognizer::new(&grammar).unwrap();
            let compiled = CompiledGrammar::new(&grammar, vocab.clone()).unwrap();
            let mut walker = Walker::new(vocab.clone());
            for style in [Style::Explore, Style::TargetLength] {
                let options = WalkOptions { max_tokens: 48, style };
                let mut complete = 0;
                for seed in 0..40 {
                    let w = walker.walk(&compiled, &mut Xoshiro256::new(seed), &options).unwrap();
                    assert!(w.tokens.len() <= 48);
                    let again = walker.walk(&compiled, &mut Xoshiro256::new(seed), &options).unwrap();
                    assert_eq!(w, again, "{style:?}, seed {seed}: not deterministic");
                    if w.complete {
                        complete += 1;
                        let text = w.text(&vocab);
                        assert!(
                            recognizer.matches(&text),
                            "{style:?}: {:?} is not in {gbnf}",
                            String::from_utf8_lossy(&text)
                        );
                    }
                }
                assert!(complete >= 36, "{style:?}: only {complete} of 40 walks of {gbnf} finished");
            }
        }
    }

    /// A budget too small to finish gives an incomplete walk, not an error.
    #[test]
    fn a_small_budget_leaves_the_walk_incomplete() {
        let vocab = vocab();
        let grammar = stencil_grammar::parse_gbnf(r#"root ::= "x"{20}"#).unwrap();
        let compiled = CompiledGrammar::new(&grammar, vocab.clone()).unwrap();
        for style in [Style::Explore, Style::TargetLength] {
            let w = walk(&compiled, &mut SplitMix64::new(3), &WalkOptions { max_tokens: 5, style }).unwrap();
            assert_eq!((w.tokens.len(), w.complete), (5, false), "{style:?}");
            assert_eq!(w.text(&vocab), b"xxxxx");
        }
    }

    /// Past its target length, a target-length walk ends as soon as the grammar may.
    #[test]
    fn target_length_walks_end_when_they_may() {
        let vocab = vocab();
        let grammar = stencil_grammar::parse_gbnf(r#"root ::= "a"+"#).unwrap();
        let compiled = CompiledGrammar::new(&grammar, vocab.clone()).unwrap();
        let options = WalkOptions { max_tokens: 12, style: Style::TargetLength };
        for seed in 0..20 {
            let w = walk(&compiled, &mut SplitMix64::new(seed), &options).unwrap();
            // The target is 8 to 11 tokens; "a" is the only token, so the walk is the target.
            assert!(w.complete && (8..12).contains(&w.tokens.len()), "seed {seed}: {w:?}");
        }
    }
}
