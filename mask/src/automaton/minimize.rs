//! DFA minimization by partition refinement over the transitions that exist (Valmari and
//! Lehtinen's algorithm for partial transition functions, `O(m log n)` for `m`
//! transitions): no dead sink, no per-round signatures, so neither sparse automata nor
//! long chains of states (which make Moore's refinement quadratic) cost more than their
//! size.
//!
//! Two states end up in one class iff they agree on finality and, label by label, either
//! both lack a transition or both go to states of one class. Missing transitions are kept
//! distinct from every state, so merging never changes what the automaton accepts.
//!
//! [`RuleDfa::minimize`] runs it on one rule's automaton (byte classes, calls and token
//! terminals as labels), and [`worth_minimizing`] says which automata are worth it: rules
//! with a regex terminal (formats and patterns make equivalent states) or more than 256
//! states, but not those made mostly of stamped copies of a repeated body (minimal
//! already). First the byte classes that every state treats alike are merged (a `\S` and
//! a `\s` cut UTF-8 bytes where no DFA state does; a merged class need not be a byte
//! interval, so each class map lists the classes of each non-ASCII UTF-8 byte range for
//! the passes that follow characters). Then an automaton without cycles is minimized
//! bottom up by hash-consing, in linear time, and any other by the refinement above;
//! both give the same partition.
//!
//! Invariant: minimization keeps the start state first and the language unchanged; it
//! only merges states.

use super::determinize::RuleDfa;
use super::nfa::Nfa;
use super::rows::group_into_rows;
use super::DEAD;

/// A transition `tail --label--> head`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Transition {
    pub tail: u32,
    pub label: u64,
    pub head: u32,
}

/// [`Refiner::partition`] with fresh buffers.
#[cfg(test)]
pub(crate) fn coarsest_partition(n: usize, finals: &[bool], transitions: &[Transition]) -> (Vec<u32>, usize) {
    let mut refiner = Refiner::default();
    let count = refiner.partition(n, finals, transitions).1;
    (refiner.class, count)
}

/// Partition refinement, with buffers kept from one automaton to the next.
#[derive(Default)]
pub(crate) struct Refiner {
    blocks: Partition,
    cords: Partition,
    in_start: Vec<u32>,
    incoming: Vec<u32>,
    renumber: Vec<u32>,
    class: Vec<u32>,
    acyclic: Acyclic,
}

impl Refiner {
    /// The coarsest stable partition of states `0..n`: `(class of each state, number of
    /// classes)`. Classes are numbered by first occurrence, so state 0's class is 0.
    /// Transitions sorted by label are the cheapest to take.
    ///
    /// ```text
    /// states 0 -a-> 1, 2 -a-> 1, 1 final   ⇒   0 and 2 share a class
    /// ```
    pub fn partition(&mut self, n: usize, finals: &[bool], transitions: &[Transition]) -> (&[u32], usize) {
        let m = transitions.len();
        let Refiner { blocks, cords, in_start, incoming, renumber, class, acyclic } = self;
        // Incoming transitions per state (by head), in compressed rows.
        group_into_rows(n, || transitions.iter().enumerate().map(|(i, t)| (t.head, i as u32)), in_start, incoming);
        if acyclic.partition(n, finals, transitions, in_start, incoming, class) {
            return number_by_first_occurrence(class, renumber);
        }
        blocks.reset(n);
        for s in (0..n).filter(|&s| finals[s]) {
            blocks.mark(s as u32);
        }
        blocks.split();

        // Cords: transitions grouped by label to begin with.
        cords.reset(m);
        cords.elems.sort_unstable_by_key(|&t| transitions[t as usize].label);
        for (i, &t) in cords.elems.iter().enumerate() {
            cords.loc[t as usize] = i as u32;
        }
        for i in 1..m {
            let (prev, cur) = (cords.elems[i - 1] as usize, cords.elems[i] as usize);
            if transitions[prev].label != transitions[cur].label {
                let last = cords.sets - 1;
                cords.past[last] = i as u32;
                cords.first.push(i as u32);
                cords.past.push(m as u32);
                cords.marked.push(0);
                cords.sets += 1;
            }
            cords.set_of[cur] = cords.sets as u32 - 1;
        }

        // Split blocks by the tails of each cord, and cords by the heads of each new block.
        // Every block but the first splits cords: what it would split off is the rest.
        let mut b = 1;
        let mut c = 0;
        while c < cords.sets {
            for i in cords.first[c]..cords.past[c] {
                blocks.mark(transitions[cords.elems[i as usize] as usize].tail);
            }
            blocks.split();
            while b < blocks.sets {
                for i in blocks.first[b]..blocks.past[b] {
                    let s = blocks.elems[i as usize] as usize;
                    for &t in &incoming[in_start[s] as usize..in_start[s + 1] as usize] {
                        cords.mark(t);
                    }
                }
                cords.split();
                b += 1;
            }
            c += 1;
        }

        class.clear();
        class.extend_from_slice(&blocks.set_of);
        number_by_first_occurrence(class, renumber)
    }
}

