//! Determinization: one rule's Thompson NFA (see `nfa.rs`) to a [`RuleDfa`] over the
//! rule's own byte classes, by the subset construction.
//!
//! A DFA state is an ε-closed set of NFA states, known by the states in it that matter
//! for what comes next (those with an edge that is not ε, and the final state). Rule
//! calls and token terminals stay labelled edges, grouped by label like bytes by class.
//! The construction stops, without a result, past a number of states or a deadline
//! ([`Unfinished`]); its buffers are kept from one rule to the next ([`SubsetScratch`]).
//!
//! Targets are memoized as transitions reach them, before their ε-closure (the costly
//! part); every set is interned in one arena (`sets.rs`); a state whose class ranges do
//! not overlap (a literal, a trie node, a character's UTF-8 sequences) fills its row range
//! by range.
//!
//! Invariant: the DFA accepts exactly the NFA's language over bytes, calls and tokens;
//! state 0 is the start; every transition is to a state of the same DFA or [`DEAD`].

use super::nfa::{Edge, Nfa};
use super::rows::EdgeRows;
use super::sets::StateSets;
use super::DEAD;

/// One rule's DFA over the rule's own byte classes (coarser than the global ones: a
/// string rule does not tell `a` from `b` even when a key elsewhere does), states
/// numbered from 0, the start first.
pub(super) struct RuleDfa {
    /// Byte → the rule's class.
    pub(super) class: [u8; 256],
    pub(super) n_classes: usize,
    /// `trans[state * n_classes + class]`: next state or [`DEAD`].
    pub(super) trans: Vec<u32>,
    pub(super) is_final: Vec<bool>,
    /// `(rule, next state)` per state.
    pub(super) calls: EdgeRows,
    /// `(terminal, next state)` per state.
    pub(super) token_edges: EdgeRows,
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
    pub(super) fn n_states(&self) -> usize {
        self.is_final.len()
    }

    /// No states, over the byte classes `class` (keeping the buffers).
    pub(super) fn reset(&mut self, class: [u8; 256], n_classes: usize) {
        (self.class, self.n_classes) = (class, n_classes);
        self.trans.clear();
        self.is_final.clear();
        self.calls.clear();
        self.token_edges.clear();
    }

    /// State `s`'s transitions as NFA edges, byte by byte (neighbouring bytes with one
    /// target make one edge).
    pub(super) fn edges(&self, s: u32) -> Vec<Edge> {
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

/// Why a subset construction gave up.
#[derive(Debug)]
pub(super) enum Unfinished {
    TooManyStates,
    OutOfTime,
}

/// Buffers the subset construction keeps from one rule to the next (a grammar has many
/// small rules: allocating them afresh each time was a good part of the compile).
#[derive(Default)]
pub(super) struct SubsetScratch {
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
    pub(super) fn recycle(&mut self, dfa: RuleDfa) {
        self.spare = dfa;
    }
}

/// Subset construction of `nfa` (start state 0, final state `nfa.accept`) over its
/// byte classes (see [`byte_classes`](super::classes::byte_classes)); gives up past `max_states` states or the `deadline`.
pub(super) fn determinize(
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
