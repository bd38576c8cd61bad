//! Small containers the passes share: per-state lists in one buffer ([`Rows`]), the
//! counting sort that builds them ([`group_into_rows`]), and two sets of states
//! ([`StampSet`], [`SmallSet`]).
//!
//! Invariant: a [`Rows`] has one more start than lists, the starts never decrease, and
//! the last start is the number of items; every list is a slice of one buffer.

/// A set of at most 8 states, in insertion order (`insert` fails when full).
#[derive(Default, Clone, Copy)]
pub(super) struct SmallSet {
    items: [u32; 8],
    len: usize,
}

impl SmallSet {
    pub(super) fn insert(&mut self, x: u32) -> Option<()> {
        if !self.as_slice().contains(&x) {
            *self.items.get_mut(self.len)? = x;
            self.len += 1;
        }
        Some(())
    }

    pub(super) fn as_slice(&self) -> &[u32] {
        &self.items[..self.len]
    }
}

/// Per-state lists in one buffer (most states have none: a list of its own per state
/// was an allocation each). `rows[s]` is state `s`'s list.
#[derive(Debug)]
pub(crate) struct Rows<T> {
    pub(super) items: Vec<T>,
    /// State `s`'s list is `items[starts[s]..starts[s + 1]]` (one entry more than states).
    starts: Vec<u32>,
}

/// Per-state `(label, next state)` lists: calls (label: the rule) or token edges (label:
/// the terminal).
pub(super) type EdgeRows = Rows<(u32, u32)>;

impl<T> Default for Rows<T> {
    fn default() -> Self {
        Rows { items: Vec::new(), starts: vec![0] }
    }
}

impl<T> Rows<T> {
    /// `n` lists from `(list, item)` pairs, each list's items in the pairs' order (see
    /// [`group_into_rows`]).
    pub(super) fn grouped<I: Iterator<Item = (u32, T)>>(n: usize, pairs: impl Fn() -> I) -> Self
    where
        T: Copy,
    {
        let mut rows = Rows { items: Vec::new(), starts: Vec::new() };
        group_into_rows(n, pairs, &mut rows.starts, &mut rows.items);
        rows
    }

    /// `n` empty lists.
    pub(super) fn empty(n: usize) -> Self {
        Rows { items: Vec::new(), starts: vec![0; n + 1] }
    }

    pub(super) fn get(&self, s: usize) -> &[T] {
        &self.items[self.starts[s] as usize..self.starts[s + 1] as usize]
    }

    /// How many lists.
    pub(super) fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// No lists (keeping the buffers).
    pub(super) fn clear(&mut self) {
        self.items.clear();
        self.starts.clear();
        self.starts.push(0);
    }

    /// Ends the current state's list (its items were pushed onto `items`).
    pub(super) fn end_row(&mut self) {
        self.starts.push(self.items.len() as u32);
    }

    /// Appends a state's list.
    pub(super) fn push_row(&mut self, items: impl IntoIterator<Item = T>) {
        self.items.extend(items);
        self.end_row();
    }

    /// Keeps, in every list, the items `keep` holds to.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
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

/// Groups `(row, item)` pairs into compressed rows over rows `0..n`: row `r`'s items
/// become `items[first[r]..first[r + 1]]`, in the pairs' order (a counting sort; `pairs`
/// is walked twice, to count and to place). The buffers' old contents are dropped.
pub(super) fn group_into_rows<T: Copy, I: Iterator<Item = (u32, T)>>(
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