/// Renumbers `class` (each state's class, any ids below its length) by first occurrence:
/// `(class, number of classes)`.
fn number_by_first_occurrence<'c>(class: &'c mut [u32], renumber: &mut Vec<u32>) -> (&'c [u32], usize) {
    renumber.clear();
    renumber.resize(class.len(), u32::MAX);
    let mut count = 0u32;
    for c in class.iter_mut() {
        let r = &mut renumber[*c as usize];
        if *r == u32::MAX {
            *r = count;
            count += 1;
        }
        *c = *r;
    }
    (class, count as usize)
}

/// The coarsest partition of an automaton without cycles, bottom up: a state's class is
/// known once its successors' are, and two states share one when they agree on
/// finality and, label by label, on their transitions' classes (hash-consing). Linear in
/// the automaton, against partition refinement's `O(m log n)` and its bigger constant;
/// most rules of a schema (a key's trie, a property list) have no cycle.
#[derive(Default)]
struct Acyclic {
    /// Each state's outgoing transitions (indices), by tail.
    out_start: Vec<u32>,
    out: Vec<u32>,
    /// Per state, outgoing transitions to states without a class yet.
    waiting: Vec<u32>,
    ready: Vec<u32>,
    /// Signature hash → the first state with it; states with the same hash, chained.
    first_with: rustc_hash::FxHashMap<u64, u32>,
    next_with: Vec<u32>,
}

impl Acyclic {
    /// Writes each state's class (ids in order of discovery) to `class`; `false` (and
    /// `class` unspecified) when the automaton has a cycle.
    fn partition(
        &mut self,
        n: usize,
        finals: &[bool],
        transitions: &[Transition],
        in_start: &[u32],
        incoming: &[u32],
        class: &mut Vec<u32>,
    ) -> bool {
        use std::hash::{Hash, Hasher};
        let Acyclic { out_start, out, waiting, ready, first_with, next_with } = self;
        group_into_rows(n, || transitions.iter().enumerate().map(|(i, t)| (t.tail, i as u32)), out_start, out);
        for s in 0..n {
            let row = &mut out[out_start[s] as usize..out_start[s + 1] as usize];
            if !row.is_sorted_by_key(|&t| transitions[t as usize].label) {
                row.sort_unstable_by_key(|&t| transitions[t as usize].label);
            }
        }
        waiting.clear();
        waiting.extend((0..n).map(|s| out_start[s + 1] - out_start[s]));
        ready.clear();
        ready.extend((0..n as u32).filter(|&s| waiting[s as usize] == 0));
        class.clear();
        class.resize(n, u32::MAX);
        first_with.clear();
        next_with.clear();
        next_with.resize(n, u32::MAX);
        let row = |s: u32| &out[out_start[s as usize] as usize..out_start[s as usize + 1] as usize];
        let (mut next, mut count) = (0, 0u32);
        while let Some(&s) = ready.get(next) {
            next += 1;
            let mut h = rustc_hash::FxHasher::default();
            finals[s as usize].hash(&mut h);
            for &t in row(s) {
                let t = &transitions[t as usize];
                (t.label, class[t.head as usize]).hash(&mut h);
            }
            let same = |p: u32| {
                finals[p as usize] == finals[s as usize]
                    && row(p).len() == row(s).len()
                    && row(p).iter().zip(row(s)).all(|(&x, &y)| {
                        let (x, y) = (&transitions[x as usize], &transitions[y as usize]);
                        x.label == y.label && class[x.head as usize] == class[y.head as usize]
                    })
            };
            let mut p = *first_with.entry(h.finish()).or_insert(s);
            while p != s && !same(p) {
                if next_with[p as usize] == u32::MAX {
                    next_with[p as usize] = s;
                }
                p = next_with[p as usize];
            }
            class[s as usize] = if p == s {
                count += 1;
                count - 1
            } else {
                class[p as usize]
            };
            for &t in &incoming[in_start[s as usize] as usize..in_start[s as usize + 1] as usize] {
                let tail = transitions[t as usize].tail;
                waiting[tail as usize] -= 1;
                if waiting[tail as usize] == 0 {
                    ready.push(tail);
                }
            }
        }
        next == n
    }
}

