//! An Earley parser whose rules are the automata of [`crate::automaton`].
//!
//! An item is `(state, origin)`: a rule's automaton in `state`, started after `origin`
//! steps. The chart keeps one item set per step (a step is one byte, or one whole token
//! matched by a token terminal). Calls of nullable rules are skipped at prediction time
//! (Aycock–Horspool), so completions only ever look back at earlier sets. Left recursion
//! and ambiguity need nothing special, and each state's predictions are precomputed (the
//! automaton's closures).
//!
//! Duplicate items are found by a scan while a set is small and through a hash index once
//! it passes 32 items (ambiguous grammars make sets of thousands); every item added or
//! examined counts against the step's work budget (`max_step_work`, a typed error when
//! spent). A step from a single item into a state with nothing to predict or complete is
//! one table lookup.
//!
//! An item with origin [`NO_ORIGIN`] stands for "some caller we do not know": when it
//! completes, the step reports an *escape* instead of looking for callers. The token-mask
//! cache uses this to explore a state's futures independently of its context.

use crate::automaton::{Automaton, StampSet, DEAD, NO_ORIGIN};
use crate::bytes::ByteSet;

/// Sets up to this size are searched for duplicates by a scan; larger ones get an index.
const SCAN_MAX: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Item {
    pub state: u32,
    pub origin: u32,
}

/// Item sets, one per step; set `k` holds the items after `k` steps.
#[derive(Clone, Debug, Default)]
pub(crate) struct Chart {
    items: Vec<Item>,
    /// `ends[k]`: end of set `k` in `items`.
    ends: Vec<u32>,
}

/// What one step found besides its item set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StepInfo {
    /// An item with origin [`NO_ORIGIN`] completed.
    pub escaped: bool,
    /// The step made more items than allowed and was cut short.
    pub overflow: bool,
}

impl Chart {
    /// A chart whose only set holds `items` (then closed).
    pub fn new(a: &Automaton, items: &[Item], scratch: &mut Scratch) -> (Chart, StepInfo) {
        let mut chart = Chart::default();
        chart.ends.push(0);
        scratch.begin(usize::MAX);
        let mut info = StepInfo::default();
        for &it in items {
            chart.add(it, scratch, &mut info);
        }
        chart.close(a, 0, scratch, &mut info);
        (chart, info)
    }

