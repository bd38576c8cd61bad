//! DFA minimization by partition refinement over the transitions that exist (Valmari and
//! Lehtinen's algorithm for partial transition functions, `O(m log n)` for `m`
//! transitions): no dead sink, no per-round signatures, so neither sparse automata nor
//! long chains of states (which make Moore's refinement quadratic) cost more than their
//! size.
//!
//! Two states end up in one class iff they agree on finality and, label by label, either
//! both lack a transition or both go to states of one class. Missing transitions are kept
//! distinct from every state, so merging never changes what the automaton accepts.

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
        let Refiner { blocks, cords, in_start, incoming, renumber, class } = self;
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

        // Incoming transitions per state (by head), in compressed rows.
        super::group_into_rows(
            n,
            || transitions.iter().enumerate().map(|(i, t)| (t.head, i as u32)),
            in_start,
            incoming,
        );

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

        // Number classes by first occurrence.
        renumber.clear();
        renumber.resize(blocks.sets, u32::MAX);
        let mut count = 0u32;
        class.clear();
        class.extend((0..n).map(|s| {
            let r = &mut renumber[blocks.set_of[s] as usize];
            if *r == u32::MAX {
                *r = count;
                count += 1;
            }
            *r
        }));
        (class, count as usize)
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
            let (class, count) = coarsest_partition(n, &finals, &transitions);
            let expected = moore(n, &finals, &transitions);
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
