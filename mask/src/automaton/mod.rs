//! The compiled form of a grammar: every rule a deterministic automaton over bytes, rule
//! calls and whole-token terminals, all states in one global numbering.
//!
//! Small non-recursive rules are expanded in place; the rest stay rules that the Earley
//! parser ([`crate::earley`]) calls. States that cannot reach their rule's end are
//! trimmed, so every live Earley item can finish: a non-empty item set means the input so
//! far is a viable prefix.

mod chain;
mod fuse;
mod minimize;
mod nfa;
mod sets;
mod split;

use crate::earley::NO_ORIGIN;
use crate::error::CompileError;
use crate::limits::{LimitKind, Limits};
use crate::vocab::Vocabulary;
use minimize::Transition;
use nfa::{Edge, Nfa, NfaBuilder, Regexes};
use rustc_hash::FxHashMap;
use sets::StateSets;
use split::Rules;
use stencil_grammar::{Expr, Grammar, Rule, RuleId, TokenName, TokenRef};

/// "No transition".
pub(crate) const DEAD: u32 = u32::MAX;

/// The lead bytes of UTF-8 sequences, `0xC2..=0xF4`, in the last word of a byte set.
const UTF8_LEADS: u64 = ((1 << (0xF4 - 0xC0 + 1)) - 1) & !((1 << (0xC2 - 0xC0)) - 1);

/// The UTF-8 byte sequences of every non-ASCII character: their byte ranges, each once,
/// and each sequence as indexes of its ranges.
struct NonAsciiUtf8 {
    ranges: Vec<(u8, u8)>,
    sequences: Vec<Vec<usize>>,
}

static NON_ASCII_UTF8: std::sync::LazyLock<NonAsciiUtf8> = std::sync::LazyLock::new(|| {
    let mut ranges: Vec<(u8, u8)> = Vec::new();
    let sequences = regex_syntax::utf8::Utf8Sequences::new('\u{80}', char::MAX)
        .map(|seq| {
            seq.as_slice()
                .iter()
                .map(|r| match ranges.iter().position(|&x| x == (r.start, r.end)) {
                    Some(i) => i,
                    None => {
                        ranges.push((r.start, r.end));
                        ranges.len() - 1
                    }
                })
                .collect()
        })
        .collect();
    NonAsciiUtf8 { ranges, sequences }
});

/// A set of at most 8 states, in insertion order (`insert` fails when full).
#[derive(Default, Clone, Copy)]
struct SmallSet {
    items: [u32; 8],
    len: usize,
}

impl SmallSet {
    fn insert(&mut self, x: u32) -> Option<()> {
        if !self.as_slice().contains(&x) {
            *self.items.get_mut(self.len)? = x;
            self.len += 1;
        }
        Some(())
    }

    fn as_slice(&self) -> &[u32] {
        &self.items[..self.len]
    }
}

/// Expressions at most this big (see `expr_size`) are inlined into their callers when
/// not recursive.
const INLINE_MAX_SIZE: usize = 8;

/// A whole-token terminal: `<[id]>` or `!<[id]>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TokenTerminal {
    pub id: u32,
    pub negated: bool,
}

impl TokenTerminal {
    pub fn matches(&self, token: u32) -> bool {
        (token == self.id) != self.negated
    }
}

/// All rules' automata.
#[derive(Debug)]
pub(crate) struct Automaton {
    /// The rules' byte classes (rules whose edges split the bytes alike share one).
    pub class_maps: Vec<ClassMap>,
    /// Per state: its row of `trans` and the class map that row uses.
    pub rows: Vec<Row>,
    /// One row per state, one entry per byte class of its rule: next state or [`DEAD`].
    /// (Rule-local classes keep rows short: a key's literal tells apart a few bytes,
    /// the whole grammar tells apart dozens.)
    pub trans: Vec<u32>,
    pub state_rule: Vec<u32>,
    pub is_final: Vec<bool>,
    /// `(rule, next state)` per state.
    pub calls: Rows<(u32, u32)>,
    /// `(terminal, next state)` per state.
    pub token_edges: Rows<(u32, u32)>,
    pub terminals: Vec<TokenTerminal>,
    /// Start state per rule ([`DEAD`] for inlined rules); the last rule is the synthetic start.
    pub rule_start: Vec<u32>,
    pub rule_nullable: Vec<bool>,
    /// States reachable from a state through calls of nullable rules (same origin), excluding itself.
    pub same_origin: Rows<u32>,
    /// States predicted at the current position by a state (or its `same_origin` states).
    pub predicted: Rows<u32>,
    /// The bytes a state has transitions on.
    pub first_bytes: Vec<[u64; 4]>,
    /// Runs (see `compute_runs`): per state, the ASCII bytes that move it where `a` does,
    /// and how many such bytes in a row keep every item alive and alone, with an unknown
    /// caller (`run_len`) or any (`run_len_simple`).
    pub run_bytes: Vec<u128>,
    pub run_len: Vec<u32>,
    pub run_len_simple: Vec<u32>,
    /// The run when non-ASCII characters count too: how many bytes in a row, each a run
    /// byte or part of a well-formed non-ASCII character, keep the item alive and alone
    /// with an unknown caller (every such character must take each state of the run where
    /// `a` does).
    pub utf8_run: Vec<u32>,
    /// Reaches (see `plain_reach`): per state, how many plain-text characters in a row,
    /// whichever they are, surely keep the item alive and alone with an unknown caller:
    /// plain ASCII only (`plain_reach`), non-ASCII characters too (`text_reach`).
    pub plain_reach: Vec<u32>,
    pub text_reach: Vec<u32>,
    /// Whether no plain text longer than `text_reach` keeps the item alive either.
    pub text_reach_exact: Vec<bool>,
    /// Not final, no calls: see [`Automaton::is_simple`].
    pub simple: Vec<bool>,
    /// Per rule: the bytes that can come right after the rule ends, in any context.
    pub follow: Vec<[u64; 4]>,
    /// Synthetic start: `start_state --root--> accept_state`.
    pub start_state: u32,
    pub accept_state: u32,
}

/// A rule's byte classes: bytes that no edge of the rule tells apart share a class.
#[derive(Debug)]
pub(crate) struct ClassMap {
    /// The class of each byte.
    pub of_byte: [u8; 256],
    /// The bytes of each class.
    pub bytes: Vec<[u64; 4]>,
    /// The classes of the bytes of each range of [`NON_ASCII_UTF8`] (each class once):
    /// range `i`'s are `utf8_classes[utf8_starts[i]..utf8_starts[i + 1]]`. A class need
    /// not be a byte interval (see [`RuleDfa::merge_equal_classes`]).
    utf8_classes: Vec<u8>,
    utf8_starts: Vec<u16>,
}

impl ClassMap {
    fn new(of_byte: [u8; 256], n_classes: usize) -> Self {
        let mut bytes = vec![[0u64; 4]; n_classes];
        for b in 0..=255u8 {
            bytes[of_byte[b as usize] as usize][b as usize >> 6] |= 1 << (b & 63);
        }
        // Classes numbered in byte order are intervals: a range's are consecutive.
        let intervals = (1..256).fold(true, |ok, b| ok & (of_byte[b].wrapping_sub(of_byte[b - 1]) <= 1));
        let (mut utf8_classes, mut utf8_starts) = (Vec::new(), vec![0u16]);
        for &(lo, hi) in &NON_ASCII_UTF8.ranges {
            if intervals {
                utf8_classes.extend(of_byte[lo as usize]..=of_byte[hi as usize]);
            } else {
                let mut seen = [0u64; 4];
                for b in lo..=hi {
                    let c = of_byte[b as usize];
                    if seen[c as usize >> 6] & 1 << (c & 63) == 0 {
                        seen[c as usize >> 6] |= 1 << (c & 63);
                        utf8_classes.push(c);
                    }
                }
            }
            utf8_starts.push(utf8_classes.len() as u16);
        }
        ClassMap { of_byte, bytes, utf8_classes, utf8_starts }
    }

    /// The classes of the bytes of range `i` of [`NON_ASCII_UTF8`].
    fn utf8_range_classes(&self, i: usize) -> &[u8] {
        &self.utf8_classes[self.utf8_starts[i] as usize..self.utf8_starts[i + 1] as usize]
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// Where a state's transitions are: `trans[start..start + n]`, `n` the classes of
/// `class_maps[classes]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row {
    pub start: u32,
    pub classes: u32,
}

impl Automaton {
    #[inline]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        let row = self.rows[state as usize];
        self.trans[row.start as usize + self.class_maps[row.classes as usize].of_byte[byte as usize] as usize]
    }

    /// State `s`'s transitions, one per class of [`Automaton::classes`]`(s)`.
    pub fn row(&self, s: usize) -> &[u32] {
        let row = self.rows[s];
        &self.trans[row.start as usize..row.start as usize + self.class_maps[row.classes as usize].len()]
    }

    /// State `s`'s transitions, to change (see [`Automaton::row`]).
    fn row_mut(&mut self, s: usize) -> &mut [u32] {
        let row = self.rows[s];
        let len = self.class_maps[row.classes as usize].len();
        &mut self.trans[row.start as usize..row.start as usize + len]
    }

    /// The byte classes of state `s`'s row.
    pub fn classes(&self, s: usize) -> &ClassMap {
        &self.class_maps[self.rows[s].classes as usize]
    }

    /// The most byte classes of any rule.
    pub fn max_classes(&self) -> usize {
        self.class_maps.iter().map(ClassMap::len).max().unwrap_or(0)
    }

    pub fn n_states(&self) -> usize {
        self.state_rule.len()
    }

    /// A state an item can move into without predicting or completing anything.
    #[inline]
    pub fn is_simple(&self, state: u32) -> bool {
        self.simple[state as usize]
    }

    /// Whether an item `(state, origin)` reached by a byte makes a set on its own: it
    /// predicts nothing, and completes nothing but, with an unknown caller, an escape.
    #[inline]
    pub fn steps_alone(&self, state: u32, origin: u32) -> bool {
        self.simple[state as usize] || (origin == crate::earley::NO_ORIGIN && self.calls[state as usize].is_empty())
    }

