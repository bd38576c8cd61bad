#![allow(dead_code, clippy::all)]
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use stencil_mask::{bitmask, CompiledGrammar, Matcher, Vocabulary};
use stencil_mask::walk::{Style, WalkOptions, Walker as NewWalker};
use stencil_grammar::random::{SplitMix64, Xoshiro256};

mod old_rng {
//! A small seeded PRNG (xoshiro256**, seeded by SplitMix64), so that a seed gives the same
//! samples on every platform and version.

pub struct Rng {
    s: [u64; 4],
}

impl Rng {
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


}
const SEARCH_BUDGET: usize = 6_000;
const COPIES_PER_KEY: usize = 2;
enum Walk {
    Complete(Vec<u8>),
    Incomplete,
}

enum Failure {
    /// No token allowed and the grammar cannot end.
    DeadEnd {
        tokens: Vec<u32>,
        text: Vec<u8>,
    },
    /// A token of the mask that the matcher refused.
    Disagree {
        token: u32,
        tokens: Vec<u32>,
        text: Vec<u8>,
    },
    Match(stencil_mask::MatchError),
}

struct Walker {
    vocab: Arc<Vocabulary>,
    /// Per byte value, a text token that is exactly that byte (a normal one preferred).
    byte_token: Vec<Option<u32>>,
    /// Tokens that are not text (control tokens, EOS included, that a grammar can name).
    special: Vec<u32>,
    mask: Vec<u32>,
}

impl Walker {
    fn new(vocab: Arc<Vocabulary>) -> Self {
        let mut byte_token: Vec<Option<u32>> = vec![None; 256];
        let mut special = Vec::new();
        for id in 0..vocab.len() as u32 {
            if vocab.is_text(id) {
                if let [b] = vocab.token_bytes(id) {
                    let slot = &mut byte_token[*b as usize];
                    let better = match *slot {
                        None => true,
                        Some(old) => {
                            vocab.kind(old) != stencil_mask::TokenKind::Normal
                                && vocab.kind(id) == stencil_mask::TokenKind::Normal
                        }
                    };
                    if better {
                        *slot = Some(id);
                    }
                }
            } else if vocab.kind(id) != stencil_mask::TokenKind::Unused {
                special.push(id);
            }
        }
        let mask = bitmask::new_mask(vocab.mask_width());
        Walker { vocab, byte_token, special, mask }
    }

