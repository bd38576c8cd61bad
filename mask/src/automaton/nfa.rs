//! Thompson construction: one rule body → an ε-NFA over bytes, rule calls and token edges.
//!
//! - Character classes become their UTF-8 byte sequences (made once per compile per
//!   class); regex terminals are built from their `regex-syntax` syntax tree in the same
//!   construction. Regexes are parsed once per compile (`Regexes`): the schema compiler
//!   hands small regexes over as IR (`Expr::from_hir`) and big ones with their syntax tree
//!   (`stencil_grammar::Regex::from_hir`), so they are not parsed again.
//! - Inlined rules are expanded in place; a call of a rule fused into its tail callers
//!   (`fuse.rs`) is an ε edge into the callee's body, built once per NFA.
//! - In tail position (nothing follows in the rule), an expression or a sequence's suffix
//!   is built once however often it occurs there, since both occurrences end where the
//!   rule ends: a trie of names shares its subtrees and ends, and comes out of the subset
//!   construction at its minimal size.
//! - A repeated body is built once, as its minimal automaton, and stamped once per copy
//!   (a JSON string character is about 250 Thompson states but 14 automaton states).

use super::chain::{Counted, CHAIN_MIN_COUNT};
use super::classes::byte_classes;
use super::determinize::determinize;
use super::split::Rules;
use crate::error::CompileError;
use crate::limits::{LimitKind, Limits};
use regex_syntax::hir::{Class, Hir, HirKind};
use regex_syntax::utf8::{Utf8Sequence, Utf8Sequences};
use std::rc::Rc;
use std::sync::{Arc, LazyLock};
use stencil_grammar::{CharClass, Expr, Regex, RuleId, MAX_CODE_POINT};

/// An edge of the ε-NFA.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Edge {
    Eps(u32),
    Bytes { lo: u8, hi: u8, to: u32 },
    Call { rule: u32, to: u32 },
    Token { terminal: u32, to: u32 },
}

/// ε-NFA of one rule: state 0 is the start, `accept` the only final state.
#[derive(Debug, Default)]
pub(crate) struct Nfa {
    /// Edges by source state: state `s`'s are `edges[first[s]..first[s + 1]]`.
    edges: Vec<Edge>,
    first: Vec<u32>,
    pub accept: u32,
    /// Built from a regex terminal, among others: their subset constructions are the ones
    /// that make equivalent states (a URI format: 623 states, 231 minimal).
    pub has_regex: bool,
    /// How many of its states are stamped copies of a repeated body's minimal automaton
    /// (see [`NfaBuilder::stamp`]).
    pub stamped: usize,
}

impl Nfa {
    /// The NFA of states `0..n_states` with `edges` (`(from, edge)`, in any order; each
    /// state's keep their order).
    pub fn new(n_states: usize, edges: &[(u32, Edge)], accept: u32) -> Nfa {
        let (mut first, mut sorted) = (Vec::new(), Vec::new());
        super::rows::group_into_rows(n_states, || edges.iter().copied(), &mut first, &mut sorted);
        Nfa { edges: sorted, first, accept, has_regex: false, stamped: 0 }
    }

    pub fn n_states(&self) -> usize {
        self.first.len() - 1
    }

    pub fn edges(&self, s: u32) -> &[Edge] {
        &self.edges[self.first[s as usize] as usize..self.first[s as usize + 1] as usize]
    }

    pub fn all_edges(&self) -> &[Edge] {
        &self.edges
    }
}

/// An NFA being built: its states so far and their edges, unsorted.
#[derive(Default)]
struct Parts {
    n_states: u32,
    edges: Vec<(u32, Edge)>,
    /// States made by [`NfaBuilder::stamp`].
    stamped: usize,
}

/// Expressions built in tail position, by structural hash: each with its entry and exit
/// states.
/// (Two expressions with one hash: the second is not shared.)
type Seen<E> = rustc_hash::FxHashMap<u64, (E, u32, u32)>;