    /// Whether every non-ASCII character takes `state` to `to`, each byte before the last
    /// into a state that predicts and completes nothing. Conservative: `false` also when
    /// the bytes of one range lead to many states.
    fn utf8_leads_to(&self, state: u32, to: u32) -> bool {
        self.utf8_targets(state).is_some_and(|t| t.as_slice() == [to])
    }

    /// The states every non-ASCII character takes `state` to, each byte before the last
    /// into a state that predicts and completes nothing; `None` when some character dies,
    /// or (conservative) when there are many states.
    fn utf8_targets(&self, state: u32) -> Option<SmallSet> {
        // Most states (keys, numbers, literals) take no lead byte at all.
        let moves = &self.first_bytes[state as usize];
        if moves[3] & UTF8_LEADS != UTF8_LEADS {
            return None;
        }
        let mut targets = SmallSet::default();
        for seq in &NON_ASCII_UTF8.sequences {
            let mut states = SmallSet::default();
            states.insert(state)?;
            for (i, &range) in seq.iter().enumerate() {
                let last = i + 1 == seq.len();
                let mut next = SmallSet::default();
                for &x in states.as_slice() {
                    let (row, classes) = (self.row(x as usize), self.classes(x as usize));
                    for &c in classes.utf8_range_classes(range) {
                        let t = row[c as usize];
                        if t == DEAD || (!last && (self.is_final[t as usize] || !self.calls[t as usize].is_empty())) {
                            return None;
                        }
                        next.insert(t)?;
                    }
                }
                states = next;
            }
            for &t in states.as_slice() {
                targets.insert(t)?;
            }
        }
        Some(targets)
    }

    /// Whether every plain-text token (see [`crate::trie::TextTokens`]) of at most `len`
    /// bytes keeps the item `(state, unknown caller)` alive and alone: the state's text
    /// reach is that long (a run over all plain text is such a reach, so runs need no
    /// check of their own here).
    pub fn reaches_over_plain_text(&self, state: u32, len: u32) -> bool {
        self.text_reach[state as usize] >= len
    }

    /// The first bytes after which every plain-text token of at most `len` bytes keeps
    /// the item `(state, unknown caller)` alive and alone: the plain ASCII bytes that
    /// move it, alone, into a state whose reach covers plain text, and whether every
    /// non-ASCII character does too (an object key that is not one of some names: all
    /// but the names' first letters). `None` when none does.
    pub fn plain_text_after(&self, state: u32, len: u32) -> Option<(u128, bool)> {
        if self.reaches_over_plain_text(state, len) {
            return Some((crate::trie::PLAIN_ASCII, true));
        }
        let rest = len.saturating_sub(1);
        let reaches_from = |t: u32| {
            t != DEAD
                && match self.waits_for(t) {
                    Some(callee) => self.reaches_over_plain_text(callee, rest),
                    None => self.steps_alone(t, NO_ORIGIN) && self.reaches_over_plain_text(t, rest),
                }
        };
        let mut ascii = 0u128;
        for b in (0..0x80u8).filter(|&b| crate::trie::PLAIN_ASCII >> b & 1 == 1) {
            if reaches_from(self.next(state, b)) {
                ascii |= 1 << b;
            }
        }
        if ascii == 0 {
            return None;
        }
        // Where the smallest non-ASCII character leads: all of them must lead there, from
        // the state or from the start of the rule it calls (a key that is none of some
        // names takes its other characters in a shared rule).
        let non_ascii_from = |s: u32| {
            let after = self.next(s, 0xC2);
            let to = if after == DEAD { DEAD } else { self.next(after, 0x80) };
            reaches_from(to) && self.utf8_leads_to(s, to)
        };
        let non_ascii = non_ascii_from(state) || self.callee_start(state).is_some_and(non_ascii_from);
        Some((ascii, non_ascii))
    }

    /// The start state of the one rule that `state` calls, when that start predicts and
    /// completes nothing.
    pub fn callee_start(&self, state: u32) -> Option<u32> {
        match self.calls[state as usize] {
            [(rule, _)] => {
                let start = self.rule_start[rule as usize];
                self.simple[start as usize].then_some(start)
            }
            _ => None,
        }
    }

    /// [`Automaton::callee_start`] of a state that cannot end and takes no token: an item
    /// reaching it by a byte makes a set with nothing but the callee's start (a key that
    /// is none of some names, inside their trie, calls a shared rule for a character that
    /// is not plain text).
    pub fn steps_with_callee(&self, state: u32) -> Option<u32> {
        let s = state as usize;
        (!self.is_final[s] && self.token_edges[s].is_empty()).then(|| self.callee_start(state)).flatten()
    }

    /// [`Automaton::steps_with_callee`] when `state` takes no byte either: it only waits
    /// for its callee (a key that is none of some names, once it left their trie, waits
    /// for the shared rest of any string). While the callee runs, the item is its callee's.
    pub fn waits_for(&self, state: u32) -> Option<u32> {
        if self.has_byte_edges(state) {
            None
        } else {
            self.steps_with_callee(state)
        }
    }

    /// Whether an item in `state` can take nothing more: no byte, no token, no call (a
    /// rule's end, once completed).
    pub fn is_inert(&self, state: u32) -> bool {
        let s = state as usize;
        !self.has_byte_edges(state) && self.calls[s].is_empty() && self.token_edges[s].is_empty()
    }

    /// The bytes an item in `state` can take next, itself or through
    /// [`Automaton::steps_with_callee`].
    pub fn item_bytes(&self, state: u32) -> [u64; 4] {
        let mut bytes = self.first_bytes[state as usize];
        if let Some(callee) = self.steps_with_callee(state) {
            bytes.iter_mut().zip(&self.first_bytes[callee as usize]).for_each(|(b, c)| *b |= c);
        }
        bytes
    }

    /// Whether `state` is a loop over all plain text (a JSON string's interior): every
    /// plain character (see [`crate::trie::TextTokens`]) takes the item `(state, any
    /// caller)` back to `state`, alone and unfinished, each byte of a non-ASCII one
    /// through states that predict and complete nothing.
    pub fn loops_over_plain_text(&self, state: u32) -> bool {
        let s = state as usize;
        self.next(state, b'a') == state
            && self.run_bytes[s] & crate::trie::PLAIN_ASCII == crate::trie::PLAIN_ASCII
            && self.run_len_simple[s] == u32::MAX
            && self.utf8_run[s] == u32::MAX
    }

    /// The run from `state`, when it has one: its ASCII bytes, and how many of them in a
    /// row (`u32::MAX`: any number) keep the item `(state, any caller)` alive, alone and
    /// unfinished (a pattern's `[a-z0-9_-]+`; the counted characters of `{30,}`, or of
    /// `{1,64}`, with what is left of the count). Each byte takes the item where `a` does.
    pub fn run(&self, state: u32) -> Option<(u128, u32)> {
        let (s, run) = (state as usize, self.run_bytes[state as usize]);
        (run != 0 && self.run_len_simple[s] > 0).then_some((run, self.run_len_simple[s]))
    }

    pub fn has_byte_edges(&self, state: u32) -> bool {
        self.first_bytes[state as usize].iter().any(|&w| w != 0)
    }

