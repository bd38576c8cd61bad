//! `stencil sample --random`: model-free random walks through the token masks.
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
//! engine bug, reported as [`CliError::EngineBug`] (exit 3).
//!
//! For a schema, every complete sample is also validated post hoc against the schema
//! before it is printed. Where the grammar enforces every keyword (strict mode, or lenient
//! mode with nothing left over), a sample that does not validate is a soundness bug: it is
//! reported loudly on stderr, not printed, and the command exits 3 after the last sample.
//! In lenient mode with unenforced keywords, such a sample is only reported and counted.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use stencil_mask::{bitmask, CompiledGrammar, Matcher, Vocabulary};

use crate::error::CliError;
use crate::print_line;
use crate::rng::Rng;
use crate::source::{describe_issue, GrammarSource, LoadedSchema};
use crate::text::escape;
use crate::vocab::LoadedVocab;

pub struct Options {
    pub count: usize,
    pub seed: u64,
    pub max_tokens: usize,
}

/// Token evaluations (accept + mask) one search may spend before it gives up.
const SEARCH_BUDGET: usize = 6_000;
/// States a search keeps per (mask, depth): more than one, since
/// equal masks do not make equal states (the stack of open rules can differ).
const COPIES_PER_KEY: usize = 2;

pub fn run(source: &GrammarSource, vocab_path: &Path, opts: &Options) -> Result<ExitCode, CliError> {
    let loaded = source.load()?;
    let vocab = LoadedVocab::load(vocab_path)?;
    let (compiled, _) = source.compile(&loaded.grammar, vocab.vocab.clone(), Some(vocab_path))?;
    let mut walker = Walker::new(compiled.vocab().clone());
    let base = Rng::new(opts.seed).next_u64();
    let (mut complete, mut not_utf8) = (0usize, 0usize);
    // Schema samples that fail post-hoc validation: explained by lenient mode, or not.
    let (mut rejected, mut unsound) = (0usize, 0usize);
    for i in 0..opts.count {
        let mut rng = Rng::new(base.wrapping_add(i as u64));
        match walker.walk(&compiled, opts.max_tokens, &mut rng) {
            Ok(Walk::Complete(bytes)) => {
                complete += 1;
                let text = match String::from_utf8(bytes) {
                    Ok(s) => s,
                    Err(e) => {
                        not_utf8 += 1;
                        eprintln!("sample {}: not valid UTF-8 (printed lossily)", i + 1);
                        String::from_utf8_lossy(e.as_bytes()).into_owned()
                    }
                };
                if let Some(schema) = &loaded.schema {
                    match post_hoc(schema, &text) {
                        Verdict::Valid => {}
                        Verdict::Invalid(issues) if !schema.is_exact() => {
                            rejected += 1;
                            eprintln!(
                                "sample {}: rejected by post-hoc validation (lenient mode, not printed): {}\n  {}",
                                i + 1,
                                serde_json::to_string(&text).expect("a string serializes"),
                                issues.join("\n  ")
                            );
                            continue;
                        }
                        Verdict::Invalid(issues) | Verdict::NotJson(issues) => {
                            unsound += 1;
                            eprintln!(
                                "SCHEMA VALIDATION FAILURE in sample {} (schema {}): the grammar produced a text \
                                 that does not validate against the schema, which the grammar is meant to enforce \
                                 (a soundness bug; not printed).\n  sample: {}\n  {}",
                                i + 1,
                                source.path().display(),
                                serde_json::to_string(&text).expect("a string serializes"),
                                issues.join("\n  ")
                            );
                            continue;
                        }
                    }
                }
                print_line(&serde_json::to_string(&text).expect("a string serializes"))?;
            }
            Ok(Walk::Incomplete) => {
                eprintln!("sample {}: incomplete after {} tokens", i + 1, opts.max_tokens);
            }
            Err(failure) => {
                return Err(match failure {
                    Failure::DeadEnd { tokens, text } => CliError::EngineBug(format!(
                        "DEAD END in sample {} (grammar {}): after {} tokens no token is allowed, yet the \
                         grammar cannot end (an engine bug).\n  text so far: {}\n  token ids: {tokens:?}",
                        i + 1,
                        source.path().display(),
                        tokens.len(),
                        escape(&text)
                    )),
                    Failure::Disagree { token, tokens, text } => CliError::EngineBug(format!(
                        "MASK/MATCHER DISAGREEMENT in sample {} (grammar {}): token {token} ({}) was allowed by the \
                         mask but the matcher refused it (an engine bug).\n  text so far: {}\n  token ids: {tokens:?}",
                        i + 1,
                        source.path().display(),
                        escape(walker.vocab.token_bytes(token)),
                        escape(&text)
                    )),
                    Failure::Match(e) => CliError::Match(e),
                });
            }
        }
    }
    let pct = if opts.count == 0 { 100.0 } else { 100.0 * complete as f64 / opts.count as f64 };
    let mut summary = format!("{complete} of {} samples complete ({pct:.0}%)", opts.count);
    if not_utf8 > 0 {
        summary.push_str(&format!(", {not_utf8} not valid UTF-8"));
    }
    if loaded.schema.is_some() {
        match (rejected, unsound) {
            (0, 0) => summary.push_str("; every complete sample validates against the schema"),
            (r, 0) => summary
                .push_str(&format!("; {r} rejected by post-hoc validation (keywords the grammar does not enforce)")),
            (_, u) => summary.push_str(&format!("; {u} DO NOT VALIDATE against the schema (a soundness bug)")),
        }
    }
    eprintln!("{summary}");
    if unsound > 0 {
        return Err(CliError::EngineBug(format!(
            "{unsound} sample{} of schema {} did not validate against it, although the grammar is meant to \
             enforce it (a soundness bug)",
            if unsound == 1 { "" } else { "s" },
            source.path().display()
        )));
    }
    Ok(ExitCode::SUCCESS)
}

/// The post-hoc verdict on a schema sample.
enum Verdict {
    Valid,
    /// The validation issues, one line each.
    Invalid(Vec<String>),
    /// Not JSON at all (never explained by lenient mode).
    NotJson(Vec<String>),
}

fn post_hoc(schema: &LoadedSchema, text: &str) -> Verdict {
    let instance: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Verdict::NotJson(vec![format!("not JSON: {e}")]),
    };
    match schema.validate(&instance) {
        Ok(()) => Verdict::Valid,
        Err(issues) => Verdict::Invalid(issues.iter().map(describe_issue).collect()),
    }
}

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

    fn walk(&mut self, g: &Arc<CompiledGrammar>, max_tokens: usize, rng: &mut Rng) -> Result<Walk, Failure> {
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
}