/// Builds NFAs; shared state across rules for the global size limit.
pub(crate) struct NfaBuilder<'a> {
    pub rules: &'a Rules<'a>,
    pub limits: &'a Limits,
    /// Rules whose bodies are expanded in place instead of called.
    pub inline: &'a [bool],
    /// The rule a call of each rule goes to (see `representatives`).
    pub representative: &'a [u32],
    /// Rules built into their tail callers' automata (see `fuse.rs`).
    pub fused: &'a [bool],
    /// Per fused rule met in the NFA being built: its body's entry and exit states
    /// (the exit leads, like every tail position, to the rule's end).
    fragments: rustc_hash::FxHashMap<u32, (u32, u32)>,
    /// Fused bodies whose states are made but not built yet: `(rule, entry, exit)`.
    pending: Vec<(u32, u32, u32)>,
    /// Expressions met in tail position in the NFA being built, by hash: the
    /// expression, its entry and exit states (see [`NfaBuilder::shared_tail`]).
    tails: Seen<&'a Expr>,
    /// Whether the NFA being built holds a regex terminal (see [`Nfa::has_regex`]).
    regex_met: bool,
    /// Suffixes of at least two items of sequences in tail position, likewise (see
    /// [`NfaBuilder::tail_seq`]).
    suffixes: Seen<&'a [Expr]>,
    /// Structural hashes of the grammar's sequences and alternatives met so far, by
    /// address.
    hashes: rustc_hash::FxHashMap<usize, u64>,
    pub regexes: &'a Regexes,
    /// Token terminal index of each `Expr::Token` met, in traversal order (resolved by the caller).
    pub token_terminal: &'a mut dyn FnMut(&stencil_grammar::TokenRef, &str) -> Result<u32, CompileError>,
    pub total_states: usize,
    rule_name: String,
    /// The regex terminal being built, for its errors.
    pattern: Regex,
    nfa: Parts,
    /// The last rule's NFA (its buffers are reused for the next).
    built: Nfa,
    /// Each character class's UTF-8 sequences, made once per compile (a JSON string's
    /// characters recur in every string of a schema).
    class_sequences: rustc_hash::FxHashMap<CharClass, Rc<[Utf8Sequence]>>,
    /// Buffer of [`NfaBuilder::sequences`]: shared suffixes `(lo, hi, to)` → their state.
    shared_suffixes: rustc_hash::FxHashMap<(u8, u8, u32), u32>,
}

impl<'a> NfaBuilder<'a> {
    pub fn new(
        rules: &'a Rules<'a>,
        limits: &'a Limits,
        inline: &'a [bool],
        representative: &'a [u32],
        fused: &'a [bool],
        regexes: &'a Regexes,
        token_terminal: &'a mut dyn FnMut(&stencil_grammar::TokenRef, &str) -> Result<u32, CompileError>,
    ) -> Self {
        NfaBuilder {
            rules,
            limits,
            inline,
            representative,
            fused,
            fragments: Default::default(),
            pending: Vec::new(),
            regex_met: false,
            tails: Default::default(),
            suffixes: Default::default(),
            hashes: Default::default(),
            regexes,
            token_terminal,
            total_states: 0,
            rule_name: String::new(),
            pattern: Regex::new(""),
            nfa: Parts::default(),
            built: Nfa::default(),
            class_sequences: Default::default(),
            shared_suffixes: Default::default(),
        }
    }

    /// The NFA of `rule`'s body.
    pub fn build_rule(&mut self, rule: RuleId) -> Result<&Nfa, CompileError> {
        self.rule_name.clone_from(&self.rules[rule.0 as usize].name);
        self.nfa.n_states = 0;
        self.nfa.edges.clear();
        self.nfa.stamped = 0;
        self.fragments.clear();
        self.tails.clear();
        self.regex_met = false;
        self.suffixes.clear();
        let start = self.new_state()?;
        let rules = self.rules;
        self.built.accept = self.build(&rules[rule.0 as usize].body, start, 0, true)?;
        // Fused callees one after the other, not nested: a chain may be thousands long.
        while let Some((callee, entry, exit)) = self.pending.pop() {
            let end = self.build(&rules[callee as usize].body, entry, 0, true)?;
            self.edge(end, Edge::Eps(exit));
        }
        self.built.has_regex = self.regex_met;
        self.built.stamped = self.nfa.stamped;
        let Nfa { edges, first, .. } = &mut self.built;
        let parts = &self.nfa;
        super::rows::group_into_rows(parts.n_states as usize, || parts.edges.iter().copied(), first, edges);
        Ok(&self.built)
    }