    /// Compiles `grammar`, resolving token references against `vocab`.
    pub fn compile(grammar: &Grammar, vocab: &Vocabulary, limits: &Limits) -> Result<Self, CompileError> {
        let started = std::time::Instant::now();
        let trace = std::env::var_os("STENCIL_TRACE_COMPILE").is_some();
        let mut last = started;
        let mut phase = |name: &str, extra: String| {
            if trace {
                let now = std::time::Instant::now();
                eprintln!("  {name}: {:.2} ms {extra}", (now - last).as_secs_f64() * 1e3);
                last = now;
            }
        };
        if grammar.root.0 as usize >= grammar.rules.len() {
            return Err(CompileError::DanglingRule { rule: "<root>".into(), id: grammar.root.0 });
        }
        // One walk over the grammar finds the calls and what to split (a big grammar's
        // nodes are scattered in memory: each walk costs). Splitting keeps every rule and
        // its name and follows no reference; the split rules' calls are found again.
        let regexes = Regexes::default();
        let mut needs_split = vec![false; grammar.rules.len()];
        let unsplit = checked_callees(grammar.rules.iter(), grammar.rules.len(), None, |r, e| {
            needs_split[r] |= split::needs_split(e, limits, &regexes)
        })?;
        let split = split::split_long_repetitions(grammar, &needs_split, limits, &regexes);
        let rules = Rules::new(grammar, &split);
        phase("split", String::new());
        let mut changed = vec![false; rules.len()];
        split.changed().for_each(|r| changed[r] = true);
        let calls = checked_callees(rules.iter().copied(), rules.len(), Some((&unsplit, &changed)), |_, _| {})?;
        let callees = &calls.callees;
        phase("callees", String::new());
        let n_rules = rules.len();
        let inline = choose_inlined(&rules, callees, &regexes);
        phase("inline", String::new());
        let representative = representatives(&rules, &inline, callees);
        phase("representatives", String::new());
        let fused = fuse::choose_fused(&rules, &calls, &inline, &representative);
        phase("fused", format!("{} fused", fused.iter().filter(|&&f| f).count()));

        // 1. Token terminals, numbered as the rules' NFAs meet them.
        let mut terminals: Vec<TokenTerminal> = Vec::new();
        let mut resolve = |t: &TokenRef, rule: &str| -> Result<u32, CompileError> {
            let id = match &t.token {
                TokenName::Id(id) => {
                    if *id as usize >= vocab.len() {
                        return Err(CompileError::TokenIdOutOfRange { rule: rule.into(), id: *id, len: vocab.len() });
                    }
                    *id
                }
                TokenName::Text(text) => vocab
                    .find_token(text.as_bytes())
                    .ok_or_else(|| CompileError::UnknownTokenText { rule: rule.into(), text: text.clone() })?,
            };
            let term = TokenTerminal { id, negated: t.negated };
            Ok(match terminals.iter().position(|x| *x == term) {
                Some(i) => i as u32,
                None => {
                    terminals.push(term);
                    terminals.len() as u32 - 1
                }
            })
        };
        // 2. Per rule that stays a rule: its Thompson NFA, subset construction over the
        // rule's own byte classes and minimization (long counted strings come as automata
        // already, `chain.rs`); appended to the table at once, in one global numbering.
        let mut a = Automaton {
            class_maps: Vec::new(),
            rows: Vec::new(),
            trans: Vec::new(),
            state_rule: Vec::new(),
            is_final: Vec::new(),
            calls: Rows::default(),
            token_edges: Rows::default(),
            terminals: Vec::new(),
            rule_start: vec![DEAD; n_rules + 1],
            rule_nullable: vec![false; n_rules + 1],
            same_origin: Rows::default(),
            predicted: Rows::default(),
            first_bytes: Vec::new(),
            run_bytes: Vec::new(),
            run_len: Vec::new(),
            run_len_simple: Vec::new(),
            utf8_run: Vec::new(),
            plain_reach: Vec::new(),
            text_reach: Vec::new(),
            text_reach_exact: Vec::new(),
            simple: Vec::new(),
            follow: Vec::new(),
            start_state: 0,
            accept_state: 0,
        };
        let deadline = started + limits.max_compile_time;
        let (mut scratch, mut min_scratch) = (SubsetScratch::default(), MinimizeScratch::default());
        let mut class_ids = FxHashMap::default();
        // The synthetic start rule: start --root--> accept.
        let start_rule = n_rules as u32;
        let start_nfa = Nfa::new(2, &[(0, Edge::Call { rule: rules.root.0, to: 1 })], 1);
        let mut nfa_states = 0;
        let mut builder = NfaBuilder::new(&rules, limits, &inline, &representative, &fused, &regexes, &mut resolve);
        for r in 0..=n_rules {
            // Per-rule times for the trace only (a clock read per rule otherwise).
            let rule_started = trace.then(std::time::Instant::now);
            let b = if r == n_rules {
                Built::Nfa(&start_nfa)
            } else if inline[r] || representative[r] != r as u32 || fused[r] {
                continue;
            } else if let Some(dfa) = builder.counted_rule(RuleId(r as u32))?.as_ref().and_then(chain::chain_dfa) {
                Built::Dfa(Box::new(dfa))
            } else {
                let nfa = builder.build_rule(RuleId(r as u32))?;
                nfa_states += nfa.n_states();
                Built::Nfa(nfa)
            };
            if std::time::Instant::now() > deadline {
                return Err(CompileError::LimitExceeded {
                    limit: LimitKind::CompileTime,
                    value: limits.max_compile_time.as_millis() as usize,
                    rule: rules.name(r).into(),
                });
            }
            // Room left under both size limits; the first to bind names the error.
            let by_count = limits.max_automaton_states.saturating_sub(a.n_states());
            let classes = match &b {
                Built::Nfa(nfa) => byte_classes(nfa),
                Built::Dfa(dfa) => (dfa.class, dfa.n_classes),
            };
            let by_memory = (limits.max_automaton_bytes / 4).saturating_sub(a.trans.len()) / classes.1;
            let stopped = |stop: Unfinished| {
                let (limit, value) = match stop {
                    Unfinished::OutOfTime => (LimitKind::CompileTime, limits.max_compile_time.as_millis() as usize),
                    _ if by_count <= by_memory => (LimitKind::AutomatonStates, limits.max_automaton_states),
                    _ => (LimitKind::AutomatonMemory, limits.max_automaton_bytes),
                };
                CompileError::LimitExceeded { limit, value, rule: rules.name(r).into() }
            };
            let dfa = match b {
                Built::Dfa(dfa) if dfa.n_states() > by_count.min(by_memory) => {
                    return Err(stopped(Unfinished::TooManyStates))
                }
                Built::Dfa(dfa) => *dfa,
                Built::Nfa(nfa) => {
                    let mut dfa = determinize(nfa, classes, by_count.min(by_memory), Some(deadline), &mut scratch)
                        .map_err(stopped)?;
                    let before = dfa.n_states();
                    let determinized = trace.then(std::time::Instant::now);
                    if worth_minimizing(nfa, before) {
                        dfa.merge_equal_classes(&mut min_scratch.kept);
                        dfa.minimize(&mut min_scratch);
                    }
                    if let (Some(rule_started), Some(determinized)) = (rule_started, determinized) {
                        let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;
                        if before > 2000 || ms(rule_started) > 0.2 {
                            eprintln!(
                                "    rule {} nfa {} dfa {before} min {} ({:.2} ms, minimizing {:.2})",
                                rules.name(r),
                                nfa.n_states(),
                                dfa.n_states(),
                                ms(rule_started),
                                ms(determinized)
                            );
                        }
                    }
                    dfa
                }
            };
            a.rule_start[r] = a.n_states() as u32;
            a.append(r as u32, &dfa, &mut class_ids);
            scratch.recycle(dfa);
        }
        drop(builder);
        phase(
            "nfa+det+min",
            format!(
                "{nfa_states} nfa states, {} states, {} table entries, {} class maps",
                a.n_states(),
                a.trans.len(),
                a.class_maps.len()
            ),
        );
        a.terminals = terminals;
        a.start_state = a.rule_start[start_rule as usize];
        a.accept_state = a.start_state + 1;

        // 3. Nullable and productive rules; trim states that cannot finish.
        let successors = Successors::of(&a);
        a.rule_nullable = fixpoint_rules(&a, &successors, false);
        let productive = fixpoint_rules(&a, &successors, true);
        if !productive[rules.root.0 as usize] {
            return Err(CompileError::EmptyLanguage { rule: rules[rules.root.0 as usize].name.clone() });
        }
        trim(&mut a, &successors, &productive);
        phase("fixpoints+trim", String::new());
        // Per state: the bytes it moves on, and the ASCII bytes that take it where `a` does.
        let mut succ = Vec::with_capacity(a.n_states());
        (a.first_bytes, a.run_bytes) = (0..a.n_states())
            .map(|s| {
                let (row, classes) = (a.row(s), a.classes(s));
                let class_a = classes.of_byte[b'a' as usize] as usize;
                let (mut moves, mut like_a) = ([0u64; 4], 0u128);
                for (&t, bytes) in row.iter().zip(&classes.bytes) {
                    if t != DEAD {
                        moves.iter_mut().zip(bytes).for_each(|(m, b)| *m |= b);
                        if t == row[class_a] {
                            like_a |= bytes[0] as u128 | (bytes[1] as u128) << 64;
                        }
                    }
                }
                succ.push(row[class_a]);
                (moves, like_a)
            })
            .unzip();
        a.run_len = compute_runs(&a, &succ, |_| true, |t| a.calls[t].is_empty());
        a.run_len_simple = compute_runs(&a, &succ, |_| true, |t| !a.is_final[t] && a.calls[t].is_empty());
        // Where each state's non-ASCII characters lead (computed once: it is not cheap).
        let utf8_to: Vec<Option<SmallSet>> = (0..a.n_states()).map(|s| a.utf8_targets(s as u32)).collect();
        let utf8_like_a: Vec<bool> = (0..a.n_states())
            .map(|s| succ[s] != DEAD && utf8_to[s].is_some_and(|t| t.as_slice() == [succ[s]]))
            .collect();
        a.utf8_run = compute_runs(&a, &succ, |s| utf8_like_a[s], |t| a.calls[t].is_empty());
        Reaches { plain: a.plain_reach, text: a.text_reach, text_exact: a.text_reach_exact } =
            plain_reach(&a, &utf8_to);
        phase("first_bytes", String::new());
        compute_closures(&mut a, &rules, limits, deadline)?;
        phase("closures", String::new());
        a.simple = (0..a.n_states()).map(|s| !a.is_final[s] && a.calls[s].is_empty()).collect();
        a.follow = follow_bytes(&a);
        phase("follow", String::new());
        Ok(a)
    }
}

/// How many bytes of `run_bytes[s]` in a row, from each state `s` that passes `from`,
/// lead through states that are alive and pass `ok` (`u32::MAX`: any number). `succ[s]` is where those bytes
/// lead; a run continues into `succ[s]` while its bytes are a subset of the successor's
/// (a counted string: `maxLength - count` more characters; a loop: unbounded).
fn compute_runs(a: &Automaton, succ: &[u32], from: impl Fn(usize) -> bool, ok: impl Fn(usize) -> bool) -> Vec<u32> {
    let mut len = vec![0u32; a.n_states()];
    // Successors mostly come later in the numbering: fill from the end.
    for s in (0..a.n_states()).rev() {
        let t = succ[s];
        len[s] = if t == DEAD || !from(s) || !ok(t as usize) {
            0
        } else if t as usize == s {
            u32::MAX
        } else if t as usize > s && a.run_bytes[s] & !a.run_bytes[t as usize] == 0 {
            len[t as usize].saturating_add(1)
        } else {
            1
        };
    }
    len
}