/// A partition of `0..n` into sets that are contiguous ranges of `elems`, refined by
/// marking elements and splitting every touched set into its marked and unmarked parts.
#[derive(Default)]
struct Partition {
    sets: usize,
    elems: Vec<u32>,
    /// Position of each element in `elems`.
    loc: Vec<u32>,
    set_of: Vec<u32>,
    first: Vec<u32>,
    past: Vec<u32>,
    /// Marked elements per set: they sit at `first..first + marked`.
    marked: Vec<u32>,
    touched: Vec<u32>,
}

impl Partition {
    /// One set holding `0..n` (none when `n` is 0).
    fn reset(&mut self, n: usize) {
        self.sets = usize::from(n > 0);
        self.elems.clear();
        self.elems.extend(0..n as u32);
        self.loc.clear();
        self.loc.extend(0..n as u32);
        self.set_of.clear();
        self.set_of.resize(n, 0);
        self.first.clear();
        self.first.resize(self.sets, 0);
        self.past.clear();
        self.past.resize(self.sets, n as u32);
        self.marked.clear();
        self.marked.resize(self.sets, 0);
        self.touched.clear();
    }

    /// Marks `e` (at most once between splits).
    fn mark(&mut self, e: u32) {
        let s = self.set_of[e as usize] as usize;
        let i = self.loc[e as usize] as usize;
        let j = (self.first[s] + self.marked[s]) as usize;
        debug_assert!(i >= j, "element marked twice");
        self.elems[i] = self.elems[j];
        self.loc[self.elems[i] as usize] = i as u32;
        self.elems[j] = e;
        self.loc[e as usize] = j as u32;
        if self.marked[s] == 0 {
            self.touched.push(s as u32);
        }
        self.marked[s] += 1;
    }

    /// Splits each touched set; the smaller part becomes a new set.
    fn split(&mut self) {
        while let Some(s) = self.touched.pop() {
            let s = s as usize;
            let j = self.first[s] + self.marked[s];
            self.marked[s] = 0;
            if j == self.past[s] {
                continue; // all marked: nothing to split
            }
            let z = self.sets;
            if j - self.first[s] <= self.past[s] - j {
                self.first.push(self.first[s]);
                self.past.push(j);
                self.first[s] = j;
            } else {
                self.first.push(j);
                self.past.push(self.past[s]);
                self.past[s] = j;
            }
            self.marked.push(0);
            self.sets += 1;
            for i in self.first[z]..self.past[z] {
                self.set_of[self.elems[i as usize] as usize] = z as u32;
            }
        }
    }
}

/// Buffers minimization keeps from one rule to the next.
#[derive(Default)]
pub(super) struct MinimizeScratch {
    transitions: Vec<Transition>,
    refiner: Refiner,
    /// The merged automaton is written here, then swapped with the rule's.
    merged: RuleDfa,
    /// One state per class.
    order: Vec<usize>,
    /// The byte classes kept by [`RuleDfa::merge_equal_classes`].
    pub(super) kept: Vec<usize>,
}