    /// `rule`'s body as literals around one long counted repetition whose body has a
    /// small automaton (built here), for [`super::chain`]; `None` for other shapes.
    pub fn counted_rule(&mut self, rule: RuleId) -> Result<Option<Counted>, CompileError> {
        /// The body's items in order, `Seq`s flattened; `false` past anything but
        /// literals and repetitions.
        fn flatten<'e>(e: &'e Expr, items: &mut Vec<&'e Expr>) -> bool {
            match e {
                Expr::Empty => true,
                Expr::Seq(v) => v.iter().all(|x| flatten(x, items)),
                Expr::Literal(_) | Expr::Repeat { .. } => {
                    items.push(e);
                    true
                }
                _ => false,
            }
        }
        let rules = self.rules;
        let mut items = Vec::new();
        if !flatten(&rules[rule.0 as usize].body, &mut items) {
            return Ok(None);
        }
        let mut repeats = items.iter().enumerate().filter(|(_, e)| matches!(e, Expr::Repeat { .. }));
        let (Some((at, &&Expr::Repeat { ref expr, min, max: Some(max) })), None) = (repeats.next(), repeats.next())
        else {
            return Ok(None);
        };
        if max < CHAIN_MIN_COUNT || max > self.limits.max_repetition {
            return Ok(None);
        }
        self.rule_name.clone_from(&rules[rule.0 as usize].name);
        let Some(body) = self.mini_dfa(Node::Expr(expr), 0)? else { return Ok(None) };
        let literals = |part: &[&Expr]| {
            part.iter().flat_map(|e| if let Expr::Literal(b) = e { b.as_slice() } else { &[] }).copied().collect()
        };
        Ok(Some(Counted { prefix: literals(&items[..at]), body, min, max, suffix: literals(&items[at + 1..]) }))
    }

    fn limit(&self, limit: LimitKind, value: usize) -> CompileError {
        CompileError::LimitExceeded { limit, value, rule: self.rule_name.clone() }
    }

    fn new_state(&mut self) -> Result<u32, CompileError> {
        self.total_states += 1;
        if self.total_states > self.limits.max_nfa_states {
            return Err(self.limit(LimitKind::NfaStates, self.limits.max_nfa_states));
        }
        self.nfa.n_states += 1;
        Ok(self.nfa.n_states - 1)
    }

    fn edge(&mut self, from: u32, e: Edge) {
        self.nfa.edges.push((from, e));
    }

    /// Adds `expr` starting at `start`; returns its end state. `tail`: nothing follows
    /// `expr` in its rule (a fused rule called there is built into this NFA, and an
    /// expression met there before is not built again: see [`NfaBuilder::shared_tail`]).
    fn build(&mut self, expr: &'a Expr, start: u32, depth: usize, tail: bool) -> Result<u32, CompileError> {
        let shared = match expr {
            Expr::Empty => false,
            Expr::Rule(id) => {
                let r = id.0 as usize;
                r < self.inline.len() && !self.inline[r] && !self.fused[self.representative[r] as usize]
            }
            _ => true,
        };
        if tail && shared {
            self.shared_tail(expr, start, depth)
        } else {
            self.build_here(expr, start, depth, tail)
        }
    }

    /// [`NfaBuilder::build`], this occurrence built whatever came before.
    fn build_here(&mut self, expr: &'a Expr, start: u32, depth: usize, tail: bool) -> Result<u32, CompileError> {
        if depth > self.limits.max_expression_depth {
            return Err(self.limit(LimitKind::ExpressionDepth, self.limits.max_expression_depth));
        }
        match expr {
            Expr::Empty => Ok(start),
            Expr::Literal(bytes) => {
                let mut cur = start;
                for &b in bytes {
                    let next = self.new_state()?;
                    self.edge(cur, Edge::Bytes { lo: b, hi: b, to: next });
                    cur = next;
                }
                Ok(cur)
            }
            Expr::Class(class) => {
                let sequences = match self.class_sequences.get(class) {
                    Some(known) => known.clone(),
                    None => {
                        let sequences: Rc<[Utf8Sequence]> = utf8_sequences(&class.code_points()).collect();
                        self.class_sequences.insert(class.clone(), sequences.clone());
                        sequences
                    }
                };
                self.sequences(&sequences, start)
            }
            Expr::AnyChar => {
                static ANY: LazyLock<Vec<Utf8Sequence>> =
                    LazyLock::new(|| utf8_sequences(&[(0, 0xD7FF), (0xE000, MAX_CODE_POINT)]).collect());
                self.sequences(&ANY, start)
            }
            Expr::Regex(pattern) => self.regex(pattern, start, depth),
            Expr::Rule(id) => {
                let Some(rule) = self.rules.get(id.0 as usize) else {
                    return Err(CompileError::DanglingRule { rule: self.rule_name.clone(), id: id.0 });
                };
                let callee = self.representative[id.0 as usize];
                if self.inline[id.0 as usize] {
                    self.build(&rule.body, start, depth + 1, tail)
                } else if tail && self.fused[callee as usize] {
                    let (entry, exit) = match self.fragments.get(&callee) {
                        Some(&f) => f,
                        None => {
                            let f = (self.new_state()?, self.new_state()?);
                            self.fragments.insert(callee, f);
                            self.pending.push((callee, f.0, f.1));
                            f
                        }
                    };
                    self.edge(start, Edge::Eps(entry));
                    Ok(exit)
                } else {
                    let end = self.new_state()?;
                    self.edge(start, Edge::Call { rule: callee, to: end });
                    Ok(end)
                }
            }
            Expr::Token(t) => {
                let terminal = (self.token_terminal)(t, &self.rule_name)?;
                let end = self.new_state()?;
                self.edge(start, Edge::Token { terminal, to: end });
                Ok(end)
            }
            Expr::Seq(items) if tail => self.tail_seq(items, start, depth),
            Expr::Seq(items) => self.concat(items.iter().map(Node::Expr), start, depth, false),
            Expr::Alt(alts) => self.alternation(alts.iter().map(Node::Expr), start, depth, tail),
            Expr::Repeat { expr, min, max } => self.repeat(Node::Expr(expr), *min, *max, start, depth, false),
        }
    }

    /// An expression in tail position, built once per NFA however often it occurs there:
    /// a later occurrence is an ε edge into the first one's start, and ends where it
    /// ends. Both end where their rule ends (nothing follows either), so they may share
    /// their states. A names' trie repeats its subtrees (every name's last node is the
    /// same) and its ends (the closing quote, the call of the rest of the string at each
    /// node): shared, its automaton is about its minimal size before minimization. A
    /// tail expression's start has no way out but the expression's own, so the first
    /// occurrence's start is its entry.
    fn shared_tail(&mut self, expr: &'a Expr, start: u32, depth: usize) -> Result<u32, CompileError> {
        let hash = self.structural_hash(expr);
        if let Some(&(_, entry, exit)) = self.tails.get(&hash).filter(|t| *t.0 == *expr) {
            self.edge(start, Edge::Eps(entry));
            return Ok(exit);
        }
        let exit = self.build_here(expr, start, depth, true)?;
        self.tails.entry(hash).or_insert((expr, start, exit));
        Ok(exit)
    }

    /// A sequence in tail position. Its suffixes are in tail position too, and one met
    /// before (the rest of an object's member after its key, with the comma in front or
    /// without) is entered instead of built again, as in [`NfaBuilder::shared_tail`].
    fn tail_seq(&mut self, items: &'a [Expr], start: u32, depth: usize) -> Result<u32, CompileError> {
        use std::hash::Hasher;
        let n = items.len();
        // Per suffix of two items or more: its hash, then its start once built.
        let mut suffixes: Vec<(u64, u32)> = vec![(0, 0); n.saturating_sub(1)];
        let mut after = 0u64;
        for i in (0..n).rev() {
            let mut h = rustc_hash::FxHasher::default();
            h.write_u64(self.structural_hash(&items[i]));
            h.write_u64(after);
            after = h.finish();
            if i + 1 < n {
                suffixes[i].0 = after;
            }
        }
        let (mut cur, mut built, mut found) = (start, 0, None);
        for i in 0..n {
            if i > 0 && i + 1 < n {
                let same = self.suffixes.get(&suffixes[i].0).filter(|t| t.0 == &items[i..]);
                if let Some(&(_, entry, exit)) = same {
                    self.edge(cur, Edge::Eps(entry));
                    found = Some(exit);
                    break;
                }
                suffixes[i].1 = cur;
                built = i + 1;
            }
            cur = self.build_node(Node::Expr(&items[i]), cur, depth + 1, i + 1 == n)?;
        }
        let exit = found.unwrap_or(cur);
        for (i, &(hash, entry)) in suffixes.iter().enumerate().take(built).skip(1) {
            self.suffixes.entry(hash).or_insert((&items[i..], entry, exit));
        }
        Ok(exit)
    }

    /// A hash of `e`'s structure (equal expressions hash alike); sequences' and
    /// alternatives' hashes are kept, so hashing every node of a trie costs its size, not
    /// its size times its depth.
    fn structural_hash(&mut self, e: &'a Expr) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let (Expr::Alt(v) | Expr::Seq(v)) = e else { return rustc_hash::FxBuildHasher.hash_one(e) };
        let address = e as *const Expr as usize;
        if let Some(&h) = self.hashes.get(&address) {
            return h;
        }
        let mut h = rustc_hash::FxHasher::default();
        std::mem::discriminant(e).hash(&mut h);
        v.len().hash(&mut h);
        for x in v {
            h.write_u64(self.structural_hash(x));
        }
        let h = h.finish();
        self.hashes.insert(address, h);
        h
    }

    /// `items` one after the other (children of an expression at `depth`; the last is
    /// in tail position when the expression is).
    fn concat<'h>(
        &mut self,
        items: impl ExactSizeIterator<Item = Node<'a, 'h>>,
        start: u32,
        depth: usize,
        tail: bool,
    ) -> Result<u32, CompileError> {
        let (mut cur, n) = (start, items.len());
        for (i, item) in items.enumerate() {
            cur = self.build_node(item, cur, depth + 1, tail && i + 1 == n)?;
        }
        Ok(cur)
    }

    /// Any one of `alts` (children of an expression at `depth`), each between ε edges.
    fn alternation<'h>(
        &mut self,
        alts: impl Iterator<Item = Node<'a, 'h>>,
        start: u32,
        depth: usize,
        tail: bool,
    ) -> Result<u32, CompileError> {
        let end = self.new_state()?;
        for alt in alts {
            let s = self.new_state()?;
            self.edge(start, Edge::Eps(s));
            let e = self.build_node(alt, s, depth + 1, tail)?;
            self.edge(e, Edge::Eps(end));
        }
        Ok(end)
    }

    fn build_node(&mut self, node: Node<'a, '_>, start: u32, depth: usize, tail: bool) -> Result<u32, CompileError> {
        match node {
            Node::Expr(e) => self.build(e, start, depth, tail),
            Node::Hir(h) => self.build_hir(h, start, depth),
        }
    }

    fn min_states_node(&self, node: Node<'a, '_>, depth: usize) -> usize {
        match node {
            Node::Expr(e) => self.min_states(e, depth),
            Node::Hir(h) => min_states_hir(h),
        }
    }

    /// `node{min,max}` (`max` `None`: unbounded). Many copies of a big body are stamped
    /// from the body's minimal automaton, built once (see [`MiniDfa`]): a JSON string
    /// character is ~250 Thompson states but 14 automaton states, so `maxLength: 10000`
    /// fits. A repetition inside a regex terminal reports its size as `max_nfa_states`
    /// (regex counts are not grammar repetitions).
    fn repeat(
        &mut self,
        node: Node<'a, '_>,
        min: u32,
        max: Option<u32>,
        start: u32,
        depth: usize,
        in_regex: bool,
    ) -> Result<u32, CompileError> {
        let count = max.unwrap_or(min);
        if !in_regex && count > self.limits.max_repetition {
            return Err(self.limit(LimitKind::Repetition, self.limits.max_repetition as usize));
        }
        let copies = max.map_or(min as usize + 1, |m| m as usize);
        let one = self.min_states_node(node, depth + 1);
        let worth = (4..=MINI_MAX_BODY).contains(&one) || multibyte_class(node);
        let mini = if copies >= 3 && worth { self.mini_dfa(node, depth)? } else { None };
        // Fail before building when the expansion is sure not to fit.
        let per_copy = match &mini {
            Some(d) => d.finals.len() + 2,
            None => one,
        };
        let at_least = copies.saturating_mul(per_copy);
        if self.total_states.saturating_add(at_least) > self.limits.max_nfa_states {
            return Err(self.limit(LimitKind::NfaStates, self.limits.max_nfa_states));
        }
        let copy = |this: &mut Self, s: u32| match &mini {
            Some(d) => this.stamp(d, s),
            None => this.build_node(node, s, depth + 1, false),
        };
        let mut cur = start;
        let Some(max) = max else {
            // `X*` loops at `cur`: cur --ε--> s --expr--> e --ε--> cur, exit at cur.
            // `X{m,}` with m ≥ 1 is `X{m-1} X+`, the last copy looping back to itself:
            // cur --ε--> s --expr--> e --ε--> s, exit at e.
            for _ in 1..min {
                cur = copy(self, cur)?;
            }
            let s = self.new_state()?;
            self.edge(cur, Edge::Eps(s));
            let e = copy(self, s)?;
            let (head, exit) = if min == 0 { (cur, cur) } else { (s, e) };
            self.edge(e, Edge::Eps(head));
            let end = self.new_state()?;
            self.edge(exit, Edge::Eps(end));
            return Ok(end);
        };
        for _ in 0..min {
            cur = copy(self, cur)?;
        }
        let end = self.new_state()?;
        for _ in min..max {
            self.edge(cur, Edge::Eps(end));
            let s = self.new_state()?;
            self.edge(cur, Edge::Eps(s));
            cur = copy(self, s)?;
        }
        self.edge(cur, Edge::Eps(end));
        Ok(end)
    }

    /// The minimal automaton of `node` alone, or `None` when it has more than
    /// [`MINI_MAX_STATES`] states (then copies are built from the expression).
    fn mini_dfa(&mut self, node: Node<'a, '_>, depth: usize) -> Result<Option<MiniDfa>, CompileError> {
        let saved = std::mem::take(&mut self.nfa);
        let saved_total = self.total_states;
        let built = self.new_state().and_then(|s| self.build_node(node, s, depth + 1, false));
        let sub = std::mem::replace(&mut self.nfa, saved);
        self.total_states = saved_total;
        Ok(MiniDfa::new(&Nfa::new(sub.n_states as usize, &sub.edges, built?)))
    }

    /// A copy of `d` entered from `start`; returns its end state.
    fn stamp(&mut self, d: &MiniDfa, start: u32) -> Result<u32, CompileError> {
        let base = self.nfa.n_states;
        self.nfa.stamped += d.finals.len() + 1;
        for _ in 0..d.finals.len() {
            self.new_state()?;
        }
        let end = self.new_state()?;
        self.edge(start, Edge::Eps(base));
        for (i, edges) in d.edges.iter().enumerate() {
            let from = base + i as u32;
            for &e in edges {
                self.edge(
                    from,
                    match e {
                        Edge::Eps(t) => Edge::Eps(base + t),
                        Edge::Bytes { lo, hi, to } => Edge::Bytes { lo, hi, to: base + to },
                        Edge::Call { rule, to } => Edge::Call { rule, to: base + to },
                        Edge::Token { terminal, to } => Edge::Token { terminal, to: base + to },
                    },
                );
            }
            if d.finals[i] {
                self.edge(from, Edge::Eps(end));
            }
        }
        Ok(end)
    }

    /// A regex terminal's syntax tree (regex-syntax, UTF-8, Unicode), as states.
    fn build_hir(&mut self, h: &Hir, start: u32, depth: usize) -> Result<u32, CompileError> {
        if depth > self.limits.max_expression_depth {
            return Err(self.limit(LimitKind::ExpressionDepth, self.limits.max_expression_depth));
        }
        match h.kind() {
            HirKind::Empty => Ok(start),
            HirKind::Literal(l) => {
                let mut cur = start;
                for &b in l.0.iter() {
                    let next = self.new_state()?;
                    self.edge(cur, Edge::Bytes { lo: b, hi: b, to: next });
                    cur = next;
                }
                Ok(cur)
            }
            HirKind::Class(Class::Unicode(c)) => {
                let ranges: Vec<(u32, u32)> = c.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect();
                let sequences: Vec<Utf8Sequence> = utf8_sequences(&ranges).collect();
                self.sequences(&sequences, start)
            }
            HirKind::Class(Class::Bytes(c)) => {
                let end = self.new_state()?;
                for r in c.ranges() {
                    self.edge(start, Edge::Bytes { lo: r.start(), hi: r.end(), to: end });
                }
                Ok(end)
            }
            HirKind::Look(look) => Err(CompileError::UnsupportedRegex {
                rule: self.rule_name.clone(),
                pattern: self.pattern.to_string(),
                feature: format!("the assertion {look:?}"),
            }),
            HirKind::Capture(c) => self.build_hir(&c.sub, start, depth + 1),
            HirKind::Concat(items) => self.concat(items.iter().map(Node::Hir), start, depth, false),
            HirKind::Alternation(alts) => self.alternation(alts.iter().map(Node::Hir), start, depth, false),
            HirKind::Repetition(r) => self.repeat(Node::Hir(&r.sub), r.min, r.max, start, depth, true),
        }
    }

    /// A lower bound on the states `build` makes for `expr` (saturating; stops counting
    /// past the depth limit, where `build` fails anyway).
    fn min_states(&self, expr: &Expr, depth: usize) -> usize {
        if depth > self.limits.max_expression_depth {
            return 0;
        }
        match expr {
            Expr::Empty => 0,
            Expr::Literal(b) => b.len(),
            Expr::Class(_) | Expr::AnyChar | Expr::Regex(_) | Expr::Token(_) => 1,
            Expr::Rule(id) => match self.rules.get(id.0 as usize) {
                Some(rule) if self.inline[id.0 as usize] => self.min_states(&rule.body, depth + 1),
                _ => 1,
            },
            Expr::Seq(v) => v.iter().fold(0usize, |n, e| n.saturating_add(self.min_states(e, depth + 1))),
            Expr::Alt(v) => {
                v.iter().fold(1usize, |n, e| n.saturating_add(1).saturating_add(self.min_states(e, depth + 1)))
            }
            Expr::Repeat { expr, min, max } => {
                let one = self.min_states(expr, depth + 1);
                match max {
                    None => (*min as usize + 1).saturating_mul(one).saturating_add(2),
                    Some(max) => (*max as usize).saturating_mul(one).saturating_add(1),
                }
            }
        }
    }

    /// One code point from `sequences` (UTF-8 byte sequences, see [`utf8_sequences`]).
    /// Sequences share their common suffixes (`[E1-EC][80-BF][80-BF]` and
    /// `[EE-EF][80-BF][80-BF]` go through the same two states), so the subset construction
    /// does not make equivalent copies.
    fn sequences(&mut self, sequences: &[Utf8Sequence], start: u32) -> Result<u32, CompileError> {
        let end = self.new_state()?;
        let mut suffixes = std::mem::take(&mut self.shared_suffixes);
        suffixes.clear();
        for seq in sequences {
            let (first, rest) = seq.as_slice().split_first().expect("a UTF-8 sequence is not empty");
            let mut to = end;
            for r in rest.iter().rev() {
                to = match suffixes.get(&(r.start, r.end, to)) {
                    Some(&state) => state,
                    None => {
                        let state = self.new_state()?;
                        self.edge(state, Edge::Bytes { lo: r.start, hi: r.end, to });
                        suffixes.insert((r.start, r.end, to), state);
                        state
                    }
                };
            }
            self.edge(start, Edge::Bytes { lo: first.start, hi: first.end, to });
        }
        self.shared_suffixes = suffixes;
        Ok(end)
    }

    /// A regex terminal: parsed by regex-syntax (UTF-8, Unicode), then built like the IR.
    fn regex(&mut self, pattern: &Regex, start: u32, depth: usize) -> Result<u32, CompileError> {
        self.regex_met = true;
        let hir = self.regexes.parse(pattern).map_err(|message| CompileError::BadRegex {
            rule: self.rule_name.clone(),
            pattern: pattern.to_string(),
            message,
        })?;
        let saved = std::mem::replace(&mut self.pattern, pattern.clone());
        let r = self.build_hir(&hir, start, depth + 1);
        self.pattern = saved;
        r
    }
}