/// Per state, how many plain-text characters (see [`crate::trie::TextTokens`]) in a row
/// surely keep the item `(state, unknown caller)` alive and alone, whichever characters
/// they are (`u32::MAX`: any number): plain ASCII ones only, and non-ASCII ones too.
/// Unlike runs, the characters may lead to different states: an unanchored pattern's
/// search, or a `maxLength` string's count. It is the distance, over plain characters
/// and backwards, to a state where some plain character may fail. A reach is *exact*
/// when no plain text longer than it gets through either (a count's end).
fn plain_reach(a: &Automaton, utf8_to: &[Option<SmallSet>]) -> Reaches {
    use crate::trie::PLAIN_ASCII;
    let n = a.n_states();
    // Per class map, the classes of plain ASCII bytes.
    let plain_classes: Vec<Vec<usize>> = a
        .class_maps
        .iter()
        .map(|m| {
            let mut classes: Vec<usize> =
                (0..0x80u8).filter(|&b| PLAIN_ASCII >> b & 1 == 1).map(|b| m.of_byte[b as usize] as usize).collect();
            classes.dedup();
            classes
        })
        .collect();
    let plain_bytes = [PLAIN_ASCII as u64, (PLAIN_ASCII >> 64) as u64];
    let ok = |t: u32| t != DEAD && a.calls[t as usize].is_empty();
    // Where a plain ASCII (non-ASCII) character may fail, and where they lead: edges
    // `(to, from)`.
    let (mut ascii_fails, mut non_ascii_fails) = (vec![true; n], vec![true; n]);
    let (mut edges, mut non_ascii_edges) = (Vec::<(u32, u32)>::new(), Vec::<(u32, u32)>::new());
    for s in 0..n {
        let moves = &a.first_bytes[s];
        if moves[..2].iter().zip(&plain_bytes).any(|(m, p)| p & !m != 0) {
            continue;
        }
        non_ascii_fails[s] = false;
        let (row, plain_classes) = (a.row(s), &plain_classes[a.rows[s].classes as usize]);
        let first_edge = edges.len();
        if plain_classes.iter().all(|&c| ok(row[c])) {
            for &c in plain_classes {
                if edges.len() == first_edge || edges.last().unwrap().0 != row[c] {
                    edges.push((row[c], s as u32));
                }
            }
            ascii_fails[s] = false;
        }
        match utf8_to[s] {
            Some(targets) if targets.as_slice().iter().all(|&t| ok(t)) => {
                non_ascii_edges.extend(targets.as_slice().iter().map(|&t| (t, s as u32)));
            }
            _ => non_ascii_fails[s] = true,
        }
    }
    let (mut first, mut from) = (Vec::new(), Vec::new());
    // Breadth first, backwards from the failing states; also gives the states in order.
    let mut distances = |with_non_ascii: bool| {
        let non_ascii = if with_non_ascii { &non_ascii_edges[..] } else { &[] };
        group_into_rows(n, || edges.iter().chain(non_ascii).copied(), &mut first, &mut from);
        let mut reach = vec![u32::MAX; n];
        let mut order: Vec<u32> = (0..n as u32)
            .filter(|&s| ascii_fails[s as usize] || with_non_ascii && non_ascii_fails[s as usize])
            .collect();
        order.iter().for_each(|&s| reach[s as usize] = 0);
        let mut next = 0;
        while let Some(&t) = order.get(next) {
            next += 1;
            let d = reach[t as usize] + 1;
            for &s in &from[first[t as usize] as usize..first[t as usize + 1] as usize] {
                if reach[s as usize] == u32::MAX {
                    reach[s as usize] = d;
                    order.push(s);
                }
            }
        }
        (reach, order)
    };
    let (plain, _) = distances(false);
    let (text, order) = distances(true);
    // Exact: a state that takes no plain character, or whose plain characters all lead
    // to exact states one nearer (forward edges now); neither calling nor ending, where
    // other items could take the text on.
    group_into_rows(n, || edges.iter().chain(&non_ascii_edges).map(|&(t, s)| (s, t)), &mut first, &mut from);
    let takes_none = |s: usize| {
        let moves = &a.first_bytes[s];
        moves[0] & plain_bytes[0] == 0 && moves[1] & plain_bytes[1] == 0 && moves[3] & UTF8_LEADS == 0
    };
    let mut text_exact = vec![false; n];
    for &s in &order {
        let (s, r) = (s as usize, text[s as usize]);
        text_exact[s] = if !a.calls[s].is_empty() || a.is_final[s] {
            false
        } else if r == 0 {
            takes_none(s)
        } else {
            from[first[s] as usize..first[s + 1] as usize]
                .iter()
                .all(|&t| text_exact[t as usize] && text[t as usize] == r - 1)
        };
    }
    Reaches { plain, text, text_exact }
}

/// See [`plain_reach`].
struct Reaches {
    plain: Vec<u32>,
    text: Vec<u32>,
    text_exact: Vec<bool>,
}

/// The rules each rule calls, in order, and whether each call is in tail position
/// (nothing follows it in its rule; see `fuse.rs`): `callees[r]` and `tail[r]`.
pub(super) struct Calls {
    pub callees: Rows<u32>,
    pub tail: Rows<bool>,
}

/// Each rule's [`Calls`]; an error at a call of a rule that does not exist. `visit` sees
/// every node of each rule walked (with the rule's index). With `known`, the calls of
/// the rules not `changed` are copied from those found before instead.
#[inline(never)]
fn checked_callees<'r>(
    rules: impl Iterator<Item = &'r Rule>,
    n_rules: usize,
    known: Option<(&Calls, &[bool])>,
    mut visit: impl FnMut(usize, &Expr),
) -> Result<Calls, CompileError> {
    fn walk(e: &Expr, tail: bool, calls: &mut Calls, visit: &mut dyn FnMut(&Expr)) {
        visit(e);
        match e {
            Expr::Rule(id) => {
                calls.callees.items.push(id.0);
                calls.tail.items.push(tail);
            }
            Expr::Seq(v) => v.iter().enumerate().for_each(|(i, x)| walk(x, tail && i + 1 == v.len(), calls, visit)),
            Expr::Alt(v) => v.iter().for_each(|x| walk(x, tail, calls, visit)),
            Expr::Repeat { expr, .. } => walk(expr, false, calls, visit),
            _ => {}
        }
    }
    let mut calls = Calls { callees: Rows::default(), tail: Rows::default() };
    for (r, rule) in rules.enumerate() {
        match known {
            Some((known, changed)) if !changed[r] => {
                calls.callees.push_row(known.callees[r].iter().copied());
                calls.tail.push_row(known.tail[r].iter().copied());
                continue;
            }
            _ => {
                walk(&rule.body, true, &mut calls, &mut |e| visit(r, e));
                calls.callees.end_row();
                calls.tail.end_row();
            }
        }
        if let Some(&id) = calls.callees[r].iter().find(|&&id| id as usize >= n_rules) {
            return Err(CompileError::DanglingRule { rule: rule.name.clone(), id });
        }
    }
    Ok(calls)
}

/// Each rule's representative: the first rule with the same body once the rules it
/// calls are replaced by theirs (the root before all; itself for inlined rules).
/// Generated grammars repeat themselves (a schema's subschema copied at several places,
/// each copy a chain of rules with names of its own); calls go to the representative,
/// whose automaton is built once. Rules are compared callees first (an explicit
/// post-order walk of the calls); a callee not decided yet (recursion) stands for itself.
fn representatives(rules: &Rules, inline: &[bool], callees: &Rows<u32>) -> Vec<u32> {
    use std::hash::Hasher;
    let n = rules.len();
    let root = rules.root.0;
    let mut class: Vec<u32> = (0..n as u32).collect();
    // 0: not seen, 1: on the walk's stack, 2: decided.
    let mut seen = vec![0u8; n];
    // Rules decided so far, by hash: the first one, and after each the next with its hash.
    let mut first_with_hash: FxHashMap<u64, u32> = FxHashMap::default();
    let mut next_with_hash = vec![u32::MAX; n];
    let mut stack: Vec<(u32, usize)> = Vec::new();
    for first in std::iter::once(root).chain(0..n as u32) {
        if seen[first as usize] != 0 {
            continue;
        }
        seen[first as usize] = 1;
        stack.push((first, 0));
        while let Some(&mut (r, ref mut next)) = stack.last_mut() {
            if let Some(&c) = callees[r as usize].get(*next) {
                *next += 1;
                if seen[c as usize] == 0 {
                    seen[c as usize] = 1;
                    stack.push((c, 0));
                }
                continue;
            }
            stack.pop();
            seen[r as usize] = 2;
            let (body, inlined) = (&rules[r as usize].body, inline[r as usize]);
            let mut h = rustc_hash::FxHasher::default();
            h.write_u8(inlined as u8);
            hash_calls_as(body, &class, &mut h);
            let mut s = *first_with_hash.entry(h.finish()).or_insert(r);
            if s == r {
                continue;
            }
            // The first equal rule; the root joins the list, as do rules equal to none.
            let mut same = None;
            loop {
                if same.is_none()
                    && inline[s as usize] == inlined
                    && equal_calls_as(&rules[s as usize].body, body, &class)
                {
                    same = Some(s);
                    if r != root {
                        break;
                    }
                }
                match next_with_hash[s as usize] {
                    u32::MAX => break,
                    next => s = next,
                }
            }
            match same {
                Some(same) if r != root => class[r as usize] = same,
                _ => next_with_hash[s as usize] = r,
            }
        }
    }
    (0..n).map(|r| if inline[r] { r as u32 } else { class[r] }).collect()
}

/// Hashes `e` with each rule reference replaced by `class[rule]`.
fn hash_calls_as(e: &Expr, class: &[u32], h: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    std::mem::discriminant(e).hash(h);
    match e {
        Expr::Empty | Expr::AnyChar => {}
        Expr::Literal(b) => b.hash(h),
        Expr::Class(c) => c.hash(h),
        Expr::Regex(p) => p.hash(h),
        Expr::Rule(r) => class[r.0 as usize].hash(h),
        Expr::Token(t) => t.hash(h),
        Expr::Seq(v) | Expr::Alt(v) => {
            v.len().hash(h);
            v.iter().for_each(|x| hash_calls_as(x, class, h));
        }
        Expr::Repeat { expr, min, max } => {
            (min, max).hash(h);
            hash_calls_as(expr, class, h);
        }
    }
}

/// Whether `a` and `b` are the same with each rule reference replaced by `class[rule]`.
fn equal_calls_as(a: &Expr, b: &Expr, class: &[u32]) -> bool {
    match (a, b) {
        (Expr::Rule(x), Expr::Rule(y)) => class[x.0 as usize] == class[y.0 as usize],
        (Expr::Seq(x), Expr::Seq(y)) | (Expr::Alt(x), Expr::Alt(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| equal_calls_as(x, y, class))
        }
        (Expr::Repeat { expr: x, min: m, max: n }, Expr::Repeat { expr: y, min: p, max: q }) => {
            (m, n) == (p, q) && equal_calls_as(x, y, class)
        }
        (Expr::Seq(_) | Expr::Alt(_) | Expr::Repeat { .. } | Expr::Rule(_), _) => false,
        _ => a == b,
    }
}

/// Size of an expression for the inlining decision; a reference to a rule counts as the
/// size that rule expands to (`rule_size`) when it is inlined itself, else as 1. Only
/// sizes up to [`INLINE_MAX_SIZE`] matter: past it, the count stops (a schema's trie of
/// names is thousands of nodes).
fn expr_size(e: &Expr, rule_size: &dyn Fn(u32) -> usize, regexes: &Regexes) -> usize {
    match e {
        // Saturating: nested repetitions multiply (`(("a"{8}){8}){8}`...).
        Expr::Seq(v) | Expr::Alt(v) => {
            let mut n = 1usize;
            for x in v {
                n = n.saturating_add(expr_size(x, rule_size, regexes));
                if n > INLINE_MAX_SIZE {
                    break;
                }
            }
            n
        }
        Expr::Repeat { expr, min, max } => 1usize.saturating_add(
            expr_size(expr, rule_size, regexes).saturating_mul((*max).unwrap_or(*min).clamp(1, 8) as usize),
        ),
        Expr::Literal(b) => 1 + b.len() / 8,
        Expr::Rule(r) => rule_size(r.0),
        Expr::Regex(pattern) => regex_size(pattern, regexes),
        _ => 1,
    }
}