    /// The text of the tokens accepted (a control token the grammar names gives its text;
    /// the final EOS is never among them).
    fn text(&self, tokens: &[u32]) -> Vec<u8> {
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
            stencil_mask::MatchError::TokenRejected { .. } => {
                Failure::Disagree { token, tokens: tokens.to_vec(), text: self.text(tokens) }
            }
            e => Failure::Match(e),
        })
    }

    fn walk(&mut self, g: &Arc<CompiledGrammar>, max_tokens: usize, rng: &mut old_rng::Rng) -> Result<Walk, Failure> {
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
    fn wander(&mut self, m: &mut Matcher, n: usize, rng: &mut old_rng::Rng) -> u32 {
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
    fn candidates(&self, rng: &mut old_rng::Rng) -> Vec<u32> {
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
        rng: &mut old_rng::Rng,
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
        rng: &mut old_rng::Rng,
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

/// SplitMix64: a tiny, fixed, seedable generator (sequences are reproducible).
struct BRng(u64);

impl BRng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Seeded random walks over Stencil's masks. Each step picks an allowed non-EOS token
/// (half the time among the ≤2-byte ones, which walks the grammar's structure more than
/// long string tokens do); past a per-sequence target length it prefers punctuation-only
/// tokens and takes EOS as soon as the grammar allows it.
fn random_walks(
    g: &Arc<CompiledGrammar>,
    vocab: &Vocabulary,
    n: usize,
    max_len: usize,
    seed: u64,
) -> Result<Vec<Vec<u32>>, String> {
    let mut mask = bitmask::new_mask(vocab.mask_width());
    let eos = vocab.eos_ids()[0];
    let mut out = Vec::new();
    for k in 0..n {
        let mut rng = BRng(seed ^ (k as u64).wrapping_mul(0xA076_1D64_78BD_642F));
        let target = 8 + rng.below(max_len - 8);
        let mut m = Matcher::new(g.clone());
        let mut seq = Vec::new();
        while seq.len() < max_len {
            m.fill_mask(&mut mask).map_err(|e| format!("walk {k}, step {}: {e}", seq.len()))?;
            let allowed: Vec<u32> = bitmask::allowed(&mask).filter(|&t| !vocab.is_eos(t)).collect();
            let finishing = seq.len() >= target;
            if m.can_end() && (allowed.is_empty() || finishing) {
                m.accept_token(eos).map_err(|e| format!("walk {k}: EOS: {e}"))?;
                seq.push(eos);
                break;
            }
            if allowed.is_empty() {
                break;
            }
            let pool: Vec<u32> = if finishing && rng.chance(70) {
                allowed.iter().copied().filter(|&t| is_punct(vocab.token_bytes(t))).collect()
            } else if rng.chance(50) {
                allowed.iter().copied().filter(|&t| vocab.token_bytes(t).len() <= 2).collect()
            } else {
                Vec::new()
            };
            let pool = if pool.is_empty() { &allowed } else { &pool };
            let t = pool[rng.below(pool.len())];
            m.accept_token(t).map_err(|e| format!("walk {k}: token {t} from its own mask: {e}"))?;
            seq.push(t);
        }
        out.push(seq);
    }
    Ok(out)
}

fn is_punct(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(|c| c.is_ascii_punctuation())
}



#[test]
fn equivalence() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/gbnf");
    let mut files: Vec<_> = std::fs::read_dir(&root).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "gbnf")).collect();
    files.sort();
    let (vocab, _) = stencil_test_support::fixtures::gemma3();
    let (mut cli_n, mut bench_n, mut complete) = (0, 0, 0);
    for f in files {
        let g = stencil_grammar::parse_gbnf(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let c = CompiledGrammar::new(&g, vocab.clone()).unwrap();
        let mut old = Walker::new(vocab.clone());
        let mut new = NewWalker::new(vocab.clone());
        for max_tokens in [24usize, 64] {
            let base = old_rng::Rng::new(7).next_u64();
            assert_eq!(base, Xoshiro256::new(7).next_u64());
            for i in 0..6u64 {
                let o = old.walk(&c, max_tokens, &mut old_rng::Rng::new(base.wrapping_add(i)));
                let n = new.walk(&c, &mut Xoshiro256::new(base.wrapping_add(i)), &WalkOptions { max_tokens, style: Style::Explore });
                match (o, n) {
                    (Ok(Walk::Complete(b)), Ok(w)) => { assert!(w.complete, "{f:?}"); assert_eq!(b, w.text(&vocab), "{f:?} {i}"); complete += 1; }
                    (Ok(Walk::Incomplete), Ok(w)) => assert!(!w.complete, "{f:?}"),
                    (Err(_), Err(_)) => {}
                    _ => panic!("{f:?} {i}: outcomes differ"),
                }
                cli_n += 1;
            }
            let seed = 0x5eed ^ fnv(&f.display().to_string());
            let old_seqs = random_walks(&c, &vocab, 8, max_tokens, seed).unwrap();
            let eos = vocab.eos_ids()[0];
            let mut new_seqs = Vec::new();
            for k in 0..8usize {
                let mut rng = SplitMix64::new(seed ^ (k as u64).wrapping_mul(0xA076_1D64_78BD_642F));
                let w = new.walk(&c, &mut rng, &WalkOptions { max_tokens, style: Style::TargetLength }).unwrap();
                let mut s = w.tokens; if w.complete { s.push(eos); }
                new_seqs.push(s);
            }
            assert_eq!(old_seqs, new_seqs, "{f:?}");
            bench_n += old_seqs.len();
        }
    }
    eprintln!("equivalent: {cli_n} CLI walks ({complete} complete), {bench_n} bench walks");
}
