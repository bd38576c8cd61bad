//! [`CompiledGrammar`] (immutable, shared) and [`Matcher`] (one per sequence).
//!
//! A token is allowed iff its bytes keep the Earley item set non-empty. The mask of a step:
//!
//! - the accepted sets of the current set's kernel items (those not predicted at this
//!   step), from the mask cache (`cache.rs`), ORed together (the first dense set is copied
//!   rather than ORed into zeros);
//! - each kernel item's uncertain suffixes, checked by stepping the parser from the item's
//!   real callers: a few hundred byte steps at most, pruned by the bytes the callers can
//!   take;
//! - at the end of a piece of a long count split into rules, the plain tokens longer than
//!   the piece's rest: all allowed where an item after the rule's end reaches far enough
//!   (the next piece), none where no item takes plain text (the quote); where it reaches
//!   23 characters those up to 23 come from their mask and only the longer ones are
//!   scanned; otherwise all are scanned;
//! - last, token terminals (`<[id]>`, `!<[id]>`) and EOS where the start rule is complete.
//!
//! Accepting a token scans its bytes (and, for token terminals, merges the whole-token
//! step into the same set); a refused token leaves the matcher unchanged and says at which
//! byte it failed. Rollback truncates the chart to the set where a token started; fork
//! clones the chart. Forced text: `forced_bytes` follows the single possible next byte
//! while there is one; `forced_tokens` covers those bytes with the longest vocabulary
//! tokens and drops trailing tokens that a longer token could straddle (canonical-safe at
//! the boundary).

use crate::automaton::{Automaton, NO_ORIGIN};
use crate::bitmask::{self, TokenSet};
use crate::bytes::ByteSet;
use crate::cache::{self, StateMasks};
use crate::earley::{Chart, Item, Scratch};
use crate::error::{CompileError, MatchError};
use crate::limits::{LimitKind, Limits};
use crate::vocab::trie::{TextTokens, TokenTrie};
use crate::vocab::Vocabulary;
use rayon::prelude::*;
use std::sync::{Arc, OnceLock};
use stencil_grammar::Grammar;

/// A grammar compiled against a vocabulary: immutable, shared by any number of
/// [`Matcher`]s on any threads. Token-mask cache entries are filled on first use.
///
/// ```
/// use std::sync::Arc;
/// use stencil_grammar::{Expr, Grammar};
/// use stencil_mask::{CompiledGrammar, Matcher, TokenKind, Vocabulary, bitmask};
///
/// let tokens = ["<eos>", "a", "b", "ab"].iter().enumerate()
///     .map(|(i, t)| (t.as_bytes().to_vec(), if i == 0 { TokenKind::Control } else { TokenKind::Normal }))
///     .collect();
/// let vocab = Arc::new(Vocabulary::new(tokens, vec![0]).unwrap());
/// let mut g = Grammar::new();
/// g.root = g.add_rule("root", Expr::plus(Expr::literal("ab"))); // root ::= ("ab")+
/// let compiled = CompiledGrammar::new(&g, vocab).unwrap();
///
/// let mut m = Matcher::new(compiled);
/// let mut mask = bitmask::new_mask(4);
/// m.fill_mask(&mut mask).unwrap();
/// assert_eq!(bitmask::allowed(&mask).collect::<Vec<_>>(), vec![1, 3]); // "a", "ab"
/// m.accept_token(3).unwrap();
/// assert!(m.can_end());
/// assert!(m.accept_token(2).is_err()); // "b" cannot follow "ab"
/// ```
pub struct CompiledGrammar {
    automaton: Automaton,
    vocab: Arc<Vocabulary>,
    text: Arc<TextTokens>,
    cache: Vec<OnceLock<Result<StateMasks, LimitKind>>>,
    limits: Limits,
}

impl std::fmt::Debug for CompiledGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledGrammar").field("stats", &self.stats()).finish()
    }
}