/// [`expr_size`] of a regex terminal, measured on its syntax tree: a regex is no cheaper
/// to expand than the same expression written in the IR (`[a-z]{0,1000}` must not be
/// inlined into every caller). A pattern that does not parse counts as big (it fails later).
fn regex_size(pattern: &stencil_grammar::Regex, regexes: &Regexes) -> usize {
    use regex_syntax::hir::{Hir, HirKind};
    fn size(h: &Hir) -> usize {
        match h.kind() {
            HirKind::Empty | HirKind::Look(_) => 0,
            HirKind::Literal(l) => 1 + l.0.len() / 8,
            HirKind::Class(_) => 1,
            HirKind::Capture(c) => size(&c.sub),
            HirKind::Repetition(r) => {
                1usize.saturating_add(size(&r.sub).saturating_mul(r.max.unwrap_or(r.min).clamp(1, 8) as usize))
            }
            HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().fold(1usize, |n, x| n.saturating_add(size(x))),
        }
    }
    // Only the decision "small or not" matters: long patterns are big without parsing.
    if pattern.len() > 64 * INLINE_MAX_SIZE {
        return usize::MAX;
    }
    match regexes.parse(pattern) {
        Ok(h) => size(&h),
        Err(_) => usize::MAX,
    }
}

/// Rules to expand in place: not recursive, not the root, and small (`callees`: each
/// rule's calls, from [`checked_callees`]).
///
/// Linear in the grammar and without recursion on the call graph (a chain of 100,000
/// rules must neither take quadratic time nor overflow the stack).
fn choose_inlined(rules: &Rules, callees: &Rows<u32>, regexes: &Regexes) -> Vec<bool> {
    let n = rules.len();
    let recursive = recursive_rules(callees);
    // Decide callees first (non-recursive rules form a DAG), so that a small rule whose
    // callees are inlined counts their size too: only small expansions are inlined.
    // An explicit post-order walk: a rule is sized once all its callees are.
    let mut inline = vec![false; n];
    let mut size: Vec<Option<usize>> = vec![None; n];
    for r in 0..n {
        if recursive[r] {
            size[r] = Some(1);
        }
    }
    let mut stack: Vec<(usize, usize)> = Vec::new(); // (rule, next callee to visit)
    for root in 0..n {
        if size[root].is_some() {
            continue;
        }
        stack.push((root, 0));
        while let Some(&mut (r, ref mut next)) = stack.last_mut() {
            if let Some(&c) = callees[r].get(*next) {
                *next += 1;
                // Non-recursive rules only call rules that are not on the stack.
                if size[c as usize].is_none() {
                    stack.push((c as usize, 0));
                }
                continue;
            }
            stack.pop();
            if rules[r].no_inline {
                size[r] = Some(INLINE_MAX_SIZE + 1);
                continue;
            }
            let own = expr_size(
                &rules[r].body,
                &|c| {
                    if inline[c as usize] {
                        size[c as usize].unwrap_or(1)
                    } else {
                        1
                    }
                },
                regexes,
            );
            inline[r] = r != rules.root.0 as usize && own <= INLINE_MAX_SIZE;
            size[r] = Some(own);
        }
    }
    inline
}

/// Which rules can reach themselves through calls: members of a strongly connected
/// component of the call graph with more than one rule, or with a self-call (Tarjan's
/// algorithm, iterative).
fn recursive_rules(callees: &Rows<u32>) -> Vec<bool> {
    let n = callees.len();
    const UNSEEN: u32 = u32::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut scc_stack: Vec<u32> = Vec::new();
    let mut recursive = vec![false; n];
    let mut counter = 0u32;
    let mut work: Vec<(u32, usize)> = Vec::new();
    for root in 0..n as u32 {
        if index[root as usize] != UNSEEN {
            continue;
        }
        work.push((root, 0));
        index[root as usize] = counter;
        low[root as usize] = counter;
        counter += 1;
        scc_stack.push(root);
        on_stack[root as usize] = true;
        while let Some(&mut (v, ref mut next)) = work.last_mut() {
            let vu = v as usize;
            if let Some(&w) = callees[vu].get(*next) {
                *next += 1;
                let wu = w as usize;
                if w == v {
                    recursive[vu] = true;
                }
                if index[wu] == UNSEEN {
                    index[wu] = counter;
                    low[wu] = counter;
                    counter += 1;
                    scc_stack.push(w);
                    on_stack[wu] = true;
                    work.push((w, 0));
                } else if on_stack[wu] {
                    low[vu] = low[vu].min(index[wu]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent as usize] = low[parent as usize].min(low[vu]);
            }
            if low[vu] == index[vu] {
                // The component: `v` and what is above it on the stack.
                let at = scc_stack.iter().rposition(|&w| w == v).expect("v is on the stack");
                let members = &scc_stack[at..];
                for &w in members {
                    on_stack[w as usize] = false;
                    recursive[w as usize] |= members.len() > 1;
                }
                scc_stack.truncate(at);
            }
        }
    }
    recursive
}

fn eps_closure(nfa: &Nfa, set: &mut Vec<u32>, seen: &mut [u32], stamp: u32) {
    let mut i = 0;
    for &s in set.iter() {
        seen[s as usize] = stamp;
    }
    while i < set.len() {
        let s = set[i];
        for e in nfa.edges(s) {
            if let Edge::Eps(t) = *e {
                if seen[t as usize] != stamp {
                    seen[t as usize] = stamp;
                    set.push(t);
                }
            }
        }
        i += 1;
    }
    set.sort_unstable();
}

/// One rule's DFA over the rule's own byte classes (coarser than the global ones: a
/// string rule does not tell `a` from `b` even when a key elsewhere does), states
/// numbered from 0, the start first.
struct RuleDfa {
    /// Byte → the rule's class.
    class: [u8; 256],
    n_classes: usize,
    /// `trans[state * n_classes + class]`: next state or [`DEAD`].
    trans: Vec<u32>,
    is_final: Vec<bool>,
    /// `(rule, next state)` per state.
    calls: EdgeRows,
    /// `(terminal, next state)` per state.
    token_edges: EdgeRows,
}

/// Per-state lists in one buffer (most states have none: a list of its own per state
/// was an allocation each). `rows[s]` is state `s`'s list.
#[derive(Debug)]
pub(crate) struct Rows<T> {
    items: Vec<T>,
    /// State `s`'s list is `items[starts[s]..starts[s + 1]]` (one entry more than states).
    starts: Vec<u32>,
}

/// Per-state `(label, next state)` lists: calls (label: the rule) or token edges (label:
/// the terminal).
type EdgeRows = Rows<(u32, u32)>;

impl<T> Default for Rows<T> {
    fn default() -> Self {
        Rows { items: Vec::new(), starts: vec![0] }
    }
}

impl<T> Rows<T> {
    /// `n` lists from `(list, item)` pairs, each list's items in the pairs' order (see
    /// [`group_into_rows`]).
    fn grouped<I: Iterator<Item = (u32, T)>>(n: usize, pairs: impl Fn() -> I) -> Self
    where
        T: Copy,
    {
        let mut rows = Rows { items: Vec::new(), starts: Vec::new() };
        group_into_rows(n, pairs, &mut rows.starts, &mut rows.items);
        rows
    }

    /// `n` empty lists.
    fn empty(n: usize) -> Self {
        Rows { items: Vec::new(), starts: vec![0; n + 1] }
    }

    fn get(&self, s: usize) -> &[T] {
        &self.items[self.starts[s] as usize..self.starts[s + 1] as usize]
    }

    /// How many lists.
    fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// No lists (keeping the buffers).
    fn clear(&mut self) {
        self.items.clear();
        self.starts.clear();
        self.starts.push(0);
    }

    /// Ends the current state's list (its items were pushed onto `items`).
    fn end_row(&mut self) {
        self.starts.push(self.items.len() as u32);
    }

    /// Appends a state's list.
    fn push_row(&mut self, items: impl IntoIterator<Item = T>) {
        self.items.extend(items);
        self.end_row();
    }

    /// Keeps, in every list, the items `keep` holds to.
    fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut kept = 0;
        for s in 0..self.len() {
            let (start, end) = (self.starts[s] as usize, self.starts[s + 1] as usize);
            self.starts[s] = kept as u32;
            for i in start..end {
                if keep(&self.items[i]) {
                    self.items.swap(kept, i);
                    kept += 1;
                }
            }
        }
        *self.starts.last_mut().expect("one entry more than states") = kept as u32;
        self.items.truncate(kept);
    }
}

impl<T> std::ops::Index<usize> for Rows<T> {
    type Output = [T];

    fn index(&self, s: usize) -> &[T] {
        self.get(s)
    }
}

impl Default for RuleDfa {
    fn default() -> Self {
        RuleDfa {
            class: [0; 256],
            n_classes: 0,
            trans: Vec::new(),
            is_final: Vec::new(),
            calls: EdgeRows::default(),
            token_edges: EdgeRows::default(),
        }
    }
}

impl RuleDfa {
    fn n_states(&self) -> usize {
        self.is_final.len()
    }

    /// No states, over the byte classes `class` (keeping the buffers).
    fn reset(&mut self, class: [u8; 256], n_classes: usize) {
        (self.class, self.n_classes) = (class, n_classes);
        self.trans.clear();
        self.is_final.clear();
        self.calls.clear();
        self.token_edges.clear();
    }