    /// Number of sets.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn set(&self, k: usize) -> &[Item] {
        let start = if k == 0 { 0 } else { self.ends[k - 1] as usize };
        &self.items[start..self.ends[k] as usize]
    }

    pub fn last(&self) -> &[Item] {
        self.set(self.len() - 1)
    }

    /// The bytes that some item of the last set can take next.
    pub fn next_bytes(&self, a: &Automaton) -> ByteSet {
        let mut out = ByteSet::EMPTY;
        for it in self.last() {
            out |= a.table.first_bytes[it.state as usize];
        }
        out
    }

    /// Keeps the first `n` sets.
    pub fn truncate(&mut self, n: usize) {
        self.ends.truncate(n);
        self.items.truncate(self.ends.last().copied().unwrap_or(0) as usize);
    }

    fn set_start(&self, k: usize) -> usize {
        if k == 0 {
            0
        } else {
            self.ends[k - 1] as usize
        }
    }

    /// Appends the set reached from the last one by `byte`. The new set may be empty.
    pub fn scan_byte(&mut self, a: &Automaton, byte: u8, scratch: &mut Scratch) -> StepInfo {
        let prev = self.len() - 1;
        let (lo, hi) = (self.set_start(prev), self.ends[prev] as usize);
        if hi - lo == 1 {
            // Fast path: one item moving to a state with nothing to predict or complete.
            let it = self.items[lo];
            let t = a.next(it.state, byte);
            if t == DEAD {
                self.ends.push(hi as u32);
                return StepInfo::default();
            }
            if a.is_simple(t) {
                self.items.push(Item { state: t, origin: it.origin });
                self.ends.push(hi as u32 + 1);
                return StepInfo::default();
            }
        }
        self.ends.push(hi as u32);
        scratch.begin(prev + 1);
        let mut info = StepInfo::default();
        for i in lo..hi {
            let it = self.items[i];
            let t = a.next(it.state, byte);
            if t != DEAD {
                self.add(Item { state: t, origin: it.origin }, scratch, &mut info);
            }
        }
        self.close(a, hi, scratch, &mut info);
        info
    }

    /// Adds to the last set the items that set `from` reaches by matching `token` with a
    /// token terminal (`<[id]>`; `!<[id]>` only when `token` is not an EOS token), then
    /// closes it. Returns whether any item was added.
    pub fn merge_token_step(
        &mut self,
        a: &Automaton,
        from: usize,
        token: u32,
        is_eos: bool,
        scratch: &mut Scratch,
    ) -> (bool, StepInfo) {
        let cur = self.len() - 1;
        let start = self.set_start(cur);
        scratch.begin(cur);
        for i in start..self.items.len() {
            scratch.seen.insert(self.items[i].state);
        }
        let first_new = self.items.len();
        let mut info = StepInfo::default();
        let (lo, hi) = (self.set_start(from), self.ends[from] as usize);
        for i in lo..hi {
            let it = self.items[i];
            for &(term, t) in &a.edges.token_edges[it.state as usize] {
                let terminal = a.edges.terminals[term as usize];
                if terminal.matches(token) && !(terminal.negated && is_eos) {
                    self.add(Item { state: t, origin: it.origin }, scratch, &mut info);
                }
            }
        }
        let added = self.items.len() > first_new;
        self.close(a, first_new, scratch, &mut info);
        (added, info)
    }

    /// Appends an empty set (a placeholder step).
    pub fn push_empty(&mut self) {
        self.ends.push(self.items.len() as u32);
    }

    /// Appends a set holding `items`, closed.
    pub fn push_set(
        &mut self,
        a: &Automaton,
        items: impl IntoIterator<Item = Item>,
        scratch: &mut Scratch,
    ) -> StepInfo {
        let start = self.items.len();
        self.ends.push(start as u32);
        scratch.begin(self.len() - 1);
        let mut info = StepInfo::default();
        for it in items {
            self.add(it, scratch, &mut info);
        }
        self.close(a, start, scratch, &mut info);
        info
    }

    /// Adds `it` to the last set unless present.
    #[inline]
    fn add(&mut self, it: Item, scratch: &mut Scratch, info: &mut StepInfo) {
        let k = self.ends.len() - 1;
        scratch.work += 1;
        if scratch.work > scratch.max_work {
            info.overflow = true;
            return;
        }
        // A state met for the first time in this set cannot be a duplicate.
        if !scratch.seen.insert(it.state) && self.last_set_contains(it, scratch) {
            return;
        }
        if self.items.len() - self.set_start(k) >= scratch.max_items {
            info.overflow = true;
            return;
        }
        self.items.push(it);
        self.ends[k] += 1;
        if scratch.indexed {
            scratch.index.insert(it);
        }
    }

    /// Whether the last set holds `it`: a scan while the set is small, then a hash index
    /// built once per set (ambiguous grammars make sets of thousands of items, which a
    /// scan per addition would make quadratic).
    fn last_set_contains(&self, it: Item, scratch: &mut Scratch) -> bool {
        let set = self.last();
        if !scratch.indexed {
            scratch.work += set.len() as u64;
            if set.len() <= SCAN_MAX {
                return set.contains(&it);
            }
            scratch.index.clear();
            scratch.index.extend(set.iter().copied());
            scratch.indexed = true;
        }
        scratch.index.contains(&it)
    }

    /// Predicts and completes from `items[from..]` until the last set is closed.
    fn close(&mut self, a: &Automaton, from: usize, scratch: &mut Scratch, info: &mut StepInfo) {
        let cur = (self.len() - 1) as u32;
        let mut i = from;
        while i < self.items.len() {
            let Item { state, origin } = self.items[i];
            i += 1;
            if origin == cur {
                continue; // predicted here: its closure came with its predictor's
            }
            let s = state as usize;
            for &t in &a.closures.same_origin[s] {
                self.add(Item { state: t, origin }, scratch, info);
            }
            for &p in &a.closures.predicted[s] {
                self.add(Item { state: p, origin: cur }, scratch, info);
            }
            if a.table.is_final[s] {
                if origin == NO_ORIGIN {
                    info.escaped = true;
                } else {
                    self.complete(a, a.table.state_rule[s], origin as usize, scratch, info);
                }
            }
            if info.overflow {
                return;
            }
        }
    }

    /// Advances the items of set `origin` that wait on `rule`.
    fn complete(&mut self, a: &Automaton, rule: u32, origin: usize, scratch: &mut Scratch, info: &mut StepInfo) {
        let (lo, hi) = (self.set_start(origin), self.ends[origin] as usize);
        scratch.work += (hi - lo) as u64;
        for j in lo..hi {
            let parent = self.items[j];
            for &(r, t) in &a.edges.calls[parent.state as usize] {
                if r == rule {
                    self.add(Item { state: t, origin: parent.origin }, scratch, info);
                }
            }
        }
    }
}

/// Reusable per-thread buffers for stepping, and the work counter of the current mask or
/// accept computation (items added or examined, mask-cache fills included).
pub(crate) struct Scratch {
    pub seen: StampSet,
    pub max_items: usize,
    pub work: u64,
    pub max_work: u64,
    /// The items of the set being built, once it outgrew [`SCAN_MAX`] (`indexed`).
    index: rustc_hash::FxHashSet<Item>,
    indexed: bool,
}

impl Scratch {
    pub fn new(n_states: usize, max_items: usize, max_work: u64) -> Self {
        Scratch {
            seen: StampSet::new(n_states),
            max_items,
            work: 0,
            max_work,
            index: Default::default(),
            indexed: false,
        }
    }

    /// Which limit an overflowing step hit.
    pub fn overflow_kind(&self) -> crate::limits::LimitKind {
        if self.work > self.max_work {
            crate::limits::LimitKind::StepWork
        } else {
            crate::limits::LimitKind::ItemsPerStep
        }
    }

    fn begin(&mut self, _set: usize) {
        self.seen.clear();
        self.indexed = false;
    }
}