/// Sizes of a compiled grammar, for summaries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrammarStats {
    /// Rules that stay rules (after small ones were expanded in place).
    pub rules: usize,
    /// Automaton states over all rules (after minimization and trimming).
    pub states: usize,
    /// The most byte classes of any rule (each rule splits the bytes by its own edges).
    pub byte_classes: usize,
    /// Distinct whole-token terminals (`<[id]>`, `!<[id]>`, `<text>`).
    pub token_terminals: usize,
}

impl CompiledGrammar {
    /// Compiles with the default [`Limits`].
    pub fn new(grammar: &Grammar, vocab: Arc<Vocabulary>) -> Result<Arc<Self>, CompileError> {
        Self::with_limits(grammar, vocab, Limits::default())
    }

    /// Compiles `grammar` against `vocab` under `limits`.
    ///
    /// # Errors
    ///
    /// A [`CompileError`]: a limit passed (naming it and the rule), a regex terminal that
    /// is invalid or cannot be enforced, a token terminal the vocabulary lacks, a call of
    /// a rule that does not exist, or a grammar whose language is empty.
    pub fn with_limits(grammar: &Grammar, vocab: Arc<Vocabulary>, limits: Limits) -> Result<Arc<Self>, CompileError> {
        let automaton = Automaton::compile(grammar, &vocab, &limits)?;
        let text = vocab.text_tokens();
        let cache = (0..automaton.n_states()).map(|_| OnceLock::new()).collect();
        Ok(Arc::new(CompiledGrammar { automaton, vocab, text, cache, limits }))
    }

    /// The vocabulary it was compiled against.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Its sizes.
    pub fn stats(&self) -> GrammarStats {
        let a = &self.automaton;
        GrammarStats {
            rules: a.rules.start.iter().filter(|&&s| s != crate::automaton::DEAD).count() - 1,
            states: a.n_states(),
            byte_classes: a.max_classes(),
            token_terminals: a.edges.terminals.len(),
        }
    }

    fn new_scratch(&self) -> Scratch {
        Scratch::new(self.automaton.n_states(), self.limits.max_items_per_step, self.limits.max_step_work)
    }

    fn state_masks(&self, state: u32, scratch: &mut Scratch) -> Result<&StateMasks, MatchError> {
        let cell = &self.cache[state as usize];
        if cell.get().is_none() {
            match cache::compute(&self.automaton, &self.text, &self.vocab, state, scratch) {
                // The step's work budget ran out (partly spent before this entry): not a
                // property of the state, so not cached.
                Err(LimitKind::StepWork) => return Err(MatchError::LimitExceeded { limit: LimitKind::StepWork }),
                // Another thread may have filled it meanwhile, with the same value.
                r => drop(cell.set(r)),
            }
        }
        let entry = cell.get().expect("filled above");
        entry.as_ref().map_err(|&limit| MatchError::LimitExceeded { limit })
    }

    /// Fills every state's mask cache now (in parallel) instead of on first use.
    pub fn warm_up(&self) {
        (0..self.automaton.n_states() as u32).into_par_iter().for_each_init(
            || self.new_scratch(),
            |scratch, s| {
                scratch.work = 0;
                let _ = self.state_masks(s, scratch);
            },
        );
    }
}

/// Where one accepted token started in the chart.
#[derive(Clone, Copy, Debug)]
struct TokenStep {
    chart_len: usize,
    eos: bool,
}

/// The parse state of one sequence: next-token masks, accepting tokens, rollback, fork.
/// Cheap to create and to clone ([`Matcher::fork`]).
pub struct Matcher {
    grammar: Arc<CompiledGrammar>,
    chart: Chart,
    steps: Vec<TokenStep>,
    ended: bool,
    scratch: Option<Scratch>,
    /// A limit hit while building the first item set: every mask and accept reports it
    /// (the set would otherwise be silently truncated).
    start_error: Option<LimitKind>,
}

impl Clone for Matcher {
    fn clone(&self) -> Self {
        self.fork()
    }
}