    /// Merges the byte classes that every state treats alike (equal columns). The subset
    /// construction starts from the NFA's classes, which tell apart bytes that no state
    /// of the DFA does: a `\S` and a `\s` cut UTF-8 lead bytes differently, and a JSON
    /// string's `\S` automaton has 57 classes where 37 do. Fewer classes make a smaller
    /// table and cheaper minimization; the states and what they accept are the same.
    fn merge_equal_classes(&mut self, kept: &mut Vec<usize>) {
        let (n, nc) = (self.n_states(), self.n_classes);
        // A hash of each column, then each class against the classes kept so far.
        let mut hashes = vec![0u64; nc];
        for row in self.trans.chunks_exact(nc) {
            for (h, &t) in hashes.iter_mut().zip(row) {
                *h = (h.rotate_left(5) ^ t as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
            }
        }
        let column_eq = |a: usize, b: usize| (0..n).all(|s| self.trans[s * nc + a] == self.trans[s * nc + b]);
        let mut new_class = [0u8; 256];
        kept.clear();
        for c in 0..nc {
            let same = kept.iter().position(|&k| hashes[k] == hashes[c] && column_eq(k, c));
            new_class[c] = match same {
                Some(k) => k as u8,
                None => {
                    kept.push(c);
                    (kept.len() - 1) as u8
                }
            };
        }
        if kept.len() == nc {
            return;
        }
        let mut merged = Vec::with_capacity(n * kept.len());
        for row in self.trans.chunks_exact(nc) {
            merged.extend(kept.iter().map(|&c| row[c]));
        }
        self.trans = merged;
        self.n_classes = kept.len();
        for c in self.class.iter_mut() {
            *c = new_class[*c as usize];
        }
    }

    /// Merges equivalent states (partition refinement, see
    /// [`minimize::Refiner`]), keeping the start state first. Fewer states means
    /// fewer mask-cache entries.
    fn minimize(&mut self, scratch: &mut MinimizeScratch) {
        let (n, nc) = (self.n_states(), self.n_classes);
        let MinimizeScratch { transitions, refiner, merged, order, .. } = scratch;
        // By label (partition refinement sorts them so: this way it finds them sorted).
        transitions.clear();
        for c in 0..nc {
            for s in 0..n {
                let head = self.trans[s * nc + c];
                if head != DEAD {
                    transitions.push(Transition { tail: s as u32, label: c as u64, head });
                }
            }
        }
        let by_class = transitions.len();
        for s in 0..n {
            let tail = s as u32;
            for &(r, head) in self.calls.get(s) {
                transitions.push(Transition { tail, label: nc as u64 + 2 * r as u64, head });
            }
            for &(k, head) in self.token_edges.get(s) {
                transitions.push(Transition { tail, label: nc as u64 + 2 * k as u64 + 1, head });
            }
        }
        transitions[by_class..].sort_unstable_by_key(|t| t.label);
        let (class, n_classes) = refiner.partition(n, &self.is_final, transitions);
        if n_classes == n {
            return;
        }
        // One representative per class, in class order (the start state's class is 0).
        order.clear();
        for (i, &c) in class.iter().enumerate() {
            if c as usize == order.len() {
                order.push(i);
            }
        }
        let map = |t: u32| if t == DEAD { DEAD } else { class[t as usize] };
        merged.reset(self.class, nc);
        for &s in order.iter() {
            merged.trans.extend(self.trans[s * nc..(s + 1) * nc].iter().map(|&t| map(t)));
            merged.is_final.push(self.is_final[s]);
            merged.calls.push_row(self.calls.get(s).iter().map(|&(x, t)| (x, map(t))));
            merged.token_edges.push_row(self.token_edges.get(s).iter().map(|&(x, t)| (x, map(t))));
        }
        std::mem::swap(self, merged);
    }

    /// State `s`'s transitions as NFA edges, byte by byte (neighbouring bytes with one
    /// target make one edge).
    fn edges(&self, s: u32) -> Vec<Edge> {
        let row = &self.trans[s as usize * self.n_classes..(s as usize + 1) * self.n_classes];
        let mut out: Vec<Edge> = Vec::new();
        for (b, &c) in self.class.iter().enumerate() {
            let to = row[c as usize];
            if to == DEAD {
                continue;
            }
            match out.last_mut() {
                Some(Edge::Bytes { hi, to: t, .. }) if *t == to && *hi as usize + 1 == b => *hi = b as u8,
                _ => out.push(Edge::Bytes { lo: b as u8, hi: b as u8, to }),
            }
        }
        out.extend(self.calls.get(s as usize).iter().map(|&(rule, to)| Edge::Call { rule, to }));
        out.extend(self.token_edges.get(s as usize).iter().map(|&(terminal, to)| Edge::Token { terminal, to }));
        out
    }
}

impl Automaton {
    /// Appends `dfa` as `rule`'s states; `class_ids` finds class maps already kept.
    fn append(&mut self, rule: u32, dfa: &RuleDfa, class_ids: &mut FxHashMap<[u8; 256], u32>) {
        let base = self.n_states() as u32;
        let shift = |t: u32| if t == DEAD { DEAD } else { base + t };
        let classes = *class_ids.entry(dfa.class).or_insert_with(|| {
            self.class_maps.push(ClassMap::new(dfa.class, dfa.n_classes));
            self.class_maps.len() as u32 - 1
        });
        let start = self.trans.len() as u32;
        self.rows.extend((0..dfa.n_states() as u32).map(|s| Row { start: start + s * dfa.n_classes as u32, classes }));
        self.trans.extend(dfa.trans.iter().map(|&t| shift(t)));
        for s in 0..dfa.n_states() {
            self.calls.push_row(dfa.calls.get(s).iter().map(|&(r, t)| (r, shift(t))));
            self.token_edges.push_row(dfa.token_edges.get(s).iter().map(|&(k, t)| (k, shift(t))));
        }
        self.is_final.extend_from_slice(&dfa.is_final);
        self.state_rule.extend(std::iter::repeat_n(rule, dfa.n_states()));
    }
}

/// Groups `(row, item)` pairs into compressed rows over rows `0..n`: row `r`'s items
/// become `items[first[r]..first[r + 1]]`, in the pairs' order (a counting sort; `pairs`
/// is walked twice, to count and to place). The buffers' old contents are dropped.
fn group_into_rows<T: Copy, I: Iterator<Item = (u32, T)>>(
    n: usize,
    pairs: impl Fn() -> I,
    first: &mut Vec<u32>,
    items: &mut Vec<T>,
) {
    // Counted one slot further on, so that placing an item advances its row's start to
    // the next row's.
    first.clear();
    first.resize(n + 2, 0);
    for (r, _) in pairs() {
        first[r as usize + 2] += 1;
    }
    for r in 2..n + 2 {
        first[r] += first[r - 1];
    }
    items.clear();
    if let Some((_, any)) = pairs().next() {
        items.resize(first[n + 1] as usize, any);
    }
    for (r, x) in pairs() {
        let slot = &mut first[r as usize + 1];
        items[*slot as usize] = x;
        *slot += 1;
    }
    first.pop();
}

/// The byte classes of an NFA's edges: bytes no edge tells apart share a class.
fn byte_classes(nfa: &Nfa) -> ([u8; 256], usize) {
    let mut boundary = [false; 257];
    mark_boundaries(&mut boundary, nfa.all_edges());
    classes_of(&boundary)
}

/// Marks where the byte ranges of `edges` start and end (see [`classes_of`]).
fn mark_boundaries<'e>(boundary: &mut [bool; 257], edges: impl IntoIterator<Item = &'e Edge>) {
    for e in edges {
        if let Edge::Bytes { lo, hi, .. } = *e {
            boundary[lo as usize] = true;
            boundary[hi as usize + 1] = true;
        }
    }
}

/// Bytes numbered by class, a new class at each boundary (`boundary[b]`: byte `b`
/// starts a class): `(class of each byte, number of classes)`.
fn classes_of(boundary: &[bool; 257]) -> ([u8; 256], usize) {
    let mut class = [0u8; 256];
    let mut c = 0usize;
    for b in 0..256 {
        if b > 0 && boundary[b] {
            c += 1;
        }
        class[b] = c as u8;
    }
    (class, c + 1)
}

/// A rule on its way to its automaton.
enum Built<'n> {
    Nfa(&'n Nfa),
    /// Built directly (see `chain.rs`), already minimal.
    Dfa(Box<RuleDfa>),
}

/// Why a subset construction gave up.
#[derive(Debug)]
enum Unfinished {
    TooManyStates,
    OutOfTime,
}

/// Buffers minimization keeps from one rule to the next.
#[derive(Default)]
struct MinimizeScratch {
    transitions: Vec<Transition>,
    refiner: minimize::Refiner,
    /// The merged automaton is written here, then swapped with the rule's.
    merged: RuleDfa,
    /// One state per class.
    order: Vec<usize>,
    /// The byte classes kept by [`RuleDfa::merge_equal_classes`].
    kept: Vec<usize>,
}

/// Buffers the subset construction keeps from one rule to the next (a grammar has many
/// small rules: allocating them afresh each time was a good part of the compile).
#[derive(Default)]
struct SubsetScratch {
    seen: Vec<u32>,
    matters: Vec<bool>,
    closed: StateSets,
    direct: StateSets,
    direct_state: Vec<u32>,
    set: Vec<u32>,
    /// The DFA state each single NFA state leads to, once its closure is known.
    single: Vec<u32>,
    /// A state's byte edges as class ranges `(first, last, NFA target)`.
    ranges: Vec<(u8, u8, u32)>,
    /// Where ranges overlap, their `(class, target)` pairs grouped by class (a counting
    /// sort), and where each class's group starts.
    by_class: Vec<(u8, u32)>,
    class_start: Vec<u32>,
    labelled: Vec<(bool, u32, u32)>,
    /// A finished rule's buffers, for the next one (see [`SubsetScratch::recycle`]).
    spare: RuleDfa,
}

impl SubsetScratch {
    /// Gives back the buffers of a rule's automaton once it is copied into the table.
    fn recycle(&mut self, dfa: RuleDfa) {
        self.spare = dfa;
    }
}