/// For tests: `f` with a builder over `g` as it stands (no rule inlined, fused or shared,
/// no token terminals).
#[cfg(test)]
pub(crate) fn with_plain_builder<T>(g: &stencil_grammar::Grammar, f: impl FnOnce(&mut NfaBuilder) -> T) -> T {
    let n = g.rules.len();
    let rules = Rules::of(g);
    let (limits, regexes) = (Limits::default(), Regexes::default());
    let (inline, fused, representative) = (vec![false; n], vec![false; n], (0..n as u32).collect::<Vec<_>>());
    let mut no_tokens = |_: &stencil_grammar::TokenRef, _: &str| -> Result<u32, CompileError> { unreachable!() };
    f(&mut NfaBuilder::new(&rules, &limits, &inline, &representative, &fused, &regexes, &mut no_tokens))
}

/// The UTF-8 byte sequences of the code points in `ranges` (surrogates left out).
fn utf8_sequences(ranges: &[(u32, u32)]) -> impl Iterator<Item = Utf8Sequence> + '_ {
    ranges.iter().filter_map(|&(lo, hi)| Some(Utf8Sequences::new(char::from_u32(lo)?, char::from_u32(hi)?))).flatten()
}

/// What [`NfaBuilder::repeat`] repeats: an IR expression or a regex's syntax tree.
#[derive(Clone, Copy)]
enum Node<'a, 'h> {
    Expr(&'a Expr),
    Hir(&'h Hir),
}

/// Parses a regex terminal as the engine reads it (UTF-8, Unicode).
pub(crate) fn parse_regex(pattern: &str) -> Result<Hir, String> {
    regex_syntax::ParserBuilder::new().utf8(true).unicode(true).build().parse(pattern).map_err(|e| e.to_string())
}

/// Regexes parsed once per compile: generated grammars (JSON Schema) repeat a few patterns,
/// such as a JSON string's, in hundreds of places.
#[derive(Default)]
pub(crate) struct Regexes(std::cell::RefCell<rustc_hash::FxHashMap<String, Result<Arc<Hir>, String>>>);

impl Regexes {
    /// The regex's syntax tree: the one it was built from, or [`parse_regex`] of its text,
    /// remembered.
    pub fn parse(&self, pattern: &Regex) -> Result<Arc<Hir>, String> {
        if let Some(hir) = pattern.hir() {
            return Ok(hir.clone());
        }
        if let Some(parsed) = self.0.borrow().get(pattern.as_str()) {
            return parsed.clone();
        }
        let parsed = parse_regex(pattern).map(Arc::new);
        self.0.borrow_mut().insert(pattern.to_string(), parsed.clone());
        parsed
    }
}

/// Whether `node` is one character class with characters of several UTF-8 bytes: one
/// state in [`min_states_hir`]'s count, but its UTF-8 automaton can be hundreds (a
/// 600-range Unicode class: about 700 Thompson states, 170 minimal), so its copies are
/// stamped too.
fn multibyte_class(node: Node<'_, '_>) -> bool {
    match node {
        Node::Expr(Expr::Class(c)) => c.negated || c.ranges.iter().any(|&(_, hi)| hi > 0x7F),
        Node::Hir(h) => match h.kind() {
            HirKind::Class(regex_syntax::hir::Class::Unicode(c)) => c.ranges().iter().any(|r| r.end() > '\x7F'),
            _ => false,
        },
        _ => false,
    }
}

/// A lower bound on the states `build_hir` makes for `h` (saturating).
fn min_states_hir(h: &Hir) -> usize {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => 0,
        HirKind::Literal(l) => l.0.len(),
        HirKind::Class(_) => 1,
        HirKind::Capture(c) => min_states_hir(&c.sub),
        HirKind::Concat(v) => v.iter().fold(0usize, |n, e| n.saturating_add(min_states_hir(e))),
        HirKind::Alternation(v) => v.iter().fold(1usize, |n, e| n.saturating_add(1).saturating_add(min_states_hir(e))),
        HirKind::Repetition(r) => {
            let one = min_states_hir(&r.sub);
            match r.max {
                None => (r.min as usize + 1).saturating_mul(one).saturating_add(2),
                Some(max) => (max as usize).saturating_mul(one).saturating_add(1),
            }
        }
    }
}

/// Bodies whose Thompson automaton has more (lower-bound) states than this are not
/// turned into a [`MiniDfa`].
const MINI_MAX_BODY: usize = 20_000;
/// A [`MiniDfa`] bigger than this is given up.
const MINI_MAX_STATES: usize = 2_000;

/// The minimal deterministic automaton of one repetition body, in the NFA's edge form
/// (state 0 the start; no ε edges), stamped once per copy of the repetition.
pub(super) struct MiniDfa {
    pub finals: Vec<bool>,
    pub edges: Vec<Vec<Edge>>,
}

impl MiniDfa {
    /// The body's minimal automaton (the rules' subset construction and minimization),
    /// as edges; `None` past [`MINI_MAX_STATES`].
    fn new(nfa: &Nfa) -> Option<MiniDfa> {
        let mut dfa = determinize(nfa, byte_classes(nfa), MINI_MAX_STATES, None, &mut Default::default()).ok()?;
        dfa.minimize(&mut Default::default());
        let edges = (0..dfa.n_states() as u32).map(|s| dfa.edges(s)).collect();
        Some(MiniDfa { finals: dfa.is_final, edges })
    }
}