impl Matcher {
    /// A matcher at the start of `grammar`: nothing accepted yet.
    pub fn new(grammar: Arc<CompiledGrammar>) -> Self {
        let mut scratch = grammar.new_scratch();
        let (chart, info) = Chart::new(
            &grammar.automaton,
            &[Item { state: grammar.automaton.start_state, origin: NO_ORIGIN }],
            &mut scratch,
        );
        let start_error = info.overflow.then(|| scratch.overflow_kind());
        Matcher { grammar, chart, steps: Vec::new(), ended: false, scratch: Some(scratch), start_error }
    }

    /// An independent copy in the same state (for beams and speculation).
    pub fn fork(&self) -> Self {
        Matcher {
            grammar: self.grammar.clone(),
            chart: self.chart.clone(),
            steps: self.steps.clone(),
            ended: self.ended,
            scratch: None,
            start_error: self.start_error,
        }
    }

    /// The grammar it matches.
    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.grammar
    }

    /// Tokens accepted so far (EOS included).
    pub fn tokens_accepted(&self) -> usize {
        self.steps.len()
    }

    /// True once EOS was accepted.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The grammar's text may end here (EOS is allowed).
    pub fn can_end(&self) -> bool {
        let accept = self.grammar.automaton.accept_state;
        !self.ended && self.chart.last().iter().any(|it| it.state == accept)
    }

    /// The grammar's text must end here: EOS is the only allowed token.
    pub fn must_end(&self) -> bool {
        let a = &self.grammar.automaton;
        self.can_end()
            && self
                .chart
                .last()
                .iter()
                .all(|it| !a.has_byte_edges(it.state) && a.edges.token_edges[it.state as usize].is_empty())
    }

    fn take_scratch(&mut self) -> Scratch {
        self.scratch.take().unwrap_or_else(|| self.grammar.new_scratch())
    }

    /// Writes the allowed-token bitmask for the next token into `mask` (at least
    /// `bitmask::words(vocab.mask_width())` words; extra words are zeroed).
    pub fn fill_mask(&mut self, mask: &mut [u32]) -> Result<(), MatchError> {
        let mut scratch = self.take_scratch();
        let r = self.fill_mask_with(mask, &mut scratch);
        self.scratch = Some(scratch);
        r
    }

    fn fill_mask_with(&mut self, mask: &mut [u32], scratch: &mut Scratch) -> Result<(), MatchError> {
        if let Some(limit) = self.start_error {
            return Err(MatchError::LimitExceeded { limit });
        }
        if self.ended {
            mask.fill(0);
            return Ok(());
        }
        scratch.work = 0;
        let g = self.grammar.clone();
        let a = &g.automaton;
        let cur = (self.chart.len() - 1) as u32;
        let kernel: Vec<Item> = self.chart.last().iter().copied().filter(|it| it.origin != cur).collect();
        let mut states: Vec<u32> = kernel.iter().map(|it| it.state).collect();
        states.sort_unstable();
        states.dedup();
        // The first dense set is copied rather than ORed into zeros: one pass over the mask.
        let mut cleared = false;
        for &s in &states {
            let accepted = &g.state_masks(s, scratch)?.accepted;
            if !cleared {
                accepted.write_into(mask);
                cleared = true;
            } else {
                accepted.or_into(mask);
            }
        }
        if !cleared {
            mask.fill(0);
        }
        for it in &kernel {
            if it.origin == NO_ORIGIN {
                continue;
            }
            let masks = g.state_masks(it.state, scratch)?;
            if let Some(suffixes) = &masks.uncertain {
                self.check_suffixes(a, *it, suffixes, mask, scratch)?;
            }
            if let Some(n) = masks.plain_after {
                self.check_plain_after(&g, *it, n, mask, scratch)?;
            }
        }
        for it in self.chart.last() {
            for &(term, _) in &a.edges.token_edges[it.state as usize] {
                let t = a.edges.terminals[term as usize];
                if t.negated {
                    for id in 0..g.vocab.len() as u32 {
                        if id != t.id && !g.vocab.is_eos(id) {
                            bitmask::set(mask, id);
                        }
                    }
                } else {
                    bitmask::set(mask, t.id);
                }
            }
        }
        if self.can_end() {
            g.vocab.eos_ids().iter().for_each(|&e| bitmask::set(mask, e));
        }
        Ok(())
    }

    /// Sets the tokens of `suffixes` that can follow once `item`'s rule ends, in the
    /// item's real context.
    fn check_suffixes(
        &mut self,
        a: &Automaton,
        item: Item,
        suffixes: &TokenTrie,
        mask: &mut [u32],
        scratch: &mut Scratch,
    ) -> Result<(), MatchError> {
        let Some(base) = self.push_callers(a, item, scratch)? else {
            return Ok(());
        };
        let result = self.scan_suffixes(a, base, suffixes, mask, scratch);
        self.chart.truncate(base);
        result
    }

    /// Sets the plain tokens of more than `n` characters that `item`'s rule, ending after
    /// `n` of them (see `StateMasks::plain_after`), lets its real callers take on. Where
    /// some item after the rule's end surely takes any plain text as long as the longest
    /// token's rest (the next piece of a split count), they all are; where none takes a
    /// plain character (a string's closing quote), none is; otherwise those an item
    /// surely takes are set at once by length, and the rests of the others scanned.
    fn check_plain_after(
        &mut self,
        g: &CompiledGrammar,
        item: Item,
        n: u32,
        mask: &mut [u32],
        scratch: &mut Scratch,
    ) -> Result<(), MatchError> {
        let a = &g.automaton;
        let Some(base) = self.push_callers(a, item, scratch)? else {
            return Ok(());
        };
        // The farthest any item after the rule's end surely takes plain text on.
        let after = self.chart.last();
        let farthest = after.iter().map(|it| a.text.text_reach[it.state as usize] as usize).max().unwrap_or(0);
        let (n, short) = (n as usize, g.text.plain_upto.len() - 1);
        let result = if n.saturating_add(farthest) >= g.text.plain_max_chars as usize {
            bitmask::or_into(mask, &g.text.plain);
            Ok(())
        } else if after.iter().all(|it| !a.takes_plain_text(it.state)) {
            Ok(())
        } else if n.saturating_add(farthest) >= short {
            // The plain tokens of up to `short` characters all go on; the longer ones are
            // scanned.
            bitmask::or_into(mask, &g.text.plain_upto[short]);
            let rests = g.text.plain_after(n, true, &g.vocab);
            self.scan_suffixes(a, base, rests, mask, scratch)
        } else {
            let rests = g.text.plain_after(n, false, &g.vocab);
            self.scan_suffixes(a, base, rests, mask, scratch)
        };
        self.chart.truncate(base);
        result
    }

    /// Pushes the set of `item`'s callers after its rule ends; the chart's length before,
    /// or `None` when it has no callers (the chart is then unchanged).
    fn push_callers(&mut self, a: &Automaton, item: Item, scratch: &mut Scratch) -> Result<Option<usize>, MatchError> {
        let rule = a.table.state_rule[item.state as usize];
        let callers: Vec<Item> = self
            .chart
            .set(item.origin as usize)
            .iter()
            .flat_map(|p| {
                a.edges.calls[p.state as usize]
                    .iter()
                    .filter(|(r, _)| *r == rule)
                    .map(|&(_, t)| Item { state: t, origin: p.origin })
            })
            .collect();
        if callers.is_empty() {
            return Ok(None);
        }
        let base = self.chart.len();
        let info = self.chart.push_set(a, callers, scratch);
        if info.overflow {
            self.chart.truncate(base);
            return Err(MatchError::LimitExceeded { limit: scratch.overflow_kind() });
        }
        Ok(Some(base))
    }

    /// Sets the tokens of `suffixes` that the chart's last set (pushed at `base`) takes.
    fn scan_suffixes(
        &mut self,
        a: &Automaton,
        base: usize,
        suffixes: &TokenTrie,
        mask: &mut [u32],
        scratch: &mut Scratch,
    ) -> Result<(), MatchError> {
        let mut result = Ok(());
        let mut next_bytes: Vec<ByteSet> = vec![self.chart.next_bytes(a)];
        let mut i = 1;
        while result.is_ok() && i < suffixes.nodes.len() {
            let node = suffixes.nodes[i];
            let depth = node.depth as usize;
            if !next_bytes[depth - 1].contains(node.byte) {
                i = node.subtree_end as usize;
                continue;
            }
            self.chart.truncate(base + depth);
            let info = self.chart.scan_byte(a, node.byte, scratch);
            if info.overflow {
                result = Err(MatchError::LimitExceeded { limit: scratch.overflow_kind() });
            } else if self.chart.last().is_empty() {
                i = node.subtree_end as usize;
            } else {
                suffixes.tokens(i).iter().for_each(|&t| bitmask::set(mask, t));
                next_bytes.truncate(depth);
                next_bytes.push(self.chart.next_bytes(a));
                i += 1;
            }
        }
        self.chart.truncate(base + 1);
        result
    }

    /// Accepts `token`; an error (and no change) when the grammar does not allow it.
    pub fn accept_token(&mut self, token: u32) -> Result<(), MatchError> {
        let g = self.grammar.clone();
        if let Some(limit) = self.start_error {
            return Err(MatchError::LimitExceeded { limit });
        }
        if self.ended {
            return Err(MatchError::AlreadyEnded);
        }
        if token as usize >= g.vocab.len() {
            return Err(MatchError::TokenOutOfRange { token, len: g.vocab.len() });
        }
        let start = self.chart.len();
        if g.vocab.is_eos(token) && self.can_end() {
            self.steps.push(TokenStep { chart_len: start, eos: true });
            self.ended = true;
            return Ok(());
        }
        let mut scratch = self.take_scratch();
        let r = self.advance(&g, token, &mut scratch);
        self.scratch = Some(scratch);
        match r {
            Ok(()) => {
                self.steps.push(TokenStep { chart_len: start, eos: false });
                Ok(())
            }
            Err(e) => {
                self.chart.truncate(start);
                Err(e)
            }
        }
    }

    fn advance(&mut self, g: &CompiledGrammar, token: u32, scratch: &mut Scratch) -> Result<(), MatchError> {
        let a = &g.automaton;
        let from = self.chart.len() - 1;
        let mut rejected_at = None;
        scratch.work = 0;
        if g.vocab.is_text(token) {
            for (k, &b) in g.vocab.token_bytes(token).iter().enumerate() {
                let info = self.chart.scan_byte(a, b, scratch);
                if info.overflow {
                    return Err(MatchError::LimitExceeded { limit: scratch.overflow_kind() });
                }
                if rejected_at.is_none() && self.chart.last().is_empty() {
                    rejected_at = Some(k);
                }
            }
        } else {
            self.chart.push_empty();
        }
        if !a.edges.terminals.is_empty() {
            let (_, info) = self.chart.merge_token_step(a, from, token, g.vocab.is_eos(token), scratch);
            if info.overflow {
                return Err(MatchError::LimitExceeded { limit: scratch.overflow_kind() });
            }
        }
        if self.chart.last().is_empty() {
            return Err(MatchError::TokenRejected { token, byte_offset: rejected_at });
        }
        Ok(())
    }

    /// Accepts tokens one by one; stops at the first refused one.
    pub fn accept_tokens(&mut self, tokens: &[u32]) -> Result<(), (usize, MatchError)> {
        tokens.iter().enumerate().try_for_each(|(i, &t)| self.accept_token(t).map_err(|e| (i, e)))
    }

    /// Undoes the last `n` accepted tokens.
    pub fn rollback(&mut self, n: usize) -> Result<(), MatchError> {
        if n > self.steps.len() {
            return Err(MatchError::RollbackTooFar { requested: n, available: self.steps.len() });
        }
        if n == 0 {
            return Ok(());
        }
        let step = self.steps[self.steps.len() - n];
        self.steps.truncate(self.steps.len() - n);
        self.chart.truncate(step.chart_len);
        self.ended = self.steps.last().is_some_and(|s| s.eos);
        Ok(())
    }

    /// The bytes the grammar forces next (up to `limit`): every string the grammar can
    /// continue with starts with them.
    pub fn forced_bytes(&mut self, limit: usize) -> Vec<u8> {
        let mut out = Vec::new();
        if self.ended || self.start_error.is_some() {
            return out;
        }
        let g = self.grammar.clone();
        let a = &g.automaton;
        let base = self.chart.len();
        let mut scratch = self.take_scratch();
        scratch.work = 0;
        while out.len() < limit {
            let set = self.chart.last();
            if set.iter().any(|it| it.state == a.accept_state || !a.edges.token_edges[it.state as usize].is_empty()) {
                break;
            }
            let Some(b) = self.chart.next_bytes(a).only() else { break };
            let info = self.chart.scan_byte(a, b, &mut scratch);
            if info.overflow || self.chart.last().is_empty() {
                break;
            }
            out.push(b);
        }
        self.chart.truncate(base);
        self.scratch = Some(scratch);
        out
    }

    /// Tokens that spell the forced bytes, safe to append without sampling: the longest
    /// vocabulary tokens covering the forced bytes, minus trailing tokens that a longer
    /// token could straddle (so that the model's own tokenization stays reachable).
    pub fn forced_tokens(&mut self, limit: usize) -> Vec<u32> {
        let bytes = self.forced_bytes(limit);
        let g = self.grammar.clone();
        let trie = &g.text.all;
        let mut tokens: Vec<(usize, u32)> = Vec::new(); // (start offset, token)
        let mut pos = 0;
        while pos < bytes.len() {
            // Longest token that is a prefix of bytes[pos..].
            let mut node = 0usize;
            let mut best = None;
            for (k, &b) in bytes[pos..].iter().enumerate() {
                let end = trie.nodes[node].subtree_end as usize;
                let mut child = node + 1;
                while child < end && trie.nodes[child].byte != b {
                    child = trie.nodes[child].subtree_end as usize;
                }
                if child >= end {
                    break;
                }
                node = child;
                if let Some(&t) = trie.tokens(node).first() {
                    best = Some((k + 1, t));
                }
            }
            let Some((len, t)) = best else { break };
            tokens.push((pos, t));
            pos += len;
        }
        let covered_all = pos == bytes.len();
        // Drop trailing tokens while some longer token starts where they start and runs
        // past the forced bytes.
        if !(covered_all && self.forced_text_ends(&bytes)) {
            for _ in 0..4 {
                let Some(&(start, _)) = tokens.last() else { break };
                let straddles = trie.find(&bytes[start..]).is_some_and(|n| trie.nodes[n].subtree_end as usize > n + 1);
                if !straddles && covered_all {
                    break;
                }
                tokens.pop();
            }
        }
        tokens.into_iter().map(|(_, t)| t).collect()
    }

    /// True when after `bytes` the grammar must end.
    fn forced_text_ends(&mut self, bytes: &[u8]) -> bool {
        let g = self.grammar.clone();
        let base = self.chart.len();
        let mut scratch = self.take_scratch();
        scratch.work = 0;
        for &b in bytes {
            self.chart.scan_byte(&g.automaton, b, &mut scratch);
        }
        let a = &g.automaton;
        let ends = self
            .chart
            .last()
            .iter()
            .all(|it| !a.has_byte_edges(it.state) && a.edges.token_edges[it.state as usize].is_empty())
            && self.chart.last().iter().any(|it| it.state == a.accept_state);
        self.chart.truncate(base);
        self.scratch = Some(scratch);
        ends
    }
}

/// Fills the masks of many matchers in parallel (one mask per matcher).
pub fn fill_masks_parallel(matchers: &mut [Matcher], masks: &mut [Vec<u32>]) -> Vec<Result<(), MatchError>> {
    matchers.par_iter_mut().zip(masks.par_iter_mut()).map(|(m, mask)| m.fill_mask(mask)).collect()
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<CompiledGrammar>();
    is::<Matcher>();
    let _ = TokenSet::List(vec![]);
}