/// Subset construction of `nfa` (start state 0, final state `nfa.accept`) over its
/// byte classes (see [`byte_classes`]); gives up past `max_states` states or the `deadline`.
fn determinize(
    nfa: &Nfa,
    (class, n_classes): ([u8; 256], usize),
    max_states: usize,
    deadline: Option<std::time::Instant>,
    scratch: &mut SubsetScratch,
) -> Result<RuleDfa, Unfinished> {
    let mut dfa = std::mem::take(&mut scratch.spare);
    dfa.reset(class, n_classes);
    let SubsetScratch {
        seen,
        matters,
        closed,
        direct,
        direct_state,
        single,
        set,
        ranges,
        by_class,
        class_start,
        labelled,
        spare: _,
    } = scratch;
    seen.clear();
    seen.resize(nfa.n_states(), 0);
    single.clear();
    single.resize(nfa.n_states(), DEAD);
    let mut stamp = 1u32;
    // A closed set is known by the states in it that matter for what comes next: those
    // with an edge that is not ε, and the final state. The ends of an alternation's
    // branches (ε into the join) would otherwise make one state per branch taken.
    matters.clear();
    matters.extend(
        (0..nfa.n_states() as u32).map(|s| s == nfa.accept || nfa.edges(s).iter().any(|e| !matches!(e, Edge::Eps(_)))),
    );
    let close = |set: &mut Vec<u32>, seen: &mut [u32], stamp: u32| {
        eps_closure(nfa, set, seen, stamp);
        set.retain(|&s| matters[s as usize]);
    };
    // ε-closed sets: their ids are the DFA's states. `direct`: sets as transitions reach
    // them, before their ε-closure (the costly part): most byte classes of a state share
    // their targets.
    closed.clear();
    direct.clear();
    direct_state.clear();
    set.clear();
    set.push(0);
    close(set, seen, stamp);
    closed.intern(set);
    set.clear();
    let mut i = 0;
    while i < closed.len() as u32 {
        if closed.len() > max_states {
            return Err(Unfinished::TooManyStates);
        }
        // Sets of a big NFA make single states slow: look at the clock often.
        if let Some(deadline) = deadline {
            if (i % 64 == 63 || closed.get(i).len() > 1024) && std::time::Instant::now() > deadline {
                return Err(Unfinished::OutOfTime);
            }
        }
        ranges.clear();
        labelled.clear();
        let mut is_final = false;
        for &s in closed.get(i) {
            is_final |= s == nfa.accept;
            for e in nfa.edges(s) {
                match *e {
                    Edge::Eps(_) => {}
                    Edge::Bytes { lo, hi, to } => ranges.push((class[lo as usize], class[hi as usize], to)),
                    Edge::Call { rule, to } => labelled.push((false, rule, to)),
                    Edge::Token { terminal, to } => labelled.push((true, terminal, to)),
                }
            }
        }
        let mut target = |set: &mut Vec<u32>, closed: &mut StateSets| -> u32 {
            set.sort_unstable();
            set.dedup();
            // Where the set's DFA state is kept: one NFA state (most moves) by its index,
            // others by interning the set.
            let known = match set[..] {
                [one] => &mut single[one as usize],
                _ => {
                    let (d, new) = direct.intern(set);
                    if new {
                        direct_state.push(DEAD);
                    }
                    &mut direct_state[d as usize]
                }
            };
            if *known == DEAD {
                stamp += 1;
                close(set, seen, stamp);
                *known = closed.intern(set).0;
            }
            set.clear();
            *known
        };
        let row = dfa.trans.len();
        dfa.trans.resize(row + n_classes, DEAD);
        // Mostly the state's class ranges do not overlap (a literal, a trie node, a
        // character's UTF-8 sequences): each range moves to its one NFA state.
        ranges.sort_unstable_by_key(|r| r.0);
        if ranges.windows(2).all(|w| w[0].1 < w[1].0) {
            let mut previous = (u32::MAX, DEAD);
            for &(lo, hi, to) in ranges.iter() {
                if previous.0 != to {
                    set.push(to);
                    previous = (to, target(set, closed));
                }
                dfa.trans[row + lo as usize..=row + hi as usize].fill(previous.1);
            }
        } else {
            // Per class, its targets in the order they were met (a counting sort: two
            // classes that move to the same states meet them in the same order).
            class_start.clear();
            class_start.resize(n_classes + 1, 0);
            let mut moves = 0;
            for &(lo, hi, _) in ranges.iter() {
                for c in lo..=hi {
                    class_start[c as usize + 1] += 1;
                }
                moves += (hi - lo) as usize + 1;
            }
            for c in 0..n_classes {
                class_start[c + 1] += class_start[c];
            }
            by_class.clear();
            by_class.resize(moves, (0, 0));
            for &(lo, hi, t) in ranges.iter() {
                for c in lo..=hi {
                    let slot = &mut class_start[c as usize];
                    by_class[*slot as usize] = (c, t);
                    *slot += 1;
                }
            }
            // Neighbouring classes mostly move to the same NFA states.
            let (mut previous, mut previous_target): (&[(u8, u32)], u32) = (&[], DEAD);
            for group in by_class.chunk_by(|x, y| x.0 == y.0) {
                let same = group.len() == previous.len() && group.iter().zip(previous).all(|(x, y)| x.1 == y.1);
                if !same {
                    set.extend(group.iter().map(|m| m.1));
                    (previous, previous_target) = (group, target(set, closed));
                }
                dfa.trans[row + group[0].0 as usize] = previous_target;
            }
        }
        labelled.sort_unstable();
        for group in labelled.chunk_by(|x, y| (x.0, x.1) == (y.0, y.1)) {
            let (is_token, label, _) = group[0];
            set.extend(group.iter().map(|g| g.2));
            let to = target(set, closed);
            if is_token {
                dfa.token_edges.items.push((label, to))
            } else {
                dfa.calls.items.push((label, to))
            }
        }
        dfa.is_final.push(is_final);
        dfa.calls.end_row();
        dfa.token_edges.end_row();
        i += 1;
    }
    Ok(dfa)
}

/// Whether a rule's automaton (`states` after the subset construction of `nfa`) is
/// worth minimizing. Built with shared tails (see `nfa.rs`), most are minimal or nearly:
/// the names' tries exactly, a schema's objects within a few percent. The subset
/// constructions of regex terminals (formats, patterns) are the ones with many
/// equivalent states (a URI format: 623 states, 231 minimal), and big automata are
/// worth it for their table's size. On the benchmark's sample (350 schemas), skipping
/// the rest leaves 3 % more states and takes a tenth off the engine's compile time,
/// masks equally fast. Big automata made mostly of stamped copies of a repeated body's
/// minimal automaton (a counted repetition: `(\S+\s+){0,49}\S+`, a word count) are
/// minimal already, told apart by the count: on the dev split of JSONSchemaBench, the
/// 1,297 such rules without a regex terminal lose 2,131 states to minimization (1 % of
/// what the others lose) for 55 % of its time.
fn worth_minimizing(nfa: &Nfa, states: usize) -> bool {
    nfa.has_regex || (states > 256 && nfa.stamped * 2 <= nfa.n_states())
}

/// Least fixpoint of a per-rule flag: a rule gets the flag when its start state reaches a
/// final state over its calls of flagged rules and, when `terminals`, its byte and token
/// edges too (so: nullable rules without, productive rules with).
///
/// Linear in the automaton: each state is explored once; a call of a rule not (yet)
/// flagged waits in that rule's list until it gets the flag.
fn fixpoint_rules(a: &Automaton, successors: &Successors, terminals: bool) -> Vec<bool> {
    let n_rules = a.rule_start.len();
    let mut flags = vec![false; n_rules];
    let mut reached = vec![false; a.n_states()];
    // Per rule, the states waiting for it: a list through `waiting`, `(state, next)`.
    let mut first_waiting = vec![u32::MAX; n_rules];
    let mut waiting: Vec<(u32, u32)> = Vec::new();
    let mut newly: Vec<u32> = Vec::new();
    let mut stack: Vec<u32> = Vec::new();
    let mut explore = |from: u32,
                       flags: &mut Vec<bool>,
                       waits: (&mut Vec<u32>, &mut Vec<(u32, u32)>),
                       newly: &mut Vec<u32>,
                       stack: &mut Vec<u32>| {
        let (first_waiting, waiting) = waits;
        stack.push(from);
        while let Some(s) = stack.pop() {
            let su = s as usize;
            if std::mem::replace(&mut reached[su], true) {
                continue;
            }
            let rule = a.state_rule[su] as usize;
            if a.is_final[su] && !flags[rule] {
                flags[rule] = true;
                newly.push(rule as u32);
            }
            if terminals {
                stack.extend(successors.of_state(s));
            }
            for &(callee, t) in &a.calls[su] {
                if flags[callee as usize] {
                    stack.push(t);
                } else {
                    waiting.push((t, first_waiting[callee as usize]));
                    first_waiting[callee as usize] = waiting.len() as u32 - 1;
                }
            }
        }
    };
    for r in 0..n_rules {
        let start = a.rule_start[r];
        if start != DEAD {
            explore(start, &mut flags, (&mut first_waiting, &mut waiting), &mut newly, &mut stack);
        }
    }
    while let Some(r) = newly.pop() {
        let mut next = std::mem::replace(&mut first_waiting[r as usize], u32::MAX);
        while next != u32::MAX {
            let (t, after) = waiting[next as usize];
            next = after;
            explore(t, &mut flags, (&mut first_waiting, &mut waiting), &mut newly, &mut stack);
        }
    }
    flags
}

/// Each state's distinct targets over bytes and tokens (not calls), in compressed rows:
/// the global transition rows are long and mostly runs of one target.
struct Successors {
    start: Vec<u32>,
    targets: Vec<u32>,
}

impl Successors {
    fn of(a: &Automaton) -> Self {
        let mut start = Vec::with_capacity(a.n_states() + 1);
        let mut targets = Vec::new();
        start.push(0);
        for s in 0..a.n_states() {
            let (first, mut last) = (targets.len(), DEAD);
            for &t in a.row(s) {
                // Neighbouring classes mostly go to the same state.
                if t != last && t != DEAD && !targets[first..].contains(&t) {
                    targets.push(t);
                }
                last = t;
            }
            targets.extend(a.token_edges[s].iter().map(|&(_, t)| t));
            start.push(targets.len() as u32);
        }
        Successors { start, targets }
    }

    fn of_state(&self, s: u32) -> impl Iterator<Item = u32> + '_ {
        self.targets[self.start[s as usize] as usize..self.start[s as usize + 1] as usize].iter().copied()
    }
}