impl RuleDfa {
    /// Merges equivalent states (partition refinement, see
    /// [`Refiner`]), keeping the start state first. Fewer states means
    /// fewer mask-cache entries.
    pub(super) fn minimize(&mut self, scratch: &mut MinimizeScratch) {
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
pub(super) fn worth_minimizing(nfa: &Nfa, states: usize) -> bool {
    nfa.stamped * 2 <= nfa.n_states() && (nfa.has_regex || states > 256)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Moore's refinement with explicit "no transition" signatures: the oracle.
    fn moore(n: usize, finals: &[bool], transitions: &[Transition]) -> Vec<u32> {
        let mut class: Vec<u32> = finals.iter().map(|&f| f as u32).collect();
        let mut count = 0;
        loop {
            let mut ids = std::collections::HashMap::new();
            let next: Vec<u32> = (0..n)
                .map(|s| {
                    let mut sig: Vec<(u64, u32)> = transitions
                        .iter()
                        .filter(|t| t.tail as usize == s)
                        .map(|t| (t.label, class[t.head as usize]))
                        .collect();
                    sig.sort();
                    let len = ids.len() as u32;
                    *ids.entry((class[s], sig)).or_insert(len)
                })
                .collect();
            let new_count = ids.len();
            class = next;
            if new_count == count {
                return class;
            }
            count = new_count;
        }
    }

    /// The refiner's partition, numbered by first occurrence, is Moore's.
    fn assert_agrees_with_moore(n: usize, finals: &[bool], transitions: &[Transition]) {
        let (class, count) = coarsest_partition(n, finals, transitions);
        let expected = moore(n, finals, transitions);
        assert_eq!(class[0], 0);
        assert_eq!(count as u32, class.iter().max().unwrap() + 1);
        for p in 0..n {
            for q in 0..n {
                assert_eq!(
                    class[p] == class[q],
                    expected[p] == expected[q],
                    "states {p} and {q}: {finals:?} {transitions:?}"
                );
            }
        }
    }

    #[test]
    fn agrees_with_moore_on_random_partial_automata() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..2000 {
            let n = rng.gen_range(1..14);
            let labels = rng.gen_range(1..4u64);
            let finals: Vec<bool> = (0..n).map(|_| rng.gen_bool(0.3)).collect();
            let mut transitions = Vec::new();
            for s in 0..n as u32 {
                for label in 0..labels {
                    if rng.gen_bool(0.6) {
                        transitions.push(Transition { tail: s, label, head: rng.gen_range(0..n as u32) });
                    }
                }
            }
            assert_agrees_with_moore(n, &finals, &transitions);
        }
    }

    #[test]
    fn agrees_with_moore_on_random_acyclic_automata() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut acyclic = Acyclic::default();
        for round in 0..2000 {
            let n = rng.gen_range(1..20);
            let labels = rng.gen_range(1..4u64);
            let finals: Vec<bool> = (0..n).map(|_| rng.gen_bool(0.3)).collect();
            // Edges only to later states (no cycle), or a loop as well in some rounds.
            let mut transitions = Vec::new();
            for s in 0..n as u32 {
                for label in 0..labels {
                    if s + 1 < n as u32 && rng.gen_bool(0.6) {
                        transitions.push(Transition { tail: s, label, head: rng.gen_range(s + 1..n as u32) });
                    }
                }
            }
            let with_cycle = round % 4 == 0;
            if with_cycle {
                let s = rng.gen_range(0..n as u32);
                transitions.push(Transition { tail: s, label: labels, head: s });
            }
            // Transitions in any order, as the partition may be given them.
            transitions.reverse();
            assert_agrees_with_moore(n, &finals, &transitions);
            // The bottom-up pass takes exactly the automata without a cycle.
            let mut refiner = Refiner::default();
            let Refiner { in_start, incoming, class, .. } = &mut refiner;
            super::super::rows::group_into_rows(
                n,
                || transitions.iter().enumerate().map(|(i, t)| (t.head, i as u32)),
                in_start,
                incoming,
            );
            assert_eq!(acyclic.partition(n, &finals, &transitions, in_start, incoming, class), !with_cycle);
        }
    }

    #[test]
    fn long_chain_merges_nothing_and_parallel_chains_merge() {
        // 0 -a-> 1 -a-> ... -a-> 999 (final), and a second copy 1000..1999.
        let n = 2000;
        let mut finals = vec![false; n];
        finals[999] = true;
        finals[1999] = true;
        let transitions: Vec<Transition> =
            (0..n as u32).filter(|s| s % 1000 != 999).map(|s| Transition { tail: s, label: 0, head: s + 1 }).collect();
        let (class, count) = coarsest_partition(n, &finals, &transitions);
        assert_eq!(count, 1000);
        assert!((0..1000).all(|s| class[s] == class[s + 1000]));
    }
}