/// Removes edges into states that cannot reach their rule's final state, and calls of
/// unproductive rules.
fn trim(a: &mut Automaton, successors: &Successors, productive: &[bool]) {
    let n = a.n_states();
    a.calls.retain(|(r, _)| productive[*r as usize]);
    // Predecessors in compressed rows, then a search backwards from the final states.
    // Listed once (walked twice below; a chain of iterators per state was slower).
    let mut reversed = Vec::with_capacity(successors.targets.len() + a.calls.items.len());
    for s in 0..n as u32 {
        reversed.extend(successors.of_state(s).map(|t| (t, s)));
        reversed.extend(a.calls[s as usize].iter().map(|&(_, t)| (t, s)));
    }
    let preds = Rows::grouped(n, || reversed.iter().copied());
    let mut live = vec![false; n];
    let mut stack: Vec<u32> = (0..n as u32).filter(|&s| a.is_final[s as usize]).collect();
    while let Some(s) = stack.pop() {
        if !std::mem::replace(&mut live[s as usize], true) {
            stack.extend(&preds[s as usize]);
        }
    }
    if live.iter().all(|&l| l) {
        return;
    }
    for s in 0..n {
        for t in a.row_mut(s) {
            if *t != DEAD && !live[*t as usize] {
                *t = DEAD;
            }
        }
    }
    a.calls.retain(|&(_, t)| live[t as usize]);
    a.token_edges.retain(|&(_, t)| live[t as usize]);
}

/// `same_origin` and `predicted` for every state (see the field docs).
fn compute_closures(
    a: &mut Automaton,
    rules: &Rules,
    limits: &Limits,
    deadline: std::time::Instant,
) -> Result<(), CompileError> {
    let n = a.n_states();
    // What the closures may add to the transition table's memory (4 bytes an entry): they
    // can be quadratic in a rule's states (`root ::= x x x ...` with a nullable `x`).
    let mut budget = limits.max_automaton_bytes.saturating_sub(a.trans.len() * 4) / 4;
    let over = |a: &Automaton, s: usize, what: LimitKind| CompileError::LimitExceeded {
        limit: what,
        value: match what {
            LimitKind::CompileTime => limits.max_compile_time.as_millis() as usize,
            _ => limits.max_automaton_bytes,
        },
        rule: rules.name(a.state_rule[s] as usize).into(),
    };
    let nullable = a.rule_nullable.clone();
    let mut set = StampSet::new(n);
    let mut same_origin = Rows::default();
    let mut stack = Vec::new();
    for s in 0..n {
        set.clear();
        set.insert(s as u32);
        let row = same_origin.items.len();
        stack.push(s as u32);
        while let Some(x) = stack.pop() {
            for &(r, t) in &a.calls[x as usize] {
                if nullable[r as usize] && set.insert(t) {
                    same_origin.items.push(t);
                    stack.push(t);
                }
            }
        }
        same_origin.end_row();
        budget =
            budget.checked_sub(same_origin.items.len() - row).ok_or_else(|| over(a, s, LimitKind::AutomatonMemory))?;
        if s % 4096 == 4095 && std::time::Instant::now() > deadline {
            return Err(over(a, s, LimitKind::CompileTime));
        }
    }
    a.same_origin = same_origin;
    // Everything a rule predicts at its own start: its start state, the starts of the
    // rules its states call, and the states reached over nullable calls, transitively.
    let mut rule_predict: Rows<u32> = Rows::default();
    for r in 0..a.rule_start.len() {
        let start = a.rule_start[r];
        let row = rule_predict.items.len();
        if start != DEAD {
            set.clear();
            set.insert(start);
            rule_predict.items.push(start);
            let mut i = row;
            while i < rule_predict.items.len() {
                for &(callee, t) in &a.calls[rule_predict.items[i] as usize] {
                    let callee_start = a.rule_start[callee as usize];
                    if set.insert(callee_start) {
                        rule_predict.items.push(callee_start);
                    }
                    if nullable[callee as usize] && set.insert(t) {
                        rule_predict.items.push(t);
                    }
                }
                i += 1;
            }
            budget = budget
                .checked_sub(rule_predict.items.len() - row)
                .ok_or_else(|| over(a, start as usize, LimitKind::AutomatonMemory))?;
            if r % 1024 == 1023 && std::time::Instant::now() > deadline {
                return Err(over(a, start as usize, LimitKind::CompileTime));
            }
        }
        rule_predict.end_row();
    }
    let mut predicted = Rows::default();
    for s in 0..n {
        set.clear();
        let row = predicted.items.len();
        for x in std::iter::once(s as u32).chain(a.same_origin[s].iter().copied()) {
            for &(callee, _) in &a.calls[x as usize] {
                for &y in &rule_predict[callee as usize] {
                    if set.insert(y) {
                        predicted.items.push(y);
                    }
                }
            }
        }
        predicted.end_row();
        budget =
            budget.checked_sub(predicted.items.len() - row).ok_or_else(|| over(a, s, LimitKind::AutomatonMemory))?;
        if s % 4096 == 4095 && std::time::Instant::now() > deadline {
            return Err(over(a, s, LimitKind::CompileTime));
        }
    }
    a.predicted = predicted;
    Ok(())
}

/// FOLLOW sets over bytes: for each rule, the bytes some caller can take right after the
/// rule ends (through the caller's own end, transitively).
fn follow_bytes(a: &Automaton) -> Vec<[u64; 4]> {
    let n_rules = a.rule_start.len();
    // What an item in state t can take next, and whether it can end right there.
    let next_of = |t: u32| {
        let mut set = [0u64; 4];
        let mut can_end = false;
        for x in std::iter::once(t)
            .chain(a.same_origin[t as usize].iter().copied())
            .chain(a.predicted[t as usize].iter().copied())
        {
            for (o, f) in set.iter_mut().zip(&a.first_bytes[x as usize]) {
                *o |= f;
            }
        }
        for x in std::iter::once(t).chain(a.same_origin[t as usize].iter().copied()) {
            can_end |= a.is_final[x as usize];
        }
        (set, can_end)
    };
    let mut follow = vec![[0u64; 4]; n_rules];
    // (callee, caller rule) pairs whose FOLLOW flows from caller to callee.
    let mut inherits: Vec<(u32, u32)> = Vec::new();
    for s in 0..a.n_states() {
        for &(callee, t) in &a.calls[s] {
            let (set, can_end) = next_of(t);
            for (o, f) in follow[callee as usize].iter_mut().zip(&set) {
                *o |= f;
            }
            if can_end {
                inherits.push((callee, a.state_rule[s]));
            }
        }
    }
    // Propagate along caller → callee edges with a worklist: a rule's set only grows, at
    // most 256 times, so this is linear in the edges (a fixed-point loop over all pairs
    // would be quadratic on long call chains).
    let heirs = Rows::grouped(n_rules, || inherits.iter().map(|&(callee, caller)| (caller, callee)));
    let mut queued = vec![true; n_rules];
    let mut work: Vec<u32> = (0..n_rules as u32).collect();
    while let Some(caller) = work.pop() {
        queued[caller as usize] = false;
        let from = follow[caller as usize];
        for &callee in &heirs[caller as usize] {
            let to = &mut follow[callee as usize];
            let mut changed = false;
            for w in 0..4 {
                let add = from[w] & !to[w];
                if add != 0 {
                    to[w] |= add;
                    changed = true;
                }
            }
            if changed && !std::mem::replace(&mut queued[callee as usize], true) {
                work.push(callee);
            }
        }
    }
    follow
}

/// A set of small integers with O(1) clear.
pub(crate) struct StampSet {
    stamps: Vec<u32>,
    current: u32,
}

impl StampSet {
    pub fn new(n: usize) -> Self {
        StampSet { stamps: vec![0; n], current: 1 }
    }
    pub fn clear(&mut self) {
        self.current = self.current.wrapping_add(1);
        if self.current == 0 {
            self.stamps.iter_mut().for_each(|s| *s = 0);
            self.current = 1;
        }
    }
    /// Inserts `x`; true when it was not there.
    pub fn insert(&mut self, x: u32) -> bool {
        let slot = &mut self.stamps[x as usize];
        let new = *slot != self.current;
        *slot = self.current;
        new
    }
}

#[cfg(test)]
mod tests {
    use super::Rows;

    /// Merging equal classes keeps every byte's move from every state, and leaves fewer
    /// classes where a Unicode class and its complement cut UTF-8 bytes apart.
    #[test]
    fn merging_equal_classes_keeps_every_move() {
        let src = r#"root ::= ([^ \u1680\u2000-\u200a] [ \u1680\u2000-\u200a]){0,3} "x""#;
        let g = stencil_grammar::parse_gbnf(src).unwrap();
        let mut dfa = super::nfa::with_plain_builder(&g, |b| {
            let nfa = b.build_rule(g.root).unwrap();
            super::determinize(nfa, super::byte_classes(nfa), usize::MAX, None, &mut Default::default()).unwrap()
        });
        let moves = |d: &super::RuleDfa| -> Vec<u32> {
            (0..d.n_states())
                .flat_map(|s| (0..256).map(move |b| d.trans[s * d.n_classes + d.class[b] as usize]))
                .collect()
        };
        let (before, classes) = (moves(&dfa), dfa.n_classes);
        dfa.merge_equal_classes(&mut Vec::new());
        assert_eq!(moves(&dfa), before);
        assert!(dfa.n_classes < classes, "{} classes, {classes} before", dfa.n_classes);
        assert!(dfa.class.iter().all(|&c| (c as usize) < dfa.n_classes));
    }

    #[test]
    fn utf8_leads_are_c2_to_f4() {
        let leads: Vec<u8> = (0xC0..=0xFFu8).filter(|&b| super::UTF8_LEADS >> (b - 0xC0) & 1 == 1).collect();
        assert_eq!(leads, (0xC2..=0xF4).collect::<Vec<u8>>());
    }

    #[test]
    fn rows_keep_their_lists_apart_through_retain() {
        let mut rows = Rows::default();
        rows.push_row([1, 2, 3]);
        rows.push_row([]);
        rows.push_row([4, 5, 7]);
        rows.retain(|&x| x % 2 == 1);
        let lists: Vec<&[u32]> = (0..3).map(|s| &rows[s]).collect();
        assert_eq!(lists, [&[1, 3][..], &[], &[5, 7]]);
    }
}
